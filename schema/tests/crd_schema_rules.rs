//! `validate_crd_schema`: one test per upstream rule, asserting upstream's rendered message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use schema::validate_crd_schema;
use serde_json::json;

const P: &str = "spec.versions[0].schema.openAPIV3Schema";

fn errs(schema: serde_json::Value) -> Vec<String> {
    let props: JSONSchemaProps = serde_json::from_value(schema).expect("schema");
    validate_crd_schema(&props, P)
        .iter()
        .map(|e| e.to_string())
        .collect()
}

fn has(schema: serde_json::Value, want: &str) {
    let got = errs(schema);
    assert!(
        got.iter().any(|e| e == want),
        "want {want:?}\n got {got:#?}"
    );
}

fn obj(props: serde_json::Value) -> serde_json::Value {
    json!({"type": "object", "properties": props})
}

#[test]
fn a_structural_schema_has_no_errors() {
    let e = errs(obj(json!({
        "spec": {"type": "object", "properties": {
            "replicas": {"type": "integer", "default": 1, "minimum": 0},
            "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}},
            "anything": {"x-kubernetes-preserve-unknown-fields": true},
            "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}
        }},
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}}
    })));
    assert!(e.is_empty(), "{e:#?}");
}

#[test]
fn types_must_be_specified() {
    has(
        json!({"properties": {}}),
        &format!("{P}.type: Required value: must not be empty at the root"),
    );
    has(obj(json!({"spec": {}})), &format!("{P}.properties[spec].type: Required value: must not be empty for specified object fields"));
    has(obj(json!({"l": {"type": "array", "items": {}}})), &format!("{P}.properties[l].items.type: Required value: must not be empty for specified array items"));
    has(
        obj(json!({"l": {"type": "array"}})),
        &format!("{P}.properties[l].items: Required value: must be specified"),
    );
    has(
        json!({"type": "string"}),
        &format!("{P}.type: Invalid value: \"string\": must be object at the root"),
    );
}

#[test]
fn junctors_hold_value_validations_only() {
    let s = obj(
        json!({"spec": {"type": "object", "properties": {"a": {"type": "string"}},
        "anyOf": [{"type": "object", "description": "x", "nullable": true, "default": {}, "properties": {"b": {}}}]}}),
    );
    let base = format!("{P}.properties[spec].anyOf[0]");
    has(
        s.clone(),
        &format!("{base}.type: Forbidden: must be empty to be structural"),
    );
    has(
        s.clone(),
        &format!("{base}.description: Forbidden: must be empty to be structural"),
    );
    has(
        s.clone(),
        &format!("{base}.nullable: Forbidden: must be false to be structural"),
    );
    has(
        s.clone(),
        &format!("{base}.default: Forbidden: must be undefined to be structural"),
    );
    has(
        s,
        &format!("{base}.type: Forbidden: must be empty to be structural"),
    );
    // Completeness is checked for the root's junctors (upstream does not descend further).
    has(
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "anyOf": [{"properties": {"b": {}}}]}),
        &format!("{P}.properties[b]: Required value: because it is defined in {P}.anyOf[0].properties[b]"),
    );
    has(
        obj(json!({"spec": {"type": "object", "allOf": [{"properties": {"metadata": {}}}]}})),
        &format!("{P}.properties[spec].allOf[0].properties[metadata]: Forbidden: must not be specified in a nested context"),
    );
    has(
        obj(json!({"spec": {"type": "object", "not": {"x-kubernetes-preserve-unknown-fields": true}}})),
        &format!("{P}.properties[spec].not.x-kubernetes-preserve-unknown-fields: Forbidden: must be false to be structural"),
    );
}

#[test]
fn extension_rules() {
    has(
        obj(json!({"a": {"x-kubernetes-int-or-string": true, "x-kubernetes-preserve-unknown-fields": true}})),
        &format!("{P}.properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true"),
    );
    has(
        obj(json!({"a": {"type": "string", "x-kubernetes-embedded-resource": true}})),
        &format!("{P}.properties[a].type: Invalid value: \"string\": must be object if x-kubernetes-embedded-resource is true"),
    );
    has(
        obj(json!({"a": {"type": "object", "x-kubernetes-embedded-resource": true}})),
        &format!("{P}.properties[a].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"),
    );
    has(
        obj(json!({"a": {"type": "object", "x-kubernetes-preserve-unknown-fields": false}})),
        &format!("{P}.properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"),
    );
    has(
        json!({"type": "object", "additionalProperties": {"type": "string"}}),
        &format!("{P}.additionalProperties: Forbidden: must not be used at the root"),
    );
}

