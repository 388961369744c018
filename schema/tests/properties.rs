//! Property tests: validation never panics on any JSON against any schema; pruning is
//! idempotent and leaves nothing the schema does not declare; defaulting is idempotent.
//!
//! Every run prints its seed; `TEST_SEED=<n> cargo test -p schema --test properties` replays it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool, JSON,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use schema::Structural;
use serde_json::{json, Map, Value};

fn runner() -> TestRunner {
    let seed = std::env::var("TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(7)
        });
    eprintln!("TEST_SEED={seed}");
    TestRunner::new(Config {
        cases: 200,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    })
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(|f| json!(f)),
        "[a-c0-9:. \\-'\\[\\]\\\\éµ💥T]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-e]{1,2}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

fn scalar_schema() -> impl Strategy<Value = JSONSchemaProps> {
    (
        prop_oneof![
            Just("string"),
            Just("integer"),
            Just("number"),
            Just("boolean")
        ],
        any::<bool>(),
        prop::option::of(0i64..4),
        prop::option::of(-3.0f64..3.0),
        prop::option::of(prop_oneof![
            Just("date-time"),
            Just("ipv4"),
            Just("int32"),
            Just("uuid"),
            Just("bogus")
        ]),
        prop::option::of(prop_oneof![Just("^[a-c]+$"), Just("("), Just("1")]),
        prop::option::of(json_value()),
        any::<bool>(),
    )
        .prop_map(
            |(t, nullable, max_len, min, format, pattern, default, with_enum)| JSONSchemaProps {
                type_: Some(t.to_string()),
                nullable: Some(nullable),
                max_length: max_len,
                minimum: min,
                format: format.map(str::to_string),
                pattern: pattern.map(str::to_string),
                default: default.map(JSON),
                enum_: with_enum.then(|| vec![JSON(json!("a")), JSON(json!(1)), JSON(json!(1.5))]),
                ..Default::default()
            },
        )
}

fn schema_tree() -> impl Strategy<Value = JSONSchemaProps> {
    scalar_schema().prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            (
                prop::collection::btree_map("[a-e]{1,2}", inner.clone(), 0..4),
                any::<bool>(),
                prop::option::of(0i64..3),
                prop::collection::vec("[a-e]{1,2}", 0..2)
            )
                .prop_map(|(props, preserve, max_props, required)| JSONSchemaProps {
                    type_: Some("object".into()),
                    properties: Some(props),
                    x_kubernetes_preserve_unknown_fields: preserve.then_some(true),
                    max_properties: max_props,
                    required: Some(required),
                    ..Default::default()
                }),
            inner.clone().prop_map(|v| JSONSchemaProps {
                type_: Some("object".into()),
                additional_properties: Some(JSONSchemaPropsOrBool::Schema(Box::new(v))),
                ..Default::default()
            }),
            (
                inner.clone(),
                prop::option::of(0i64..3),
                prop_oneof![Just(None), Just(Some("set")), Just(Some("atomic"))]
            )
                .prop_map(|(v, max_items, lt)| JSONSchemaProps {
                    type_: Some("array".into()),
                    items: Some(JSONSchemaPropsOrArray::Schema(Box::new(v))),
                    max_items,
                    x_kubernetes_list_type: lt.map(str::to_string),
                    ..Default::default()
                }),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|v| JSONSchemaProps {
                any_of: Some(v.clone()),
                one_of: Some(v),
                ..Default::default()
            }),
            (inner.clone(), inner).prop_map(|(a, b)| JSONSchemaProps {
                type_: Some("object".into()),
                x_kubernetes_embedded_resource: Some(true),
                properties: Some([("spec".to_string(), a)].into_iter().collect()),
                all_of: Some(vec![b]),
                not: Some(Box::new(JSONSchemaProps::default())),
                ..Default::default()
            }),
        ]
    })
}

