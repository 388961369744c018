//! The real `/usr/bin/kubectl` against an in-process apiserver with PodDisruptionBudgets,
//! evictions and node ports: `kubectl create poddisruptionbudget` (a protobuf body) and `get pdb`
//! with kubectl's columns, `kubectl drain` blocked by a budget with upstream's message and then
//! draining the node through `pods/eviction`, `kubectl logs` and `kubectl exec` answered with the
//! clear "not simulated yet" Status, and `kubectl create service nodeport` showing its allocated
//! port (and upstream's message for one out of range).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{blocking, Kube};

const NODE_AND_PODS: &str = r#"apiVersion: v1
kind: Node
metadata:
  name: n1
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  labels: {app: web}
  ownerReferences:
  - {apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: 6b1f5c1e-0000-4000-8000-000000000001, controller: true}
spec:
  nodeName: n1
  terminationGracePeriodSeconds: 0
  containers:
  - {name: nginx, image: "nginx:1.27"}
  volumes:
  - {name: scratch, emptyDir: {}}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-2
  labels: {app: web}
  ownerReferences:
  - {apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: 6b1f5c1e-0000-4000-8000-000000000001, controller: true}
spec:
  nodeName: n1
  terminationGracePeriodSeconds: 0
  containers:
  - {name: nginx, image: "nginx:1.27"}
---
apiVersion: v1
kind: Pod
metadata:
  name: shell
spec:
  containers:
  - {name: sh, image: "busybox:1.36"}
"#;

const PDB: &str = r#"apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: db
spec:
  maxUnavailable: 25%
  unhealthyPodEvictionPolicy: AlwaysAllow
  selector:
    matchLabels: {app: db}
"#;

const RUNNING: &str =
    r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#;

