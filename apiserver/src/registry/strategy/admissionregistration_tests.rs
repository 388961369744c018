//! admissionregistration.k8s.io: webhook and policy defaults, upstream's messages and field
//! paths, update relaxations, generation, tables.

use crate::registry::{builtin, Resource};
use serde_json::{json, Value};
use std::sync::Arc;

fn s(plural: &str) -> Arc<Resource> {
    match builtin::find("admissionregistration.k8s.io", plural) {
        Some(s) => s,
        None => panic!("no strategy for {plural}"),
    }
}

fn defaulted(r: &Resource, obj: &Value) -> Value {
    let mut obj = obj.clone();
    r.prepare_for_create(&mut obj);
    obj
}

fn errors(r: &Resource, obj: &Value) -> Vec<String> {
    r.validate_create(&defaulted(r, obj))
        .iter()
        .map(|e| format!("{}: {}", e.field, e.body()))
        .collect()
}

fn hook(name: &str) -> Value {
    json!({
        "name": name,
        "clientConfig": {"service": {"namespace": "default", "name": "svc", "path": "/validate"}},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    })
}

#[test]
fn webhook_defaults() {
    for (plural, mutating) in [
        ("validatingwebhookconfigurations", false),
        ("mutatingwebhookconfigurations", true),
    ] {
        let r = s(plural);
        let obj = defaulted(
            &r,
            &json!({"metadata": {"name": "c"}, "webhooks": [hook("a.example.com")]}),
        );
        let h = &obj["webhooks"][0];
        assert_eq!(h["failurePolicy"], "Fail");
        assert_eq!(h["matchPolicy"], "Equivalent");
        assert_eq!(h["namespaceSelector"], json!({}));
        assert_eq!(h["objectSelector"], json!({}));
        assert_eq!(h["timeoutSeconds"], 10);
        assert_eq!(h["rules"][0]["scope"], "*");
        assert_eq!(h["clientConfig"]["service"]["port"], 443);
        assert_eq!(h.get("reinvocationPolicy").is_some(), mutating);
        assert_eq!(obj["metadata"]["generation"], 1);
        assert_eq!(errors(&r, &obj), Vec::<String>::new());
    }
}

#[test]
fn webhook_validation_uses_upstreams_messages() {
    let r = s("validatingwebhookconfigurations");
    let bad = json!({"metadata": {"name": "c"}, "webhooks": [
        {"name": "short.name", "clientConfig": {"url": "http://user@host/x?a=b#f", "service": {"name": "s", "namespace": "n"}}},
        {"name": "a.example.com", "clientConfig": {"url": "http://user@host/x?a=b#f"},
         "rules": [{"operations": ["*", "CREATE", "PATCH"], "apiGroups": [], "apiVersions": ["*", "v1"], "resources": ["*/*", "pods"], "scope": "World"}],
         "sideEffects": "Some", "timeoutSeconds": 31, "failurePolicy": "Maybe", "admissionReviewVersions": ["v2", "v2"]},
        {"name": "a.example.com", "clientConfig": {"service": {"path": "no-slash//x"}}, "sideEffects": "None", "admissionReviewVersions": ["v1"],
         "matchConditions": [{"name": "", "expression": " "}]},
    ]});
    assert_eq!(
        errors(&r, &bad),
        [
            "webhooks[0].name: Invalid value: \"short.name\": should be a domain with at least three segments separated by dots",
            "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
            "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
            "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
            "webhooks[1].rules[0].operations: Invalid value: []admissionregistration.OperationType{\"*\", \"CREATE\", \"PATCH\"}: if '*' is present, must not specify other operations",
            "webhooks[1].rules[0].operations[2]: Unsupported value: \"PATCH\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"",
            "webhooks[1].rules[0].apiGroups: Required value",
            "webhooks[1].rules[0].apiVersions: Invalid value: []string{\"*\", \"v1\"}: if '*' is present, must not specify other API versions",
            "webhooks[1].rules[0].resources: Invalid value: []string{\"*/*\", \"pods\"}: if '*/*' is present, must not specify other resources",
            "webhooks[1].rules[0].scope: Unsupported value: \"World\": supported values: \"*\", \"Cluster\", \"Namespaced\"",
            "webhooks[1].failurePolicy: Unsupported value: \"Maybe\": supported values: \"Fail\", \"Ignore\"",
            "webhooks[1].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
            "webhooks[1].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
            "webhooks[1].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
            "webhooks[1].clientConfig.url: Invalid value: \"user\": user information is not permitted in the URL",
            "webhooks[1].clientConfig.url: Invalid value: \"f\": fragments are not permitted in the URL",
            "webhooks[1].clientConfig.url: Invalid value: \"a=b\": query parameters are not permitted in the URL",
            "webhooks[1].admissionReviewVersions[1]: Invalid value: \"v2\": duplicate version",
            "webhooks[1].admissionReviewVersions: Invalid value: []string{\"v2\", \"v2\"}: must include at least one of v1, v1beta1",
            "webhooks[2].clientConfig.service.name: Required value",
            "webhooks[2].clientConfig.service.namespace: Required value",
            "webhooks[2].clientConfig.service.path: Invalid value: \"no-slash//x\": must start with a '/'",
            "webhooks[2].clientConfig.service.path: Invalid value: \"no-slash//x\": segment[1] may not be empty",
            "webhooks[2].matchConditions[0].expression: Required value",
            "webhooks[2].matchConditions[0].name: Required value",
            "webhooks[2].name: Duplicate value: \"a.example.com\"",
        ]
    );
}

