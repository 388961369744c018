//! The ResourceQuota admission plugin through the router with `oneshot` (no controller runs
//! here: the tests write `resourcequotas/status` themselves, as the controller would): a quota
//! not yet synced does not apply, creates are charged in `status.used` before they are stored,
//! the create over the limit gets upstream's 403, a dry run is checked but not charged, and a
//! Service update that adds node ports is charged only for the growth.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};

use crate::common;
use common::http::{get, post, put};
use common::router as app;

const NS: &str = "/api/v1/namespaces/quota";

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
}

async fn used(app: &axum::Router) -> Value {
    let (code, q) = get(app, &format!("{NS}/resourcequotas/q")).await;
    assert_eq!(code, 200, "{q}");
    q["status"]["used"].clone()
}

#[tokio::test]
async fn quota_admission_charges_and_refuses() {
    let app = app().await;
    let (code, body) = post(
        &app,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "quota"}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let quota = json!({"metadata": {"name": "q"},
        "spec": {"hard": {"pods": "2", "services.nodeports": "1"}}});
    let (code, body) = post(&app, &format!("{NS}/resourcequotas"), quota).await;
    assert_eq!(code, 201, "{body}");
    // Not synced yet (no status.hard): the quota does not apply.
    let (code, body) = post(&app, &format!("{NS}/pods"), pod("p1")).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(used(&app).await, Value::Null);

    // What the controller writes once it counted p1.
    let (_, mut q) = get(&app, &format!("{NS}/resourcequotas/q")).await;
    q["status"] = json!({"hard": {"pods": "2", "services.nodeports": "1"},
        "used": {"pods": "1", "services.nodeports": "0"}});
    let (code, body) = put(&app, &format!("{NS}/resourcequotas/q/status"), q).await;
    assert_eq!(code, 200, "{body}");

    // A dry run is admitted but charges nothing.
    let (code, body) = post(&app, &format!("{NS}/pods?dryRun=All"), pod("p2")).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(used(&app).await["pods"], "1");
    let (code, body) = post(&app, &format!("{NS}/pods"), pod("p2")).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(used(&app).await["pods"], "2");

    let (code, body) = post(&app, &format!("{NS}/pods"), pod("p3")).await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(body["reason"], "Forbidden");
    assert_eq!(
        body["message"],
        "pods \"p3\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"
    );
    assert_eq!(body["details"]["name"], "p3");
    assert_eq!(body["details"]["kind"], "pods");
    let (code, _) = get(&app, &format!("{NS}/pods/p3")).await;
    assert_eq!(code, 404);

    // Services: ClusterIP costs no node port; turning it into a NodePort service costs one per
    // port, checked against the limit.
    let svc = json!({"metadata": {"name": "s"}, "spec": {"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]}});
    let (code, body) = post(&app, &format!("{NS}/services"), svc).await;
    assert_eq!(code, 201, "{body}");
    let mut two = body.clone();
    two["spec"]["type"] = json!("NodePort");
    let (code, body) = put(&app, &format!("{NS}/services/s"), two).await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body["message"],
        "services \"s\" is forbidden: exceeded quota: q, requested: services.nodeports=2, used: services.nodeports=0, limited: services.nodeports=1"
    );
    let (_, current) = get(&app, &format!("{NS}/services/s")).await;
    let mut one = current.clone();
    one["spec"]["type"] = json!("NodePort");
    one["spec"]["ports"] = json!([{"name": "a", "port": 80, "protocol": "TCP", "targetPort": 80}]);
    let (code, body) = put(&app, &format!("{NS}/services/s"), one).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        used(&app).await,
        json!({"pods": "2", "services.nodeports": "1"})
    );
}
