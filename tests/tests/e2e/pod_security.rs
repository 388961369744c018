//! Pod Security admission end to end, with the real kubectl against a Sandbox: a namespace's
//! `pod-security.kubernetes.io/*` labels refuse (enforce), warn (warn) or let pods in, with
//! upstream's messages; a Deployment's pods are refused while the Deployment only warns, and the
//! ReplicaSet's FailedCreate event carries the refusal; the checks for host paths, capabilities,
//! runAsNonRoot and seccomp; labelling a namespace warns about its existing pods; invalid labels
//! are refused; `kubectl debug` adding a privileged ephemeral container is refused. The plugin
//! flags are tested in `admission_plugins.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::{json, Value};

async fn kubectl<T: Send + 'static>(
    sandbox: &minik8s::Sandbox,
    f: impl FnOnce(tests::Kubectl) -> T + Send + 'static,
) -> T {
    let k = tests::Kubectl::new(sandbox.kubeconfig_path());
    tokio::task::spawn_blocking(move || f(k)).await.unwrap()
}

/// Runs kubectl `args` with `obj` as the file; (success, stdout + stderr).
fn apply(k: &tests::Kubectl, args: &[&str], obj: &Value) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("obj.json");
    std::fs::write(&file, obj.to_string()).unwrap();
    let path = file.to_string_lossy().into_owned();
    let mut full = args.to_vec();
    full.extend(["-f", path.as_str()]);
    let out = k.output(&full);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn namespace(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

fn pod(ns: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec})
}

fn privileged_spec() -> Value {
    json!({"containers": [{"name": "c", "image": "nginx", "securityContext": {"privileged": true}}]})
}

