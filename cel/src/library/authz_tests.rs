//! Tests of the authz library: the questions checks ask, selectors, argument errors, cost.

use super::*;
use crate::env::{Meter, ENV};
use cel::common::types::{CelBool, CelString};
use cel::Context;
use std::sync::Mutex;

/// Allows `get` of anything and `/healthz`; records every question.
#[derive(Default)]
struct Recorder(Mutex<Vec<(Principal, Question)>>);

impl Authorize for Recorder {
    fn authorize(&self, principal: &Principal, question: &Question) -> Answer {
        if let Ok(mut seen) = self.0.lock() {
            seen.push((principal.clone(), question.clone()));
        }
        let allowed = match question {
            Question::Resource { verb, .. } => verb == "get",
            Question::Path { path, .. } => path == "/healthz",
        };
        Answer {
            allowed,
            reason: if allowed { "ok".into() } else { String::new() },
            error: None,
        }
    }
}

fn eval(src: &str, backend: &Arc<Recorder>) -> String {
    let program = match crate::compile::parse(src) {
        Ok(p) => p,
        Err(e) => return format!("parse error: {e}"),
    };
    let request = RequestResource {
        group: "apps".into(),
        resource: "deployments".into(),
        subresource: "scale".into(),
        namespace: "ns".into(),
        name: "web".into(),
    };
    let authorizer = AuthorizerVal::new(backend.clone(), Some(request));
    let mut ctx = Context::with_env(ENV.clone());
    ctx.add_variable_as_val("authorizer", Box::new(authorizer));
    let (out, _) = Meter::run(
        0,
        crate::cost::PER_CALL_LIMIT,
        || match cel::Value::resolve_val(&program, &ctx) {
            Ok(v) => {
                if let Some(b) = v.downcast_ref::<CelBool>() {
                    b.inner().to_string()
                } else if let Some(s) = v.downcast_ref::<CelString>() {
                    format!("{:?}", s.inner())
                } else {
                    format!("{v:?}")
                }
            }
            Err(e) => format!("error: {}", crate::errors::runtime_message(&e)),
        },
    );
    out
}

#[test]
fn checks_ask_the_backend_the_question_built() {
    let backend = Arc::new(Recorder::default());
    let e = |src: &str| eval(src, &backend);
    assert_eq!(
        e("authorizer.group('apps').resource('deployments').namespace('ns').name('web').subresource('scale').check('get').allowed()"),
        "true"
    );
    assert_eq!(
        e("authorizer.group('').resource('pods').check('delete').allowed()"),
        "false"
    );
    assert_eq!(
        e("authorizer.path('/healthz').check('get').reason()"),
        "\"ok\""
    );
    assert_eq!(
        e("authorizer.serviceAccount('kube-system', 'gc').group('').resource('pods').check('list').errored()"),
        "false"
    );
    assert_eq!(e("authorizer.requestResource.check('get').error()"), "\"\"");
    let seen = backend.0.lock().map(|s| s.clone()).unwrap_or_default();
    let resource =
        |g: &str, r: &str, sub: &str, ns: &str, n: &str, verb: &str| Question::Resource {
            group: g.into(),
            resource: r.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: n.into(),
            verb: verb.into(),
            field_selector: String::new(),
            label_selector: String::new(),
        };
    assert_eq!(
        seen,
        vec![
            (
                Principal::Requester,
                resource("apps", "deployments", "scale", "ns", "web", "get")
            ),
            (
                Principal::Requester,
                resource("", "pods", "", "", "", "delete")
            ),
            (
                Principal::Requester,
                Question::Path {
                    path: "/healthz".into(),
                    verb: "get".into()
                }
            ),
            (
                Principal::ServiceAccount {
                    namespace: "kube-system".into(),
                    name: "gc".into()
                },
                resource("", "pods", "", "", "", "list")
            ),
            (
                Principal::Requester,
                resource("apps", "deployments", "scale", "ns", "web", "get")
            ),
        ]
    );
}

/// `fieldSelector` and `labelSelector` reach the question as written, the last call of each
/// winning; one that would not parse is carried too (the server records its parse error)
/// and the check still decides.
#[test]
fn selectors_narrow_a_resource_check() {
    let backend = Arc::new(Recorder::default());
    let e = |src: &str| eval(src, &backend);
    assert_eq!(
        e("authorizer.group('').resource('pods').fieldSelector('spec.nodeName=n1').labelSelector('app=web').check('get').allowed()"),
        "true"
    );
    assert_eq!(
        e("authorizer.group('').resource('pods').labelSelector('a=b').labelSelector('c in (d)').check('list').allowed()"),
        "false"
    );
    assert_eq!(
        e("authorizer.group('').resource('pods').fieldSelector('a b c').check('get').errored()"),
        "false"
    );
    assert_eq!(
        e("authorizer.requestResource.fieldSelector('metadata.name=web').check('get').allowed()"),
        "true"
    );
    // Only on resource checks.
    assert!(e("authorizer.path('/healthz').fieldSelector('a=b')").starts_with("error"));
    let seen = backend.0.lock().map(|s| s.clone()).unwrap_or_default();
    let selectors: Vec<(String, String)> = seen
        .iter()
        .filter_map(|(_, q)| match q {
            Question::Resource {
                field_selector,
                label_selector,
                ..
            } => Some((field_selector.clone(), label_selector.clone())),
            Question::Path { .. } => None,
        })
        .collect();
    let pair = |f: &str, l: &str| (f.to_string(), l.to_string());
    assert_eq!(
        selectors,
        vec![
            pair("spec.nodeName=n1", "app=web"),
            pair("", "c in (d)"),
            pair("a b c", ""),
            pair("metadata.name=web", ""),
        ]
    );
}

#[test]
fn invalid_arguments_are_upstreams_errors() {
    let backend = Arc::new(Recorder::default());
    let e = |src: &str| eval(src, &backend);
    assert!(e("authorizer.path(' ')").contains("path must not be empty"));
    assert!(e("authorizer.group('').resource('')").contains("resource must not be empty"));
    assert!(
        e("authorizer.serviceAccount('ns', 'Bad_Name')").contains("Invalid service account name")
    );
    assert!(e("authorizer.serviceAccount('not.a.label', 'sa')")
        .contains("Invalid service account namespace"));
}

#[test]
fn two_checks_fit_one_expression_and_a_third_does_not() {
    let backend = Arc::new(Recorder::default());
    let check = "authorizer.group('').resource('pods').check('get').allowed()";
    assert_eq!(eval(&format!("{check} && {check}"), &backend), "true");
    assert!(eval(&format!("{check} && {check} && {check}"), &backend)
        .contains("operation cancelled: actual cost limit exceeded"));
}
