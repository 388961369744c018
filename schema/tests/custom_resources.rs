//! `Structural::{validate, prune, apply_defaults, coerce_metadata}` on custom objects, with
//! upstream's messages and paths.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use schema::Structural;
use serde_json::{json, Value};

fn s(schema: Value) -> Structural {
    let props: JSONSchemaProps = serde_json::from_value(schema).expect("schema");
    Structural::new(&props)
}

fn spec(props: Value) -> Structural {
    s(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props}}}))
}

fn errs(st: &Structural, obj: Value) -> Vec<String> {
    st.validate(&obj).iter().map(|e| e.to_string()).collect()
}

fn one(st: &Structural, spec_value: Value, want: &str) {
    let got = errs(
        st,
        json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"}, "spec": spec_value}),
    );
    assert!(
        got.iter().any(|e| e == want),
        "want {want:?}\n got {got:#?}"
    );
}

#[test]
fn type_errors() {
    let st = spec(
        json!({"duration": {"type": "string"}, "n": {"type": "integer"}, "f": {"type": "number"},
                         "b": {"type": "boolean"}, "o": {"type": "object"}, "l": {"type": "array", "items": {"type": "string"}},
                         "ios": {"x-kubernetes-int-or-string": true}, "nul": {"type": "string", "nullable": true}}),
    );
    one(
        &st,
        json!({"duration": 5}),
        r#"spec.duration: Invalid value: "integer": spec.duration in body must be of type string: "integer""#,
    );
    one(
        &st,
        json!({"n": 1.5}),
        r#"spec.n: Invalid value: "number": spec.n in body must be of type integer: "number""#,
    );
    one(
        &st,
        json!({"b": "true"}),
        r#"spec.b: Invalid value: "string": spec.b in body must be of type boolean: "string""#,
    );
    one(
        &st,
        json!({"o": []}),
        r#"spec.o: Invalid value: "array": spec.o in body must be of type object: "array""#,
    );
    one(
        &st,
        json!({"l": [1]}),
        r#"spec.l[0]: Invalid value: "integer": spec.l[0] in body must be of type string: "integer""#,
    );
    one(
        &st,
        json!({"ios": true}),
        r#"spec.ios: Invalid value: "boolean": spec.ios in body must be of type integer,string: "boolean""#,
    );
    one(
        &st,
        json!({"duration": null}),
        r#"spec.duration: Invalid value: "null": spec.duration in body must be of type string: "null""#,
    );
    assert!(errs(
        &st,
        json!({"spec": {"nul": null, "n": 2.0, "f": 3, "ios": "50%"}})
    )
    .is_empty());
}

#[test]
fn value_errors() {
    let st = spec(json!({
        "e": {"type": "string", "enum": ["a", "b"]},
        "p": {"type": "string", "pattern": "^[a-z]+$"},
        "len": {"type": "string", "minLength": 2, "maxLength": 3},
        "n": {"type": "integer", "minimum": 1, "maximum": 10, "multipleOf": 2},
        "x": {"type": "number", "exclusiveMinimum": true, "minimum": 0.5},
        "l": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
        "m": {"type": "object", "minProperties": 1, "maxProperties": 1, "additionalProperties": {"type": "string"}},
        "r": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
        "closed": {"type": "object", "additionalProperties": false},
        "d": {"type": "string", "format": "date-time"},
        "ignored": {"type": "string", "format": "my-own-format"}
    }));
    one(
        &st,
        json!({"e": "c"}),
        r#"spec.e: Unsupported value: "c": supported values: "a", "b""#,
    );
    one(
        &st,
        json!({"p": "A1"}),
        r#"spec.p: Invalid value: "A1": spec.p in body should match '^[a-z]+$'"#,
    );
    one(
        &st,
        json!({"len": "a"}),
        r#"spec.len: Invalid value: "a": spec.len in body should be at least 2 chars long"#,
    );
    one(
        &st,
        json!({"len": "abcd"}),
        "spec.len: Too long: may not be more than 3 bytes",
    );
    one(
        &st,
        json!({"n": 0}),
        "spec.n: Invalid value: 0: spec.n in body should be greater than or equal to 1",
    );
    one(
        &st,
        json!({"n": 12}),
        "spec.n: Invalid value: 12: spec.n in body should be less than or equal to 10",
    );
    one(
        &st,
        json!({"n": 3}),
        "spec.n: Invalid value: 3: spec.n in body should be a multiple of 2",
    );
    one(
        &st,
        json!({"x": 0.5}),
        "spec.x: Invalid value: 0.5: spec.x in body should be greater than 0.5",
    );
    one(
        &st,
        json!({"l": []}),
        "spec.l: Invalid value: 0: spec.l in body should have at least 1 items",
    );
    one(
        &st,
        json!({"l": ["a", "b", "c"]}),
        "spec.l: Too many: 3: must have at most 2 items",
    );
    one(
        &st,
        json!({"m": {}}),
        "spec.m: Invalid value: 0: spec.m in body should have at least 1 properties",
    );
    one(
        &st,
        json!({"m": {"a": "1", "b": "2"}}),
        "spec.m: Too many: 2: must have at most 1 items",
    );
    one(
        &st,
        json!({"m": {"a": 1}}),
        r#"spec.m.a: Invalid value: "integer": spec.m.a in body must be of type string: "integer""#,
    );
    one(&st, json!({"r": {}}), "spec.r.name: Required value");
    one(
        &st,
        json!({"closed": {"k": 1}}),
        r#"spec.closed: Invalid value: "k": spec.closed.k in body is a forbidden property"#,
    );
    one(
        &st,
        json!({"d": "yesterday"}),
        r#"spec.d: Invalid value: "yesterday": spec.d in body must be of type date-time: "yesterday""#,
    );
    assert!(errs(
        &st,
        json!({"spec": {"ignored": "whatever", "d": "2024-05-01T10:00:00Z"}})
    )
    .is_empty());
}