#[test]
fn root_metadata_may_only_restrict_name_and_generate_name() {
    has(
        obj(json!({"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}})),
        &format!("{P}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"),
    );
    has(
        obj(json!({"metadata": {"type": "string"}})),
        &format!("{P}.properties[metadata].type: Invalid value: \"string\": must be object"),
    );
    has(
        obj(json!({"kind": {"type": "integer"}})),
        &format!("{P}.properties[kind].type: Invalid value: \"integer\": must be string"),
    );
    has(
        obj(json!({"metadata": {"type": "object", "default": {"name": "x"}}})),
        &format!(
            "{P}.properties[metadata].default: Forbidden: must not be set in top-level metadata"
        ),
    );
}

#[test]
fn openapi_schema_rules() {
    has(
        obj(json!({"a": {"$ref": "#/x", "type": "string"}})),
        &format!("{P}.properties[a].$ref: Forbidden: $ref is not supported"),
    );
    has(
        obj(json!({"a": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}})),
        &format!("{P}.properties[a].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"),
    );
    has(
        obj(json!({"a": {"type": "object", "properties": {"b": {"type": "string"}}, "additionalProperties": {"type": "string"}}})),
        &format!("{P}.properties[a].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"),
    );
    has(obj(json!({"a": {"type": "strin"}})), &format!("{P}.properties[a].type: Unsupported value: \"strin\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\""));
    has(
        json!({"type": "object", "nullable": true}),
        &format!("{P}.nullable: Forbidden: nullable cannot be true at the root"),
    );
    has(obj(json!({"a": {"type": "string", "pattern": "("}})), &format!("{P}.properties[a].pattern: Invalid value: \"(\": must be a valid regular expression, but isn't: error parsing regexp: missing closing ): `(`"));
}

#[test]
fn list_and_map_type_rules() {
    has(obj(json!({"a": {"type": "string", "x-kubernetes-list-type": "set"}})), &format!("{P}.properties[a].type: Invalid value: \"string\": must be array if x-kubernetes-list-type is specified"));
    has(
        obj(json!({"a": {"type": "array", "x-kubernetes-list-type": "bag", "items": {"type": "string"}}})),
        &format!("{P}.properties[a].x-kubernetes-list-type: Unsupported value: \"bag\": supported values: \"atomic\", \"set\", \"map\""),
    );
    has(
        obj(json!({"a": {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object", "properties": {"n": {"type": "string"}}}}})),
        &format!("{P}.properties[a].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"),
    );
    has(
        obj(json!({"a": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["n"],
                        "items": {"type": "object", "properties": {"n": {"type": "string"}}}}})),
        &format!("{P}.properties[a].items.properties[n].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"),
    );
    has(
        obj(json!({"a": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["x"],
                        "items": {"type": "object", "properties": {"n": {"type": "string"}}}}})),
        &format!("{P}.properties[a].x-kubernetes-list-map-keys: Invalid value: []string{{\"x\"}}: entries must all be names of item properties"),
    );
    has(
        obj(json!({"a": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object", "properties": {"n": {"type": "string"}}}}})),
        &format!("{P}.properties[a].items.x-kubernetes-map-type: Invalid value: null: must be atomic as item of a list with x-kubernetes-list-type=set"),
    );
    has(
        obj(json!({"a": {"type": "array", "x-kubernetes-map-type": "atomic", "items": {"type": "string"}}})),
        &format!("{P}.properties[a].type: Invalid value: \"array\": must be object if x-kubernetes-map-type is specified"),
    );
    has(
        obj(json!({"a": {"type": "array", "x-kubernetes-list-map-keys": ["a"], "items": {"type": "string"}}})),
        &format!("{P}.properties[a].x-kubernetes-list-type: Required value: must be map if x-kubernetes-list-map-keys is non-empty"),
    );
}

#[test]
fn defaults_are_validated_and_pruned() {
    has(
        obj(json!({"a": {"type": "object", "properties": {"b": {"type": "string"}}, "default": {"b": "x", "c": 1}}})),
        &format!("{P}.properties[a].default: Invalid value: map[string]interface {{}}{{\"b\":\"x\", \"c\":1}}: must not have unknown fields"),
    );
    has(
        obj(json!({"a": {"type": "integer", "default": "x"}})),
        &format!("{P}.properties[a].default: Invalid value: \"string\":  in body must be of type integer: \"string\""),
    );
    has(
        obj(json!({"a": {"type": "string", "maxLength": 2, "default": "xyz"}})),
        &format!("{P}.properties[a].default: Too long: may not be more than 2 bytes"),
    );
    // A null default is no default.
    assert!(errs(obj(
        json!({"a": {"type": "string", "nullable": true, "default": null}})
    ))
    .is_empty());
}

#[test]
fn validation_rule_static_checks() {
    has(
        obj(json!({"a": {"type": "string", "x-kubernetes-validations": [{"rule": " "}]}})),
        &format!("{P}.properties[a].x-kubernetes-validations[0].rule: Required value: rule is not specified"),
    );
    has(
        obj(json!({"a": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() > 0", "reason": "Bad"}]}})),
        &format!("{P}.properties[a].x-kubernetes-validations[0].reason: Unsupported value: \"Bad\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""),
    );
}

#[test]
fn validation_rule_field_paths_must_resolve() {
    has(
        obj(json!({"a": {"type": "object", "properties": {"b": {"type": "string"}},
                         "x-kubernetes-validations": [{"rule": "true", "fieldPath": ".c"}]}})),
        &format!("{P}.properties[a].x-kubernetes-validations[0].fieldPath: Invalid value: \".c\": fieldPath must be a valid path"),
    );
    assert!(errs(obj(json!({"a": {"type": "object", "properties": {"b": {"type": "string"}},
                                  "x-kubernetes-validations": [{"rule": "true", "fieldPath": ".b"}]}}))).is_empty());
}

#[test]
fn hostile_depth_is_refused_without_overflow() {
    let mut props = JSONSchemaProps {
        type_: Some("string".into()),
        ..Default::default()
    };
    for _ in 0..(schema::MAX_DEPTH + 5) {
        props = JSONSchemaProps {
            type_: Some("object".into()),
            properties: Some([("a".to_string(), props)].into_iter().collect()),
            ..Default::default()
        };
    }
    let e = validate_crd_schema(&props, P);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].to_string().contains("must not be nested more than"));
}
