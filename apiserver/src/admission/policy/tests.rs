//! The dispatcher: actions, refusals' texts and codes, configuration errors, audit annotations.

use super::compiled::{Binding, Policy};
use super::*;
use crate::admission::webhook::Operation;
use crate::authn::UserInfo;
use crate::registry::{AuditAnnotations, Warnings};
use serde_json::json;

struct NoParams;

impl ParamSource for NoParams {
    fn namespaced(&self, kind: &compiled::ParamKind) -> Option<bool> {
        (kind.kind == "ConfigMap").then_some(true)
    }
    fn get(&self, _: &compiled::ParamKind, _: Option<&str>, _: &str) -> Option<Arc<Value>> {
        None
    }
    fn list(&self, _: &compiled::ParamKind, _: Option<&str>) -> Vec<Arc<Value>> {
        Vec::new()
    }
}

/// An authorizer that allows `get` and nothing else.
struct OnlyGets;

impl k8s_cel::library::authz::Authorize for OnlyGets {
    fn authorize(
        &self,
        _: &k8s_cel::library::authz::Principal,
        question: &k8s_cel::library::authz::Question,
    ) -> k8s_cel::library::authz::Answer {
        let allowed = matches!(question,
            k8s_cel::library::authz::Question::Resource { verb, .. } if verb == "get");
        k8s_cel::library::authz::Answer {
            allowed,
            reason: String::new(),
            error: None,
        }
    }
}

fn plugin(policies: &[Value], bindings: &[Value]) -> Policies {
    let p = Policies::new(true);
    let compiled = |v: &Value| v["metadata"]["name"].as_str().unwrap_or("").to_string();
    let ps = policies
        .iter()
        .filter_map(|v| Some((compiled(v), Arc::new(Policy::compile(v)?))))
        .collect();
    let bs = bindings
        .iter()
        .filter_map(|v| Some((compiled(v), Arc::new(Binding::compile(v)?))))
        .collect();
    p.source.publish(&ps, &bs);
    p
}

