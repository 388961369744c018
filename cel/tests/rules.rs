//! Rule compilation and evaluation on small schemas: upstream's error texts and paths.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_cel::Validator;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use serde_json::{json, Value};

fn schema(v: Value) -> JSONSchemaProps {
    serde_json::from_value(v).expect("schema")
}

fn compile(v: Value) -> Result<Validator, Vec<String>> {
    Validator::compile(&schema(v), "spec.validation.openAPIV3Schema").map_err(|errs| {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect()
    })
}

fn ok(v: Value) -> Validator {
    match compile(v) {
        Ok(v) => v,
        Err(e) => panic!("{e:#?}"),
    }
}

fn check(v: &Validator, obj: Value, old: Option<Value>) -> Vec<String> {
    v.validate(&obj, old.as_ref())
        .iter()
        .map(|e| format!("{}: {}", e.field, e.body()))
        .collect()
}

fn spec_with(rules: Value, props: Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": props,
                "x-kubernetes-validations": rules
            }
        }
    })
}

#[test]
fn undefined_field_is_a_compile_error_at_the_rule() {
    let errs = compile(spec_with(
        json!([{"rule": "self.foo > 0"}]),
        json!({"bar": {"type": "integer"}}),
    ))
    .unwrap_err();
    assert_eq!(
        errs,
        vec!["spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.foo > 0\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:5: undefined field 'foo'\n | self.foo > 0\n | ....^".to_owned()]
    );
}

#[test]
fn syntax_errors_and_non_bool_rules_are_refused() {
    let errs = compile(spec_with(
        json!([{"rule": "self.bar >"}]),
        json!({"bar": {"type": "integer"}}),
    ))
    .unwrap_err();
    assert!(
        errs[0].contains("compilation failed: ERROR: <input>:1:"),
        "{errs:?}"
    );
    let errs = compile(spec_with(
        json!([{"rule": "self.bar + 1"}]),
        json!({"bar": {"type": "integer"}}),
    ))
    .unwrap_err();
    assert!(
        errs[0].ends_with(": cel expression must evaluate to a bool"),
        "{errs:?}"
    );
}