#[test]
fn all_errors_of_an_object_come_together() {
    let st = spec(json!({"a": {"type": "string"}, "b": {"type": "integer", "maximum": 1}}));
    let got = errs(&st, json!({"spec": {"a": 1, "b": 2}}));
    assert_eq!(got.len(), 2, "{got:?}");
}

#[test]
fn junctors() {
    let st = spec(
        json!({"v": {"type": "string", "anyOf": [{"pattern": "^a"}, {"pattern": "^b"}]},
                         "w": {"type": "string", "oneOf": [{"pattern": "^a"}, {"pattern": "b$"}]},
                         "x": {"type": "string", "not": {"pattern": "^a"}},
                         "y": {"type": "string", "allOf": [{"minLength": 2}, {"pattern": "^a"}]}}),
    );
    one(
        &st,
        json!({"v": "c"}),
        r#"<nil>: Invalid value: "": "spec.v" must validate at least one schema (anyOf)"#,
    );
    one(
        &st,
        json!({"v": "c"}),
        r#"spec.v: Invalid value: "c": spec.v in body should match '^a'"#,
    );
    one(
        &st,
        json!({"w": "ab"}),
        r#"<nil>: Invalid value: "": "spec.w" must validate one and only one schema (oneOf). Found 2 valid alternatives"#,
    );
    one(
        &st,
        json!({"x": "abc"}),
        r#"<nil>: Invalid value: "": "spec.x" must not validate the schema (not)"#,
    );
    one(
        &st,
        json!({"y": "b"}),
        r#"<nil>: Invalid value: "": "spec.y" must validate all the schemas (allOf). None validated"#,
    );
    assert!(errs(
        &st,
        json!({"spec": {"v": "b", "w": "a", "x": "b", "y": "ab"}})
    )
    .is_empty());
}

#[test]
fn embedded_resources_need_type_meta_and_valid_metadata() {
    let st = spec(
        json!({"template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                      "x-kubernetes-preserve-unknown-fields": true}}),
    );
    let got = errs(
        &st,
        json!({"spec": {"template": {"metadata": {"labels": {"a": "b c"}}}}}),
    );
    assert!(
        got.contains(&"spec.template.apiVersion: Required value".to_string()),
        "{got:?}"
    );
    assert!(
        got.contains(&"spec.template.kind: Required value".to_string()),
        "{got:?}"
    );
    assert!(
        got.iter()
            .any(|e| e.starts_with("spec.template.metadata.labels")
                && e.contains("Invalid value: \"b c\"")),
        "{got:?}"
    );
    let got = errs(
        &st,
        json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod_x"}}}),
    );
    assert!(got.iter().any(|e| e.starts_with("spec.template.kind: Invalid value: \"Pod_x\": may have mixed case, but should otherwise match: ")), "{got:?}");
    assert!(errs(&st, json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}}})).is_empty());
}

#[test]
fn list_sets_and_maps_are_unique() {
    let st = spec(
        json!({"s": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                         "m": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
                               "items": {"type": "object", "required": ["k"], "properties": {"k": {"type": "string"}, "v": {"type": "integer"}}}}}),
    );
    one(
        &st,
        json!({"s": ["a", "b", "a", "a"]}),
        r#"spec.s[2]: Duplicate value: "a""#,
    );
    one(
        &st,
        json!({"m": [{"k": "a", "v": 1}, {"k": "a", "v": 2}]}),
        r#"spec.m[1]: Duplicate value: map[string]interface {}{"k":"a"}"#,
    );
    assert_eq!(
        errs(&st, json!({"spec": {"s": ["a", "b", "a", "a"]}})).len(),
        1
    );
}