fn root(s: JSONSchemaProps) -> Structural {
    Structural::new(&JSONSchemaProps {
        type_: Some("object".into()),
        properties: Some([("spec".to_string(), s)].into_iter().collect()),
        ..Default::default()
    })
}

/// Every object key is declared by the schema, or covered by preserve-unknown-fields or by the
/// embedded-resource meta fields.
fn unknown_free(v: &Value, s: Option<&JSONSchemaProps>, resource: bool) -> bool {
    let Some(s) = s else {
        return !matches!(v, Value::Object(m) if !m.is_empty())
            && v.as_array()
                .is_none_or(|a| a.iter().all(|x| unknown_free(x, None, false)));
    };
    let embedded = resource || s.x_kubernetes_embedded_resource == Some(true);
    match v {
        Value::Object(m) => m.iter().all(|(k, x)| {
            if embedded && ["apiVersion", "kind", "metadata"].contains(&k.as_str()) {
                return true;
            }
            match s.properties.as_ref().and_then(|p| p.get(k)) {
                Some(p) => unknown_free(x, Some(p), false),
                None => match &s.additional_properties {
                    Some(JSONSchemaPropsOrBool::Schema(a)) => unknown_free(x, Some(a), false),
                    Some(JSONSchemaPropsOrBool::Bool(_)) => unknown_free(x, None, false),
                    None => s.x_kubernetes_preserve_unknown_fields == Some(true),
                },
            }
        }),
        Value::Array(a) => {
            let item = match &s.items {
                Some(JSONSchemaPropsOrArray::Schema(i)) => Some(&**i),
                _ => None,
            };
            if s.x_kubernetes_preserve_unknown_fields == Some(true) && item.is_none() {
                return true;
            }
            a.iter().all(|x| unknown_free(x, item, false))
        }
        _ => true,
    }
}

#[test]
fn validate_never_panics() {
    runner()
        .run(&(schema_tree(), json_value()), |(s, v)| {
            let st = root(s.clone());
            let _ = st.validate(&json!({"spec": v.clone()}));
            let _ = st.validate(&v);
            let _ = schema::validate_crd_schema(&s, "x");
            let mut c = json!({"metadata": v.clone(), "spec": v});
            let _ = st.coerce_metadata(&mut c, false);
            let _ = st.coerce_metadata(&mut c, true);
            Ok(())
        })
        .expect("property");
}

#[test]
fn pruning_is_idempotent_and_leaves_no_unknown_fields() {
    runner()
        .run(&(schema_tree(), json_value()), |(s, v)| {
            let st = root(s);
            let mut obj = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"}, "spec": v, "extra": 1});
            let first = st.prune(&mut obj);
            prop_assert!(first.contains(&"extra".to_string()));
            prop_assert!(unknown_free(&obj, Some(st.props()), true), "left unknown fields: {obj}");
            let again = obj.clone();
            let second = st.prune(&mut obj);
            prop_assert!(second.is_empty(), "second prune removed {second:?}");
            prop_assert_eq!(obj, again);
            Ok(())
        })
        .expect("property");
}

#[test]
fn defaulting_is_idempotent() {
    runner()
        .run(&(schema_tree(), json_value()), |(s, v)| {
            let st = root(s);
            let mut obj = json!({"spec": v});
            st.prune(&mut obj);
            st.apply_defaults(&mut obj);
            let once = obj.clone();
            st.apply_defaults(&mut obj);
            prop_assert_eq!(obj, once);
            Ok(())
        })
        .expect("property");
}

#[test]
fn field_paths_never_panic() {
    let s = JSONSchemaProps {
        type_: Some("object".into()),
        properties: Some(
            [("a".to_string(), JSONSchemaProps::default())]
                .into_iter()
                .collect(),
        ),
        ..Default::default()
    };
    runner()
        .run(&"[a.\\[\\]'\\\\éµ💥 ]{0,12}", |p| {
            let _ = schema::valid_field_path(&p, &s);
            Ok(())
        })
        .expect("property");
}
