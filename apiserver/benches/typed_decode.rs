//! What the typed-decoding check of every write costs on the hottest path, a pod written by the
//! fake kubelets and controllers in `minik8s bench scale` (`cargo bench -p apiserver --bench
//! typed_decode`). A plain std::time loop: prints the mean per call of the check and, for scale,
//! of two steps every write already takes (the unknown-field walk and the serialisation of the
//! stored object); asserts nothing.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Calls `f` for about `budget` (at least 100 times) and prints the mean per call.
fn measure(what: &str, budget: Duration, mut f: impl FnMut() -> usize) {
    let start = Instant::now();
    let mut n = 0u32;
    let mut sink = 0usize;
    while n < 100 || start.elapsed() < budget {
        sink = sink.wrapping_add(f());
        n += 1;
    }
    let per = start.elapsed() / n;
    println!("{what:<40} {per:>10.2?} per call ({n} calls, {sink})");
}

/// A running pod as the scale benchmark stores it: a ReplicaSet's pod, scheduled, with status.
fn pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "web-7d4b9c8f5d-x2x7q", "generateName": "web-7d4b9c8f5d-", "namespace": "default",
            "uid": "1f0a6f2e-7c1b-4c44-9a55-3b1f2b4f8a11", "resourceVersion": "12345",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "7d4b9c8f5d"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c8f5d",
                                 "uid": "0b6f3f5e-2d3c-4f1a-8e7b-5c6d7e8f9a0b", "controller": true,
                                 "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                               "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}}}}}]
        },
        "spec": {
            "containers": [{"name": "web", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File"}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "nodeName": "node-1", "schedulerName": "default-scheduler",
            "securityContext": {}, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ]
        },
        "status": {
            "phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.244.0.5", "qosClass": "Burstable",
            "startTime": "2026-01-01T00:00:01Z",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-01-01T00:00:02Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:02Z"}
            ],
            "containerStatuses": [{"name": "web", "ready": true, "restartCount": 0, "started": true,
                                   "image": "nginx:1.27", "imageID": "docker.io/library/nginx@sha256:0",
                                   "containerID": "fake://web",
                                   "state": {"running": {"startedAt": "2026-01-01T00:00:02Z"}}}]
        }
    })
}

fn main() {
    let Some(pods) = apiserver::registry::builtin::find("", "pods") else {
        eprintln!("pods are not served");
        return;
    };
    let pod = pod();
    let budget = Duration::from_secs(2);
    measure("typed decode check (Pod)", budget, || {
        usize::from(pods.decodes(&pod).is_ok())
    });
    measure("unknown-field walk (every write)", budget, || {
        apiserver::openapi::schemas::unknown_fields(&pods, &pod).len()
    });
    measure("serialise the stored object", budget, || {
        serde_json::to_vec(&pod).map_or(0, |b| b.len())
    });
    let ill = json!({"spec": {"tolerations": 5}});
    measure("refusal with its Go message", budget, || {
        pods.decodes(&ill).err().map_or(0, |m| m.len())
    });
}
