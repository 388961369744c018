//! The disruption, taint-eviction and clusterrole-aggregation controllers against a Sandbox:
//! a PodDisruptionBudget's status follows a Deployment's pods (scale, spec change) and a custom
//! resource's scale subresource; `kubectl drain` is held back by a budget (429 while
//! `disruptionsAllowed` is 0) and finishes as the evicted pods come back on the other node; a
//! `NoExecute` taint set with `kubectl taint` evicts the pods that do not tolerate it at once,
//! those tolerating it for `tolerationSeconds` after that time, and spares those tolerating it
//! forever; a ClusterRole labelled `aggregate-to-view` shows up in `view`, `edit` and `admin`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tests::eventually;

use minik8s::client::{Api, Client, ListParams, Patch};
use minik8s::k8s_openapi::api::apps::v1::Deployment;
use minik8s::k8s_openapi::api::core::v1::{Event, Node, Pod};
use minik8s::k8s_openapi::api::policy::v1::PodDisruptionBudget;
use minik8s::k8s_openapi::api::rbac::v1::ClusterRole;
use minik8s::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{json, Value};

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    obj(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}
            }
        }
    }))
}

fn pdb(name: &str, app: &str, budget: Value) -> PodDisruptionBudget {
    let mut spec = json!({"selector": {"matchLabels": {"app": app}}});
    for (k, v) in budget.as_object().cloned().unwrap_or_default() {
        spec[k] = v;
    }
    obj(json!({"metadata": {"name": name}, "spec": spec}))
}

/// `(expectedPods, desiredHealthy, currentHealthy, disruptionsAllowed)`, once observed at the
/// PDB's current generation.
fn counts(b: &PodDisruptionBudget) -> Option<(i32, i32, i32, i32)> {
    let s = b.status.as_ref()?;
    (s.observed_generation == b.metadata.generation).then_some((
        s.expected_pods,
        s.desired_healthy,
        s.current_healthy,
        s.disruptions_allowed,
    ))
}

async fn pdb_reaches(
    api: &Api<PodDisruptionBudget>,
    name: &str,
    want: (i32, i32, i32, i32),
) -> PodDisruptionBudget {
    eventually(&format!("pdb {name} at {want:?}"), || async {
        let b = api.get(name).await.ok()?;
        (counts(&b) == Some(want)).then_some(b)
    })
    .await
}

fn allowed_condition(b: &PodDisruptionBudget) -> (String, String) {
    let c = b
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "DisruptionAllowed"))
        .cloned()
        .unwrap();
    (c.status, c.reason)
}

async fn live_pods(pods: &Api<Pod>, app: &str) -> Vec<Pod> {
    let lp = ListParams {
        label_selector: Some(format!("app={app}")),
        ..Default::default()
    };
    pods.list(&lp)
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

fn node_of(p: &Pod) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

async fn kubectl(sandbox: &minik8s::Sandbox, args: &[&str]) -> std::process::Output {
    let k = tests::Kubectl::new(sandbox.kubeconfig_path());
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        k.output(&refs)
    })
    .await
    .unwrap()
}

