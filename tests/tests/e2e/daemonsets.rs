//! The DaemonSet controller against a Sandbox with fake nodes: one pod per node, Running and
//! Ready, pinned by a `matchFields metadata.name` node affinity that the scheduler honours; a
//! node added at run time gets a pod and a removed one leaves the desired count; tainted nodes
//! are skipped unless tolerated (a NoExecute taint evicts); a node selector limits the nodes; a
//! failed pod is replaced; a deleted DaemonSet's pods and revisions are collected; a template
//! change rolls out within `maxUnavailable` with a new ControllerRevision, or with `OnDelete`
//! only to pods someone deleted; and the real kubectl's `rollout status/history/undo daemonset/x`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use tests::eventually;

use minik8s::client::{Api, ListParams, Patch};
use minik8s::k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use minik8s::k8s_openapi::api::core::v1::{Event, Node, Pod};
use serde_json::json;

async fn sandbox(nodes: usize) -> minik8s::Sandbox {
    minik8s::Sandbox::builder()
        .in_memory()
        .nodes(nodes)
        .start()
        .await
        .unwrap()
}

/// A DaemonSet `name` (pods labelled `app=<name>`) with extra `spec` fields and pod-spec fields.
fn daemonset(name: &str, spec: serde_json::Value, pod_spec: serde_json::Value) -> DaemonSet {
    let mut v = json!({
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "agent:1"}]}
            }
        }
    });
    for (k, val) in spec.as_object().cloned().unwrap_or_default() {
        v["spec"][k] = val;
    }
    for (k, val) in pod_spec.as_object().cloned().unwrap_or_default() {
        v["spec"]["template"]["spec"][k] = val;
    }
    serde_json::from_value(v).unwrap()
}

async fn pods_of(pods: &Api<Pod>, app: &str) -> Vec<Pod> {
    let lp = ListParams {
        label_selector: Some(format!("app={app}")),
        ..Default::default()
    };
    pods.list(&lp).await.unwrap().items
}

fn ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Waits until `app` has exactly one Ready pod on each of `nodes` and no other pod; returns them.
async fn one_ready_pod_on(pods: &Api<Pod>, app: &str, nodes: &BTreeSet<String>) -> Vec<Pod> {
    eventually(
        &format!("{app}: one Ready pod on each of {nodes:?}"),
        || async {
            let all = pods_of(pods, app).await;
            let on: BTreeSet<String> = all
                .iter()
                .filter(|p| ready(p))
                .filter_map(|p| p.spec.as_ref()?.node_name.clone())
                .collect();
            (all.len() == nodes.len() && &on == nodes).then_some(all)
        },
    )
    .await
}

async fn status_is(dss: &Api<DaemonSet>, name: &str, desired: i32, ready: i32) -> DaemonSet {
    eventually(&format!("{name} status {desired}/{ready}"), || async {
        let ds = dss.get(name).await.ok()?;
        let s = ds.status.clone()?;
        (s.desired_number_scheduled == desired
            && s.number_ready == ready
            && s.number_available.unwrap_or(0) == ready
            && s.observed_generation == ds.metadata.generation)
            .then_some(ds)
    })
    .await
}

fn node_names(sandbox: &minik8s::Sandbox) -> BTreeSet<String> {
    sandbox
        .kubelets()
        .unwrap()
        .node_names()
        .into_iter()
        .collect()
}

