//! Calling the webhooks a request matches (upstream's `webhook/generic.Webhook.Dispatch`,
//! `mutating/dispatcher.go` and `validating/dispatcher.go`).
//!
//! - Mutating webhooks are called one after another in configuration order; each sees the
//!   object as the previous ones left it. A `JSONPatch` answer is applied to the object; when it
//!   changed the object, every webhook called before it with `reinvocationPolicy: IfNeeded` is
//!   marked for a second round, which calls the marked ones once more, in order.
//! - Validating webhooks are called concurrently; the request is refused by the first refusal
//!   in configuration order.
//! - For each webhook: rules, namespace and object selectors, then match conditions
//!   ([`super::matching`], [`super::conditions`]); a dry-run request is refused (400
//!   `admission webhook "x" does not support dry run`) by a webhook whose `sideEffects` is not
//!   `None`/`NoneOnDryRun`; then the call through the shared client ([`crate::webhook`]) with the
//!   webhook's `timeoutSeconds`.
//! - A failed call (transport, deadline, status, invalid answer) is `failed calling webhook
//!   "x": …`: with `failurePolicy: Fail` a 500 `Internal error occurred: …`, with `Ignore` the
//!   webhook is skipped and a `failed-open` audit annotation recorded. A refusal is the answer's
//!   status as upstream's `ToStatusErr` renders it: its code (400 when absent or below), reason
//!   and details as sent, the message `admission webhook "x" denied the request: msg`.
//! - Warnings of every answer go to the response's `Warning` headers; audit annotations are
//!   kept on the request as `<webhook>/<key>`, with upstream's `mutation.webhook…` annotations.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{json, Value};

use super::conditions::Decision;
use super::matching::{Hook, NamespaceMiss};
use super::request::{review_version, verify, Request};
use crate::error::{ApiError, Result};
use crate::registry::{AuditAnnotations, Warnings};
use crate::webhook::CallError;

/// Where a request's webhooks leave what they report besides the verdict.
pub struct Effects<'a> {
    pub warnings: &'a Warnings,
    pub audit: &'a AuditAnnotations,
    /// Labels of a namespace by name (`None`: no such namespace).
    pub namespace_labels: &'a (dyn Fn(&str) -> Option<BTreeMap<String, String>> + Sync),
    /// The `authorizer` variable of `matchConditions` (made only for a webhook that has them);
    /// none: the variable is not bound.
    pub authorizer: Option<&'a (dyn Fn() -> k8s_cel::library::authz::AuthorizerVal + Sync)>,
}

/// An object a webhook's patch was applied to, and the patch (for the audit annotation).
struct Patched {
    object: Value,
    patch: Value,
}

/// How one webhook call ended, short of a refusal.
enum Called {
    /// Allowed; with the patched object if a patch was applied.
    Allowed(Option<Patched>),
    /// The call failed: `failed calling webhook "x": <reason>`.
    Failed(String),
}

/// The status of a 500 for `failed calling webhook`.
fn internal(msg: &str) -> ApiError {
    api::status::internal(msg).into()
}

/// Whether `hook` is to be called for `req`: `Ok(false)` to skip it.
fn should_call(hook: &Hook, req: &Request<'_>, fx: &Effects<'_>, gr: &str) -> Result<bool> {
    if !hook.matches_rules(req) {
        return Ok(false);
    }
    match hook.matches_namespace(req, |ns| (fx.namespace_labels)(ns)) {
        Ok(true) => {}
        Ok(false) => return Ok(false),
        Err(NamespaceMiss::NotFound(ns)) => return Err(ApiError::not_found("namespaces", &ns)),
        Err(NamespaceMiss::Invalid(e)) => return Err(internal(&e)),
    }
    match hook.matches_object(req) {
        Ok(true) => {}
        Ok(false) => return Ok(false),
        Err(e) => return Err(internal(&e)),
    }
    if hook.conditions.is_empty() {
        return Ok(true);
    }
    let request = req.admission_request("");
    let null = Value::Null;
    let authorizer = fx.authorizer.map(|make| make());
    match hook.conditions.decide(
        req.object.unwrap_or(&null),
        req.old.unwrap_or(&null),
        &request,
        authorizer.as_ref(),
    ) {
        Decision::Call => Ok(true),
        Decision::Skip => Ok(false),
        Decision::Error(_) if hook.ignore_failures => Ok(false),
        Decision::Error(e) => Err(api::status::forbidden(gr, req.name, &e).into()),
    }
}

