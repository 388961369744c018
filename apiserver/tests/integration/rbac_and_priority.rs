//! RBAC and scheduling over HTTP (router with `oneshot`, no sockets): the bootstrap policy and
//! system priority classes after start, create/get/list/update/patch/delete of each kind, 422s
//! with upstream's field paths, and the Priority admission of pods.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::body::Body;
use axum::http::Request;
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::common;
use common::router_and_state as app;

const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";
const PCS: &str = "/apis/scheduling.k8s.io/v1/priorityclasses";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

async fn call(app: &Router, method: &str, uri: &str, accept: &str, body: Value) -> (u16, Value) {
    let content_type = match method {
        "PATCH" => "application/merge-patch+json",
        _ => "application/json",
    };
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("accept", accept)
        .header("content-type", content_type);
    let body = if body.is_null() {
        Body::empty()
    } else {
        Body::from(body.to_string())
    };
    let resp = app.clone().oneshot(req.body(body).unwrap()).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn get(app: &Router, uri: &str) -> (u16, Value) {
    call(app, "GET", uri, "application/json", Value::Null).await
}

async fn send(app: &Router, method: &str, uri: &str, body: Value) -> (u16, Value) {
    call(app, method, uri, "application/json", body).await
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// `field: message` of each cause of a 422.
fn causes(status: &Value) -> Vec<String> {
    status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap(),
                c["message"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn the_bootstrap_policy_and_system_classes_exist_after_start() {
    let (app, state) = app().await;
    let (code, roles) = get(&app, &format!("{RBAC}/clusterroles")).await;
    assert_eq!(code, 200);
    let roles = names(&roles);
    for name in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:discovery",
        "system:node",
        "system:kube-scheduler",
        "system:controller:replicaset-controller",
    ] {
        assert!(roles.iter().any(|r| r == name), "{name}: {roles:?}");
    }
    let (_, admin) = get(&app, &format!("{RBAC}/clusterroles/admin")).await;
    assert_eq!(admin["kind"], "ClusterRole");
    assert_eq!(
        admin["metadata"]["labels"]["kubernetes.io/bootstrapping"],
        "rbac-defaults"
    );
    assert_eq!(
        admin["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"],
        "true"
    );
    assert_eq!(
        admin["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]
            ["rbac.authorization.k8s.io/aggregate-to-admin"],
        "true"
    );
    assert!(admin["rules"].as_array().unwrap().len() > 10);
    assert_eq!(
        admin["metadata"]["managedFields"][0]["manager"],
        "kube-apiserver"
    );
    let (_, crb) = get(&app, &format!("{RBAC}/clusterrolebindings/cluster-admin")).await;
    assert_eq!(
        crb["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"})
    );
    assert_eq!(crb["subjects"][0]["name"], "system:masters");
    let (_, rbs) = get(&app, &format!("{RBAC}/namespaces/kube-system/rolebindings")).await;
    assert!(names(&rbs).contains(&"system::leader-locking-kube-scheduler".to_string()));
    let (_, rbs) = get(&app, &format!("{RBAC}/rolebindings")).await;
    assert_eq!(names(&rbs).len(), 7);

    let (_, table) = call(
        &app,
        "GET",
        &format!("{RBAC}/clusterroles"),
        TABLE,
        Value::Null,
    )
    .await;
    let cols: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, ["Name", "Created At"]);
    let row = &table["rows"][0]["cells"];
    assert_eq!(row[1], admin["metadata"]["creationTimestamp"]);

    let (_, pcs) = get(&app, PCS).await;
    assert_eq!(
        names(&pcs),
        ["system-cluster-critical", "system-node-critical"]
    );
    let node_critical = &pcs["items"][1];
    assert_eq!(node_critical["value"], 2_000_001_000);
    assert_eq!(node_critical["preemptionPolicy"], "PreemptLowerPriority");
    assert_eq!(
        node_critical["description"],
        "Used for system critical pods that must not be moved from their current node."
    );
    assert_eq!(node_critical["metadata"]["generation"], 1);
    let (_, table) = call(&app, "GET", PCS, TABLE, Value::Null).await;
    assert_eq!(
        table["rows"][0]["cells"].as_array().unwrap()[..3],
        [
            json!("system-cluster-critical"),
            json!(2_000_000_000),
            json!(false)
        ]
    );
    assert_eq!(table["rows"][0]["cells"][4], "PreemptLowerPriority");

    // A restart leaves everything as it is, changed objects too.
    let (code, _) = send(
        &app,
        "PATCH",
        &format!("{RBAC}/clusterroles/view"),
        json!({"metadata": {"labels": {"mine": "yes"}}}),
    )
    .await;
    assert_eq!(code, 200);
    let before = state.store.current_revision();
    apiserver::bootstrap::seed(&state).await.unwrap();
    assert_eq!(state.store.current_revision(), before);
    let (_, view) = get(&app, &format!("{RBAC}/clusterroles/view")).await;
    assert_eq!(view["metadata"]["labels"]["mine"], "yes");
}

#[tokio::test]
async fn roles_and_bindings_crud() {
    let (app, _) = app().await;
    let roles = format!("{RBAC}/namespaces/default/roles");
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "pod-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]});
    let (code, created) = send(&app, "POST", &roles, role.clone()).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["namespace"], "default");
    let (code, _) = send(&app, "POST", &roles, role.clone()).await;
    assert_eq!(code, 409);
    let (code, got) = get(&app, &format!("{roles}/pod-reader")).await;
    assert_eq!(
        (code, &got["rules"][0]["verbs"]),
        (200, &json!(["get", "list"]))
    );
    let (_, list) = get(&app, &roles).await;
    assert_eq!(names(&list), ["pod-reader"]);
    let mut upd = got.clone();
    upd["rules"][0]["verbs"] = json!(["get", "list", "watch"]);
    let (code, updated) = send(&app, "PUT", &format!("{roles}/pod-reader"), upd).await;
    assert_eq!(
        (code, &updated["rules"][0]["verbs"][2]),
        (200, &json!("watch"))
    );
    // PUT creates roles (upstream's AllowCreateOnUpdate).
    let mut other = role.clone();
    other["metadata"]["name"] = json!("other");
    let (code, _) = send(&app, "PUT", &format!("{roles}/other"), other).await;
    assert_eq!(code, 201);
    let (code, patched) = send(
        &app,
        "PATCH",
        &format!("{roles}/pod-reader"),
        json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
    )
    .await;
    assert_eq!(
        (code, &patched["rules"][0]["resources"]),
        (200, &json!(["configmaps"]))
    );
    let (code, bad) = send(
        &app,
        "POST",
        &roles,
        json!({"metadata": {"name": "bad/name"},
        "rules": [{"verbs": [], "nonResourceURLs": ["/healthz"]}]}),
    )
    .await;
    assert_eq!(code, 422, "{bad}");
    assert_eq!(bad["details"]["kind"], "Role");
    assert_eq!(bad["details"]["group"], "rbac.authorization.k8s.io");
    assert_eq!(
        causes(&bad),
        [
            "metadata.name: Invalid value: \"bad/name\": may not contain '/'",
            "rules[0].verbs: Required value: verbs must contain at least one value",
            "rules[0].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs",
        ]
    );
    let (code, _) = send(&app, "DELETE", &format!("{roles}/pod-reader"), Value::Null).await;
    assert_eq!(code, 200);
    let (code, _) = get(&app, &format!("{roles}/pod-reader")).await;
    assert_eq!(code, 404);

    // Bindings: defaults, roleRef immutable, the table.
    let rbs = format!("{RBAC}/namespaces/default/rolebindings");
    let (code, rb) = send(&app, "POST", &rbs, json!({"metadata": {"name": "read-pods"},
        "roleRef": {"kind": "Role", "name": "pod-reader"},
        "subjects": [{"kind": "User", "name": "jane"}, {"kind": "ServiceAccount", "name": "default", "namespace": "default"}]})).await;
    assert_eq!(code, 201, "{rb}");
    assert_eq!(rb["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
    assert_eq!(rb["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
    let (code, st) = send(
        &app,
        "PATCH",
        &format!("{rbs}/read-pods"),
        json!({"roleRef": {"kind": "ClusterRole", "name": "admin"}}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        causes(&st),
        ["roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"admin\"}: cannot change roleRef"]
    );
    assert_eq!(st["message"].as_str().unwrap(), "RoleBinding.rbac.authorization.k8s.io \"read-pods\" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"admin\"}: cannot change roleRef");
    let (code, _) = send(
        &app,
        "PATCH",
        &format!("{rbs}/read-pods"),
        json!({"subjects": [{"kind": "Group", "name": "devs"}]}),
    )
    .await;
    assert_eq!(code, 200);
    let (_, table) = call(&app, "GET", &rbs, TABLE, Value::Null).await;
    assert_eq!(table["rows"][0]["cells"][1], "Role/pod-reader");
    assert_eq!(table["rows"][0]["cells"][4], "devs");
    let (code, st) = send(
        &app,
        "POST",
        &rbs,
        json!({"metadata": {"name": "x"}, "roleRef": {"kind": "Secret", "name": "r"},
        "subjects": [{"kind": "Robot", "name": "r2"}]}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        causes(&st),
        [
            "roleRef.kind: Unsupported value: \"Secret\": supported values: \"Role\", \"ClusterRole\"",
            "subjects[0].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
        ]
    );

    // Cluster-scoped kinds.
    let (code, _) = send(
        &app,
        "POST",
        &format!("{RBAC}/clusterroles"),
        json!({"metadata": {"name": "health"},
        "rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]}),
    )
    .await;
    assert_eq!(code, 201);
    let crbs = format!("{RBAC}/clusterrolebindings");
    let (code, st) = send(&app, "POST", &crbs, json!({"metadata": {"name": "health"},
        "roleRef": {"kind": "ClusterRole", "name": "health"}, "subjects": [{"kind": "ServiceAccount", "name": "default"}]})).await;
    assert_eq!(
        (code, causes(&st)),
        (
            422,
            vec!["subjects[0].namespace: Required value".to_string()]
        )
    );
    let (code, _) = send(&app, "POST", &crbs, json!({"metadata": {"name": "health"},
        "roleRef": {"kind": "ClusterRole", "name": "health"}, "subjects": [{"kind": "Group", "name": "system:authenticated"}]})).await;
    assert_eq!(code, 201);
    let (code, _) = send(&app, "DELETE", &format!("{crbs}/health"), Value::Null).await;
    assert_eq!(code, 200);
    let (code, _) = send(
        &app,
        "DELETE",
        &format!("{RBAC}/clusterroles/health"),
        Value::Null,
    )
    .await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn priority_classes_and_pod_priority_admission() {
    let (app, _) = app().await;
    let (code, pc) = send(
        &app,
        "POST",
        PCS,
        json!({"metadata": {"name": "high"}, "value": 1000, "description": "d"}),
    )
    .await;
    assert_eq!(code, 201, "{pc}");
    assert_eq!(pc["preemptionPolicy"], "PreemptLowerPriority");
    let (code, st) = send(
        &app,
        "POST",
        PCS,
        json!({"metadata": {"name": "too-high"}, "value": 1_000_000_001}),
    )
    .await;
    assert_eq!(
        (code, causes(&st)),
        (
            422,
            vec![
                "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
                    .to_string()
            ]
        )
    );
    let (code, st) = send(&app, "PATCH", &format!("{PCS}/high"), json!({"value": 5})).await;
    assert_eq!(
        (code, causes(&st)),
        (
            422,
            vec!["value: Forbidden: may not be changed in an update.".to_string()]
        )
    );
    let (code, _) = send(
        &app,
        "PATCH",
        &format!("{PCS}/high"),
        json!({"description": "now"}),
    )
    .await;
    assert_eq!(code, 200);
    let (code, st) = send(
        &app,
        "DELETE",
        &format!("{PCS}/system-node-critical"),
        Value::Null,
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(st["message"], "priorityclasses.scheduling.k8s.io \"system-node-critical\" is forbidden: this is a system priority class and cannot be deleted");

    let pods = "/api/v1/namespaces/default/pods";
    let pod = |name: &str, spec: Value| {
        let mut p = json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        p["spec"]
            .as_object_mut()
            .unwrap()
            .extend(spec.as_object().unwrap().clone());
        p
    };
    let (code, p) = send(&app, "POST", pods, pod("plain", json!({}))).await;
    assert_eq!(code, 201);
    assert_eq!(
        (&p["spec"]["priority"], &p["spec"]["preemptionPolicy"]),
        (&json!(0), &json!("PreemptLowerPriority"))
    );
    let (_, p) = send(
        &app,
        "POST",
        pods,
        pod(
            "critical",
            json!({"priorityClassName": "system-node-critical"}),
        ),
    )
    .await;
    assert_eq!(p["spec"]["priority"], 2_000_001_000);
    let (_, p) = send(
        &app,
        "POST",
        pods,
        pod("high", json!({"priorityClassName": "high"})),
    )
    .await;
    assert_eq!(p["spec"]["priority"], 1000);
    let (code, st) = send(
        &app,
        "POST",
        pods,
        pod("x", json!({"priorityClassName": "foo"})),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(st["reason"], "Forbidden");
    assert_eq!(
        st["message"],
        "pods \"x\" is forbidden: no PriorityClass with name foo was found"
    );
    let (code, st) = send(&app, "POST", pods, pod("y", json!({"priority": 7}))).await;
    assert_eq!(code, 403);
    assert_eq!(st["message"], "pods \"y\" is forbidden: the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name");
    let mut generated = pod("", json!({"priorityClassName": "foo"}));
    generated["metadata"] = json!({"generateName": "gen-"});
    let (code, st) = send(&app, "POST", pods, generated).await;
    assert_eq!(
        (code, st["message"].as_str().unwrap()),
        (
            403,
            "pods is forbidden: no PriorityClass with name foo was found"
        )
    );
    // A pod update keeps its priority; the dry run of a bad pod is refused too.
    let (code, _) = send(
        &app,
        "PATCH",
        &format!("{pods}/high"),
        json!({"metadata": {"labels": {"a": "b"}}}),
    )
    .await;
    assert_eq!(code, 200);
    let (code, _) = send(
        &app,
        "POST",
        &format!("{pods}?dryRun=All"),
        pod("z", json!({"priorityClassName": "foo"})),
    )
    .await;
    assert_eq!(code, 403);

    // One global default at most; pods without a class then take it.
    let (code, _) = send(&app, "POST", PCS, json!({"metadata": {"name": "default-class"}, "value": 10, "globalDefault": true, "preemptionPolicy": "Never"})).await;
    assert_eq!(code, 201);
    let (code, st) = send(
        &app,
        "POST",
        PCS,
        json!({"metadata": {"name": "second"}, "value": 20, "globalDefault": true}),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(st["message"], "priorityclasses.scheduling.k8s.io \"second\" is forbidden: PriorityClass default-class is already marked as default. Only one default can exist");
    let (code, _) = send(
        &app,
        "PATCH",
        &format!("{PCS}/high"),
        json!({"globalDefault": true}),
    )
    .await;
    assert_eq!(code, 403);
    let (code, _) = send(
        &app,
        "PATCH",
        &format!("{PCS}/default-class"),
        json!({"description": "the default"}),
    )
    .await;
    assert_eq!(code, 200);
    let (_, p) = send(&app, "POST", pods, pod("defaulted", json!({}))).await;
    assert_eq!(
        (
            &p["spec"]["priorityClassName"],
            &p["spec"]["priority"],
            &p["spec"]["preemptionPolicy"]
        ),
        (&json!("default-class"), &json!(10), &json!("Never"))
    );
}