async fn has_event(client: &minik8s::client::Client, reason: &str) -> bool {
    let events: Api<Event> = client.api(Some("default"));
    let list = events.list(&Default::default()).await.unwrap();
    list.items
        .iter()
        .any(|e| e.reason.as_deref() == Some(reason))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pod_per_node_and_new_nodes_get_one() {
    let sandbox = sandbox(5).await;
    let client = sandbox.client();
    let dss: Api<DaemonSet> = client.api(Some("default"));
    let pods: Api<Pod> = client.api(Some("default"));
    dss.create(&daemonset("agent", json!({}), json!({})))
        .await
        .unwrap();
    let mut nodes = node_names(&sandbox);
    assert_eq!(nodes.len(), 5);
    let running = one_ready_pod_on(&pods, "agent", &nodes).await;
    let ds = status_is(&dss, "agent", 5, 5).await;
    let st = ds.status.unwrap();
    assert_eq!(
        (
            st.current_number_scheduled,
            st.updated_number_scheduled,
            st.number_misscheduled
        ),
        (5, Some(5), 0)
    );
    // Pinned to its node by required node affinity; labelled with the revision and generation.
    let p = &running[0];
    let labels = p.metadata.labels.clone().unwrap();
    assert_eq!(labels["pod-template-generation"], "1");
    let revisions: Api<ControllerRevision> = client.api(Some("default"));
    let revs = revisions.list(&Default::default()).await.unwrap().items;
    assert_eq!(revs.len(), 1);
    assert_eq!(
        revs[0].metadata.labels.as_ref().unwrap()["controller-revision-hash"],
        labels["controller-revision-hash"]
    );
    let affinity = serde_json::to_value(&p.spec.as_ref().unwrap().affinity).unwrap();
    let field = &affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"][0]["matchFields"][0];
    assert_eq!(field["key"], "metadata.name");
    assert_eq!(
        field["values"][0],
        *p.spec.as_ref().unwrap().node_name.as_ref().unwrap()
    );
    let tolerations = serde_json::to_string(&p.spec.as_ref().unwrap().tolerations).unwrap();
    assert!(
        tolerations.contains("node.kubernetes.io/unreachable"),
        "{tolerations}"
    );

    // A sixth node joins: it gets a pod.
    let sixth = sandbox.kubelets().unwrap().add_node().await.unwrap();
    assert!(nodes.insert(sixth));
    one_ready_pod_on(&pods, "agent", &nodes).await;
    status_is(&dss, "agent", 6, 6).await;

    // A node leaves: the DaemonSet no longer counts it.
    let gone = nodes.iter().next().cloned().unwrap();
    sandbox
        .kubelets()
        .unwrap()
        .remove_node(&gone)
        .await
        .unwrap();
    status_is(&dss, "agent", 5, 5).await;
    assert!(has_event(&client, "SuccessfulCreate").await);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taints_tolerations_and_node_selectors_choose_the_nodes() {
    let sandbox = sandbox(3).await;
    let client = sandbox.client();
    let dss: Api<DaemonSet> = client.api(Some("default"));
    let pods: Api<Pod> = client.api(Some("default"));
    let node_api: Api<Node> = client.api(None);
    let all = node_names(&sandbox);
    let names: Vec<String> = all.iter().cloned().collect();
    let (tainted, labelled) = (&names[0], &names[1]);
    node_api
        .patch(
            tainted,
            &Patch::Merge(json!({"spec": {"taints": [
                {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
            ]}})),
        )
        .await
        .unwrap();
    node_api
        .patch(
            labelled,
            &Patch::Merge(json!({"metadata": {"labels": {"disk": "ssd"}}})),
        )
        .await
        .unwrap();

    // The ssd DaemonSet first: once its one pod is there, the controller's node cache holds the
    // label, and so the taint written before it (one watch, in order). A pod the controller made
    // on the tainted node before it saw a NoSchedule taint would stay, as upstream's does.
    dss.create(&daemonset(
        "ssd",
        json!({}),
        json!({"nodeSelector": {"disk": "ssd"}}),
    ))
    .await
    .unwrap();
    one_ready_pod_on(&pods, "ssd", &[labelled.clone()].into()).await;
    dss.create(&daemonset("plain", json!({}), json!({})))
        .await
        .unwrap();
    dss.create(&daemonset(
        "tolerant",
        json!({}),
        json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}]}),
    ))
    .await
    .unwrap();
    let untainted: BTreeSet<String> = all.iter().filter(|n| *n != tainted).cloned().collect();
    one_ready_pod_on(&pods, "plain", &untainted).await;
    one_ready_pod_on(&pods, "tolerant", &all).await;
    status_is(&dss, "plain", 2, 2).await;
    status_is(&dss, "ssd", 1, 1).await;

    // A NoExecute taint nobody tolerates: the pods there are deleted.
    let evicting = &names[2];
    node_api
        .patch(
            evicting,
            &Patch::Merge(json!({"spec": {"taints": [
                {"key": "maintenance", "effect": "NoExecute"}
            ]}})),
        )
        .await
        .unwrap();
    let left: BTreeSet<String> = [labelled.clone()].into();
    one_ready_pod_on(&pods, "plain", &left).await;
    // The label goes: the ssd DaemonSet's pod goes with it.
    node_api
        .patch(
            labelled,
            &Patch::Merge(json!({"metadata": {"labels": {"disk": null}}})),
        )
        .await
        .unwrap();
    one_ready_pod_on(&pods, "ssd", &BTreeSet::new()).await;
    status_is(&dss, "ssd", 0, 0).await;
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_pod_is_replaced() {
    let sandbox = sandbox(2).await;
    let client = sandbox.client();
    let dss: Api<DaemonSet> = client.api(Some("default"));
    let pods: Api<Pod> = client.api(Some("default"));
    dss.create(&daemonset("agent", json!({}), json!({})))
        .await
        .unwrap();
    let nodes = node_names(&sandbox);
    let first = one_ready_pod_on(&pods, "agent", &nodes).await;
    let victim = first[0].clone();
    let name = victim.metadata.name.clone().unwrap();
    let mut failed = victim.clone();
    let status = failed.status.get_or_insert_with(Default::default);
    status.phase = Some("Failed".into());
    pods.replace_status(&name, &failed).await.unwrap();
    eventually("the failed pod replaced", || async {
        let now = pods_of(&pods, "agent").await;
        let replaced = now
            .iter()
            .all(|p| p.metadata.name.as_deref() != Some(&name));
        (replaced && now.len() == 2 && now.iter().all(ready)).then_some(())
    })
    .await;
    assert!(has_event(&client, "FailedDaemonPod").await);

    // Deleting the DaemonSet deletes its pods and revisions (garbage collector).
    dss.delete("agent", &Default::default()).await.unwrap();
    let revisions: Api<ControllerRevision> = client.api(Some("default"));
    eventually("pods and revisions collected", || async {
        let left = pods_of(&pods, "agent").await.len()
            + revisions
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .len();
        (left == 0).then_some(())
    })
    .await;
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_delete_updates_only_pods_someone_deleted() {
    let sandbox = sandbox(2).await;
    let client = sandbox.client();
    let dss: Api<DaemonSet> = client.api(Some("default"));
    let pods: Api<Pod> = client.api(Some("default"));
    dss.create(&daemonset(
        "agent",
        json!({"updateStrategy": {"type": "OnDelete"}}),
        json!({}),
    ))
    .await
    .unwrap();
    let nodes = node_names(&sandbox);
    let before = one_ready_pod_on(&pods, "agent", &nodes).await;
    status_is(&dss, "agent", 2, 2).await;
    dss.patch(
        "agent",
        &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "agent:2"}
        ]}}}})),
    )
    .await
    .unwrap();
    // The new generation is observed with no pod updated.
    let ds = status_is(&dss, "agent", 2, 2).await;
    assert_eq!(ds.metadata.generation, Some(2));
    assert_eq!(ds.status.unwrap().updated_number_scheduled, Some(0));
    let victim = before[0].metadata.name.clone().unwrap();
    pods.delete(&victim, &Default::default()).await.unwrap();
    let after = one_ready_pod_on(&pods, "agent", &nodes).await;
    let images: BTreeSet<String> = after
        .iter()
        .map(|p| {
            p.spec.as_ref().unwrap().containers[0]
                .image
                .clone()
                .unwrap()
        })
        .collect();
    assert_eq!(
        images,
        ["agent:1".to_string(), "agent:2".to_string()].into()
    );
    assert!(after
        .iter()
        .any(|p| p.metadata.name == before[1].metadata.name));
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_change_rolls_out_within_max_unavailable() {
    let sandbox = sandbox(4).await;
    let client = sandbox.client();
    let dss: Api<DaemonSet> = client.api(Some("default"));
    let pods: Api<Pod> = client.api(Some("default"));
    dss.create(&daemonset(
        "agent",
        json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}}),
        json!({}),
    ))
    .await
    .unwrap();
    let nodes = node_names(&sandbox);
    let before = one_ready_pod_on(&pods, "agent", &nodes).await;
    let old_hash = before[0].metadata.labels.as_ref().unwrap()["controller-revision-hash"].clone();
    status_is(&dss, "agent", 4, 4).await;
    dss.patch(
        "agent",
        &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "agent:2"}
        ]}}}})),
    )
    .await
    .unwrap();
    // While it rolls, at most maxUnavailable nodes lack a Ready pod of either revision.
    let after = eventually("every pod on the new revision", || async {
        let all = pods_of(&pods, "agent").await;
        let ready_nodes: BTreeSet<String> = all
            .iter()
            .filter(|p| ready(p))
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        assert!(
            ready_nodes.len() >= nodes.len() - 2,
            "more than maxUnavailable nodes without a Ready pod: {ready_nodes:?}"
        );
        let updated = all.iter().all(|p| {
            ready(p) && p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some("agent:2")
        });
        (updated && all.len() == nodes.len()).then_some(all)
    })
    .await;
    let ds = status_is(&dss, "agent", 4, 4).await;
    assert_eq!(
        ds.status.as_ref().unwrap().updated_number_scheduled,
        Some(4)
    );
    let new_hash = &after[0].metadata.labels.as_ref().unwrap()["controller-revision-hash"];
    assert_ne!(*new_hash, old_hash);
    assert_eq!(
        after[0].metadata.labels.as_ref().unwrap()["pod-template-generation"],
        "2"
    );
    let revisions: Api<ControllerRevision> = client.api(Some("default"));
    let mut revs: Vec<i64> = revisions
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|r| r.revision)
        .collect();
    revs.sort();
    assert_eq!(revs, [1, 2]);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_rollout_status_history_and_undo() {
    let sandbox = sandbox(3).await;
    let client = sandbox.client();
    let dss: Api<DaemonSet> = client.api(Some("default"));
    let manifest = serde_json::to_string(&daemonset("web", json!({}), json!({}))).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ds.json");
    std::fs::write(&file, manifest).unwrap();
    let file = file.to_string_lossy().into_owned();
    let run = |args: Vec<String>| {
        let k = tests::Kubectl::new(sandbox.kubeconfig_path());
        async move {
            tokio::task::spawn_blocking(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                k.ok(&args)
            })
            .await
            .unwrap()
        }
    };
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    run(args(&["apply", "-f", &file])).await;
    let out = run(args(&[
        "rollout",
        "status",
        "daemonset/web",
        "--timeout=60s",
    ]))
    .await;
    assert!(
        out.contains("daemon set \"web\" successfully rolled out"),
        "{out}"
    );

    run(args(&["set", "image", "daemonset/web", "c=agent:2"])).await;
    let out = run(args(&[
        "rollout",
        "status",
        "daemonset/web",
        "--timeout=60s",
    ]))
    .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    let history = run(args(&["rollout", "history", "daemonset/web"])).await;
    assert!(history.contains("REVISION"), "{history}");
    let revisions: BTreeSet<String> = history
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert_eq!(
        revisions,
        ["1".to_string(), "2".to_string()].into(),
        "{history}"
    );
    let detail = run(args(&[
        "rollout",
        "history",
        "daemonset/web",
        "--revision=1",
    ]))
    .await;
    assert!(detail.contains("agent:1"), "{detail}");

    let out = run(args(&["rollout", "undo", "daemonset/web"])).await;
    assert!(out.contains("rolled back"), "{out}");
    let out = run(args(&[
        "rollout",
        "status",
        "daemonset/web",
        "--timeout=60s",
    ]))
    .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    let ds = dss.get("web").await.unwrap();
    let image = ds.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone();
    assert_eq!(image.as_deref(), Some("agent:1"));
    // The old revision became current again under the next number.
    let history = eventually("revision 1 renumbered to 3", || async {
        let h = run(args(&["rollout", "history", "daemonset/web"])).await;
        let revs: BTreeSet<String> = h
            .lines()
            .skip(2)
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect();
        (revs == ["2".to_string(), "3".to_string()].into()).then_some(h)
    })
    .await;
    assert!(history.contains('3'), "{history}");
    sandbox.stop().await;
}
