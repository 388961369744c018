//! Built-in admission end to end, with the real kubectl against a Sandbox: a pod run in a
//! namespace created a moment before gets its `default` ServiceAccount's token volume and the
//! default tolerations; a LimitRange's defaults appear on a pod; a pod over a limit and a pod
//! naming a missing ServiceAccount are refused with upstream's messages; without controllers
//! (envtest's shape) pods keep an empty account.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;

async fn kubectl<T: Send + 'static>(
    sandbox: &minik8s::Sandbox,
    f: impl FnOnce(tests::Kubectl) -> T + Send + 'static,
) -> T {
    let k = tests::Kubectl::new(sandbox.kubeconfig_path());
    tokio::task::spawn_blocking(move || f(k)).await.unwrap()
}

/// Runs kubectl expecting a failure; returns its stderr.
fn refused(k: &tests::Kubectl, args: &[&str]) -> String {
    let out = k.output(args);
    assert!(!out.status.success(), "kubectl {args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_run_in_a_new_namespace_gets_the_token_volume() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .start()
        .await
        .unwrap();
    let pod: Value = kubectl(&sandbox, |k| {
        k.ok(&["create", "namespace", "x"]);
        k.ok(&["run", "p", "--image=nginx", "-n", "x"]);
        k.json(&["get", "pod", "p", "-n", "x"])
    })
    .await;
    let spec = &pod["spec"];
    assert_eq!(spec["serviceAccountName"], "default", "{pod}");
    let volume = &spec["volumes"][0];
    let name = volume["name"].as_str().unwrap();
    assert!(name.starts_with("kube-api-access-"), "{volume}");
    let sources = &volume["projected"]["sources"];
    assert_eq!(sources[0]["serviceAccountToken"]["expirationSeconds"], 3607);
    assert_eq!(sources[1]["configMap"]["name"], "kube-root-ca.crt");
    assert_eq!(
        sources[2]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    let mount = &spec["containers"][0]["volumeMounts"][0];
    assert_eq!(
        mount["mountPath"],
        "/var/run/secrets/kubernetes.io/serviceaccount"
    );
    assert_eq!(mount["readOnly"], true);
    assert_eq!(mount["name"], name);
    let tolerations = spec["tolerations"].as_array().unwrap();
    assert!(
        tolerations
            .iter()
            .any(|t| t["key"] == "node.kubernetes.io/unreachable" && t["tolerationSeconds"] == 300),
        "{tolerations:?}"
    );
    sandbox.stop().await;
}

const LIMIT_RANGE: &str = r#"{"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits", "namespace": "lr"},
 "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}, "default": {"cpu": "500m", "memory": "256Mi"}, "defaultRequest": {"cpu": "100m", "memory": "128Mi"}}]}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_ranges_and_missing_accounts_through_kubectl() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .start()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("limits.json");
    std::fs::write(&file, LIMIT_RANGE).unwrap();
    let path = file.to_string_lossy().into_owned();
    let (pod, over, missing) = kubectl(&sandbox, move |k| {
        k.ok(&["create", "namespace", "lr"]);
        k.ok(&["create", "-f", &path]);
        k.ok(&["run", "web", "--image=nginx", "-n", "lr"]);
        let pod = k.json(&["get", "pod", "web", "-n", "lr"]);
        let over = refused(&k, &["run", "big", "--image=nginx", "-n", "lr", "--overrides",
            r#"{"spec": {"containers": [{"name": "big", "image": "nginx", "resources": {"limits": {"cpu": "2"}}}]}}"#]);
        let missing = refused(&k, &["run", "lost", "--image=nginx", "-n", "lr", "--overrides",
            r#"{"spec": {"serviceAccountName": "missing"}}"#]);
        (pod, over, missing)
    })
    .await;
    assert_eq!(
        pod["spec"]["containers"][0]["resources"],
        serde_json::json!({"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}})
    );
    assert_eq!(
        pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container web; cpu, memory limit for container web"
    );
    assert_eq!(pod["status"]["qosClass"], "Burstable");
    assert!(
        over.contains("Error from server (Forbidden): pods \"big\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"),
        "{over}"
    );
    assert!(
        missing.contains("Error from server (Forbidden): pods \"lost\" is forbidden: error looking up service account lr/missing: serviceaccount \"missing\" not found"),
        "{missing}"
    );
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_controllers_pods_have_no_account_as_in_envtest() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .without_controllers()
        .start()
        .await
        .unwrap();
    let pod: Value = kubectl(&sandbox, |k| {
        k.ok(&["run", "p", "--image=nginx"]);
        k.json(&["get", "pod", "p"])
    })
    .await;
    assert!(pod["spec"].get("serviceAccountName").is_none(), "{pod}");
    assert!(pod["spec"].get("volumes").is_none(), "{pod}");
    sandbox.stop().await;
}
