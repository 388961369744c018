//! ResourceQuota end to end against a Sandbox with the real kubectl: `kubectl create quota`, the
//! controller filling in `status.hard`/`status.used`, the admission plugin refusing the pod over
//! the limit and the pod without a cpu request with upstream's messages, `kubectl describe quota`,
//! usage falling when pods are deleted, and concurrent creates never exceeding the quota.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tests::eventually;

use minik8s::client::{Api, DeleteParams};
use minik8s::k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use serde_json::{json, Value};

/// Waits until the quota's `status.used` is `used` (as JSON).
async fn used_becomes(quotas: &Api<ResourceQuota>, name: &str, used: Value) -> ResourceQuota {
    eventually(&format!("quota {name} used {used}"), || async {
        let q = quotas.get(name).await.ok()?;
        let now = serde_json::to_value(q.status.as_ref()?.used.as_ref()?).ok()?;
        (now == used).then_some(q)
    })
    .await
}

fn pod_manifest(name: &str, cpu: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx",
            "resources": {"requests": {"cpu": cpu}}}]}})
}

/// `kubectl <args> -f <file with manifest>`: (success, stdout + stderr).
async fn kubectl_with(
    sandbox: &minik8s::Sandbox,
    args: &[&str],
    manifest: Option<Value>,
) -> (bool, String) {
    let k = tests::Kubectl::new(sandbox.kubeconfig_path());
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().unwrap();
        let mut full = args.clone();
        if let Some(m) = manifest {
            let path = dir.path().join("obj.json");
            std::fs::write(&path, m.to_string()).unwrap();
            full.extend(["-f".to_string(), path.display().to_string()]);
        }
        let refs: Vec<&str> = full.iter().map(String::as_str).collect();
        let out = k.output(&refs);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_quota_limits_pods_and_frees_usage_on_delete() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .nodes(1)
        .start()
        .await
        .unwrap();
    let client = sandbox.client();
    let quotas: Api<ResourceQuota> = client.api(Some("default"));
    let pods: Api<Pod> = client.api(Some("default"));

    let (ok, out) = kubectl_with(
        &sandbox,
        &["create", "quota", "q", "--hard=pods=2,requests.cpu=1"],
        None,
    )
    .await;
    assert!(ok, "{out}");
    assert!(out.contains("resourcequota/q created"), "{out}");
    let q = used_becomes(&quotas, "q", json!({"pods": "0", "requests.cpu": "0"})).await;
    let hard = serde_json::to_value(q.status.unwrap().hard).unwrap();
    assert_eq!(hard, json!({"pods": "2", "requests.cpu": "1"}));

    for name in ["p1", "p2"] {
        let (ok, out) = kubectl_with(&sandbox, &["create"], Some(pod_manifest(name, "400m"))).await;
        assert!(ok, "{out}");
    }
    // Charged by admission before the pods were stored.
    let q = quotas.get("q").await.unwrap();
    let used = serde_json::to_value(q.status.unwrap().used).unwrap();
    assert_eq!(used, json!({"pods": "2", "requests.cpu": "800m"}));

    let (ok, out) = kubectl_with(&sandbox, &["create"], Some(pod_manifest("p3", "400m"))).await;
    assert!(!ok, "{out}");
    assert!(
        out.contains("Error from server (Forbidden)")
            && out.contains("pods \"p3\" is forbidden: exceeded quota: q, requested: pods=1,requests.cpu=400m, used: pods=2,requests.cpu=800m, limited: pods=2,requests.cpu=1"),
        "{out}"
    );
    let (ok, out) = kubectl_with(&sandbox, &["run", "p4", "--image=nginx"], None).await;
    assert!(!ok, "{out}");
    assert!(
        out.contains(
            "pods \"p4\" is forbidden: failed quota: q: must specify requests.cpu for: p4"
        ),
        "{out}"
    );

    let (ok, out) = kubectl_with(&sandbox, &["describe", "quota", "q"], None).await;
    assert!(ok, "{out}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(rows.contains(&vec!["Name:", "q"]), "{out}");
    assert!(rows.contains(&vec!["Resource", "Used", "Hard"]), "{out}");
    assert!(rows.contains(&vec!["pods", "2", "2"]), "{out}");
    assert!(rows.contains(&vec!["requests.cpu", "800m", "1"]), "{out}");

    // Deleting a pod (graceful: the fake kubelet finishes it) gives its usage back.
    let (ok, out) = kubectl_with(&sandbox, &["delete", "pod", "p1"], None).await;
    assert!(ok, "{out}");
    used_becomes(&quotas, "q", json!({"pods": "1", "requests.cpu": "400m"})).await;
    let (ok, out) = kubectl_with(&sandbox, &["create"], Some(pod_manifest("p3", "400m"))).await;
    assert!(ok, "{out}");
    assert_eq!(pods.list(&Default::default()).await.unwrap().items.len(), 2);
    used_becomes(&quotas, "q", json!({"pods": "2", "requests.cpu": "800m"})).await;
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_never_exceed_the_quota() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .nodes(0)
        .start()
        .await
        .unwrap();
    let client = sandbox.client();
    let quotas: Api<ResourceQuota> = client.api(Some("default"));
    let pods: Api<Pod> = client.api(Some("default"));
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "five"}, "spec": {"hard": {"pods": "5"}}
    }))
    .unwrap();
    quotas.create(&quota).await.unwrap();
    used_becomes(&quotas, "five", json!({"pods": "0"})).await;

    let attempts = 24;
    let creates = (0..attempts).map(|i| {
        let pods = pods.clone();
        async move {
            let p: Pod = serde_json::from_value(json!({"metadata": {"name": format!("p{i}")},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}))
            .unwrap();
            pods.create(&p).await
        }
    });
    let results = futures::future::join_all(creates).await;
    let created = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(created, 5, "{results:?}");
    for r in results.iter().filter_map(|r| r.as_ref().err()) {
        let text = r.to_string();
        assert!(
            text.contains("exceeded quota: five, requested: pods=1, used: pods=5, limited: pods=5"),
            "{text}"
        );
    }
    assert_eq!(pods.list(&Default::default()).await.unwrap().items.len(), 5);
    let q = quotas.get("five").await.unwrap();
    let used = serde_json::to_value(q.status.unwrap().used).unwrap();
    assert_eq!(used["pods"], "5");

    // Deleting pods (no kubelets: force) frees their share; the next create fits again.
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    for r in results.iter().filter_map(|r| r.as_ref().ok()).take(2) {
        let name = r.metadata.name.clone().unwrap();
        pods.delete(&name, &force).await.unwrap();
    }
    used_becomes(&quotas, "five", json!({"pods": "3"})).await;
    sandbox.stop().await;
}