async fn events_with(client: &Client, reason: &str) -> Vec<Event> {
    let events: Api<Event> = client.api(Some("default"));
    events
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pdb_status_follows_the_pods_of_a_deployment() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .nodes(2)
        .start()
        .await
        .unwrap();
    let client = sandbox.client();
    let deployments: Api<Deployment> = client.api(Some("default"));
    let pdbs: Api<PodDisruptionBudget> = client.api(Some("default"));
    deployments.create(&deployment("web", 3)).await.unwrap();
    pdbs.create(&pdb("web", "web", json!({"maxUnavailable": 1})))
        .await
        .unwrap();
    // maxUnavailable: the Deployment's replicas are the expected pods.
    let b = pdb_reaches(&pdbs, "web", (3, 2, 3, 1)).await;
    assert_eq!(
        allowed_condition(&b),
        ("True".into(), "SufficientPods".into())
    );
    assert!(b.status.unwrap().disrupted_pods.is_none());

    // Scaling the Deployment moves the expected count with it.
    deployments
        .patch("web", &Patch::Merge(json!({"spec": {"replicas": 5}})))
        .await
        .unwrap();
    pdb_reaches(&pdbs, "web", (5, 4, 5, 1)).await;

    // A percentage is of the controllers' scale, rounded up; a number of the matching pods.
    pdbs.patch(
        "web",
        &Patch::Merge(json!({"spec": {"maxUnavailable": null, "minAvailable": "50%"}})),
    )
    .await
    .unwrap();
    pdb_reaches(&pdbs, "web", (5, 3, 5, 2)).await;
    pdbs.patch("web", &Patch::Merge(json!({"spec": {"minAvailable": 5}})))
        .await
        .unwrap();
    let b = pdb_reaches(&pdbs, "web", (5, 5, 5, 0)).await;
    assert_eq!(
        allowed_condition(&b),
        ("False".into(), "InsufficientPods".into())
    );
    assert_eq!(b.status.unwrap().observed_generation, Some(3));

    // A budget over no pods says so.
    pdbs.create(&pdb("none", "nothing", json!({"minAvailable": 1})))
        .await
        .unwrap();
    pdb_reaches(&pdbs, "none", (0, 1, 0, 0)).await;
    eventually("NoPods event", || async {
        let e = events_with(&client, "NoPods").await;
        e.iter()
            .any(|e| {
                e.involved_object.name.as_deref() == Some("none")
                    && e.message.as_deref() == Some("No matching pods found")
            })
            .then_some(())
    })
    .await;
    sandbox.stop().await;
}

fn widget_crd() -> CustomResourceDefinition {
    obj(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas"
                }},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
                    "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}
                }}}
            }]
        }
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_scale_sets_the_expected_pods() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .nodes(1)
        .crd(widget_crd())
        .start()
        .await
        .unwrap();
    let client = sandbox.client();
    let mapper = minik8s::client::RestMapper::new(client.clone());
    let widgets = mapper
        .api(
            &minik8s::client::GroupVersionKind::new("example.com", "v1", "Widget"),
            Some("default"),
        )
        .await
        .unwrap();
    let w = widgets
        .create(&obj(json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "default"},
            "spec": {"replicas": 4}
        })))
        .await
        .unwrap();
    let uid = w.metadata.uid.clone().unwrap();
    let pods: Api<Pod> = client.api(Some("default"));
    for i in 0..2 {
        pods.create(&obj(json!({
            "metadata": {
                "name": format!("w-{i}"),
                "labels": {"app": "wid"},
                "ownerReferences": [{
                    "apiVersion": "example.com/v1", "kind": "Widget", "name": "w",
                    "uid": uid, "controller": true
                }]
            },
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}
        })))
        .await
        .unwrap();
    }
    let pdbs: Api<PodDisruptionBudget> = client.api(Some("default"));
    pdbs.create(&pdb("wid", "wid", json!({"maxUnavailable": "50%"})))
        .await
        .unwrap();
    // 4 expected (the Widget's spec.replicas through its scale), 2 unavailable allowed, 2 ready.
    pdb_reaches(&pdbs, "wid", (4, 2, 2, 0)).await;
    widgets
        .patch("w", &Patch::Merge(json!({"spec": {"replicas": 2}})))
        .await
        .unwrap();
    // Nothing watches Widgets: a pod change brings the PDB round again (as upstream).
    pods.patch(
        "w-0",
        &Patch::Merge(json!({"metadata": {"labels": {"touch": "1"}}})),
    )
    .await
    .unwrap();
    pdb_reaches(&pdbs, "wid", (2, 1, 2, 1)).await;
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drain_waits_for_the_budget() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .nodes(2)
        .start()
        .await
        .unwrap();
    let client = sandbox.client();
    let out = kubectl(&sandbox, &["cordon", "node-1"]).await;
    assert!(out.status.success(), "{out:?}");
    let deployments: Api<Deployment> = client.api(Some("default"));
    let pdbs: Api<PodDisruptionBudget> = client.api(Some("default"));
    let pods: Api<Pod> = client.api(Some("default"));
    deployments.create(&deployment("db", 3)).await.unwrap();
    pdbs.create(&pdb("db", "db", json!({"minAvailable": 2})))
        .await
        .unwrap();
    pdb_reaches(&pdbs, "db", (3, 2, 3, 1)).await;
    assert!(live_pods(&pods, "db")
        .await
        .iter()
        .all(|p| node_of(p) == "node-0"));

    let out = kubectl(&sandbox, &["uncordon", "node-1"]).await;
    assert!(out.status.success(), "{out:?}");
    let out = kubectl(
        &sandbox,
        &["drain", "node-0", "--ignore-daemonsets", "--timeout=120s"],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "drain failed:\n{stdout}\n{stderr}");
    // Only one pod could go at a time: the others were refused (429) and retried.
    assert!(
        stderr.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "drain was never held back:\n{stderr}"
    );
    assert!(stdout.contains("node/node-0 drained"), "{stdout}");

    let moved = eventually("3 db pods on node-1", || async {
        let live = live_pods(&pods, "db").await;
        (live.len() == 3 && live.iter().all(|p| node_of(p) == "node-1")).then_some(live)
    })
    .await;
    assert_eq!(moved.len(), 3);
    pdb_reaches(&pdbs, "db", (3, 2, 3, 1)).await;
    sandbox.stop().await;
}

