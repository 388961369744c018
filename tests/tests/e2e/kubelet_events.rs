//! The fake kubelet's events as a user sees them through the real `kubectl`: a pod's life
//! (`Scheduled` from the scheduler, then the kubelet's `Pulling`, `Pulled`, `Created`, `Started`,
//! and `Killing` on delete) in `kubectl describe pod` and `kubectl get events`; `BackOff` for a
//! crash-looping container; a node's start-up events in `kubectl describe node`. Exact reasons,
//! types, messages, `source` and `involvedObject` are checked against the API objects.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tests::eventually;

use minik8s::client::{Api, ListParams};
use minik8s::k8s_openapi::api::core::v1::{Event, Pod};
use serde_json::json;

async fn sandbox() -> minik8s::Sandbox {
    minik8s::Sandbox::builder()
        .in_memory()
        .nodes(1)
        .start()
        .await
        .unwrap()
}

/// Runs the real kubectl off the async runtime.
async fn kubectl(sandbox: &minik8s::Sandbox, args: &[&str]) -> String {
    let k = tests::Kubectl::new(sandbox.kubeconfig_path());
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        k.ok(&args)
    })
    .await
    .unwrap()
}

/// The events about `kind`/`name` in `ns`, oldest first (the API lists them by name, which is
/// `<object>.<hex nanos>`).
async fn events_of(
    client: &minik8s::client::Client,
    ns: &str,
    kind: &str,
    name: &str,
) -> Vec<Event> {
    let api: Api<Event> = client.api(Some(ns));
    let lp = ListParams {
        field_selector: Some(format!(
            "involvedObject.kind={kind},involvedObject.name={name}"
        )),
        ..Default::default()
    };
    api.list(&lp).await.map(|l| l.items).unwrap_or_default()
}

fn find<'a>(events: &'a [Event], reason: &str) -> Option<&'a Event> {
    events.iter().find(|e| e.reason.as_deref() == Some(reason))
}

/// The position of the first line of `text` that contains every one of `needles`.
fn line_of(text: &str, needles: &[&str]) -> usize {
    text.lines()
        .position(|l| needles.iter().all(|n| l.contains(n)))
        .unwrap_or_else(|| panic!("no line with {needles:?} in:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_life_in_describe_and_get_events() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let node = sandbox.kubelets().unwrap().node_names()[0].clone();
    let pods: Api<Pod> = client.api(Some("default"));
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]}
    }))
    .unwrap();
    let created = pods.create(&pod).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();

    let events = eventually("the kubelet's Started event", || async {
        let evs = events_of(&client, "default", "Pod", "web").await;
        find(&evs, "Started").is_some().then_some(evs)
    })
    .await;
    for (reason, message) in [
        ("Pulling", "Pulling image \"nginx\"".to_string()),
        ("Created", "Created container: web".to_string()),
        ("Started", "Started container web".to_string()),
    ] {
        let e = find(&events, reason).unwrap();
        assert_eq!(e.message.as_deref(), Some(message.as_str()), "{reason}");
        assert_eq!(e.type_.as_deref(), Some("Normal"));
        let src = e.source.clone().unwrap();
        assert_eq!(src.component.as_deref(), Some("kubelet"));
        assert_eq!(src.host.as_deref(), Some(node.as_str()));
        let o = &e.involved_object;
        assert_eq!(o.field_path.as_deref(), Some("spec.containers{web}"));
        assert_eq!(o.uid.as_deref(), Some(uid.as_str()));
        assert_eq!(o.api_version.as_deref(), Some("v1"));
    }
    let pulled = find(&events, "Pulled").unwrap().message.clone().unwrap();
    assert!(
        pulled.starts_with("Successfully pulled image \"nginx\" in ")
            && pulled.contains(" including waiting). Image size: ")
            && pulled.ends_with(" bytes."),
        "{pulled}"
    );

    // `kubectl describe pod` lists them in order, from the scheduler and the kubelet.
    let describe = kubectl(&sandbox, &["describe", "pod", "web"]).await;
    let order = [
        line_of(&describe, &["Scheduled", "default-scheduler"]),
        line_of(
            &describe,
            &["Pulling", "kubelet", "Pulling image \"nginx\""],
        ),
        line_of(
            &describe,
            &["Pulled", "kubelet", "Successfully pulled image"],
        ),
        line_of(&describe, &["Created", "kubelet", "Created container: web"]),
        line_of(&describe, &["Started", "kubelet", "Started container web"]),
    ];
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "{order:?}\n{describe}"
    );

    // Deleting it stops the container.
    kubectl(&sandbox, &["delete", "pod", "web", "--wait=false"]).await;
    let killing = eventually("the Killing event", || async {
        let evs = events_of(&client, "default", "Pod", "web").await;
        find(&evs, "Killing").cloned()
    })
    .await;
    assert_eq!(killing.message.as_deref(), Some("Stopping container web"));
    assert_eq!(
        killing.involved_object.field_path.as_deref(),
        Some("spec.containers{web}")
    );
    let listed = kubectl(
        &sandbox,
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=web",
        ],
    )
    .await;
    line_of(&listed, &["Killing", "pod/web", "Stopping container web"]);
    sandbox.stop().await;
}

