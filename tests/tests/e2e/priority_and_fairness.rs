//! API Priority and Fairness with the real components: the controller manager's and the fake
//! kubelets' own requests are dispatched in the FlowSchemas and priority levels upstream gives
//! kube-controller-manager and kubelets (read from `apiserver_flowcontrol_dispatched_requests_total`).

use std::time::Duration;

use tests::{http_get, wait_for};

/// The dispatched count of `flow_schema` at `level`, from `/metrics`.
fn dispatched(url: &str, flow_schema: &str, level: &str) -> u64 {
    let Ok((200, text)) = http_get(&format!("{url}/metrics")) else {
        return 0;
    };
    let series = format!(
        "apiserver_flowcontrol_dispatched_requests_total{{flow_schema=\"{flow_schema}\",priority_level=\"{level}\"}} "
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_requests_are_dispatched_in_their_upstream_levels() {
    let sandbox = minik8s::Sandbox::builder()
        .nodes(1)
        .in_memory()
        .start()
        .await
        .expect("sandbox starts");
    let url = sandbox.url().to_string();
    // A pod for the kubelet to run: the controller manager creates it, the kubelet posts its
    // status.
    let rc = serde_json::json!({"apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"app": "web"}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    let created = reqwest::Client::new()
        .post(format!(
            "{url}/api/v1/namespaces/default/replicationcontrollers"
        ))
        .json(&rc)
        .send()
        .await
        .expect("create rc");
    assert_eq!(created.status(), 201);
    for (schema, level) in [
        ("kube-controller-manager", "workload-high"),
        ("system-node-high", "node-high"),
        ("system-nodes", "system"),
    ] {
        let u = url.clone();
        tokio::task::spawn_blocking(move || {
            wait_for(
                &format!("a request dispatched in {schema} / {level}"),
                Duration::from_secs(30),
                || match dispatched(&u, schema, level) {
                    0 => Err("none yet".to_string()),
                    n => Ok(n),
                },
            )
        })
        .await
        .expect("join");
    }
    sandbox.stop().await;
}
