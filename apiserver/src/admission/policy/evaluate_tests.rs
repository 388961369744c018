use super::*;
use k8s_cel::admission::Activation;
use serde_json::json;
use std::collections::BTreeMap;

fn policy(spec: Value) -> Policy {
    match Policy::compile(&json!({"metadata": {"name": "p"}, "spec": spec})) {
        Some(p) => p,
        None => panic!("policy does not decode"),
    }
}

fn eval(p: &Policy, object: &Value, params: &Value) -> Result {
    let null = Value::Null;
    let request = json!({"operation": "CREATE"});
    let act = Activation::new(&p.variables, [object, &null, &request, params, &null]);
    evaluate(p, &act)
}

fn denial(index: usize, message: &str, reason: Option<&str>) -> Denial {
    Denial {
        index,
        message: message.into(),
        reason: reason.map(String::from),
    }
}

#[test]
fn messages_come_from_message_expression_then_message_then_the_expression() {
    let p = policy(json!({
    "variables": [{"name": "replicas", "expression": "object.spec.replicas"}],
    "validations": [
        {"expression": "variables.replicas < 5",
         "messageExpression": "'replicas ' + string(variables.replicas) + ' over 4'",
         "message": "unused"},
        {"expression": "variables.replicas < 3", "message": "  too many  ",
         "reason": "Forbidden"},
        {"expression": " variables.replicas < 2 ", "messageExpression": "'two\\nlines'"},
        {"expression": "variables.replicas > 0"},
    ]}));
    let out = eval(&p, &json!({"spec": {"replicas": 7}}), &Value::Null);
    assert_eq!(
        out.denials,
        vec![
            denial(0, "replicas 7 over 4", Some("Invalid")),
            denial(1, "too many", Some("Forbidden")),
            denial(
                2,
                "failed expression: variables.replicas < 2",
                Some("Invalid")
            ),
        ]
    );
    assert!(eval(&p, &json!({"spec": {"replicas": 1}}), &Value::Null)
        .denials
        .is_empty());
}

#[test]
fn errors_follow_the_failure_policy() {
    let spec = |fp: &str| {
        json!({"failurePolicy": fp, "validations": [
            {"expression": "object.missing == 1"}, {"expression": "object."}]})
    };
    let fail = eval(&policy(spec("Fail")), &json!({}), &Value::Null);
    assert_eq!(fail.denials.len(), 2);
    assert_eq!(
        fail.denials[0].message,
        "expression 'object.missing == 1' resulted in error: no such key: missing"
    );
    assert_eq!(fail.denials[0].reason, None);
    assert!(fail.denials[1]
        .message
        .starts_with("compilation error: compilation failed: ERROR: <input>:1:"));
    assert!(eval(&policy(spec("Ignore")), &json!({}), &Value::Null)
        .denials
        .is_empty());
}

#[test]
fn match_conditions_skip_or_fail_the_policy() {
    let p = policy(json!({
        "matchConditions": [{"name": "labelled", "expression": "has(object.metadata.labels)"}],
        "validations": [{"expression": "false", "message": "no"}]}));
    assert!(eval(&p, &json!({"metadata": {}}), &Value::Null)
        .denials
        .is_empty());
    let labelled = json!({"metadata": {"labels": {"a": "b"}}});
    assert_eq!(eval(&p, &labelled, &Value::Null).denials.len(), 1);
    let erring = policy(json!({
        "matchConditions": [{"name": "e", "expression": "object.nope"}],
        "validations": [{"expression": "false"}]}));
    assert_eq!(
        eval(&erring, &json!({}), &Value::Null).denials,
        vec![denial(
            0,
            "expression 'object.nope' resulted in error: no such key: nope",
            None
        )]
    );
}

