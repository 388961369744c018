//! Discovery (spec §3): `/version`, legacy `/api`, `/apis`, `/api/v1`, `/apis/<g>/<v>`, and
//! aggregated discovery (`apidiscovery.k8s.io/v2` and `v2beta1`) negotiated exactly by `Accept`
//! with the chosen media type echoed in `Content-Type`. Everything is derived from the static
//! resource table `api::resources()`.

use api::ResourceInfo;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::http::negotiate::{
    negotiate_discovery, DiscoveryOutput, Negotiated, DISCOVERY_V2BETA1_CONTENT_TYPE,
    DISCOVERY_V2_CONTENT_TYPE,
};

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

/// The distinct named groups in table order, each with its versions in table order.
fn groups() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in api::resources().iter().filter(|r| !r.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, vs)) if !vs.contains(&r.version) => vs.push(r.version),
            Some(_) => {}
            None => out.push((r.group, vec![r.version])),
        }
    }
    out
}

fn resources_of<'a>(
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'static ResourceInfo> + 'a {
    api::resources()
        .iter()
        .filter(move |r| r.group == group && r.version == version)
}

fn gv(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// Whether `(group, version)` is served.
pub fn serves(group: &str, version: &str) -> bool {
    resources_of(group, version).next().is_some()
}

/// Legacy `APIResourceList` of one group-version, or `None` if not served.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    if !serves(group, version) {
        return None;
    }
    let mut entries = Vec::new();
    for r in resources_of(group, version) {
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
        for s in r.subresources {
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

fn aggregated_version(group: &str, version: &str) -> Value {
    let resources: Vec<Value> = resources_of(group, version)
        .map(|r| {
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

fn aggregated(core: bool, v2beta1: bool) -> Value {
    let items: Vec<Value> = if core {
        vec![json!({
            "metadata": { "creationTimestamp": null },
            "versions": [aggregated_version("", "v1")],
        })]
    } else {
        groups()
            .into_iter()
            .map(|(g, versions)| {
                json!({
                    "metadata": { "name": g, "creationTimestamp": null },
                    "versions": versions.iter().map(|v| aggregated_version(g, v)).collect::<Vec<_>>(),
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
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut resp = bytes.into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// `/api` (`core = true`) or `/apis`, negotiated by `Accept`.
pub fn root(headers: &HeaderMap, core: bool, advertise: &str) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    match negotiate_discovery(accept) {
        Negotiated::NotAcceptable => ApiError::not_acceptable().into_response(),
        Negotiated::Chosen(DiscoveryOutput::AggregatedV2) => {
            json_response(&aggregated(core, false), DISCOVERY_V2_CONTENT_TYPE)
        }
        Negotiated::Chosen(DiscoveryOutput::AggregatedV2Beta1) => {
            json_response(&aggregated(core, true), DISCOVERY_V2BETA1_CONTENT_TYPE)
        }
        Negotiated::Chosen(DiscoveryOutput::Legacy) if core => json_response(
            &json!({
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": advertise }],
            }),
            "application/json",
        ),
        Negotiated::Chosen(DiscoveryOutput::Legacy) => {
            let groups: Vec<Value> = groups()
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
pub fn group(name: &str) -> Option<Value> {
    let (g, versions) = groups().into_iter().find(|(g, _)| *g == name)?;
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

/// Every served (group, version), core first.
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out = vec![("", "v1")];
    for (g, vs) in groups() {
        for v in vs {
            out.push((g, v));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_list_has_subresources_with_overrides() {
        let l = resource_list("", "v1").unwrap_or_default();
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
        assert!(resource_list("", "v2").is_none());
    }

    #[test]
    fn aggregated_negotiation_echoes_media_type() {
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"),
        );
        let r = root(&h, false, "x");
        assert_eq!(
            r.headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok()),
            Some(DISCOVERY_V2BETA1_CONTENT_TYPE)
        );
    }
}
