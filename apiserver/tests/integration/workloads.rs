//! batch/v1 Jobs and CronJobs, apps/v1 StatefulSets, DaemonSets and ControllerRevisions through
//! the router with `oneshot`: create/get/list/update/patch/delete, subresources, Tables, field
//! selectors, and 422s with upstream's messages and field paths — never a 5xx.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::body::Body;
use axum::http::Request;
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::common;
use common::router as app;

struct Resp {
    code: u16,
    body: Value,
}

async fn call(app: &Router, method: &str, uri: &str, content_type: &str, body: &str) -> Resp {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    assert!(code < 500, "{method} {uri}: {code} {body}");
    Resp { code, body }
}

async fn post(app: &Router, uri: &str, body: &Value) -> Resp {
    call(app, "POST", uri, "application/json", &body.to_string()).await
}

async fn get(app: &Router, uri: &str) -> Resp {
    call(app, "GET", uri, "application/json", "").await
}

async fn put(app: &Router, uri: &str, body: &Value) -> Resp {
    call(app, "PUT", uri, "application/json", &body.to_string()).await
}

async fn merge(app: &Router, uri: &str, patch: Value) -> Resp {
    call(
        app,
        "PATCH",
        uri,
        "application/merge-patch+json",
        &patch.to_string(),
    )
    .await
}

async fn strategic(app: &Router, uri: &str, patch: Value) -> Resp {
    call(
        app,
        "PATCH",
        uri,
        "application/strategic-merge-patch+json",
        &patch.to_string(),
    )
    .await
}

async fn delete(app: &Router, uri: &str) -> Resp {
    call(app, "DELETE", uri, "application/json", "").await
}