/// On disk, as `minik8s up` runs: there the store keeps Events' values on disk alone
/// (`StoreConfig::cold_prefixes`), so the kubelet's count updates and the lists below read them
/// from sled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_looping_container_backs_off() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = minik8s::Sandbox::builder()
        .data_dir(dir.path())
        .nodes(1)
        .start()
        .await
        .unwrap();
    let client = sandbox.client();
    let pods: Api<Pod> = client.api(Some("default"));
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "crash", "annotations": {
            "kubelet-fake.minik8s.io/run-for": "1s",
            "kubelet-fake.minik8s.io/exit-code": "1"
        }},
        "spec": {
            "initContainers": [{"name": "setup", "image": "busybox:1.36"}],
            "containers": [{"name": "app", "image": "busybox:1.36"}]
        }
    }))
    .unwrap();
    let uid = pods.create(&pod).await.unwrap().metadata.uid.unwrap();

    let events = eventually("the BackOff event", || async {
        let evs = events_of(&client, "default", "Pod", "crash").await;
        find(&evs, "BackOff").is_some().then_some(evs)
    })
    .await;
    let backoff = find(&events, "BackOff").unwrap();
    assert_eq!(backoff.type_.as_deref(), Some("Warning"));
    assert_eq!(
        backoff.message.clone().unwrap(),
        format!("Back-off restarting failed container app in pod crash_default({uid})")
    );
    assert_eq!(
        backoff.involved_object.field_path.as_deref(),
        Some("spec.containers{app}")
    );
    // The init container ran first; its image was pulled once, and found by the app container
    // (`IfNotPresent` for a tagged image).
    let setup: Vec<&Event> = events
        .iter()
        .filter(|e| e.involved_object.field_path.as_deref() == Some("spec.initContainers{setup}"))
        .collect();
    let reasons: Vec<&str> = setup.iter().filter_map(|e| e.reason.as_deref()).collect();
    assert_eq!(reasons, ["Pulling", "Pulled", "Created", "Started"]);
    let app_pulled = events
        .iter()
        .find(|e| {
            e.reason.as_deref() == Some("Pulled")
                && e.involved_object.field_path.as_deref() == Some("spec.containers{app}")
        })
        .unwrap();
    assert_eq!(
        app_pulled.message.as_deref(),
        Some("Container image \"busybox:1.36\" already present on machine")
    );
    // The immediate first restart started the container again: one event with count 2.
    let started = events
        .iter()
        .find(|e| {
            e.reason.as_deref() == Some("Started")
                && e.involved_object.field_path.as_deref() == Some("spec.containers{app}")
        })
        .unwrap();
    assert!(started.count.unwrap_or(0) >= 2, "{started:?}");

    let describe = kubectl(&sandbox, &["describe", "pod", "crash"]).await;
    line_of(
        &describe,
        &[
            "Warning",
            "BackOff",
            "kubelet",
            "Back-off restarting failed container app",
        ],
    );
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_records_its_start() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let node = sandbox.kubelets().unwrap().node_names()[0].clone();
    let expected = [
        ("Starting", "Starting kubelet.".to_string()),
        (
            "NodeAllocatableEnforced",
            "Updated Node Allocatable limit across pods".to_string(),
        ),
        (
            "NodeHasSufficientMemory",
            format!("Node {node} status is now: NodeHasSufficientMemory"),
        ),
        (
            "NodeHasNoDiskPressure",
            format!("Node {node} status is now: NodeHasNoDiskPressure"),
        ),
        (
            "NodeHasSufficientPID",
            format!("Node {node} status is now: NodeHasSufficientPID"),
        ),
        ("NodeReady", format!("Node {node} status is now: NodeReady")),
    ];
    let events = eventually("the node's events", || async {
        let evs = events_of(&client, "default", "Node", &node).await;
        expected
            .iter()
            .all(|(r, _)| find(&evs, r).is_some())
            .then_some(evs)
    })
    .await;
    let mut positions = Vec::new();
    for (reason, message) in &expected {
        let e = find(&events, reason).unwrap();
        assert_eq!(e.message.as_deref(), Some(message.as_str()));
        assert_eq!(e.type_.as_deref(), Some("Normal"));
        assert_eq!(e.involved_object.uid.as_deref(), Some(node.as_str()));
        assert_eq!(e.involved_object.namespace, None);
        let src = e.source.clone().unwrap();
        assert_eq!(
            (src.component.as_deref(), src.host.as_deref()),
            (Some("kubelet"), Some(node.as_str()))
        );
        positions.push(events.iter().position(|x| std::ptr::eq(x, e)).unwrap());
    }
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");

    // `kubectl describe node` finds them (it searches by the kubelet's nodeRef, uid = name).
    let describe = kubectl(&sandbox, &["describe", "node", &node]).await;
    line_of(&describe, &["Starting", "kubelet", "Starting kubelet."]);
    line_of(
        &describe,
        &[
            "NodeReady",
            "kubelet",
            &format!("Node {node} status is now: NodeReady"),
        ],
    );
    sandbox.stop().await;
}