#[test]
fn rule_fields_are_checked() {
    let errs = compile(spec_with(
        json!([
            {"rule": "true", "reason": "Nope"},
            {"rule": "true", "fieldPath": ".missing"},
            {"rule": "true", "messageExpression": "self.nope"},
            {"rule": "true", "optionalOldSelf": true}
        ]),
        json!({"bar": {"type": "integer"}}),
    ))
    .unwrap_err();
    let base = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations";
    assert!(errs.contains(&format!("{base}[0].reason: Unsupported value: \"Nope\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"")), "{errs:#?}");
    assert!(
        errs.contains(&format!(
            "{base}[1].fieldPath: Invalid value: \".missing\": fieldPath must be a valid path"
        )),
        "{errs:#?}"
    );
    assert!(
        errs.iter().any(|e| e.starts_with(&format!(
            "{base}[2].messageExpression: Invalid value: apiextensions.ValidationRule{{"
        )) && e.contains(
            "messageExpression compilation failed: ERROR: <input>:1:5: undefined field 'nope'"
        )),
        "{errs:#?}"
    );
    assert!(errs.contains(&format!("{base}[3].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule")), "{errs:#?}");
}

#[test]
fn failures_render_as_upstream() {
    let v = ok(spec_with(
        json!([
            {"rule": "self.replicas >= 1"},
            {"rule": "self.replicas <= 5", "message": "too many"},
            {"rule": "self.replicas != 3", "messageExpression": "'replicas is ' + string(self.replicas)", "reason": "FieldValueForbidden"},
            {"rule": "self.replicas != 4", "fieldPath": ".replicas", "reason": "FieldValueRequired"}
        ]),
        json!({"replicas": {"type": "integer"}}),
    ));
    assert_eq!(
        check(&v, json!({"spec": {"replicas": 0}}), None),
        vec!["spec: Invalid value: \"object\": failed rule: self.replicas >= 1"]
    );
    assert_eq!(
        check(&v, json!({"spec": {"replicas": 6}}), None),
        vec!["spec: Invalid value: \"object\": too many"]
    );
    assert_eq!(
        check(&v, json!({"spec": {"replicas": 3}}), None),
        vec!["spec: Forbidden: replicas is 3"]
    );
    assert_eq!(
        check(&v, json!({"spec": {"replicas": 4}}), None),
        vec!["spec.replicas: Required value: failed rule: self.replicas != 4"]
    );
    assert!(check(&v, json!({"spec": {"replicas": 2}}), None).is_empty());
}

#[test]
fn root_rules_report_at_nil_and_see_metadata_name() {
    let v = ok(json!({
        "type": "object",
        "properties": {"spec": {"type": "object"}},
        "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('ok')"}]
    }));
    assert_eq!(
        check(&v, json!({"metadata": {"name": "bad"}, "spec": {}}), None),
        vec!["<nil>: Invalid value: \"object\": failed rule: self.metadata.name.startsWith('ok')"]
    );
    assert!(check(&v, json!({"metadata": {"name": "ok1"}}), None).is_empty());
}

#[test]
fn absent_fields_are_no_such_key_and_has_works() {
    let v = ok(spec_with(
        json!([{"rule": "self.a > 0"}, {"rule": "!has(self.b) || self.b > 0"}]),
        json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
    ));
    assert_eq!(
        check(&v, json!({"spec": {"b": 1}}), None),
        vec!["spec: Invalid value: \"object\": no such key: a evaluating rule: self.a > 0"]
    );
    assert_eq!(
        check(&v, json!({"spec": {"a": 1, "b": 0}}), None),
        vec!["spec: Invalid value: \"object\": failed rule: !has(self.b) || self.b > 0"]
    );
}

#[test]
fn transition_rules_run_only_on_update_and_correlate_map_lists() {
    let v = ok(json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"items": {
            "type": "array",
            "maxItems": 10,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string", "maxLength": 10}, "value": {"type": "string", "maxLength": 10}},
                "x-kubernetes-validations": [{"rule": "self.value == oldSelf.value", "message": "value is immutable"}]
            }
        }}}}
    }));
    let new = json!({"spec": {"items": [{"name": "b", "value": "2"}, {"name": "a", "value": "changed"}]}});
    let old = json!({"spec": {"items": [{"name": "a", "value": "1"}]}});
    assert!(check(&v, new.clone(), None).is_empty());
    assert_eq!(
        check(&v, new, Some(old)),
        vec!["spec.items[1]: Invalid value: \"object\": value is immutable"]
    );
}

#[test]
fn old_self_under_an_atomic_list_is_refused() {
    let errs = compile(json!({
        "type": "object",
        "properties": {"l": {"type": "array", "items": {
            "type": "string",
            "x-kubernetes-validations": [{"rule": "self == oldSelf"}]
        }}}
    }))
    .unwrap_err();
    assert!(errs.iter().any(|e| e.contains("oldSelf cannot be used on the uncorrelatable portion of the schema within spec.validation.openAPIV3Schema.properties[l]")), "{errs:?}");
}

#[test]
fn optional_old_self_runs_on_create() {
    let v = ok(spec_with(
        json!([{"rule": "oldSelf.hasValue() ? self.x == oldSelf.value().x : self.x == 'init'", "optionalOldSelf": true}]),
        json!({"x": {"type": "string"}}),
    ));
    assert_eq!(check(&v, json!({"spec": {"x": "other"}}), None).len(), 1);
    assert!(check(&v, json!({"spec": {"x": "init"}}), None).is_empty());
    assert!(check(
        &v,
        json!({"spec": {"x": "other"}}),
        Some(json!({"spec": {"x": "other"}}))
    )
    .is_empty());
}

