//! The streaming subresources: `pods/log`, `pods/exec`, `pods/attach`, `pods/portforward`,
//! `pods/proxy`, `nodes/proxy` and `services/proxy`. Upstream's apiserver connects them to the
//! kubelet (or proxies to the pod or service); minik8s's fake kubelets do not serve them yet.
//!
//! Each request is answered as upstream answers it up to the point where the kubelet would be
//! reached: the method must be one the subresource takes (405 otherwise), the object is looked
//! up first, so a missing pod, node or service is the usual 404 NotFound Status, and the
//! `container` of a log, exec or attach must be the pod's (upstream's 400s). Then the
//! answer is a 400 BadRequest Status naming what is not simulated. 400 because that is what
//! kube-apiserver itself answers when the kubelet cannot serve a stream for a pod (a container
//! still waiting to start, a pod not yet scheduled): clients already treat it as final and print
//! its message (`kubectl logs`, `kubectl exec` after its WebSocket and SPDY upgrade attempts),
//! while 503 would invite retries and 501 has no `StatusReason` of its own in apimachinery.

use axum::http::Method;
use axum::response::Response;
use serde_json::Value;

use crate::error::{ApiError, Result};
use crate::http::request::Ctx;

/// What a streaming subresource does, as its message names it.
fn what(plural: &str, sub: &str) -> &'static str {
    match (plural, sub) {
        (_, "log") => "container logs",
        (_, "exec") => "exec in containers",
        (_, "attach") => "attaching to containers",
        (_, "portforward") => "port forwarding to pods",
        ("nodes", _) => "proxying to the kubelet",
        ("services", _) => "proxying to services",
        _ => "proxying to pods",
    }
}

/// Whether `sub` takes `method` (`log`: GET; `exec`, `attach`, `portforward`: GET and POST, as
/// connect; `proxy`: every method).
fn takes(sub: &str, method: &Method) -> bool {
    match sub {
        "log" => method == Method::GET,
        "exec" | "attach" | "portforward" => method == Method::GET || method == Method::POST,
        _ => true,
    }
}

/// The object name of a proxy target: `name`, `name:port` or `scheme:name:port`.
fn object_name<'a>(sub: &str, target: &'a str) -> &'a str {
    if sub != "proxy" {
        return target;
    }
    let parts: Vec<&str> = target.split(':').collect();
    match parts.as_slice() {
        [_, name, _] => name,
        [name, ..] => name,
        [] => target,
    }
}

/// The message of a streaming subresource that is not simulated.
pub fn not_simulated_message(
    plural: &str,
    sub: &str,
    name: &str,
    namespace: Option<&str>,
) -> String {
    let singular = plural.trim_end_matches('s');
    let place = match namespace {
        Some(ns) => format!(" in namespace \"{ns}\""),
        None => String::new(),
    };
    format!(
        "{plural}/{sub} is not simulated yet: the fake kubelets of minik8s do not serve {} ({singular} \"{name}\"{place})",
        what(plural, sub)
    )
}

/// `validateContainer` of the pod REST's log, exec and attach locations: the `container` query
/// parameter must name a container of the pod (any kind); without one, the pod must have exactly
/// one container. Its 400 messages are upstream's.
pub fn validate_container(pod: &Value, container: Option<&str>) -> Result<()> {
    let name = api::meta::name(pod).unwrap_or("");
    let all: Vec<&str> = ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|k| {
            pod.get("spec")
                .and_then(|s| s.get(*k))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| c.get("name").and_then(Value::as_str))
        })
        .collect();
    match container.filter(|c| !c.is_empty()) {
        Some(c) if all.contains(&c) => Ok(()),
        Some(c) => Err(ApiError::bad_request(format!(
            "container {c} is not valid for pod {name}"
        ))),
        None => {
            let regular = pod
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            match regular {
                1 => Ok(()),
                0 => Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}"
                ))),
                _ => Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    all.join(" ")
                ))),
            }
        }
    }
}

/// Answers a streaming subresource request (see the module docs).
pub async fn not_simulated(ctx: Ctx, method: Method, sub: &str) -> Result<Response> {
    if !takes(sub, &method) {
        return Err(ApiError::method_not_allowed());
    }
    let target = ctx.target.require_name()?;
    let name = object_name(sub, target);
    let obj = ctx.store().get(name).await?;
    // Only pods have these three.
    if matches!(sub, "log" | "exec" | "attach") {
        validate_container(&obj, ctx.query.get("container"))?;
    }
    let plural = ctx.target.info().plural.clone();
    let msg = not_simulated_message(&plural, sub, name, ctx.target.namespace.as_deref());
    Err(ApiError::bad_request(msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_messages() {
        assert_eq!(object_name("proxy", "web:8080"), "web");
        assert_eq!(object_name("proxy", "https:web:8443"), "web");
        assert_eq!(object_name("log", "web:x"), "web:x");
        assert_eq!(
            not_simulated_message("pods", "log", "web", Some("default")),
            "pods/log is not simulated yet: the fake kubelets of minik8s do not serve container logs (pod \"web\" in namespace \"default\")"
        );
        assert_eq!(
            not_simulated_message("nodes", "proxy", "n1", None),
            "nodes/proxy is not simulated yet: the fake kubelets of minik8s do not serve proxying to the kubelet (node \"n1\")"
        );
        assert!(takes("exec", &Method::POST));
        let pod = serde_json::json!({"metadata": {"name": "web"}, "spec": {"containers": [{"name": "a"}, {"name": "b"}], "initContainers": [{"name": "i"}]}});
        let msg = |r: Result<()>| r.err().map(|e| e.to_status()["message"].clone());
        assert_eq!(
            msg(validate_container(&pod, None)),
            Some(serde_json::json!(
                "a container name must be specified for pod web, choose one of: [i a b]"
            ))
        );
        assert_eq!(
            msg(validate_container(&pod, Some("x"))),
            Some(serde_json::json!("container x is not valid for pod web"))
        );
        assert!(validate_container(&pod, Some("i")).is_ok());
        assert!(!takes("log", &Method::POST));
    }
}