#[test]
fn an_update_relaxes_what_the_stored_object_already_broke() {
    let r = s("mutatingwebhookconfigurations");
    let mut some = hook("a.example.com");
    some["sideEffects"] = json!("Some");
    let mut old = defaulted(
        &r,
        &json!({"metadata": {"name": "c"}, "webhooks": [some.clone()]}),
    );
    old["metadata"]["generation"] = json!(3);
    let mut new = old.clone();
    r.prepare_for_update(&mut new, &old);
    assert!(
        r.validate_update(&new, &old).is_empty(),
        "{:?}",
        r.validate_update(&new, &old)
    );
    assert_eq!(
        new["metadata"]["generation"], 3,
        "an unchanged update keeps generation"
    );
    // A change of the webhooks bumps generation.
    let old = new.clone();
    new["webhooks"][0]["timeoutSeconds"] = json!(5);
    r.prepare_for_update(&mut new, &old);
    assert_eq!(new["metadata"]["generation"], 4);
    // Created fresh, the same webhook is refused.
    assert!(!r.validate_create(&defaulted(&r, &old)).is_empty());
}

#[test]
fn policies_and_bindings() {
    let p = s("validatingadmissionpolicies");
    let ok = json!({"metadata": {"name": "demo"}, "spec": {
        "matchConstraints": {"resourceRules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]},
        "validations": [{"expression": "object.spec.replicas <= 5"}]}});
    let obj = defaulted(&p, &ok);
    assert_eq!(obj["spec"]["failurePolicy"], "Fail");
    assert_eq!(obj["spec"]["matchConstraints"]["matchPolicy"], "Equivalent");
    assert_eq!(
        obj["spec"]["matchConstraints"]["namespaceSelector"],
        json!({})
    );
    assert_eq!(
        obj["spec"]["matchConstraints"]["resourceRules"][0]["scope"],
        "*"
    );
    assert_eq!(
        obj["spec"]["validations"][0]["expression"], "object.spec.replicas <= 5",
        "stored as given"
    );
    assert_eq!(errors(&p, &ok), Vec::<String>::new());
    assert_eq!(
        errors(&p, &json!({"metadata": {"name": "demo"}, "spec": {"paramKind": {"apiVersion": "a/b/c", "kind": "Bad_Kind"}, "variables": [{"name": "in", "expression": ""}]}})),
        [
            "spec.paramKind.apiVersion: Invalid value: \"a/b/c\": unexpected GroupVersion string: a/b/c",
            "spec.paramKind.kind: Invalid value: \"Bad_Kind\": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            "spec.matchConstraints: Required value",
            "spec.variables[0].name: Invalid value: \"in\": name is not a valid CEL identifier",
            "spec.variables[0].expression: Required value: expression is not specified",
            "spec.validations: Required value: validations or auditAnnotations must contain at least one item",
            "spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item",
        ]
    );
    let cells = p.strategy.table_cells(&obj, jiff::Timestamp::now());
    assert_eq!(cells[1..3], [json!(1), json!("<unset>")]);

    let b = s("validatingadmissionpolicybindings");
    let ok = json!({"metadata": {"name": "demo-binding"}, "spec": {"policyName": "demo", "validationActions": ["Deny"],
        "paramRef": {"name": "cfg", "namespace": "default", "parameterNotFoundAction": "Deny"}}});
    assert_eq!(errors(&b, &ok), Vec::<String>::new());
    let cells = b
        .strategy
        .table_cells(&defaulted(&b, &ok), jiff::Timestamp::now());
    assert_eq!(cells[1..3], [json!("demo"), json!("default/cfg")]);
    assert_eq!(
        errors(&b, &json!({"metadata": {"name": "x"}, "spec": {"validationActions": ["Deny", "Warn", "Deny"], "paramRef": {}}})),
        [
            "spec.policyName: Required value",
            "spec.paramRef: Required value: one of name or selector must be specified",
            "spec.paramRef.parameterNotFoundAction: Required value",
            "spec.validationActions[2]: Duplicate value: \"Deny\"",
            "spec.validationActions: Invalid value: []admissionregistration.ValidationAction{\"Deny\", \"Warn\", \"Deny\"}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ]
    );
}