async fn table(app: &Router, uri: &str) -> Value {
    let req = Request::builder()
        .uri(uri)
        .header(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Body::empty())
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

fn column_names(t: &Value) -> Vec<String> {
    t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["priority"] == 0)
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

fn causes(r: &Resp) -> Vec<(String, String)> {
    r.body["details"]["causes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    (
                        c["field"].as_str().unwrap_or("").to_string(),
                        c["message"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";
const CRONJOBS: &str = "/apis/batch/v1/namespaces/default/cronjobs";
const STS: &str = "/apis/apps/v1/namespaces/default/statefulsets";
const DS: &str = "/apis/apps/v1/namespaces/default/daemonsets";
const REVISIONS: &str = "/apis/apps/v1/namespaces/default/controllerrevisions";

fn job(name: &str, restart_policy: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"template": {"spec": {"containers": [{"name": "pi", "image": "perl:5.34"}], "restartPolicy": restart_policy}}}})
}

#[tokio::test]
async fn jobs_crud_defaults_and_rules() {
    let app = app().await;
    let r = post(&app, JOBS, &job("pi", "Never")).await;
    assert_eq!(r.code, 201, "{}", r.body);
    let uid = r.body["metadata"]["uid"].as_str().unwrap().to_string();
    let spec = &r.body["spec"];
    assert_eq!(spec["completions"], 1);
    assert_eq!(spec["parallelism"], 1);
    assert_eq!(spec["backoffLimit"], 6);
    assert_eq!(spec["completionMode"], "NonIndexed");
    assert_eq!(spec["suspend"], false);
    assert_eq!(spec["manualSelector"], false);
    assert_eq!(spec["podReplacementPolicy"], "TerminatingOrFailed");
    assert_eq!(
        spec["selector"],
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    );
    let labels = json!({"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "pi", "controller-uid": uid, "job-name": "pi"});
    assert_eq!(spec["template"]["metadata"]["labels"], labels);
    assert_eq!(r.body["metadata"]["labels"], labels);
    assert_eq!(r.body["metadata"]["generation"], 1);
    assert_eq!(r.body["status"], json!({}));

    let r = get(&app, &format!("{JOBS}/pi")).await;
    assert_eq!((r.code, r.body["kind"].as_str()), (200, Some("Job")));
    let r = get(&app, JOBS).await;
    assert_eq!(r.body["kind"], "JobList");
    assert_eq!(r.body["items"].as_array().unwrap().len(), 1);
    let r = get(&app, &format!("{JOBS}?fieldSelector=status.successful%3D0")).await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 1);
    let r = get(&app, &format!("{JOBS}?fieldSelector=status.successful%3D1")).await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 0);
    let r = get(&app, &format!("{JOBS}?fieldSelector=spec.suspend%3Dfalse")).await;
    assert_eq!(r.code, 400);

    // Suspending and scaling parallelism is allowed and bumps the generation.
    let r = merge(
        &app,
        &format!("{JOBS}/pi"),
        json!({"spec": {"suspend": true, "parallelism": 2}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["metadata"]["generation"], 2);
    // A started Job's template is immutable.
    let mut status = r.body.clone();
    status["status"] = json!({"startTime": "2026-01-01T00:00:00Z", "active": 1});
    let r = put(&app, &format!("{JOBS}/pi/status"), &status).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["status"]["active"], 1);
    let r = strategic(
        &app,
        &format!("{JOBS}/pi"),
        json!({"spec": {"template": {"spec": {"containers": [{"name": "pi", "image": "perl:5.36"}]}}}}),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(r.body["reason"], "Invalid");
    assert!(causes(&r)
        .iter()
        .any(|(f, m)| f == "spec.template" && m.ends_with("field is immutable")));
    let r = merge(
        &app,
        &format!("{JOBS}/pi"),
        json!({"spec": {"selector": {"matchLabels": {"x": "y"}}}}),
    )
    .await;
    assert_eq!(r.code, 422);
    assert!(causes(&r).iter().any(|(f, _)| f == "spec.selector"));

    // PUT of the object as read, with a label added.
    let mut cur = get(&app, &format!("{JOBS}/pi")).await.body;
    cur["metadata"]["labels"]["team"] = json!("a");
    let r = put(&app, &format!("{JOBS}/pi"), &cur).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["metadata"]["labels"]["team"], "a");

    let t = table(&app, JOBS).await;
    assert_eq!(
        column_names(&t),
        ["Name", "Status", "Completions", "Duration", "Age"]
    );
    assert_eq!(t["rows"][0]["cells"][0], "pi");
    assert_eq!(t["rows"][0]["cells"][1], "Running");
    assert_eq!(t["rows"][0]["cells"][2], "0/1");

    // batch/v1 orphans by default: the Job waits for the garbage collector's orphan finalizer.
    let r = delete(&app, &format!("{JOBS}/pi")).await;
    assert_eq!(r.code, 200, "{}", r.body);
    let r = get(&app, &format!("{JOBS}/pi")).await;
    assert_eq!(r.body["metadata"]["finalizers"], json!(["orphan"]));
    assert!(r.body["metadata"]["deletionTimestamp"].is_string());
    let r = merge(
        &app,
        &format!("{JOBS}/pi"),
        json!({"metadata": {"finalizers": null}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(get(&app, &format!("{JOBS}/pi")).await.code, 404);
    post(&app, JOBS, &job("pi2", "OnFailure")).await;
    let r = delete(&app, &format!("{JOBS}/pi2?propagationPolicy=Background")).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(get(&app, &format!("{JOBS}/pi2")).await.code, 404);
}

#[tokio::test]
async fn invalid_jobs_are_422_with_upstreams_messages() {
    let app = app().await;
    let r = post(&app, JOBS, &job("pi", "Always")).await;
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(
        r.body["message"],
        "Job.batch \"pi\" is invalid: spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
    );
    assert_eq!(r.body["details"]["kind"], "Job");
    assert_eq!(r.body["details"]["group"], "batch");
    assert_eq!(
        r.body["details"]["causes"][0],
        json!({"reason": "FieldValueRequired", "message": "Required value: valid values: \"OnFailure\", \"Never\"", "field": "spec.template.spec.restartPolicy"})
    );
    let r = post(&app, JOBS, &job("pi", "Sometimes")).await;
    assert_eq!(r.code, 422);
    assert!(causes(&r).contains(&(
        "spec.template.spec.restartPolicy".to_string(),
        "Unsupported value: \"Sometimes\": supported values: \"OnFailure\", \"Never\"".to_string()
    )));
    let mut bad = job("pi", "Never");
    bad["spec"]["completions"] = json!(-1);
    bad["spec"]["template"]["spec"]["containers"] = json!([]);
    let r = post(&app, JOBS, &bad).await;
    assert_eq!(r.code, 422);
    let fields: Vec<String> = causes(&r).into_iter().map(|(f, _)| f).collect();
    assert!(
        fields.contains(&"spec.completions".to_string()),
        "{fields:?}"
    );
    assert!(
        fields.contains(&"spec.template.spec.containers".to_string()),
        "{fields:?}"
    );
    // Garbage never reaches a 5xx.
    for body in [
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "g"}}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "g"}, "spec": {"template": 3, "selector": "x"}}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "g"}, "spec": {"podFailurePolicy": {"rules": [{"onExitCodes": {"values": "x"}}]}}}),
    ] {
        let r = post(&app, JOBS, &body).await;
        assert!(r.code == 422 || r.code == 400, "{}", r.body);
    }
}