fn columns(header: &str) -> Vec<String> {
    header
        .split("  ")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pdbs_drain_streams_and_node_ports_with_kubectl() {
    let server = common::start().await;
    let kube = Kube::new(&server.url());
    blocking(move || {
        let out = kube.ok(&[
            "create",
            "poddisruptionbudget",
            "web",
            "--selector=app=web",
            "--min-available=1",
        ]);
        assert_eq!(out.trim(), "poddisruptionbudget.policy/web created");
        let out = kube.ok(&["get", "pdb"]);
        let header = out.lines().next().unwrap_or("");
        assert_eq!(
            columns(header),
            ["NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"]
        );
        let row = columns(out.lines().nth(1).unwrap_or(""));
        assert_eq!(row[..4], ["web", "1", "N/A", "0"]);
        let (ok, _, err) = kube.run(&["create", "pdb", "bad", "--selector=app=x", "--max-unavailable=150%"]);
        assert!(!ok);
        assert!(err.contains("must not be greater than 100%"), "{err}");

        let out = kube.ok(&["explain", "pdb.spec.unhealthyPodEvictionPolicy"]);
        assert!(out.contains("IfHealthyBudget"), "{out}");
        let pdb = kube.write("pdb.yaml", PDB);
        let out = kube.ok(&["apply", "--validate=strict", "-f", pdb.to_str().unwrap()]);
        assert_eq!(out.trim(), "poddisruptionbudget.policy/db created");
        let out = kube.ok(&["apply", "--server-side", "-f", pdb.to_str().unwrap()]);
        assert_eq!(out.trim(), "poddisruptionbudget.policy/db serverside-applied");

        let manifest = kube.write("pods.yaml", NODE_AND_PODS);
        kube.ok(&["apply", "-f", manifest.to_str().unwrap()]);
        for pod in ["web-1", "web-2", "shell"] {
            kube.ok(&["patch", "pod", pod, "--subresource=status", "--type=merge", "-p", RUNNING]);
        }

        // No disruption allowed (as the disruption controller would compute it): drain is
        // refused with upstream's message. (A status never computed is refused the same way,
        // with `Retry-After: 10`, which client-go honours for ten retries: the HTTP tests cover
        // it.)
        let status = |allowed: u32| {
            format!(r#"{{"status":{{"observedGeneration":1,"disruptionsAllowed":{allowed},"currentHealthy":2,"desiredHealthy":1,"expectedPods":2}}}}"#)
        };
        kube.ok(&["patch", "pdb", "web", "--subresource=status", "--type=merge", "-p", &status(0)]);
        let drain = [
            "drain",
            "n1",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=6s",
        ];
        let (ok, out, err) = kube.run(&drain);
        assert!(!ok, "drain should be blocked: {out}");
        assert!(
            err.contains("Cannot evict pod as it would violate the pod's disruption budget."),
            "{err}"
        );
        let out = kube.ok(&["get", "node", "n1"]);
        assert!(out.contains("SchedulingDisabled"), "{out}");
        assert!(kube.ok(&["get", "pod", "web-1", "-o", "name"]).contains("pod/web-1"));

        // Two disruptions allowed: the node drains through pods/eviction.
        kube.ok(&["patch", "pdb", "web", "--subresource=status", "--type=merge", "-p", &status(2)]);
        let (ok, out, err) = kube.run(&drain);
        assert!(ok, "drain failed:\nstdout: {out}\nstderr: {err}");
        assert!(out.contains("pod/web-1 evicted"), "{out}");
        assert!(out.contains("node/n1 drained"), "{out}");
        let left = kube.ok(&["get", "pods", "-o", "name"]);
        assert_eq!(left.trim(), "pod/shell");
        // Without eviction, drain deletes with a DeleteOptions body in protobuf.
        let one = NODE_AND_PODS
            .split("---\n")
            .nth(1)
            .unwrap_or("")
            .replace("web-1", "web-3");
        let manifest = kube.write("web3.yaml", &one);
        kube.ok(&["apply", "-f", manifest.to_str().unwrap()]);
        let (ok, out, err) = kube.run(&[
            "drain",
            "n1",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--disable-eviction",
        ]);
        assert!(ok, "drain --disable-eviction failed:\nstdout: {out}\nstderr: {err}");
        assert!(out.contains("pod/web-3 deleted"), "{out}");
        let out = kube.ok(&["get", "pdb", "web", "-o", "jsonpath={.status.disruptionsAllowed}"]);
        assert_eq!(out.trim(), "0");

        // The streaming subresources say what is not simulated.
        let (ok, _, err) = kube.run(&["logs", "shell"]);
        assert!(!ok);
        assert!(err.contains("pods/log is not simulated yet"), "{err}");
        let (ok, _, err) = kube.run(&["exec", "shell", "--", "ls"]);
        assert!(!ok);
        assert!(err.contains("pods/exec is not simulated yet"), "{err}");
        // kubectl debug adds an ephemeral container through pods/ephemeralcontainers.
        let (ok, out, err) = kube.run(&[
            "debug",
            "shell",
            "--image=busybox:1.36",
            "--target=sh",
            "-c",
            "debugger",
        ]);
        assert!(ok, "kubectl debug failed:\nstdout: {out}\nstderr: {err}");
        let out = kube.ok(&[
            "get",
            "pod",
            "shell",
            "-o",
            "jsonpath={.spec.ephemeralContainers[0].name}/{.spec.ephemeralContainers[0].targetContainerName}",
        ]);
        assert_eq!(out.trim(), "debugger/sh");
        let (ok, _, err) = kube.run(&["logs", "nope"]);
        assert!(!ok);
        assert!(err.contains("pods \"nope\" not found"), "{err}");

        // Node ports.
        let out = kube.ok(&["create", "service", "nodeport", "np1", "--tcp=80:8080"]);
        assert_eq!(out.trim(), "service/np1 created");
        let port = kube.ok(&["get", "svc", "np1", "-o", "jsonpath={.spec.ports[0].nodePort}"]);
        let port: u16 = port.trim().parse().unwrap();
        assert!((30000..=32767).contains(&port), "{port}");
        let out = kube.ok(&["get", "svc", "np1"]);
        assert!(out.contains(&format!("80:{port}/TCP")), "{out}");
        let (ok, _, err) = kube.run(&[
            "create",
            "service",
            "nodeport",
            "np2",
            "--tcp=80:8080",
            "--node-port=40000",
        ]);
        assert!(!ok);
        assert!(
            err.contains("spec.ports[0].nodePort: Invalid value: 40000: provided port is not in the valid range. The range of valid ports is 30000-32767"),
            "{err}"
        );
        let (ok, _, err) = kube.run(&[
            "create",
            "service",
            "nodeport",
            "np3",
            "--tcp=80:8080",
            &format!("--node-port={port}"),
        ]);
        assert!(!ok);
        assert!(err.contains("provided port is already allocated"), "{err}");
    })
    .await;
}
