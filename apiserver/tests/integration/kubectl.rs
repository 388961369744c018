//! End-to-end tests with the real `/usr/bin/kubectl` (the version dispatcher) against an
//! in-process apiserver on 127.0.0.1. A test fails if kubectl exits non-zero, prints an error,
//! or prints a wrong value.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{blocking, Kube};

const RC: &str = r#"apiVersion: v1
kind: ReplicationController
metadata:
  name: web
  labels:
    app: web
spec:
  replicas: 3
  selector:
    app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
        ports:
        - containerPort: 80
"#;

const POD: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: nginx
  labels:
    app: foo
spec:
  containers:
  - name: nginx
    image: nginx:1.27
"#;

fn lines_with<'a>(out: &'a str, needle: &str) -> Vec<&'a str> {
    out.lines().filter(|l| l.contains(needle)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_and_api_resources() {
    let server = common::start().await;
    let k = Kube::new(&server.url());
    blocking(move || {
        let out = k.ok(&["version"]);
        assert!(out.contains("Server Version: v1.33.0"), "{out}");
        let out = k.ok(&["api-resources"]);
        for needle in [
            "pods",
            "po",
            "replicationcontrollers",
            "rc",
            "namespaces",
            "deployments",
            "deploy",
            "leases",
            "events",
        ] {
            assert!(out.contains(needle), "api-resources lacks {needle}: {out}");
        }
        let pods = lines_with(&out, "Pod");
        assert!(pods.iter().any(|l| l.contains("true")), "{out}");
    })
    .await;
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_get_variants() {
    let server = common::start().await;
    let k = Kube::new(&server.url());
    blocking(move || {
        let rc = k.write("rc.yaml", RC);
        let out = k.ok(&["create", "-f", rc.to_str().unwrap()]);
        assert!(out.contains("replicationcontroller/web created"), "{out}");
        let (ok, _, err) = k.run(&["create", "-f", rc.to_str().unwrap()]);
        assert!(!ok);
        assert!(
            err.contains("Error from server (AlreadyExists)")
                && err.contains("replicationcontrollers \"web\" already exists"),
            "{err}"
        );
        let pod = k.write("pod.yaml", POD);
        k.ok(&["create", "-f", pod.to_str().unwrap()]);
        let typo = k.write(
            "typo.yaml",
            &RC.replace("name: web\n  labels", "name: typo\n  labelz: {}\n  labels"),
        );
        let (ok, _, err) = k.run(&["create", "-f", typo.to_str().unwrap()]);
        assert!(
            !ok && err.contains("unknown field \"metadata.labelz\""),
            "{err}"
        );

        let out = k.ok(&["get", "rc"]);
        let row = lines_with(&out, "web");
        assert_eq!(row.len(), 1, "{out}");
        assert!(out.starts_with("NAME"), "{out}");
        assert!(out.contains("DESIRED"), "{out}");
        let cols: Vec<&str> = row[0].split_whitespace().collect();
        assert_eq!(cols[0..2], ["web", "3"], "{out}");

        let out = k.ok(&["get", "rc", "-o", "wide"]);
        assert!(
            out.contains("nginx:1.25") && out.contains("app=web"),
            "{out}"
        );

        let out = k.ok(&["get", "rc", "web", "-o", "yaml"]);
        assert!(out.contains("replicas: 3") && out.contains("uid:"), "{out}");
        assert!(out.contains("creationTimestamp:"), "{out}");

        let out = k.ok(&["get", "rc", "web", "-o", "json"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["spec"]["replicas"], 3);
        assert_eq!(v["kind"], "ReplicationController");

        let out = k.ok(&["get", "pods"]);
        assert!(lines_with(&out, "nginx")[0].contains("Pending"), "{out}");

        let out = k.ok(&["get", "pods", "-l", "app=foo"]);
        assert_eq!(lines_with(&out, "nginx").len(), 1, "{out}");
        let (ok, out, err) = k.run(&["get", "pods", "-l", "app in (bar,baz),!missing"]);
        assert!(ok && !out.contains("nginx"), "{out}");
        assert!(
            err.contains("No resources found in default namespace."),
            "{err}"
        );

        let out = k.ok(&["get", "pods", "--field-selector", "status.phase=Pending"]);
        assert_eq!(lines_with(&out, "nginx").len(), 1, "{out}");
        let (_, out, _) = k.run(&["get", "pods", "--field-selector", "status.phase=Running"]);
        assert!(!out.contains("nginx"), "{out}");
        let (ok, _, err) = k.run(&["get", "pods", "--field-selector", "foo=bar"]);
        assert!(
            !ok && err.contains("field label not supported: foo"),
            "{err}"
        );

        let out = k.ok(&["get", "pods", "-A"]);
        let row = lines_with(&out, "nginx");
        assert!(row[0].starts_with("default"), "{out}");
        assert!(out.starts_with("NAMESPACE"), "{out}");

        let out = k.ok(&["get", "pods", "--show-labels"]);
        assert!(lines_with(&out, "nginx")[0].contains("app=foo"), "{out}");

        let out = k.ok(&["get", "pod", "nginx"]);
        assert!(out.contains("READY") && out.contains("0/1"), "{out}");

        let (ok, _, err) = k.run(&["get", "pod", "nope"]);
        assert!(
            !ok && err.contains("Error from server (NotFound): pods \"nope\" not found"),
            "{err}"
        );

        let out = k.ok(&["get", "pods", "--chunk-size=1", "-A", "-o", "name"]);
        assert!(out.contains("pod/nginx"), "{out}");
        let out = k.ok(&["get", "ns", "--chunk-size=1"]);
        assert_eq!(out.lines().count(), 5, "{out}");
    })
    .await;
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_label_annotate_patch_scale_delete() {
    let server = common::start().await;
    let k = Kube::new(&server.url());
    blocking(move || {
        let rc = k.write("rc.yaml", RC);
        let out = k.ok(&["apply", "-f", rc.to_str().unwrap()]);
        assert!(out.contains("replicationcontroller/web created"), "{out}");
        let out = k.ok(&["apply", "-f", rc.to_str().unwrap()]);
        assert!(out.contains("replicationcontroller/web unchanged"), "{out}");
        let changed = RC.replace("replicas: 3", "replicas: 4").replace("nginx:1.25", "nginx:1.27");
        let rc2 = k.write("rc2.yaml", &changed);
        let out = k.ok(&["apply", "-f", rc2.to_str().unwrap()]);
        assert!(out.contains("replicationcontroller/web configured"), "{out}");
        let out = k.ok(&["get", "rc", "web", "-o", "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image} {.metadata.generation}"]);
        assert_eq!(out, "4 nginx:1.27 2");

        let out = k.ok(&["apply", "--server-side", "-f", rc.to_str().unwrap(), "--force-conflicts"]);
        assert!(out.contains("serverside-applied"), "{out}");
        let out = k.ok(&["get", "rc", "web", "-o", "jsonpath={.spec.replicas}"]);
        assert_eq!(out, "3");
        let ssa = RC.replace("name: web", "name: web3");
        let ssa = k.write("ssa.yaml", &ssa);
        let out = k.ok(&["apply", "--server-side", "-f", ssa.to_str().unwrap()]);
        assert!(out.contains("replicationcontroller/web3 serverside-applied"), "{out}");
        let out = k.ok(&["get", "rc", "web3", "-o", "jsonpath={.metadata.managedFields[0].manager}"]);
        assert_eq!(out, "kubectl");

        let out = k.ok(&["label", "rc", "web", "tier=front"]);
        assert!(out.contains("labeled"), "{out}");
        let out = k.ok(&["get", "rc", "-l", "tier=front", "-o", "name"]);
        assert_eq!(out.trim(), "replicationcontroller/web");
        let out = k.ok(&["label", "rc", "web", "tier-"]);
        assert!(out.contains("unlabeled"), "{out}");
        let (ok, _, err) = k.run(&["label", "rc", "web", "z=1", "--resource-version=1"]);
        assert!(!ok && err.contains("Conflict"), "{err}");

        let out = k.ok(&["annotate", "rc", "web", "note=hello"]);
        assert!(out.contains("annotated"), "{out}");
        let out = k.ok(&["get", "rc", "web", "-o", "jsonpath={.metadata.annotations.note}"]);
        assert_eq!(out, "hello");

        let out = k.ok(&["patch", "rc", "web", "-p", r#"{"spec":{"replicas":2}}"#]);
        assert!(out.contains("patched"), "{out}");
        let out = k.ok(&["patch", "rc", "web", "--type", "merge", "-p", r#"{"metadata":{"annotations":{"x":"1"}}}"#]);
        assert!(out.contains("patched"), "{out}");
        let out = k.ok(&["patch", "rc", "web", "--type", "json", "-p", r#"[{"op":"replace","path":"/spec/replicas","value":7}]"#]);
        assert!(out.contains("patched"), "{out}");
        let out = k.ok(&["get", "rc", "web", "-o", "jsonpath={.spec.replicas} {.metadata.annotations.x}"]);
        assert_eq!(out, "7 1");
        let out = k.ok(&["patch", "rc", "web", "--dry-run=server", "-p", r#"{"spec":{"replicas":9}}"#]);
        assert!(out.contains("patched"), "{out}");
        let out = k.ok(&["get", "rc", "web", "-o", "jsonpath={.spec.replicas}"]);
        assert_eq!(out, "7");

        let out = k.ok(&["scale", "rc", "web", "--replicas=5"]);
        assert!(out.contains("scaled"), "{out}");
        let out = k.ok(&["scale", "rc", "web", "--current-replicas=5", "--replicas=6"]);
        assert!(out.contains("scaled"), "{out}");
        let out = k.ok(&["patch", "rc", "web", "--subresource=scale", "--type", "merge", "-p", r#"{"spec":{"replicas":1}}"#]);
        assert!(out.contains("patched"), "{out}");
        let out = k.ok(&["get", "rc", "web", "-o", "jsonpath={.spec.replicas}"]);
        assert_eq!(out, "1");

        let out = k.ok(&["delete", "rc", "web"]);
        assert!(out.contains("replicationcontroller \"web\" deleted"), "{out}");
        let (ok, _, err) = k.run(&["get", "rc", "web"]);
        assert!(!ok && err.contains("NotFound"), "{err}");
        let pod = k.write("pod.yaml", POD);
        k.ok(&["create", "-f", pod.to_str().unwrap()]);
        let out = k.ok(&["delete", "pod", "nginx", "--timeout=20s"]);
        assert!(out.contains("pod \"nginx\" deleted"), "{out}");
    })
    .await;
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_wait_describe_events() {
    let server = common::start().await;
    let url = server.url();
    let k = Kube::new(&url);
    let k = std::sync::Arc::new(k);
    let pod = k.write("pod.yaml", POD);
    let kk = k.clone();
    blocking(move || {
        kk.ok(&["create", "-f", pod.to_str().unwrap()]);
    })
    .await;

    // get -w: print the current row, then the change, then stop when the watch times out.
    let kk = k.clone();
    let watcher =
        tokio::task::spawn_blocking(move || kk.run(&["get", "pods", "-w", "--request-timeout=4s"]));
    let c = reqwest::Client::new();
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            server_watchers(&c, &url).await >= 1
        })
        .await,
        "kubectl get -w never started watching"
    );
    let patch = serde_json::json!({"metadata":{"labels":{"watched":"yes"}}});
    let r = c
        .patch(format!("{url}/api/v1/namespaces/default/pods/nginx"))
        .header("content-type", "application/merge-patch+json")
        .body(patch.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (_, out, _) = watcher.await.unwrap();
    assert!(
        lines_with(&out, "nginx").len() >= 2,
        "get -w printed: {out}"
    );

    // wait --for=condition=Ready, satisfied by a status update.
    let kk = k.clone();
    let waiter = tokio::task::spawn_blocking(move || {
        kk.run(&[
            "wait",
            "--for=condition=Ready",
            "pod/nginx",
            "--timeout=20s",
        ])
    });
    let status = serde_json::json!({"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}});
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            server_watchers(&c, &url).await >= 1
        })
        .await
    );
    let r = c
        .patch(format!("{url}/api/v1/namespaces/default/pods/nginx/status"))
        .header("content-type", "application/merge-patch+json")
        .body(status.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{:?}", r.text().await);
    let (ok, out, err) = waiter.await.unwrap();
    assert!(ok && out.contains("pod/nginx condition met"), "{out} {err}");

    // An event about the pod, read by get events and describe.
    let pod: serde_json::Value = c
        .get(format!("{url}/api/v1/namespaces/default/pods/nginx"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let ev = serde_json::json!({
        "metadata": {"name": "nginx.1"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "nginx", "uid": uid, "apiVersion": "v1"},
        "reason": "Started", "message": "Started container nginx", "type": "Normal",
        "source": {"component": "kubelet"}, "count": 1,
        "firstTimestamp": api::meta::now_rfc3339(), "lastTimestamp": api::meta::now_rfc3339(),
    });
    let r = c
        .post(format!("{url}/api/v1/namespaces/default/events"))
        .body(ev.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{:?}", r.text().await);
    let kk = k.clone();
    blocking(move || {
        let out = kk.ok(&["get", "events"]);
        let row = lines_with(&out, "Started");
        assert_eq!(row.len(), 1, "{out}");
        assert!(
            row[0].contains("pod/nginx") && row[0].contains("Normal"),
            "{out}"
        );
        let out = kk.ok(&["describe", "pod", "nginx"]);
        assert!(out.contains("Name:") && out.contains("nginx"), "{out}");
        assert!(
            out.contains("Started container nginx"),
            "describe lacks the event: {out}"
        );
        assert!(out.contains("Running"), "{out}");
    })
    .await;
    server.stop().await.unwrap();
}

async fn server_watchers(c: &reqwest::Client, url: &str) -> i64 {
    let Ok(r) = c.get(format!("{url}/metrics")).send().await else {
        return 0;
    };
    let text = r.text().await.unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("apiserver_registered_watchers "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_and_old_clients() {
    let server = common::start().await;
    let k = Kube::new(&server.url());
    blocking(move || {
        let out = k.ok(&["create", "namespace", "proto"]);
        assert!(out.contains("namespace/proto created"), "{out}");
        let out = k.ok(&[
            "create",
            "configmap",
            "cm1",
            "--from-literal=a=b",
            "-n",
            "proto",
        ]);
        assert!(out.contains("configmap/cm1 created"), "{out}");
        let out = k.ok(&[
            "get",
            "cm",
            "cm1",
            "-n",
            "proto",
            "-o",
            "jsonpath={.data.a}",
        ]);
        assert_eq!(out, "b");
        let (ok, _, err) = k.run(&["create", "configmap", "cm2", "-n", "missing"]);
        assert!(
            !ok && err.contains("namespaces \"missing\" not found"),
            "{err}"
        );
        let ns = k.write(
            "ns.yaml",
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n",
        );
        k.ok(&["apply", "-f", ns.to_str().unwrap()]);
        let out = k.ok(&["get", "ns", "team"]);
        assert!(lines_with(&out, "team")[0].contains("Active"), "{out}");
        for bin in ["kubectl.1.27", "kubectl.1.29"] {
            let path = format!("/usr/lib/google-cloud-sdk/bin/{bin}");
            let (ok, out, err) = k.run_with(&path, &["get", "ns"]);
            assert!(
                ok && out.contains("kube-system") && out.contains("STATUS"),
                "{bin}: {out} {err}"
            );
        }
        let (ok, _, err) = k.run(&["delete", "ns", "default", "--wait=false"]);
        assert!(!ok && err.contains("Forbidden"), "{err}");
    })
    .await;
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_pods() {
    let server = common::start().await;
    let k = Kube::new(&server.url());
    blocking(move || {
        let out = k.ok(&["explain", "pods"]);
        assert!(out.contains("KIND:") && out.contains("Pod"), "{out}");
        assert!(out.contains("spec"), "{out}");
        assert!(out.contains("Pod is a collection of containers"), "{out}");
        let out = k.ok(&["explain", "pods.spec.containers.image"]);
        assert!(
            out.contains("FIELD: image") || out.contains("FIELD:    image"),
            "{out}"
        );
        assert!(out.contains("Container image name"), "{out}");
        let out = k.ok(&["explain", "deployments.spec.replicas"]);
        assert!(out.contains("replicas"), "{out}");
    })
    .await;
    server.stop().await.unwrap();
}