fn cronjob(name: &str, schedule: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
        "spec": {"schedule": schedule, "jobTemplate": {"metadata": {"name": name},
            "spec": {"template": {"spec": {"containers": [{"name": "hello", "image": "busybox"}], "restartPolicy": "OnFailure"}}}}}})
}

#[tokio::test]
async fn cronjobs_crud_and_validation() {
    let app = app().await;
    let r = post(&app, CRONJOBS, &cronjob("hello", "*/5 * * * *")).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.body["spec"]["concurrencyPolicy"], "Allow");
    assert_eq!(r.body["spec"]["suspend"], false);
    assert_eq!(r.body["spec"]["successfulJobsHistoryLimit"], 3);
    assert_eq!(r.body["spec"]["failedJobsHistoryLimit"], 1);
    assert_eq!(r.body["metadata"]["generation"], 1);
    let r = merge(
        &app,
        &format!("{CRONJOBS}/hello"),
        json!({"spec": {"suspend": true, "timeZone": "Europe/Paris"}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["metadata"]["generation"], 2);
    let r = merge(
        &app,
        &format!("{CRONJOBS}/hello"),
        json!({"spec": {"schedule": "@weekly"}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let t = table(&app, CRONJOBS).await;
    assert_eq!(
        column_names(&t),
        [
            "Name",
            "Schedule",
            "Timezone",
            "Suspend",
            "Active",
            "Last Schedule",
            "Age"
        ]
    );
    assert_eq!(
        t["rows"][0]["cells"].as_array().unwrap()[..6],
        [
            json!("hello"),
            json!("@weekly"),
            json!("Europe/Paris"),
            json!("True"),
            json!(0),
            json!("<none>")
        ]
    );
    assert_eq!(get(&app, CRONJOBS).await.body["kind"], "CronJobList");

    let r = post(&app, CRONJOBS, &cronjob("bad", "every day")).await;
    assert_eq!(r.code, 422);
    assert_eq!(
        r.body["message"],
        "CronJob.batch \"bad\" is invalid: spec.schedule: Invalid value: \"every day\": expected exactly 5 fields, found 2: [every day]"
    );
    let mut tz = cronjob("tz", "0 * * * *");
    tz["spec"]["timeZone"] = json!("Nowhere/City");
    let r = post(&app, CRONJOBS, &tz).await;
    assert_eq!(r.code, 422);
    assert_eq!(
        causes(&r),
        [(
            "spec.timeZone".to_string(),
            "Invalid value: \"Nowhere/City\": unknown time zone Nowhere/City".to_string()
        )]
    );
    let r = merge(
        &app,
        &format!("{CRONJOBS}/hello"),
        json!({"spec": {"concurrencyPolicy": "Twice"}}),
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(causes(&r)[0].0, "spec.concurrencyPolicy");
    let r = delete(&app, &format!("{CRONJOBS}/hello")).await;
    assert_eq!(r.code, 200, "{}", r.body);
}

fn statefulset(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
        "spec": {"serviceName": name, "replicas": 2, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "www"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}})
}

#[tokio::test]
async fn statefulsets_crud_scale_and_update_rules() {
    let app = app().await;
    let r = post(&app, STS, &statefulset("web")).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.body["spec"]["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        r.body["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    assert_eq!(r.body["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(
        r.body["spec"]["volumeClaimTemplates"][0]["spec"]["volumeMode"],
        "Filesystem"
    );
    assert_eq!(
        r.body["status"],
        json!({"availableReplicas": 0, "replicas": 0})
    );

    let r = get(&app, &format!("{STS}/web/scale")).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["kind"], "Scale");
    assert_eq!(r.body["spec"]["replicas"], 2);
    assert_eq!(r.body["status"]["selector"], "app=web");
    let mut scale = r.body.clone();
    scale["spec"]["replicas"] = json!(5);
    let r = put(&app, &format!("{STS}/web/scale"), &scale).await;
    assert_eq!(r.code, 200, "{}", r.body);
    let r = merge(
        &app,
        &format!("{STS}/web/scale"),
        json!({"spec": {"replicas": 3}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let r = get(&app, &format!("{STS}/web")).await;
    assert_eq!(r.body["spec"]["replicas"], 3);
    assert_eq!(r.body["metadata"]["generation"], 3);

    let r = strategic(
        &app,
        &format!("{STS}/web"),
        json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.28"}]}}}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(
        r.body["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.28"
    );
    let r = merge(
        &app,
        &format!("{STS}/web"),
        json!({"spec": {"serviceName": "other"}}),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(
        r.body["message"],
        "StatefulSet.apps \"web\" is invalid: spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
    );
    let r = post(&app, STS, &json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db.v1"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}})).await;
    assert_eq!(r.code, 422);
    let fields: Vec<String> = causes(&r).into_iter().map(|(f, _)| f).collect();
    assert_eq!(
        fields,
        ["metadata.name", "spec.template.spec.restartPolicy"]
    );

    let t = table(&app, STS).await;
    assert_eq!(column_names(&t), ["Name", "Ready", "Age"]);
    assert_eq!(t["rows"][0]["cells"][1], "0/3");
    assert_eq!(get(&app, STS).await.body["kind"], "StatefulSetList");
    let r = delete(&app, &format!("{STS}/web")).await;
    assert_eq!(r.code, 200, "{}", r.body);
}

fn daemonset(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"name": name}},
            "template": {"metadata": {"labels": {"name": name}}, "spec": {"nodeSelector": {"kubernetes.io/os": "linux"}, "containers": [{"name": "agent", "image": "agent:1"}]}}}})
}

#[tokio::test]
async fn daemonsets_crud_and_rules() {
    let app = app().await;
    let r = post(&app, DS, &daemonset("agent")).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(
        r.body["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    assert_eq!(
        r.body["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
        "1"
    );
    assert_eq!(r.body["status"]["numberReady"], 0);
    let r = strategic(
        &app,
        &format!("{DS}/agent"),
        json!({"spec": {"template": {"spec": {"containers": [{"name": "agent", "image": "agent:2"}]}}}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(
        r.body["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
        "2"
    );
    assert_eq!(r.body["metadata"]["generation"], 2);
    let mut status = r.body.clone();
    status["status"] = json!({"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberMisscheduled": 0, "numberReady": 1});
    let r = put(&app, &format!("{DS}/agent/status"), &status).await;
    assert_eq!(r.code, 200, "{}", r.body);
    let r = merge(
        &app,
        &format!("{DS}/agent"),
        json!({"spec": {"selector": {"matchLabels": {"name": "agent", "x": "1"}}, "template": {"metadata": {"labels": {"x": "1"}}}}}),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(causes(&r)[0].0, "spec.selector");
    let r = merge(
        &app,
        &format!("{DS}/agent"),
        json!({"spec": {"updateStrategy": {"rollingUpdate": {"maxSurge": 1}}}}),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(
        causes(&r),
        [(
            "spec.updateStrategy.rollingUpdate.maxSurge".to_string(),
            "Invalid value: intstr.IntOrString{Type:0, IntVal:1, StrVal:\"\"}: may not be set when maxUnavailable is non-zero".to_string()
        )]
    );
    let t = table(&app, DS).await;
    assert_eq!(
        column_names(&t),
        [
            "Name",
            "Desired",
            "Current",
            "Ready",
            "Up-to-date",
            "Available",
            "Node Selector",
            "Age"
        ]
    );
    assert_eq!(
        t["rows"][0]["cells"].as_array().unwrap()[..7],
        [
            json!("agent"),
            json!(3),
            json!(3),
            json!(1),
            json!(0),
            json!(0),
            json!("kubernetes.io/os=linux")
        ]
    );
    let r = delete(&app, &format!("{DS}/agent")).await;
    assert_eq!(r.code, 200, "{}", r.body);
}

#[tokio::test]
async fn controller_revisions_crud() {
    let app = app().await;
    let rev = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "web-1", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "u-1", "controller": true}]},
        "data": {"spec": {"template": {"metadata": {"labels": {"app": "web"}}}}}, "revision": 1});
    let r = post(&app, REVISIONS, &rev).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.body["revision"], 1);
    let r = merge(
        &app,
        &format!("{REVISIONS}/web-1"),
        json!({"metadata": {"labels": {"a": "b"}}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let r = merge(
        &app,
        &format!("{REVISIONS}/web-1"),
        json!({"data": {"spec": null}}),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(causes(&r)[0].0, "data");
    let r = post(&app, REVISIONS, &json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "x"}, "revision": 1})).await;
    assert_eq!(r.code, 422);
    assert_eq!(
        r.body["message"],
        "ControllerRevision.apps \"x\" is invalid: data: Required value: data is mandatory"
    );
    let t = table(&app, REVISIONS).await;
    assert_eq!(column_names(&t), ["Name", "Controller", "Revision", "Age"]);
    assert_eq!(t["rows"][0]["cells"][1], "statefulset.apps/web");
    assert_eq!(t["rows"][0]["cells"][2], 1);
    let r = delete(&app, &format!("{REVISIONS}/web-1")).await;
    assert_eq!(r.code, 200, "{}", r.body);
}
