//! What kube-apiserver's wire order costs per object: a Pod as the create path has it (typed
//! round trip through k8s-openapi, so alphabetical), put into Go order and serialised with Go's
//! escaping, against serialising it as before (serde_json, keys as they are); and the read path
//! (serialising an already-ordered object) with both writers.
//!
//! `cargo run --release -p api --example wire_bench [-- ROUNDS]`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Value};

fn pod() -> Value {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-7d4b9c8f6d-x2k9q", "namespace": "default", "uid": "3f0c1c1e-5b4a-4c1e-9d7e-1b2c3d4e5f60",
            "creationTimestamp": "2026-12-04T01:00:00Z", "generateName": "web-7d4b9c8f6d-",
            "labels": {"app": "web", "pod-template-hash": "7d4b9c8f6d"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c8f6d",
                "uid": "0a1b2c3d-0000-4000-8000-000000000001", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                "time": "2026-12-04T01:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}}}}}]},
        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "resources": {}, "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default", "securityContext": {}, "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority"},
        "status": {"phase": "Pending", "qosClass": "BestEffort"},
    });
    // The typed round trip every built-in object takes before it is stored.
    let typed: Pod = serde_json::from_value(pod).unwrap();
    serde_json::to_value(typed).unwrap()
}

fn time(rounds: u32, mut f: impl FnMut() -> usize) -> f64 {
    let mut sink = 0;
    let start = Instant::now();
    for _ in 0..rounds {
        sink += f();
    }
    let ns = start.elapsed().as_nanos() as f64 / f64::from(rounds);
    std::hint::black_box(sink);
    ns
}

fn main() {
    let rounds: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let stored = pod();
    let mut ordered = stored.clone();
    api::wire::canonicalize_object(&mut ordered, true);
    for _ in 0..3 {
        let before = time(rounds, || serde_json::to_vec(&stored).unwrap().len());
        let write = time(rounds, || {
            let mut o = stored.clone();
            api::wire::canonicalize_object(&mut o, true);
            api::wire::to_vec(&o).unwrap().len()
        });
        let clone = time(rounds, || {
            let o = stored.clone();
            o.as_object().map_or(0, |m| m.len())
        });
        let canon_ordered = time(rounds, || {
            let mut o = ordered.clone();
            api::wire::canonicalize_object(&mut o, true);
            o.as_object().map_or(0, |m| m.len())
        });
        let read_serde = time(rounds, || serde_json::to_vec(&ordered).unwrap().len());
        let read_go = time(rounds, || api::wire::to_vec(&ordered).unwrap().len());
        println!(
            "write: serde_json::to_vec {before:.0} ns; canonicalize + wire::to_vec {:.0} ns (clone excluded; clone {clone:.0} ns); canonicalize of an ordered object {:.0} ns | read: serde_json {read_serde:.0} ns, wire::to_vec {read_go:.0} ns ({} bytes)",
            write - clone,
            canon_ordered - clone,
            api::wire::to_vec(&ordered).unwrap().len(),
        );
    }
}