/// The dry-run check: a webhook with side effects cannot see a dry-run request.
fn check_dry_run(hook: &Hook, req: &Request<'_>) -> Result<()> {
    if req.dry_run && !matches!(hook.side_effects.as_str(), "None" | "NoneOnDryRun") {
        return Err(ApiError::bad_request(format!(
            "admission webhook {:?} does not support dry run",
            hook.name
        )));
    }
    Ok(())
}

/// `ToStatusErr`: a refusal is the webhook's own `status`, as it sent it (code, reason, details),
/// its message prefixed with which webhook refused; no `… is forbidden:` wrapping.
fn refusal(hook: &Hook, result: Option<&Value>) -> ApiError {
    let field = |f: &str| {
        result
            .and_then(|r| r.get(f))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    // A refusal is an error: upstream raises any code below 400 (an absent one too) to 400, so a
    // webhook's `code: 200` cannot turn a refusal into an HTTP 200 a typed client would decode as
    // the object. Above 599 is no HTTP status: 599 at most (a deviation upstream does not need).
    let code = result
        .and_then(|r| r.get("code"))
        .and_then(Value::as_i64)
        .map_or(400, |c| c.clamp(400, 599));
    let denied = format!("admission webhook {:?} denied the request", hook.name);
    let (message, reason) = (field("message"), field("reason"));
    let text = if !message.is_empty() {
        format!("{denied}: {message}")
    } else if !reason.is_empty() {
        format!("{denied}: {reason}")
    } else {
        format!("{denied} without explanation")
    };
    api::status::StatusObject {
        code: i32::try_from(code).ok(),
        details: result
            .and_then(|r| r.get("details"))
            .filter(|d| d.is_object())
            .and_then(|d| serde_json::from_value(d.clone()).ok()),
        message: Some(text),
        metadata: Default::default(),
        reason: (!reason.is_empty()).then_some(reason),
        status: Some("Failure".to_string()),
    }
    .into()
}

/// Calls one webhook; `Err` is a refusal or an error not subject to `failurePolicy`.
async fn call(hook: &Hook, req: &Request<'_>, fx: &Effects<'_>, mutating: bool) -> Result<Called> {
    let Some(version) = review_version(&hook.review_versions) else {
        return Ok(Called::Failed(
            "webhook does not accept v1 or v1beta1 AdmissionReview".into(),
        ));
    };
    let uid = uuid::Uuid::new_v4().to_string();
    let review = req.review(&uid, version);
    let answer =
        match crate::webhook::post_json(hook.client.endpoint(), &review, hook.timeout).await {
            Ok(a) => a,
            Err(CallError::Client(e)) => {
                return Ok(Called::Failed(format!("could not get REST client: {e}")))
            }
            Err(CallError::Call(e)) => {
                return Ok(Called::Failed(format!("failed to call webhook: {e}")))
            }
        };
    let verdict = match verify(&answer, &uid, version, mutating) {
        Ok(v) => v,
        Err(e) => {
            return Ok(Called::Failed(format!(
                "received invalid webhook response: {e}"
            )))
        }
    };
    for (k, v) in &verdict.audit_annotations {
        fx.audit.add(format!("{}/{k}", hook.name), v.clone());
    }
    for w in verdict.warnings {
        fx.warnings.push(w);
    }
    if !verdict.allowed {
        return Err(refusal(hook, verdict.result.as_ref()));
    }
    if verdict.patch.is_empty() {
        return Ok(Called::Allowed(None));
    }
    let patch: json_patch::Patch = match serde_json::from_slice(&verdict.patch) {
        Ok(p) => p,
        Err(e) => {
            return Ok(Called::Failed(format!(
                "received undecodable patch in webhook response: {e}"
            )))
        }
    };
    if patch.0.is_empty() {
        return Ok(Called::Allowed(None));
    }
    let Some(object) = req.object else {
        return Err(internal(&format!(
            "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
            hook.name
        )));
    };
    let mut patched = object.clone();
    // The same bounds as a client's JSON patch (operations, copied bytes, result size and depth):
    // a webhook's answer must not grow the object without limit either.
    crate::patch::limits::apply_json_patch(&mut patched, &patch.0)
        .and_then(|()| crate::patch::limits::check_result(&patched))
        .map_err(|e| internal(&e.to_string()))?;
    Ok(Called::Allowed(Some(Patched {
        object: patched,
        patch: serde_json::to_value(&patch).unwrap_or(Value::Null),
    })))
}

/// A failed call under the webhook's `failurePolicy`: `Ok` to go on (Ignore), else the 500.
fn failed(hook: &Hook, reason: &str, fx: &Effects<'_>, annotation: String) -> Result<()> {
    let err = format!("failed calling webhook {:?}: {reason}", hook.name);
    if hook.ignore_failures {
        tracing::warn!(webhook = %hook.name, error = %err, "failed calling webhook, failing open");
        fx.audit.add(annotation, hook.name.clone());
        return Ok(());
    }
    tracing::warn!(webhook = %hook.name, error = %err, "failed calling webhook, failing closed");
    Err(internal(&err))
}

/// The mutating webhooks on `req` (whose `object` is `obj`): `Some` with the mutated object when
/// any webhook changed it.
pub async fn mutate(
    hooks: &[Arc<Hook>],
    req: &Request<'_>,
    fx: &Effects<'_>,
    gr: &str,
) -> Result<Option<Value>> {
    let mut current: Option<Value> = None;
    // Called webhooks that asked to be reinvoked, and those marked for the second round.
    let mut invoked: BTreeSet<usize> = BTreeSet::new();
    let mut reinvoke: BTreeSet<usize> = BTreeSet::new();
    for round in 0..2 {
        if round == 1 && reinvoke.is_empty() {
            break;
        }
        for (i, hook) in hooks.iter().enumerate() {
            let req = hook.invocation(&Request {
                object: current.as_ref().or(req.object),
                ..*req
            });
            if round == 1 && !reinvoke.contains(&i) {
                continue;
            }
            if !should_call(hook, &req, fx, gr)? {
                continue;
            }
            check_dry_run(hook, &req)?;
            let called = call(hook, &req, fx, true).await?;
            let mut mutated = false;
            match called {
                Called::Allowed(Some(patched)) => {
                    mutated = req.object != Some(&patched.object);
                    if mutated {
                        record_patch(hook, round, i, patched.patch, fx);
                        current = Some(patched.object);
                    }
                }
                Called::Allowed(None) => {}
                Called::Failed(reason) => failed(
                    hook,
                    &reason,
                    fx,
                    format!(
                        "failed-open.mutation.webhook.admission.k8s.io/round_{round}_index_{i}"
                    ),
                )?,
            }
            fx.audit.add(
                format!("mutation.webhook.admission.k8s.io/round_{round}_index_{i}"),
                json!({"configuration": hook.configuration, "webhook": hook.name, "mutated": mutated})
                    .to_string(),
            );
            if mutated && round == 0 {
                reinvoke.extend(invoked.iter().copied());
            }
            if hook.reinvoke_if_needed && round == 0 {
                invoked.insert(i);
            }
        }
    }
    Ok(current)
}

/// Upstream's `patch.webhook.admission.k8s.io/round_R_index_I` annotation.
fn record_patch(hook: &Hook, round: usize, i: usize, patch: Value, fx: &Effects<'_>) {
    fx.audit.add(
        format!("patch.webhook.admission.k8s.io/round_{round}_index_{i}"),
        json!({"configuration": hook.configuration, "webhook": hook.name, "patch": patch,
            "patchType": "JSONPatch"})
        .to_string(),
    );
}

/// The validating webhooks on `req`, called concurrently.
pub async fn validate(
    hooks: &[Arc<Hook>],
    req: &Request<'_>,
    fx: &Effects<'_>,
    gr: &str,
) -> Result<()> {
    let mut called = Vec::new();
    for (i, hook) in hooks.iter().enumerate() {
        let req = hook.invocation(req);
        if should_call(hook, &req, fx, gr)? {
            check_dry_run(hook, &req)?;
            called.push((i, hook, req));
        }
    }
    let calls = called
        .iter()
        .map(|(_, hook, req)| call(hook, req, fx, false));
    let results = futures::future::join_all(calls).await;
    for ((i, hook, _), result) in called.iter().zip(results) {
        match result? {
            Called::Allowed(_) => {}
            Called::Failed(reason) => failed(
                hook,
                &reason,
                fx,
                format!("failed-open.validating.webhook.admission.k8s.io/round_0_index_{i}"),
            )?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::request::Operation;
    use super::*;
    use crate::authn::UserInfo;

    fn hook(extra: Value) -> Hook {
        let mut w = json!({"name": "w.example.com", "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": "ns", "name": "svc"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["configmaps"]}]});
        if let (Some(w), Value::Object(extra)) = (w.as_object_mut(), extra) {
            w.extend(extra);
        }
        Hook::compile("c", 0, &w).unwrap_or_else(|| panic!("webhook does not decode"))
    }

    fn with_request<T>(name: &str, dry_run: bool, f: impl FnOnce(&Request<'_>) -> T) -> T {
        let user = UserInfo::admin();
        let obj = json!({"metadata": {"name": name}});
        let opts = json!({});
        let req = Request {
            operation: Operation::Create,
            group: "",
            version: "v1",
            resource: "configmaps",
            kind_group: "",
            kind_version: "v1",
            kind: "ConfigMap",
            subresource: "",
            name,
            namespace: Some("default"),
            object: Some(&obj),
            old: None,
            user: &user,
            dry_run,
            options: &opts,
            equivalents: &[],
            requested: None,
        };
        f(&req)
    }

    fn message(e: &ApiError) -> (u16, String) {
        let s = e.to_status();
        (e.code(), s["message"].as_str().unwrap_or("").to_string())
    }

    #[test]
    fn dry_run_needs_a_webhook_without_side_effects() {
        for (side_effects, refused) in [
            ("None", false),
            ("NoneOnDryRun", false),
            ("Some", true),
            ("Unknown", true),
        ] {
            let h = hook(json!({"sideEffects": side_effects}));
            let checked = with_request("x", true, |req| check_dry_run(&h, req));
            match checked {
                Ok(()) => assert!(!refused, "{side_effects}"),
                Err(e) => assert_eq!(
                    message(&e),
                    (
                        400,
                        "admission webhook \"w.example.com\" does not support dry run".into()
                    )
                ),
            }
            assert!(with_request("x", false, |req| check_dry_run(&h, req)).is_ok());
        }
    }

    #[test]
    fn refusals_are_rendered_as_upstreams_to_status_err() {
        let h = hook(json!({}));
        let r = |result: Value| message(&refusal(&h, Some(&result)));
        let denied = "admission webhook \"w.example.com\" denied the request";
        assert_eq!(
            r(json!({"code": 403, "message": "no"})),
            (403, format!("{denied}: no"))
        );
        assert_eq!(
            r(json!({"reason": "Because"})),
            (400, format!("{denied}: Because"))
        );
        assert_eq!(r(json!({})), (400, format!("{denied} without explanation")));
        assert_eq!(
            r(json!({"code": 500, "message": "broken"})),
            (500, format!("{denied}: broken"))
        );
        assert_eq!(r(json!({"code": 422, "message": "bad"})).0, 422);
        // A refusal is never a success: codes below 400 are raised to 400, as upstream.
        assert_eq!(r(json!({"code": 200, "message": "no"})).0, 400);
        // The reason and details are the webhook's own.
        let st = refusal(
            &h,
            Some(&json!({"code": 403, "reason": "Forbidden", "message": "no", "details": {"name": "x"}})),
        )
        .to_status();
        assert_eq!(st["reason"], "Forbidden");
        assert_eq!(st["details"]["name"], "x");
        assert_eq!(st["status"], "Failure");
        let st = refusal(&h, None).to_status();
        assert!(st.get("reason").is_none(), "{st}");
    }

    #[tokio::test]
    async fn failure_policy_decides_what_a_failed_call_does() {
        let warnings = Warnings::default();
        let audit = AuditAnnotations::default();
        let no_namespaces = |_: &str| None;
        let fx = Effects {
            warnings: &warnings,
            audit: &audit,
            namespace_labels: &no_namespaces,
            authorizer: None,
        };
        let fail = [Arc::new(hook(json!({"failurePolicy": "Fail"})))];
        let user = UserInfo::admin();
        let obj = json!({"metadata": {"name": "x"}});
        let opts = json!({});
        let req = Request {
            operation: Operation::Create,
            group: "",
            version: "v1",
            resource: "configmaps",
            kind_group: "",
            kind_version: "v1",
            kind: "ConfigMap",
            subresource: "",
            name: "x",
            namespace: None,
            object: Some(&obj),
            old: None,
            user: &user,
            dry_run: false,
            options: &opts,
            equivalents: &[],
            requested: None,
        };
        let err = mutate(&fail, &req, &fx, "configmaps").await.err();
        let (code, msg) = err.as_ref().map(message).unwrap_or_default();
        assert_eq!(code, 500);
        assert!(
            msg.starts_with("Internal error occurred: failed calling webhook \"w.example.com\": could not get REST client: clientConfig.service ns/svc cannot be reached"),
            "{msg}"
        );
        let ignore = [Arc::new(hook(json!({"failurePolicy": "Ignore"})))];
        assert!(matches!(
            mutate(&ignore, &req, &fx, "configmaps").await,
            Ok(None)
        ));
        assert!(validate(&ignore, &req, &fx, "configmaps").await.is_ok());
        let annotations = audit.all();
        assert_eq!(
            annotations
                .get("failed-open.validating.webhook.admission.k8s.io/round_0_index_0")
                .map(String::as_str),
            Some("w.example.com")
        );
        // A match condition that errs: refused under Fail, skipped under Ignore.
        let cond = json!([{"name": "c", "expression": "object.nope == 1"}]);
        let erring = [Arc::new(hook(
            json!({"failurePolicy": "Fail", "matchConditions": cond}),
        ))];
        let err = validate(&erring, &req, &fx, "configmaps").await.err();
        assert_eq!(
            err.as_ref().map(message),
            Some((403, "configmaps \"x\" is forbidden: expression 'object.nope == 1' resulted in error: no such key: nope".into()))
        );
        let skipped = [Arc::new(hook(
            json!({"failurePolicy": "Ignore", "matchConditions": cond}),
        ))];
        assert!(validate(&skipped, &req, &fx, "configmaps").await.is_ok());
        // A rule for another resource: not called, whatever its failure policy.
        let other = [Arc::new(hook(
            json!({"rules": [{"operations": ["*"], "apiGroups": ["apps"],
            "apiVersions": ["*"], "resources": ["*"]}]}),
        ))];
        assert!(matches!(
            mutate(&other, &req, &fx, "configmaps").await,
            Ok(None)
        ));
    }
}