#[test]
fn root_metadata_is_validated_only_against_its_schema() {
    let st = s(
        json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}}}}}),
    );
    assert_eq!(
        errs(&st, json!({"metadata": {"name": "abcd"}})),
        vec!["metadata.name: Too long: may not be more than 3 bytes".to_string()]
    );
    assert!(errs(&st, json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "abc", "labels": {"x": "y"}}})).is_empty());
}

#[test]
fn pruning_reports_upstream_paths() {
    let st = s(json!({"type": "object", "properties": {
    "spec": {"type": "object", "properties": {
        "list": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"typed": {"type": "object", "properties": {}}}},
        "map": {"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {"type": "string"}}}},
        "emb": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}}
    }}}}));
    let mut obj = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a", "foo": 1},
        "status": {"x": 1},
        "spec": {"zz": 1, "list": [{"a": "1", "b": 2}], "free": {"anything": {"goes": 1}, "typed": {"dropped": 1}},
                 "map": {"k": {"x": "1", "y": "2"}},
                 "emb": {"apiVersion": "v1", "kind": "K", "metadata": {"name": "n"}, "other": 1}}});
    let pruned = st.prune(&mut obj);
    assert_eq!(
        pruned,
        vec![
            "spec.emb.other",
            "spec.free.typed.dropped",
            "spec.list[0].b",
            "spec.map.k.y",
            "spec.zz",
            "status"
        ]
    );
    assert_eq!(
        obj["metadata"],
        json!({"name": "a", "foo": 1}),
        "metadata is coercion's business"
    );
    assert_eq!(obj["spec"]["free"]["anything"], json!({"goes": 1}));
    assert_eq!(obj["spec"]["emb"]["metadata"], json!({"name": "n"}));
    assert!(st.prune(&mut obj).is_empty());
}

#[test]
fn non_nullable_nulls_without_default_are_dropped() {
    let st = spec(
        json!({"a": {"type": "string"}, "b": {"type": "string", "nullable": true}, "c": {"type": "string", "default": "d"}}),
    );
    let mut obj = json!({"spec": {"a": null, "b": null, "c": null}});
    st.prune(&mut obj);
    assert_eq!(obj, json!({"spec": {"b": null, "c": null}}));
    st.apply_defaults(&mut obj);
    assert_eq!(obj, json!({"spec": {"b": null, "c": "d"}}));
}

#[test]
fn defaults_apply_in_properties_items_and_additional_properties() {
    let st = s(json!({"type": "object", "properties": {
    "spec": {"type": "object", "default": {}, "properties": {
        "replicas": {"type": "integer", "default": 1},
        "ports": {"type": "array", "items": {"type": "object", "properties": {"protocol": {"type": "string", "default": "TCP"}}}},
        "m": {"type": "object", "additionalProperties": {"type": "object", "default": {"z": 1}, "properties": {"z": {"type": "integer"}, "q": {"type": "string", "default": "Q"}}}}
    }}}}));
    let mut obj = json!({"metadata": {"name": "a"}});
    st.apply_defaults(&mut obj);
    assert_eq!(obj["spec"], json!({"replicas": 1}));
    let mut obj = json!({"spec": {"ports": [{}, {"protocol": "UDP"}], "m": {"k": null, "j": {}}}});
    st.apply_defaults(&mut obj);
    assert_eq!(
        obj["spec"]["ports"],
        json!([{"protocol": "TCP"}, {"protocol": "UDP"}])
    );
    assert_eq!(
        obj["spec"]["m"],
        json!({"k": {"z": 1, "q": "Q"}, "j": {"q": "Q"}})
    );
}

