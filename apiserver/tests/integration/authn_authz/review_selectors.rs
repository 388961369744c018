//! Access reviews narrowed by `fieldSelector`/`labelSelector` (1.33, `AuthorizeWithSelectors`
//! beta and on): validated as upstream's `pkg/apis/authorization/validation` (422 with its
//! field paths), otherwise answered as without them (RBAC ignores selectors), with
//! `status.evaluationError` naming a selector that was ignored, wholly or partly.

use serde_json::{json, Value};

use super::{app, sar};

const SA: &str = "system:serviceaccount:default:default";

fn pods(selectors: Value) -> Value {
    let mut attrs = json!({"namespace": "default", "verb": "list", "resource": "pods"});
    if let (Some(a), Value::Object(s)) = (attrs.as_object_mut(), selectors) {
        a.extend(s);
    }
    attrs
}

fn causes(status: &Value) -> Vec<(String, String)> {
    status["details"]["causes"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|c| {
                    let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
                    (s("field"), s("reason"))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn invalid_selectors_are_refused_with_upstreams_field_paths() {
    let (app, _) = app().await;
    let both = pods(json!({"fieldSelector": {"rawSelector": "spec.nodeName=n1",
        "requirements": [{"key": "spec.nodeName", "operator": "In", "values": ["n1"]}]}}));
    let (code, st) = sar(
        &app,
        "subjectaccessreviews",
        &[],
        json!({"spec": {"user": SA, "resourceAttributes": both}}),
    )
    .await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["reason"], "Invalid");
    assert_eq!(
        st["message"],
        "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes.fieldSelector.rawSelector: Invalid value: \"spec.nodeName=n1\": may not specified at the same time as requirements"
    );

    let empty = pods(json!({"labelSelector": {}}));
    let (code, st) = sar(
        &app,
        "selfsubjectaccessreviews",
        &[],
        json!({"spec": {"resourceAttributes": empty}}),
    )
    .await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(
        st["message"],
        "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes.labelSelector.requirements: Required value: when spec.resourceAttributes.labelSelector is specified, requirements or rawSelector is required"
    );

    // Each requirement checked (an unknown operator passes); the namespace check comes after.
    let reqs = json!({"namespace": "other", "verb": "list", "resource": "pods",
        "fieldSelector": {"requirements": [{"key": "", "operator": "Unheard"},
            {"key": "spec.nodeName", "operator": "In"}]},
        "labelSelector": {"requirements": [{"key": "app", "operator": "Exists", "values": ["x"]},
            {"key": "tier", "operator": "Unheard", "values": ["-x"]}]}});
    let (code, st) = sar(
        &app,
        "localsubjectaccessreviews",
        &[],
        json!({"spec": {"user": SA, "resourceAttributes": reqs}}),
    )
    .await;
    assert_eq!(code, 422, "{st}");
    let owned = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(f, r)| (f.to_string(), r.to_string()))
            .collect()
    };
    assert_eq!(
        causes(&st),
        owned(&[
            (
                "spec.resourceAttributes.fieldSelector.requirements[0].key",
                "FieldValueRequired"
            ),
            (
                "spec.resourceAttributes.fieldSelector.requirements[1].values",
                "FieldValueRequired"
            ),
            (
                "spec.resourceAttributes.labelSelector.requirements[0].values",
                "FieldValueForbidden"
            ),
            (
                "spec.resourceAttributes.labelSelector.requirements[1].values[0]",
                "FieldValueInvalid"
            ),
            ("spec.resourceAttributes.namespace", "FieldValueInvalid"),
        ])
    );
}

#[tokio::test]
async fn valid_selectors_are_answered_as_without_them() {
    let (app, _) = app().await;
    let ask = |attrs: Value| {
        let app = app.clone();
        async move {
            let body = json!({"spec": {"user": SA, "groups": ["system:authenticated"],
                "resourceAttributes": attrs}});
            sar(&app, "subjectaccessreviews", &[], body).await
        }
    };
    let (code, plain) = ask(pods(json!({}))).await;
    assert_eq!(code, 201, "{plain}");
    assert_eq!(plain["status"], json!({"allowed": false}));
    let narrowed = pods(json!({
        "fieldSelector": {"rawSelector": "spec.nodeName=n1"},
        "labelSelector": {"requirements": [{"key": "app", "operator": "In", "values": ["web"]}]}}));
    let (code, r) = ask(narrowed.clone()).await;
    assert_eq!(code, 201, "{r}");
    assert_eq!(r["status"], plain["status"]);
    // The review comes back as sent.
    assert_eq!(r["spec"]["resourceAttributes"], narrowed);

    // The admin is allowed, selectors or not.
    let (code, r) = sar(
        &app,
        "selfsubjectaccessreviews",
        &[],
        json!({"spec": {"resourceAttributes": narrowed}}),
    )
    .await;
    assert_eq!(code, 201, "{r}");
    assert_eq!(r["status"], json!({"allowed": true}));

    // Not understood: a raw selector that does not parse is ignored, a requirement with an
    // operator this server does not know is dropped; the review says so.
    let unparsed = pods(json!({"labelSelector": {"rawSelector": "a in (b"},
        "fieldSelector": {"requirements": [
            {"key": "spec.nodeName", "operator": "In", "values": ["n1"]},
            {"key": "status.phase", "operator": "Unheard"}]}}));
    let (code, r) = ask(unparsed).await;
    assert_eq!(code, 201, "{r}");
    assert_eq!(
        r["status"],
        json!({"allowed": false, "evaluationError":
            "spec.resourceAttributes.fieldSelector partially ignored due to parse error; spec.resourceAttributes.labelSelector ignored due to parse error"})
    );
}
