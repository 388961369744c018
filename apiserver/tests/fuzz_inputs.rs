//! T7: malformed input never panics and never becomes a 5xx. Property tests over the
//! query-parameter parsers, Accept/Content-Type negotiation, path parsing, the body decoder, and
//! whole requests through the router. proptest prints its seed on failure; failures are
//! persisted by proptest and should be committed as regression cases.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use apiserver::http::body::{decode_object, parse_json, parse_yaml};
use apiserver::http::negotiate::{
    body_format, negotiate_discovery, negotiate_output, parse_accept,
};
use apiserver::http::path::parse_rest;
use apiserver::http::query::{ContinueToken, DeleteOptions, ListOptions, Query, WriteOptions};
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Request};
use proptest::prelude::*;
use tower::ServiceExt;

fn is_client_error(code: u16) -> bool {
    (400..500).contains(&code)
}

const PARAMS: &[&str] = &[
    "resourceVersion",
    "resourceVersionMatch",
    "timeoutSeconds",
    "labelSelector",
    "fieldSelector",
    "limit",
    "continue",
    "watch",
    "allowWatchBookmarks",
    "sendInitialEvents",
    "includeObject",
    "dryRun",
    "fieldManager",
    "fieldValidation",
    "force",
    "gracePeriodSeconds",
    "propagationPolicy",
    "orphanDependents",
];

fn query_strategy() -> impl Strategy<Value = String> {
    let pair = (prop::sample::select(PARAMS), ".{0,12}");
    prop::collection::vec(pair, 0..6).prop_map(|pairs| {
        pairs
            .into_iter()
            .map(|(k, v)| {
                let enc: String = form_urlencoded::byte_serialize(v.as_bytes()).collect();
                format!("{k}={enc}")
            })
            .collect::<Vec<_>>()
            .join("&")
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, ..ProptestConfig::default() })]

    #[test]
    fn query_parsers_never_panic(raw in query_strategy(), junk in ".{0,40}") {
        for q in [raw.as_str(), junk.as_str()] {
            let q = Query::parse(Some(q));
            if let Err(e) = ListOptions::from_query(&q) {
                prop_assert!(is_client_error(e.code()), "{e:?}");
            }
            if let Err(e) = WriteOptions::from_query(&q, "CreateOptions") {
                prop_assert!(is_client_error(e.code()), "{e:?}");
            }
            if let Err(e) = DeleteOptions::parse(b"", &q) {
                prop_assert!(is_client_error(e.code()), "{e:?}");
            }
        }
        if let Err(e) = ContinueToken::decode(&junk) {
            prop_assert_eq!(e.code(), 400);
        }
    }

    #[test]
    fn negotiation_and_paths_never_panic(accept in ".{0,80}", ct in ".{0,40}", rest in "[a-z/.]{0,40}") {
        let _ = parse_accept(&accept);
        let _ = negotiate_output(Some(&accept));
        let _ = negotiate_discovery(Some(&accept));
        let _ = body_format(Some(&ct));
        let _ = parse_rest("", "v1", &rest);
    }

    #[test]
    fn body_decoder_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256), ct in prop::sample::select(vec![
        "application/json", "application/yaml", "application/vnd.kubernetes.protobuf", "text/plain", "",
    ])) {
        let mut h = HeaderMap::new();
        if !ct.is_empty() {
            h.insert("content-type", HeaderValue::from_static(ct));
        }
        if let Err(e) = decode_object(&h, &bytes) {
            prop_assert!(is_client_error(e.code()), "{e:?}");
        }
        if let Err(e) = DeleteOptions::parse(&bytes, &Query::default()) {
            prop_assert!(is_client_error(e.code()), "{e:?}");
        }
    }

    #[test]
    fn json_round_trip_is_stable(v in json_value(4)) {
        let obj = serde_json::json!({ "metadata": { "name": "x" }, "data": v });
        let once = serde_json::to_vec(&obj).unwrap();
        let decoded = parse_json(&once).unwrap();
        prop_assert_eq!(&decoded, &obj);
        prop_assert_eq!(serde_json::to_vec(&decoded).unwrap(), once);
        let yaml = serde_yaml::to_string(&obj).unwrap();
        prop_assert_eq!(parse_yaml(yaml.as_bytes()).unwrap(), obj);
    }
}

fn json_value(depth: u32) -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        "[a-z]{0,8}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(depth, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Whole requests with random methods, paths, queries, content types and bodies: never a 5xx.
#[test]
fn router_never_answers_5xx_to_garbage() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let app = rt.block_on(async {
        let store = store::MemoryStore::new(store::StoreConfig::default()).unwrap();
        let config = apiserver::Config {
            future_rv_wait: std::time::Duration::from_millis(10),
            ..Default::default()
        };
        let state = apiserver::AppState::start(config, Arc::new(store), Default::default())
            .await
            .unwrap();
        apiserver::bootstrap::seed(&state).await.unwrap();
        apiserver::app(state)
    });
    let paths = prop::sample::select(vec![
        "/api/v1/namespaces/default/pods",
        "/api/v1/namespaces/default/pods/p",
        "/api/v1/namespaces/default/pods/p/status",
        "/api/v1/namespaces/default/replicationcontrollers/r/scale",
        "/api/v1/namespaces/default/pods/p/binding",
        "/api/v1/namespaces",
        "/api/v1/namespaces/x/finalize",
        "/apis/apps/v1/namespaces/default/deployments/d",
        "/api/v1/pods",
        "/api/v1/nodes/n",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        "/api/v1/namespaces/default/configmaps/c",
        "/api/v1/namespaces/default/services",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases/l",
    ]);
    let methods = prop::sample::select(vec!["GET", "POST", "PUT", "PATCH", "DELETE"]);
    let cts = prop::sample::select(vec![
        "",
        "application/json",
        "application/yaml",
        "application/merge-patch+json",
        "application/json-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
        "application/vnd.kubernetes.protobuf",
        "text/plain",
    ]);
    let bodies = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..128),
        json_value(3).prop_map(|v| serde_json::to_vec(
            &serde_json::json!({"metadata":{"name":"p"},"spec":v})
        )
        .unwrap()),
        json_value(3).prop_map(|v| serde_json::to_vec(&v).unwrap()),
    ];
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 2_000,
        ..ProptestConfig::default()
    });
    runner
        .run(
            &(methods, paths, query_strategy(), cts, bodies),
            |(m, p, q, ct, body)| {
                let uri = if q.is_empty() {
                    p.to_string()
                } else {
                    format!("{p}?{q}")
                };
                let mut b = Request::builder().method(m).uri(&uri);
                if !ct.is_empty() {
                    b = b.header("content-type", ct);
                }
                let req = b.body(Body::from(body)).unwrap();
                let code = rt.block_on(async {
                    let resp = app.clone().oneshot(req).await.unwrap();
                    let code = resp.status().as_u16();
                    // Drain watches quickly: only the status matters.
                    drop(resp);
                    code
                });
                prop_assert!(
                    code < 500 || code == 504,
                    "{m} {uri} ({ct}) answered {code}"
                );
                Ok(())
            },
        )
        .unwrap();
}