#[test]
fn unchanged_values_ratchet() {
    let v = ok(spec_with(
        json!([{"rule": "self.n > 0"}]),
        json!({"n": {"type": "integer"}}),
    ));
    let bad = json!({"spec": {"n": 0}});
    assert_eq!(check(&v, bad.clone(), None).len(), 1);
    assert!(check(&v, bad.clone(), Some(bad)).is_empty());
}

#[test]
fn values_are_typed_by_the_schema() {
    let v = ok(spec_with(
        json!([
            {"rule": "type(self.d) == double"},
            {"rule": "self.t < timestamp('2030-01-01T00:00:00Z')"},
            {"rule": "self.dur > duration('1m')"},
            {"rule": "type(self.ios) == int || type(self.ios) == string"},
            {"rule": "self.b == b'hi'"},
            {"rule": "self.m.all(k, self.m[k] > 0)"}
        ]),
        json!({
            "d": {"type": "number"},
            "t": {"type": "string", "format": "date-time"},
            "dur": {"type": "string", "format": "duration"},
            "ios": {"x-kubernetes-int-or-string": true},
            "b": {"type": "string", "format": "byte"},
            "m": {"type": "object", "additionalProperties": {"type": "integer"}}
        }),
    ));
    let good = json!({"spec": {"d": 1, "t": "2024-01-01T00:00:00Z", "dur": "1h", "ios": 3, "b": "aGk=", "m": {"a": 1}}});
    assert_eq!(check(&v, good, None), Vec::<String>::new());
    let bad = json!({"spec": {"d": 1.5, "t": "2031-01-01T00:00:00Z", "dur": "30s", "ios": "x", "b": "aGk=", "m": {"a": 0}}});
    assert_eq!(check(&v, bad, None).len(), 3);
}

#[test]
fn a_hostile_rule_is_refused_at_compile_time() {
    let errs = compile(json!({
        "type": "object",
        "properties": {"l": {"type": "array", "items": {"type": "string"}}},
        "x-kubernetes-validations": [{"rule": "self.l.all(a, self.l.all(b, self.l.all(c, a + b + c != '')))"}]
    }))
    .unwrap_err();
    assert!(
        errs.iter().any(|e| e.starts_with("spec.validation.openAPIV3Schema.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)")),
        "{errs:#?}"
    );
    assert!(errs.iter().any(|e| e.starts_with("spec.validation.openAPIV3Schema: Forbidden: total CRD cost exceeds budget by factor of")), "{errs:#?}");
}

#[test]
fn bounded_lists_keep_rules_within_budget() {
    ok(json!({
        "type": "object",
        "properties": {"l": {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 10}}},
        "x-kubernetes-validations": [{"rule": "self.l.all(a, self.l.all(b, a + b != ''))"}]
    }));
}

#[test]
fn an_expensive_evaluation_is_stopped_at_run_time() {
    // Within the static budget (10,000,000) but over the per-call limit (1,000,000): 60^3
    // iterations of a ten-node body.
    let v = ok(json!({
        "type": "object",
        "properties": {"l": {"type": "array", "maxItems": 60, "items": {"type": "integer"}}},
        "x-kubernetes-validations": [{"rule": "self.l.all(a, self.l.all(b, self.l.all(c, a + b + c >= 0)))"}]
    }));
    let list: Vec<i64> = (0..60).collect();
    let errs = check(&v, json!({"l": list}), None);
    assert_eq!(
        errs,
        vec!["<nil>: Invalid value: \"object\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.l.all(a, self.l.all(b, self.l.all(c, a + b + c >= 0)))"]
    );
}

#[test]
fn runtime_overload_errors_are_reported() {
    let v = ok(spec_with(
        json!([{"rule": "self.x > 1"}]),
        json!({"x": {"x-kubernetes-int-or-string": true}}),
    ));
    assert_eq!(
        check(&v, json!({"spec": {"x": "a"}}), None),
        vec!["spec: Invalid value: \"object\": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: self.x > 1"]
    );
}

