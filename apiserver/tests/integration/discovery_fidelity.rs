//! Discovery against a real kube-apiserver 1.33: every `APIResourceList` entry this server lists
//! equals the one in `../shared/spec/discovery/` (name, singular name, scope, kind, verbs, short
//! names, categories, and the group/version of subresources speaking another group), and what it
//! does not list yet is exactly [`NOT_SERVED_YET`]: that list only shrinks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

/// Entries of the real server's discovery that this one does not serve yet, as
/// `group/version/name` (core: `v1/name`).
const NOT_SERVED_YET: &[&str] = &[];

fn spec_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/spec/discovery")
}

/// The fields compared, verbs sorted (the documents list them sorted).
fn comparable(entry: &Value) -> Value {
    let mut e = serde_json::Map::new();
    for k in [
        "name",
        "singularName",
        "namespaced",
        "kind",
        "shortNames",
        "categories",
        "group",
        "version",
    ] {
        if let Some(v) = entry.get(k) {
            e.insert(k.to_string(), v.clone());
        }
    }
    let mut verbs: Vec<String> = entry["verbs"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    verbs.sort();
    e.insert("verbs".to_string(), Value::from(verbs));
    Value::Object(e)
}

fn entries(list: &Value) -> BTreeMap<String, Value> {
    list["resources"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| (e["name"].as_str().unwrap_or("").to_string(), comparable(e)))
                .collect()
        })
        .unwrap_or_default()
}

fn not_served_yet(gv: &str, name: &str) -> bool {
    NOT_SERVED_YET.contains(&format!("{gv}/{name}").as_str())
        || NOT_SERVED_YET.contains(&format!("{gv}/*").as_str())
}

#[tokio::test]
async fn discovery_matches_a_real_kube_apiserver_entry_by_entry() {
    let store = store::MemoryStore::new(store::StoreConfig::default()).unwrap();
    let state = apiserver::AppState::start(
        apiserver::Config::default(),
        Arc::new(store),
        Default::default(),
    )
    .await
    .unwrap();
    let served = state.resources.snapshot();
    let mut files: Vec<PathBuf> = std::fs::read_dir(spec_dir())
        .expect("the discovery documents in ../shared/spec/discovery")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 21, "{files:?}");
    let mut missing = Vec::new();
    for file in files {
        let want: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let gv = want["groupVersion"].as_str().unwrap().to_string();
        let (group, version) = api::resources::split_api_version(&gv);
        let have = apiserver::discovery::resource_list(&served, group, version)
            .map(|l| entries(&l))
            .unwrap_or_default();
        let want = entries(&want);
        for (name, entry) in &want {
            match have.get(name) {
                Some(got) => {
                    assert_eq!(got, entry, "{gv} {name}");
                    assert!(
                        !not_served_yet(&gv, name),
                        "{gv}/{name} is served now: take it off NOT_SERVED_YET"
                    );
                }
                None => {
                    assert!(
                        not_served_yet(&gv, name),
                        "{gv}/{name} is missing from discovery"
                    );
                    missing.push(format!("{gv}/{name}"));
                }
            }
        }
        for name in have.keys() {
            assert!(
                want.contains_key(name),
                "{gv}/{name} is not served by kube-apiserver 1.33"
            );
        }
    }
    eprintln!("not served yet: {} entries", missing.len());
}