fn tolerating(name: &str, node: &str, toleration: Option<Value>) -> Pod {
    let tolerations = toleration.map(|t| vec![t]).unwrap_or_default();
    obj(json!({
        "metadata": {"name": name, "labels": {"app": "taints"}},
        "spec": {
            "nodeName": node,
            "tolerations": tolerations,
            "containers": [{"name": "c", "image": "nginx"}]
        }
    }))
}

fn kv(seconds: Option<i64>) -> Option<Value> {
    let mut t = json!({"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute"});
    if let Some(s) = seconds {
        t["tolerationSeconds"] = json!(s);
    }
    Some(t)
}

/// Gone, or being deleted: the deletion instant (`None` while the pod is live).
async fn deleted_at(pods: &Api<Pod>, name: &str) -> Option<Option<jiff::Timestamp>> {
    match pods.get(name).await {
        Ok(p) => p.metadata.deletion_timestamp.map(|t| Some(t.0)),
        Err(e) if e.is_not_found() => Some(None),
        Err(_) => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_execute_taint_evicts_the_pods_that_do_not_tolerate_it() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .nodes(1)
        .start()
        .await
        .unwrap();
    let client = sandbox.client();
    let pods: Api<Pod> = client.api(Some("default"));
    // A node without a kubelet keeps its deleted pods, so their condition can be read.
    let nodes: Api<Node> = client.api(None);
    nodes
        .create(&obj(json!({"metadata": {"name": "ghost"}})))
        .await
        .unwrap();
    for p in [
        tolerating("plain", "node-0", None),
        tolerating("forever", "node-0", kv(None)),
        tolerating("brief", "node-0", kv(Some(2))),
        tolerating("ghost-pod", "ghost", None),
    ] {
        pods.create(&p).await.unwrap();
    }
    eventually("pods running on node-0", || async {
        let live = live_pods(&pods, "taints").await;
        live.iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count()
            .eq(&3)
            .then_some(())
    })
    .await;

    let before = jiff::Timestamp::now();
    for node in ["node-0", "ghost"] {
        let out = kubectl(&sandbox, &["taint", "nodes", node, "k=v:NoExecute"]).await;
        assert!(out.status.success(), "{out:?}");
    }
    eventually("plain evicted", || async {
        deleted_at(&pods, "plain").await
    })
    .await;
    eventually("brief evicted", || async {
        deleted_at(&pods, "brief").await
    })
    .await;
    let forever = pods.get("forever").await.unwrap();
    assert!(
        forever.metadata.deletion_timestamp.is_none(),
        "a forever toleration is kept"
    );

    // The condition is set before the delete.
    let ghost = eventually("ghost-pod deleted", || async {
        let p = pods.get("ghost-pod").await.ok()?;
        p.metadata.deletion_timestamp.is_some().then_some(p)
    })
    .await;
    let cond = ghost
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .expect("DisruptionTarget condition");
    assert_eq!(cond.status, "True");
    assert_eq!(cond.reason.as_deref(), Some("DeletionByTaintManager"));
    assert_eq!(
        cond.message.as_deref(),
        Some("Taint manager: deleting due to NoExecute taint")
    );
    let brief = eventually("TaintManagerEviction events", || async {
        let e = events_with(&client, "TaintManagerEviction").await;
        let said = |m: &str| e.iter().find(|e| e.message.as_deref() == Some(m)).cloned();
        said("Marking for deletion Pod default/plain")?;
        said("Marking for deletion Pod default/brief")
    })
    .await;
    // Not evicted before its tolerationSeconds (2 s) passed: the eviction's event is recorded when
    // the controller deletes (a deletionTimestamp would add the grace period). Whole seconds.
    let evicted = brief
        .first_timestamp
        .map(|t| t.0)
        .or(brief.event_time.map(|t| t.0))
        .expect("event time");
    assert!(
        evicted.as_second() >= before.as_second() + 2,
        "brief evicted at {evicted}, taint set at {before}"
    );

    // Untainted, a tolerated pod stays.
    let out = kubectl(&sandbox, &["taint", "nodes", "node-0", "k=v:NoExecute-"]).await;
    assert!(out.status.success(), "{out:?}");
    let forever = pods.get("forever").await.unwrap();
    assert!(forever.metadata.deletion_timestamp.is_none());
    sandbox.stop().await;
}

fn rules_of(role: &ClusterRole) -> Vec<(Vec<String>, Vec<String>)> {
    role.rules
        .iter()
        .flatten()
        .map(|r| {
            (
                r.api_groups.clone().unwrap_or_default(),
                r.resources.clone().unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_labelled_aggregate_to_view_shows_up_in_view_edit_and_admin() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .nodes(0)
        .start()
        .await
        .unwrap();
    let client = sandbox.client();
    let roles: Api<ClusterRole> = client.api(None);
    roles
        .create(&obj(json!({
            "metadata": {
                "name": "widget-viewer",
                "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}
            },
            "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "list", "watch"]}]
        })))
        .await
        .unwrap();
    let widgets = (vec!["example.com".to_string()], vec!["widgets".to_string()]);
    for name in ["view", "edit", "admin"] {
        let role = eventually(&format!("{name} aggregates widgets"), || async {
            let r = roles.get(name).await.ok()?;
            rules_of(&r).contains(&widgets).then_some(r)
        })
        .await;
        // The bootstrap rules are still there, and the controller owns the field.
        assert!(rules_of(&role)
            .iter()
            .any(|(_, res)| res.contains(&"pods".to_string())));
    }
    let view = roles.get("view").await.unwrap();
    let managers: Vec<String> = view
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(
        managers
            .iter()
            .any(|m| m == "clusterrole-aggregation-controller"),
        "{managers:?}"
    );

    // Deleted, its rules leave again.
    roles
        .delete("widget-viewer", &Default::default())
        .await
        .unwrap();
    eventually("view without widgets", || async {
        let r = roles.get("view").await.ok()?;
        (!rules_of(&r).contains(&widgets)).then_some(())
    })
    .await;
    sandbox.stop().await;
}