#[test]
fn the_request_budget_stops_further_rules() {
    // Each rule is within its static budget over the 12 items, but together they need more than
    // a request may spend: the default 10,000,000, and here (to keep the test quick) 3,000,000.
    let inner = json!({"type": "array", "maxItems": 280, "items": {"type": "integer"},
    "x-kubernetes-validations": [
        {"rule": "self.all(a, self.all(b, a <= b || a > b))"},
        {"rule": "self.all(a, self.all(b, b <= a || b > a))"}
    ]});
    let v = ok(json!({
        "type": "object",
        "properties": {"l": {"type": "array", "maxItems": 12, "items": inner}}
    }));
    let item: Vec<i64> = (0..280).collect();
    let obj = json!({"l": vec![item; 12]});
    let errs: Vec<String> = v
        .validate_with_budget(&obj, None, 3_000_000)
        .iter()
        .map(|e| format!("{}: {}", e.field, e.body()))
        .collect();
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(
        errs.last().map(String::as_str),
        Some("l[1]: Invalid value: \"array\": validation failed due to running out of cost budget, no further validation rules will be run"),
        "{errs:#?}"
    );
}

#[test]
fn set_lists_compare_without_order() {
    let v = ok(spec_with(
        json!([{"rule": "self.s == oldSelf.s", "message": "immutable"}]),
        json!({"s": {"type": "array", "maxItems": 5, "x-kubernetes-list-type": "set", "items": {"type": "string", "maxLength": 5}}}),
    ));
    let old = json!({"spec": {"s": ["a", "b"]}});
    assert!(check(&v, json!({"spec": {"s": ["b", "a"]}}), Some(old.clone())).is_empty());
    assert_eq!(
        check(&v, json!({"spec": {"s": ["b", "c"]}}), Some(old)),
        vec!["spec: Invalid value: \"object\": immutable"]
    );
}

#[test]
fn message_expression_must_be_a_string_and_falls_back_when_it_fails() {
    let errs = compile(spec_with(
        json!([{"rule": "true", "messageExpression": "1 + 2"}]),
        json!({"n": {"type": "integer"}}),
    ))
    .unwrap_err();
    assert!(errs[0].ends_with(": must evaluate to a string"), "{errs:?}");
    let v = ok(spec_with(
        json!([{"rule": "self.n > 0", "messageExpression": "'bad: ' + self.missing", "message": "n must be positive"}]),
        json!({"n": {"type": "integer"}, "missing": {"type": "string"}}),
    ));
    assert_eq!(
        check(&v, json!({"spec": {"n": 0}}), None),
        vec!["spec: Invalid value: \"object\": n must be positive"]
    );
}

#[test]
fn validators_can_be_shared_across_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Validator>();
}

#[test]
fn two_variable_comprehensions_are_typed_and_costed() {
    let errs = compile(spec_with(
        json!([{"rule": "self.items.all(i, v, v.nope > 0)"}]),
        json!({"items": {"type": "array", "maxItems": 4, "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}}),
    ))
    .unwrap_err();
    assert!(errs[0].contains("undefined field 'nope'"), "{errs:?}");
    let errs = compile(spec_with(
        json!([{"rule": "self.items.all(i, a, self.items.all(j, b, self.items.all(k, c, a + b + c != '')))"}]),
        json!({"items": {"type": "array", "items": {"type": "string"}}}),
    ))
    .unwrap_err();
    assert!(
        errs[0].contains("estimated rule cost exceeds budget"),
        "{errs:?}"
    );
    let v = ok(spec_with(
        json!([{"rule": "self.items.all(i, v, v.n == i)", "message": "n is the index"}]),
        json!({"items": {"type": "array", "maxItems": 4, "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}}),
    ));
    assert!(check(&v, json!({"spec": {"items": [{"n": 0}, {"n": 1}]}}), None).is_empty());
    assert_eq!(
        check(&v, json!({"spec": {"items": [{"n": 1}]}}), None),
        vec!["spec: Invalid value: \"object\": n is the index"]
    );
}
