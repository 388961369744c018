//! Discovery (spec §3): `/version`, legacy `/api`, `/apis`, `/api/v1`, `/apis/<g>/<v>`, and
//! aggregated discovery (`apidiscovery.k8s.io/v2` and `v2beta1`) negotiated exactly by `Accept`
//! with the chosen media type echoed in `Content-Type`. Everything is derived from the runtime
//! resource registry's current served set; the aggregated documents are serialised once per set
//! ([`Documents`], rebuilt when a CRD or any resource comes or goes) and carry an `ETag` (their
//! content hash) and answer `If-None-Match` with 304, so a change of the served set is seen by the
//! next discovery request and an unchanged one costs clients nothing.

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::http::negotiate::{
    negotiate_discovery, DiscoveryOutput, Negotiated, DISCOVERY_V2BETA1_CONTENT_TYPE,
    DISCOVERY_V2_CONTENT_TYPE,
};
use crate::registry::resources::Served;

/// The serialised aggregated documents of one served set (`/api` and `/apis`, `v2` and
/// `v2beta1`), each built once.
#[derive(Debug, Default)]
pub struct Documents {
    built: [std::sync::OnceLock<bytes::Bytes>; 4],
}

impl Documents {
    fn get(&self, served: &Served, core: bool, v2beta1: bool) -> &bytes::Bytes {
        let i = usize::from(core) * 2 + usize::from(v2beta1);
        self.built[i].get_or_init(|| {
            bytes::Bytes::from(api::wire::to_vec_with_newline(&aggregated(
                served, core, v2beta1,
            )))
        })
    }
}

/// The `/version` document. `minor` selects the kubectl behind the dispatcher (§0.1).
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0",
        "gitCommit": "minik8s",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T00:00:00Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

fn gv(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// Legacy `APIResourceList` of one group-version, or `None` if not served.
pub fn resource_list(served: &Served, group: &str, version: &str) -> Option<Value> {
    served.of(group, version).next()?;
    let mut entries = Vec::new();
    for r in served.of(group, version).map(|r| &r.info) {
        let mut e = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs,
        });
        if !r.short_names.is_empty() {
            e["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            e["categories"] = json!(r.categories);
        }
        entries.push(e);
        for s in &r.subresources {
            let mut e = json!({
                "name": format!("{}/{}", r.plural, s.name),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": s.kind,
                "verbs": s.verbs,
            });
            if s.group != r.group || s.version != r.version {
                e["group"] = json!(s.group);
                e["version"] = json!(s.version);
            }
            entries.push(e);
        }
    }
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv(group, version),
        "resources": entries,
    }))
}

fn aggregated_version(served: &Served, group: &str, version: &str) -> Value {
    let resources: Vec<Value> = served
        .of(group, version)
        .map(|r| {
            let r = &r.info;
            let mut e = json!({
                "resource": r.plural,
                "responseKind": { "group": r.group, "version": r.version, "kind": r.kind },
                "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                "singularResource": r.singular,
                "verbs": r.verbs,
            });
            if !r.short_names.is_empty() {
                e["shortNames"] = json!(r.short_names);
            }
            if !r.categories.is_empty() {
                e["categories"] = json!(r.categories);
            }
            if !r.subresources.is_empty() {
                e["subresources"] = r
                    .subresources
                    .iter()
                    .map(|s| {
                        json!({
                            "subresource": s.name,
                            "responseKind": { "group": s.group, "version": s.version, "kind": s.kind },
                            "verbs": s.verbs,
                        })
                    })
                    .collect();
            }
            e
        })
        .collect();
    json!({ "version": version, "resources": resources, "freshness": "Current" })
}

fn aggregated(served: &Served, core: bool, v2beta1: bool) -> Value {
    let items: Vec<Value> = if core {
        vec![json!({
            "metadata": { "creationTimestamp": null },
            "versions": [aggregated_version(served, "", "v1")],
        })]
    } else {
        served
            .groups()
            .into_iter()
            .map(|(g, versions)| {
                json!({
                    "metadata": { "name": g, "creationTimestamp": null },
                    "versions": versions.iter().map(|v| aggregated_version(served, g, v)).collect::<Vec<_>>(),
                })
            })
            .collect()
    };
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": if v2beta1 { "apidiscovery.k8s.io/v2beta1" } else { "apidiscovery.k8s.io/v2" },
        "metadata": {},
        "items": items,
    })
}