fn configmaps_policy(name: &str, extra: Value) -> Value {
    let mut spec = json!({"matchConstraints": {"resourceRules": [{"apiGroups": [""],
        "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
        "validations": [{"expression": "object.metadata.name != 'bad'", "message": "bad name"}]});
    if let (Some(s), Value::Object(extra)) = (spec.as_object_mut(), extra) {
        s.extend(extra);
    }
    json!({"metadata": {"name": name}, "spec": spec})
}

fn binding(name: &str, policy: &str, extra: Value) -> Value {
    let mut spec = json!({"policyName": policy, "validationActions": ["Deny"]});
    if let (Some(s), Value::Object(extra)) = (spec.as_object_mut(), extra) {
        s.extend(extra);
    }
    json!({"metadata": {"name": name}, "spec": spec})
}

/// A run's refusal (code and message), warnings and audit annotations.
type Ran = (Option<(u16, String)>, Vec<String>, BTreeMap<String, String>);

/// Runs `p` on a ConfigMap create named `name`: the outcome (code and message), warnings and
/// audit annotations.
fn run(p: &Policies, resource: &str, name: &str) -> Ran {
    let user = UserInfo::admin();
    let obj = json!({"metadata": {"name": name, "namespace": "default"}});
    let opts = json!({});
    let req = Request {
        operation: Operation::Create,
        group: "",
        version: "v1",
        resource,
        kind_group: "",
        kind_version: "v1",
        kind: "ConfigMap",
        subresource: "",
        name,
        namespace: Some("default"),
        object: Some(&obj),
        old: None,
        user: &user,
        dry_run: false,
        options: &opts,
        equivalents: &[],
        requested: None,
    };
    run_request(p, &req, "configmaps")
}

/// Runs `p` on `req`, `gr` naming its resource in refusals.
fn run_request(p: &Policies, req: &Request<'_>, gr: &str) -> Ran {
    let (resource, name) = (req.resource, req.name);
    let warnings = Warnings::default();
    let audit = AuditAnnotations::default();
    let labels = |_: &str| Some(BTreeMap::new());
    let fx = Effects {
        warnings: &warnings,
        audit: &audit,
        namespace_labels: &labels,
        authorizer: None,
    };
    let namespace = |_: &str| {
        Some(Arc::new(json!({"metadata": {"name": "default",
            "labels": {"env": "prod"}, "managedFields": [{"manager": "m"}]},
            "status": {"phase": "Active"}})))
    };
    let authorizer = || {
        let request = k8s_cel::library::authz::RequestResource {
            resource: resource.to_string(),
            namespace: "default".into(),
            name: name.to_string(),
            ..Default::default()
        };
        k8s_cel::library::authz::AuthorizerVal::new(Arc::new(OnlyGets), Some(request))
    };
    let lookups = Lookups {
        namespace: &namespace,
        params: &NoParams,
        authorizer: &authorizer,
    };
    let out = p.validate(req, &fx, gr, &lookups).err().map(|e| {
        let s = e.to_status();
        (e.code(), s["message"].as_str().unwrap_or("").to_string())
    });
    (out, warnings.all(), audit.all())
}

#[test]
fn deny_refuses_with_upstreams_text_and_reason_code() {
    let p = plugin(
        &[configmaps_policy("p", json!({}))],
        &[binding("b", "p", json!({}))],
    );
    assert_eq!(
        run(&p, "configmaps", "bad").0,
        Some((422, "configmaps \"bad\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: bad name".into()))
    );
    assert_eq!(run(&p, "configmaps", "good").0, None);
    // Another resource is not matched.
    assert_eq!(run(&p, "secrets", "bad").0, None);
    let forbidden = plugin(
        &[configmaps_policy(
            "p",
            json!({"validations": [{"expression": "false", "reason": "Forbidden"}]}),
        )],
        &[binding("b", "p", json!({}))],
    );
    assert_eq!(run(&forbidden, "configmaps", "x").0.map(|o| o.0), Some(403));
}

#[test]
fn warn_and_audit_actions_do_not_refuse() {
    let p = plugin(
        &[configmaps_policy(
            "p",
            json!({"auditAnnotations": [{"key": "seen", "valueExpression": "object.metadata.name"}]}),
        )],
        &[binding(
            "b",
            "p",
            json!({"validationActions": ["Warn", "Audit"]}),
        )],
    );
    let (out, warnings, audit) = run(&p, "configmaps", "bad");
    assert_eq!(out, None);
    assert_eq!(
        warnings,
        vec!["Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': bad name"]
    );
    let failure = audit
        .get("validation.policy.admission.k8s.io/validation_failure")
        .cloned()
        .unwrap_or_default();
    let failure: Value = serde_json::from_str(&failure).unwrap_or(Value::Null);
    assert_eq!(
        failure,
        json!([{"message": "bad name", "policy": "p", "binding": "b", "expressionIndex": 0,
            "validationActions": ["Warn", "Audit"]}])
    );
    assert_eq!(audit.get("p/seen").map(String::as_str), Some("bad"));
}

#[test]
fn missing_params_refuse_under_deny_and_fail() {
    let with_params = |fp: &str| {
        configmaps_policy(
            "p",
            json!({"failurePolicy": fp, "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}}),
        )
    };
    let deny = binding(
        "b",
        "p",
        json!({"paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}}),
    );
    let p = plugin(&[with_params("Fail")], std::slice::from_ref(&deny));
    assert_eq!(
        run(&p, "configmaps", "good").0,
        Some((422, "configmaps \"good\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction".into()))
    );
    let ignored = plugin(&[with_params("Ignore")], &[deny]);
    assert_eq!(run(&ignored, "configmaps", "good").0, None);
    // Allow: the binding is skipped, even for an object its validation would refuse.
    let allow = binding(
        "b",
        "p",
        json!({"paramRef": {"name": "limits", "parameterNotFoundAction": "Allow"}}),
    );
    let p = plugin(&[with_params("Fail")], &[allow]);
    assert_eq!(run(&p, "configmaps", "bad").0, None);
}

#[test]
fn binding_match_resources_narrow_and_unbound_policies_do_nothing() {
    let narrowed = binding(
        "b",
        "p",
        json!({"matchResources": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["configmaps"], "resourceNames": ["other"]}]}}),
    );
    let p = plugin(&[configmaps_policy("p", json!({}))], &[narrowed]);
    assert_eq!(run(&p, "configmaps", "bad").0, None);
    let unbound = plugin(&[configmaps_policy("p", json!({}))], &[]);
    assert!(!unbound.any("", "configmaps"));
    let disabled = Policies::new(false);
    assert!(!disabled.any("", "configmaps"));
    // The admission configuration kinds are exempt.
    let p = plugin(
        &[configmaps_policy("p", json!({}))],
        &[binding("b", "p", json!({}))],
    );
    assert!(!p.any(
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies"
    ));
}

#[test]
fn the_plugin_is_named_and_ordered_as_upstream() {
    let mut config = crate::admission::AdmissionConfig::default();
    assert!(config.enabled(VALIDATING_ADMISSION_POLICY));
    assert_eq!(config.disable_list("ValidatingAdmissionPolicy"), Ok(()));
    assert!(!config.enabled(VALIDATING_ADMISSION_POLICY));
    let at = |name: &str| {
        crate::admission::ORDERED_PLUGINS
            .iter()
            .position(|p| *p == name)
    };
    assert!(at("MutatingAdmissionWebhook") < at(VALIDATING_ADMISSION_POLICY));
    assert!(at(VALIDATING_ADMISSION_POLICY) < at("ValidatingAdmissionWebhook"));
}

#[test]
fn the_namespace_object_shows_what_upstream_shows() {
    let p = plugin(
        &[configmaps_policy(
            "p",
            json!({"validations": [{"expression":
                "namespaceObject.metadata.labels.env != 'prod' || !has(namespaceObject.metadata.managedFields)",
                "messageExpression": "'in ' + namespaceObject.metadata.name + ' ' + namespaceObject.status.phase"}]}),
        )],
        &[binding("b", "p", json!({}))],
    );
    assert_eq!(run(&p, "configmaps", "x").0, None);
    let p = plugin(
        &[configmaps_policy(
            "p",
            json!({"validations": [{"expression": "namespaceObject.metadata.labels.env != 'prod'",
                "messageExpression": "'in ' + namespaceObject.metadata.name + ' ' + namespaceObject.status.phase"}]}),
        )],
        &[binding("b", "p", json!({}))],
    );
    assert_eq!(
        run(&p, "configmaps", "x").0,
        Some((422, "configmaps \"x\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: in default Active".into()))
    );
}

#[test]
fn a_policy_whose_constraints_do_not_evaluate_refuses_under_fail() {
    let bad_selector = |fp: &str| {
        configmaps_policy(
            "p",
            json!({"failurePolicy": fp, "matchConstraints": {
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["configmaps"]}],
                "objectSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}}),
        )
    };
    let b = binding("b", "p", json!({}));
    let p = plugin(&[bad_selector("Fail")], std::slice::from_ref(&b));
    let (refusal, _, _) = run(&p, "configmaps", "good");
    let (code, message) = refusal.expect("refused");
    assert_eq!(code, 422);
    assert!(
        message.starts_with(
            "configmaps \"good\" is forbidden: ValidatingAdmissionPolicy 'p' denied request: failed to configure policy: "
        ),
        "{message}"
    );
    let ignored = plugin(&[bad_selector("Ignore")], &[b]);
    assert_eq!(run(&ignored, "configmaps", "good").0, None);
}

#[test]
fn the_authorizer_variable_asks_the_servers_authorizer() {
    let p = plugin(
        &[configmaps_policy(
            "authz",
            json!({"validations": [
                {"expression": "authorizer.requestResource.check('get').allowed()"},
                {"expression": "authorizer.group('').resource('secrets').namespace('default').check('delete').allowed()",
                 "message": "may not delete secrets"}]}),
        )],
        &[binding("b", "authz", json!({}))],
    );
    let (refused, _, _) = run(&p, "configmaps", "cm");
    assert_eq!(
        refused,
        Some((
            422,
            "configmaps \"cm\" is forbidden: ValidatingAdmissionPolicy 'authz' with binding 'b' denied request: may not delete secrets".into()
        ))
    );
}

#[test]
fn a_policy_past_its_cost_budget_is_an_error_under_its_failure_policy() {
    // Two checks (700,000) fit one expression's limit; fifteen such validations do not fit the
    // request's budget of 10,000,000.
    let check = "authorizer.group('').resource('pods').check('get').allowed()";
    let validations: Vec<Value> = (0..15)
        .map(|_| json!({"expression": format!("{check} && {check}")}))
        .collect();
    let spend = |policy: &str| configmaps_policy(policy, json!({"validations": validations}));
    let mut ignore = spend("ignore");
    ignore["spec"]["failurePolicy"] = json!("Ignore");
    let p = plugin(
        &[spend("fail"), ignore],
        &[
            binding("bf", "fail", json!({})),
            binding("bi", "ignore", json!({})),
        ],
    );
    let (refused, _, _) = run(&p, "configmaps", "cm");
    assert_eq!(
        refused,
        Some((
            422,
            "configmaps \"cm\" is forbidden: ValidatingAdmissionPolicy 'fail' with binding 'bf' denied request: validation failed due to running out of cost budget, no further validation rules will be run".into()
        ))
    );
    // Ten such validations are within the budget.
    let within: Vec<Value> = validations.iter().take(10).cloned().collect();
    let p = plugin(
        &[configmaps_policy("fits", json!({"validations": within}))],
        &[binding("b", "fits", json!({}))],
    );
    assert_eq!(run(&p, "configmaps", "cm").0, None);
}

#[test]
fn match_conditions_have_the_smaller_budget_of_their_own() {
    // Four conditions of two checks each (2,800,000) pass no validation budget, but exceed
    // `RuntimeCELCostBudgetMatchConditions` (2,500,000); three fit.
    let check = "authorizer.group('').resource('pods').check('get').allowed()";
    let conditions = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| json!({"name": format!("c{i}"), "expression": format!("{check} && {check}")}))
            .collect()
    };
    let policy = |name: &str, n: usize| {
        configmaps_policy(
            name,
            json!({"matchConditions": conditions(n),
                "validations": [{"expression": "false", "message": "matched"}]}),
        )
    };
    let p = plugin(&[policy("four", 4)], &[binding("b", "four", json!({}))]);
    assert_eq!(
        run(&p, "configmaps", "cm").0,
        Some((
            422,
            "configmaps \"cm\" is forbidden: ValidatingAdmissionPolicy 'four' with binding 'b' denied request: validation failed due to running out of cost budget, no further validation rules will be run".into()
        ))
    );
    let p = plugin(&[policy("three", 3)], &[binding("b", "three", json!({}))]);
    assert_eq!(
        run(&p, "configmaps", "cm").0,
        Some((
            422,
            "configmaps \"cm\" is forbidden: ValidatingAdmissionPolicy 'three' with binding 'b' denied request: matched".into()
        ))
    );
}

/// A Scale matched through an equivalent version: `request.resource` is the version the
/// constraints name, `request.requestResource` the one addressed; matched exactly, both are.
#[test]
fn a_scale_matched_through_an_equivalent_names_the_matched_resource() {
    use crate::admission::webhook::request::Equivalent;
    let policy = |name: &str, versions: Value| {
        json!({"metadata": {"name": name}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["autoscaling"],
                "apiVersions": versions, "operations": ["UPDATE"],
                "resources": ["horizontalpodautoscalers/scale"]}]},
            "validations": [{"expression": "object.kind == 'Scale'",
                "messageExpression": "request.resource.version + ' of ' + request.requestResource.version"}]}})
    };
    let p = plugin(
        &[
            policy("on-v1", json!(["v1"])),
            policy("on-v2", json!(["v2"])),
        ],
        &[
            binding("on-v1", "on-v1", json!({})),
            binding("on-v2", "on-v2", json!({})),
        ],
    );
    let user = UserInfo::admin();
    let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Deployment"});
    let opts = json!({});
    let equivalents: Vec<Equivalent> = ["v1", "v2"]
        .iter()
        .map(|v| Equivalent {
            group: "autoscaling".into(),
            version: (*v).into(),
            resource: "horizontalpodautoscalers".into(),
        })
        .collect();
    let req = Request {
        operation: Operation::Update,
        group: "autoscaling",
        version: "v2",
        resource: "horizontalpodautoscalers",
        kind_group: "autoscaling",
        kind_version: "v1",
        kind: "Scale",
        subresource: "scale",
        name: "h",
        namespace: Some("default"),
        object: Some(&scale),
        old: Some(&scale),
        user: &user,
        dry_run: false,
        options: &opts,
        equivalents: &equivalents,
        requested: None,
    };
    let (refused, _, _) = run_request(&p, &req, "horizontalpodautoscalers.autoscaling");
    let message = refused.map(|(_, m)| m).unwrap_or_default();
    // Policies run in name order; the first refusal is reported.
    assert!(
        message.ends_with("'on-v1' denied request: v1 of v2"),
        "{message}"
    );
    let only_v2 = plugin(
        &[policy("on-v2", json!(["v2"]))],
        &[binding("on-v2", "on-v2", json!({}))],
    );
    let (refused, _, _) = run_request(&only_v2, &req, "horizontalpodautoscalers.autoscaling");
    let message = refused.map(|(_, m)| m).unwrap_or_default();
    assert!(
        message.ends_with("'on-v2' denied request: v2 of v2"),
        "{message}"
    );
}