const RESTRICTED_PRIVILEGED: &str = "violates PodSecurity \"restricted:latest\": \
privileged (container \"c\" must not set securityContext.privileged=true), \
allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforce_refuses_and_warn_warns_through_kubectl() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .start()
        .await
        .unwrap();
    kubectl(&sandbox, |k| {
        let restricted = namespace("strict", json!({"pod-security.kubernetes.io/enforce": "restricted"}));
        assert!(apply(&k, &["create"], &restricted).0);
        let (ok, text) = apply(&k, &["create"], &pod("strict", "p", privileged_spec()));
        assert!(!ok, "{text}");
        assert!(
            text.contains("Error from server (Forbidden): error when creating"),
            "{text}"
        );
        assert!(
            text.contains(&format!("pods \"p\" is forbidden: {RESTRICTED_PRIVILEGED}")),
            "{text}"
        );

        let warned = namespace("loose", json!({"pod-security.kubernetes.io/warn": "baseline"}));
        assert!(apply(&k, &["create"], &warned).0);
        let (ok, text) = apply(&k, &["create"], &pod("loose", "p", privileged_spec()));
        assert!(ok, "{text}");
        assert!(
            text.contains("Warning: would violate PodSecurity \"baseline:latest\": privileged (container \"c\" must not set securityContext.privileged=true)"),
            "{text}"
        );
        assert!(text.contains("pod/p created"), "{text}");
    })
    .await;
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checks_at_each_level() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .start()
        .await
        .unwrap();
    kubectl(&sandbox, |k| {
        for (ns, level) in [("base", "baseline"), ("rest", "restricted")] {
            let labels = json!({"pod-security.kubernetes.io/enforce": level});
            assert!(apply(&k, &["create"], &namespace(ns, labels)).0);
        }
        let dry = ["create", "--dry-run=server"];
        let host_path = json!({"containers": [{"name": "c", "image": "i"}],
            "volumes": [{"name": "root", "hostPath": {"path": "/"}}]});
        let (ok, text) = apply(&k, &dry, &pod("base", "h", host_path.clone()));
        assert!(!ok && text.contains("violates PodSecurity \"baseline:latest\": hostPath volumes (volume \"root\")"), "{text}");
        let (ok, text) = apply(&k, &dry, &pod("rest", "h", host_path));
        assert!(!ok && text.contains("restricted volume types (volume \"root\" uses restricted volume type \"hostPath\")"), "{text}");
        assert!(!text.contains("hostPath volumes"), "{text}");

        let caps = json!({"containers": [{"name": "c", "image": "i",
            "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}]});
        let (ok, text) = apply(&k, &dry, &pod("base", "c", caps));
        assert!(!ok && text.contains("non-default capabilities (container \"c\" must not include \"NET_ADMIN\" in securityContext.capabilities.add)"), "{text}");

        // A restricted-compliant pod but for runAsNonRoot, then but for seccomp.
        let good = |sc: Value| json!({"securityContext": sc, "containers": [{"name": "c", "image": "i",
            "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]});
        let (ok, text) = apply(&k, &dry, &pod("rest", "r", good(json!({"seccompProfile": {"type": "RuntimeDefault"}}))));
        assert!(!ok, "{text}");
        let only = "is forbidden: violates PodSecurity \"restricted:latest\": runAsNonRoot != true \
                    (pod or container \"c\" must set securityContext.runAsNonRoot=true)";
        assert!(text.trim_end().ends_with(only), "{text}");
        let (ok, text) = apply(&k, &dry, &pod("rest", "s", good(json!({"runAsNonRoot": true, "seccompProfile": {"type": "Unconfined"}}))));
        assert!(!ok && text.contains("seccompProfile (pod must not set securityContext.seccompProfile.type to \"Unconfined\")"), "{text}");
        let (ok, text) = apply(&k, &dry, &pod("rest", "g", good(json!({"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}}))));
        assert!(ok, "{text}");
        // The same Unconfined pod is refused by baseline too, but a missing profile is not.
        let (ok, text) = apply(&k, &dry, &pod("base", "s", good(json!({"seccompProfile": {"type": "Unconfined"}}))));
        assert!(!ok && text.contains("violates PodSecurity \"baseline:latest\": seccompProfile"), "{text}");
        let (ok, text) = apply(&k, &dry, &pod("base", "n", good(json!({}))));
        assert!(ok, "{text}");
    })
    .await;
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_warns_and_its_pods_are_refused() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .nodes(1)
        .start()
        .await
        .unwrap();
    let events = kubectl(&sandbox, |k| {
        let labels = json!({"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"});
        assert!(apply(&k, &["create"], &namespace("apps", labels)).0);
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "apps"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": privileged_spec()}}});
        let (ok, text) = apply(&k, &["create"], &deployment);
        assert!(ok, "{text}");
        let detail = RESTRICTED_PRIVILEGED.trim_start_matches("violates ");
        assert!(
            text.contains(&format!("Warning: would violate {detail}")),
            "{text}"
        );
        tests::wait_for("the ReplicaSet's FailedCreate event", Duration::from_secs(60), || {
            let list = k.json(&["get", "events", "-n", "apps"]);
            let items = list["items"].as_array().cloned().unwrap_or_default();
            items
                .into_iter()
                .find(|e| e["reason"] == "FailedCreate" && e["involvedObject"]["kind"] == "ReplicaSet")
                .ok_or_else(|| format!("no FailedCreate yet: {list}"))
        })
    })
    .await;
    let message = events["message"].as_str().unwrap();
    assert!(
        message.starts_with("Error creating: pods \"web-"),
        "{message}"
    );
    assert!(
        message.contains(&format!("\" is forbidden: {RESTRICTED_PRIVILEGED}")),
        "{message}"
    );
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labelling_a_namespace_warns_about_existing_pods_and_invalid_labels_are_refused() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .start()
        .await
        .unwrap();
    kubectl(&sandbox, |k| {
        k.ok(&["create", "namespace", "x"]);
        for name in ["a", "b"] {
            assert!(apply(&k, &["create"], &pod("x", name, privileged_spec())).0);
        }
        let out = k.output(&["label", "ns", "x", "pod-security.kubernetes.io/enforce=baseline"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(stderr.contains("Warning: existing pods in namespace \"x\" violate the new PodSecurity enforce level \"baseline:latest\""), "{stderr}");
        assert!(stderr.contains("Warning: a (and 1 other pod): privileged"), "{stderr}");
        // Relaxing it warns about nothing.
        let out = k.output(&["label", "--overwrite", "ns", "x", "pod-security.kubernetes.io/enforce=privileged"]);
        assert!(out.status.success());
        assert!(!String::from_utf8_lossy(&out.stderr).contains("Warning"));

        let bad = namespace("bad", json!({"pod-security.kubernetes.io/enforce": "strict"}));
        let (ok, text) = apply(&k, &["create"], &bad);
        assert!(!ok, "{text}");
        assert!(text.contains("The Namespace \"bad\" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted"), "{text}");
        let out = k.output(&["label", "ns", "x", "pod-security.kubernetes.io/warn-version=1.30"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(stderr.contains("must be \"latest\" or \"v1.x\""), "{stderr}");
    })
    .await;
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_privileged_ephemeral_container_is_refused() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .start()
        .await
        .unwrap();
    kubectl(&sandbox, |k| {
        let labels = json!({"pod-security.kubernetes.io/enforce": "baseline"});
        assert!(apply(&k, &["create"], &namespace("dbg", labels)).0);
        let spec = json!({"containers": [{"name": "c", "image": "nginx"}]});
        assert!(apply(&k, &["create"], &pod("dbg", "p", spec)).0);
        let out = k.output(&["debug", "p", "-n", "dbg", "--image=busybox", "--profile=sysadmin", "-c", "debugger"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains("pods \"p\" is forbidden: violates PodSecurity \"baseline:latest\": privileged (container \"debugger\" must not set securityContext.privileged=true)"),
            "{stderr}"
        );
        // A general-profile debugger passes baseline.
        let out = k.output(&["debug", "p", "-n", "dbg", "--image=busybox", "--profile=baseline", "-c", "debugger2"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    })
    .await;
    sandbox.stop().await;
}