#[test]
fn audit_annotations_publish_strings_and_refuse_other_types() {
    let p = policy(json!({"auditAnnotations": [
        {"key": "name", "valueExpression": "' ' + object.metadata.name + ' '"},
        {"key": "none", "valueExpression": "null"},
        {"key": "blank", "valueExpression": "'  '"},
        {"key": "num", "valueExpression": "1"},
    ]}));
    let out = eval(&p, &json!({"metadata": {"name": "x"}}), &Value::Null);
    assert_eq!(out.audit, vec![("name".to_string(), "x".to_string())]);
    assert_eq!(
        out.audit_errors,
        vec!["valueExpression '1' resulted in unsupported return type: int. Return type must be either string or null.".to_string()]
    );
}

#[test]
fn params_are_bound() {
    let p = policy(json!({"validations": [
        {"expression": "object.spec.replicas <= int(params.data.max)",
         "messageExpression": "'at most ' + params.data.max"}]}));
    let params = json!({"data": {"max": "3"}});
    assert_eq!(
        eval(&p, &json!({"spec": {"replicas": 4}}), &params).denials,
        vec![denial(0, "at most 3", Some("Invalid"))]
    );
}

/// Params in memory: (namespace, name) → object, all of one namespaced kind `ConfigMap`.
struct Memory(BTreeMap<(String, String), Arc<Value>>);

impl ParamSource for Memory {
    fn namespaced(&self, kind: &ParamKind) -> Option<bool> {
        (kind.kind == "ConfigMap").then_some(true)
    }
    fn get(&self, _: &ParamKind, ns: Option<&str>, name: &str) -> Option<Arc<Value>> {
        self.0
            .get(&(ns.unwrap_or("").to_string(), name.to_string()))
            .cloned()
    }
    fn list(&self, _: &ParamKind, ns: Option<&str>) -> Vec<Arc<Value>> {
        self.0
            .iter()
            .filter(|((n, _), _)| ns.is_none_or(|ns| ns == n))
            .map(|(_, v)| v.clone())
            .collect()
    }
}

#[test]
fn params_by_name_selector_and_not_found_action() {
    let cm = |name: &str, tier: &str| {
        Arc::new(json!({"metadata": {"name": name, "labels": {"tier": tier}}}))
    };
    let source = Memory(
        [
            (("a".to_string(), "one".to_string()), cm("one", "x")),
            (("a".to_string(), "two".to_string()), cm("two", "y")),
            (("b".to_string(), "three".to_string()), cm("three", "x")),
        ]
        .into(),
    );
    let kind = ParamKind {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
    };
    let param_ref = |r: Value| -> ParamRef {
        match serde_json::from_value(r) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    };
    let collect = |r: Value, ns: &str| {
        collect_params(Some(&kind), Some(&param_ref(r)), ns, &source)
            .map(|ps| ps.iter().filter(|p| p.is_some()).count())
    };
    assert_eq!(collect(json!({"name": "one"}), "a"), Ok(1));
    assert_eq!(
        collect(json!({"name": "one", "namespace": "b"}), "a"),
        Ok(0)
    );
    assert_eq!(
        collect(json!({"selector": {"matchLabels": {"tier": "x"}}}), "a"),
        Ok(1)
    );
    assert_eq!(collect(json!({"selector": {}}), "a"), Ok(2));
    assert_eq!(
        collect(
            json!({"name": "nope", "parameterNotFoundAction": "Deny"}),
            "a"
        ),
        Err("no params found for policy binding with `Deny` parameterNotFoundAction".into())
    );
    assert_eq!(
        collect(
            json!({"name": "nope", "parameterNotFoundAction": "Allow"}),
            "a"
        ),
        Ok(0)
    );
    assert_eq!(
        collect(json!({"name": "one"}), ""),
        Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into())
    );
    let unknown = ParamKind {
        api_version: "example.com/v1".into(),
        kind: "Limits".into(),
    };
    assert_eq!(
        collect_params(
            Some(&unknown),
            Some(&param_ref(json!({"name": "x"}))),
            "a",
            &source
        ),
        Err("paramKind kind `&ParamKind{APIVersion:example.com/v1,Kind:Limits,}` not known".into())
    );
    // No paramKind, or no paramRef: one evaluation without params.
    assert_eq!(collect_params(None, None, "a", &source), Ok(vec![None]));
}