fn json_response(body: &Value, content_type: &'static str) -> Response {
    let bytes = api::wire::to_vec_with_newline(body);
    let mut resp = bytes.into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// An aggregated document with its `ETag` (a hash of its content), or 304 Not Modified when the
/// client's `If-None-Match` names it.
fn tagged_response(
    headers: &HeaderMap,
    bytes: &bytes::Bytes,
    content_type: &'static str,
) -> Response {
    use std::hash::{Hash, Hasher};
    let bytes = bytes.clone();
    let mut h = std::hash::DefaultHasher::new();
    bytes.hash(&mut h);
    let etag = format!("\"{:016X}\"", h.finish());
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut resp = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        bytes.into_response()
    };
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        resp.headers_mut().insert(header::ETAG, v);
    }
    resp
}

/// `/api` (`core = true`) or `/apis`, negotiated by `Accept`.
pub fn root(served: &Served, headers: &HeaderMap, core: bool, advertise: &str) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    match negotiate_discovery(accept) {
        Negotiated::NotAcceptable => ApiError::not_acceptable().into_response(),
        Negotiated::Chosen(DiscoveryOutput::AggregatedV2) => tagged_response(
            headers,
            served.discovery.get(served, core, false),
            DISCOVERY_V2_CONTENT_TYPE,
        ),
        Negotiated::Chosen(DiscoveryOutput::AggregatedV2Beta1) => tagged_response(
            headers,
            served.discovery.get(served, core, true),
            DISCOVERY_V2BETA1_CONTENT_TYPE,
        ),
        Negotiated::Chosen(DiscoveryOutput::Legacy) if core => json_response(
            &json!({
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": advertise }],
            }),
            "application/json",
        ),
        Negotiated::Chosen(DiscoveryOutput::Legacy) => {
            let groups: Vec<Value> = served
                .groups()
                .into_iter()
                .map(|(g, versions)| {
                    let vs: Vec<Value> = versions
                        .iter()
                        .map(|v| json!({ "groupVersion": gv(g, v), "version": v }))
                        .collect();
                    let preferred = vs.first().cloned().unwrap_or(Value::Null);
                    json!({ "name": g, "versions": vs, "preferredVersion": preferred })
                })
                .collect();
            json_response(
                &json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups }),
                "application/json",
            )
        }
    }
}

/// `/apis/<group>` (`APIGroup`), or `None` if the group is not served.
pub fn group(served: &Served, name: &str) -> Option<Value> {
    let (g, versions) = served.groups().into_iter().find(|(g, _)| *g == name)?;
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({ "groupVersion": gv(g, v), "version": v }))
        .collect();
    let preferred = vs.first().cloned().unwrap_or(Value::Null);
    Some(json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": g,
        "versions": vs,
        "preferredVersion": preferred,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served() -> std::sync::Arc<Served> {
        let reg = crate::registry::ResourceRegistry::new();
        let ips = std::sync::Arc::new(crate::registry::ClusterIpAllocator::new());
        assert!(crate::registry::builtin::register(&reg, &ips).is_ok());
        reg.snapshot()
    }

    #[test]
    fn core_list_has_subresources_with_overrides() {
        let served = served();
        let l = resource_list(&served, "", "v1").unwrap_or_default();
        let entries = l["resources"].as_array().cloned().unwrap_or_default();
        let scale = entries
            .iter()
            .find(|e| e["name"] == "replicationcontrollers/scale");
        assert_eq!(
            scale.map(|s| s["group"].clone()),
            Some(json!("autoscaling"))
        );
        assert!(entries
            .iter()
            .any(|e| e["name"] == "pods" && e["shortNames"] == json!(["po"])));
        assert!(resource_list(&served, "", "v2").is_none());
    }

    #[test]
    fn aggregated_negotiation_echoes_media_type() {
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"),
        );
        let r = root(&served(), &h, false, "x");
        assert_eq!(
            r.headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok()),
            Some(DISCOVERY_V2BETA1_CONTENT_TYPE)
        );
    }
}