#[test]
fn metadata_coercion() {
    let st = spec(
        json!({"t": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}}),
    );
    let mut obj = json!({"metadata": {"name": "a", "bogus": 1, "labels": {}, "creationTimestamp": null,
                                      "ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "n", "uid": "u", "x": 1}]},
                         "spec": {"t": {"apiVersion": "v1", "kind": "K", "metadata": {"name": "b", "what": true, "creationTimestamp": "2024-01-01T10:00:00+02:00"}}}});
    let unknown = st.coerce_metadata(&mut obj, false).expect("coerce");
    assert_eq!(
        unknown,
        vec![
            "metadata.bogus",
            "metadata.ownerReferences[0].x",
            "spec.t.metadata.what"
        ]
    );
    assert_eq!(
        obj["metadata"],
        json!({"name": "a", "ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "n", "uid": "u"}]})
    );
    assert_eq!(
        obj["spec"]["t"]["metadata"],
        json!({"name": "b", "creationTimestamp": "2024-01-01T08:00:00Z"})
    );

    let mut bad = json!({"metadata": {"name": 5, "namespace": "ns"}});
    let e = st.coerce_metadata(&mut bad, false).expect_err("ill-typed");
    assert!(
        e.to_string().starts_with("metadata: Invalid value: "),
        "{e}"
    );
    let mut stored = json!({"metadata": {"name": 5, "namespace": "ns"}});
    st.coerce_metadata(&mut stored, true).expect("dropped");
    assert_eq!(stored["metadata"], json!({"namespace": "ns"}));
    let mut kind = json!({"spec": {"t": {"apiVersion": 1, "kind": "K"}}});
    let e = st
        .coerce_metadata(&mut kind, false)
        .expect_err("apiVersion");
    assert_eq!(
        e.to_string(),
        "spec.t.apiVersion: Invalid value: 1: must be a string"
    );
}

#[test]
fn list_type_and_map_type_lookups() {
    let st = spec(
        json!({"l": {"type": "array", "items": {"type": "object", "x-kubernetes-map-type": "atomic",
                                "properties": {"inner": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}}},
                         "m": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}}}),
    );
    assert_eq!(st.list_type(&["spec", "l"]), Some(schema::ListType::Atomic));
    assert_eq!(
        st.list_type(&["spec", "l", "inner"]),
        Some(schema::ListType::Set)
    );
    assert_eq!(st.list_type(&["spec", "m"]), None);
    assert!(st.map_is_atomic(&["spec", "m"]));
    assert!(st.map_is_atomic(&["spec", "l"]) || st.schema_at(&["spec", "l"]).is_some());
    assert_eq!(st.list_type(&["spec", "nope"]), None);
}

#[test]
fn deep_values_are_refused_not_overflowed() {
    let st = s(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    let mut v = json!(1);
    for _ in 0..(schema::MAX_DEPTH * 3) {
        v = json!({"a": v});
    }
    // Nothing to check below a schema-less node: no recursion, no error.
    assert!(st.validate(&v).is_empty());
    let mut v2 = v.clone();
    st.prune(&mut v2);
    st.apply_defaults(&mut v2);
    assert!(st.coerce_metadata(&mut v2, true).is_ok());
    assert_eq!(v, v2);
}

#[test]
fn updates_ratchet_unchanged_invalid_values() {
    let st = spec(
        json!({"a": {"type": "string", "maxLength": 2}, "b": {"type": "string", "maxLength": 2},
                         "l": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
                               "items": {"type": "object", "required": ["k"], "properties": {"k": {"type": "string"}, "v": {"type": "string", "maxLength": 1}}}}}),
    );
    let old = json!({"spec": {"a": "long", "b": "ok", "l": [{"k": "x", "v": "long"}]}});
    let new = json!({"spec": {"a": "long", "b": "okay", "l": [{"k": "y", "v": "z"}, {"k": "x", "v": "long"}]}});
    let errs: Vec<String> = st
        .validate_update(&new, &old)
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(
        errs,
        vec!["spec.b: Too long: may not be more than 2 bytes".to_string()]
    );
    assert_eq!(st.validate(&new).len(), 3);
}

#[test]
fn deep_schemas_and_values_stop_at_max_depth() {
    let mut props = JSONSchemaProps {
        type_: Some("string".into()),
        ..Default::default()
    };
    let mut v = json!("x");
    for _ in 0..(schema::MAX_DEPTH + 20) {
        props = JSONSchemaProps {
            type_: Some("object".into()),
            properties: Some([("a".to_string(), props)].into_iter().collect()),
            x_kubernetes_embedded_resource: Some(true),
            default: Some(
                k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON(json!({})),
            ),
            ..Default::default()
        };
        v = json!({"a": v, "b": [1]});
    }
    let st = Structural::new(&props);
    let errs: Vec<String> = st.validate(&v).iter().map(|e| e.to_string()).collect();
    assert!(
        errs.iter()
            .any(|e| e.contains("must not be nested more than 128 levels deep")),
        "{:?}",
        errs.len()
    );
    let mut w = v.clone();
    st.prune(&mut w);
    st.apply_defaults(&mut w);
    let _ = st.coerce_metadata(&mut w, false);
    assert!(!schema::validate_crd_schema(&props, "s").is_empty());
}
