//! The streaming subresources: `pods/log`, `pods/exec`, `pods/attach`, `pods/portforward`,
//! `pods/proxy`, `nodes/proxy` and `services/proxy`. Upstream's apiserver connects them to the
//! kubelet (or proxies to the pod or service); minik8s's fake kubelets do not serve them yet.
//!
//! Each request is answered as upstream answers it up to the point where the kubelet would be
//! reached: the method must be one the subresource takes (405 otherwise), the object is looked
//! up first, so a missing pod, node or service is the usual 404 NotFound Status, and the
//! `container` of a log, exec or attach must be the pod's (upstream's 400s). Before the lookup, a
//! connect (`exec`, `attach`, `portforward`, `proxy`) is admitted as upstream's connect handler
//! admits it: a CONNECT with the options (`PodExecOptions`, …) as the object. Then the
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

/// The options object of a connect request, as upstream's parameter codec decodes the query into
/// `kind` and defaults it (`stdout` and `stderr` of exec and attach are always true), in Go's
/// JSON (empty fields omitted; `command` always present).
pub fn connect_options(kind: &str, query: &crate::http::query::Query) -> Value {
    let mut o = serde_json::Map::new();
    o.insert("kind".into(), kind.into());
    o.insert("apiVersion".into(), "v1".into());
    let flag = |o: &mut serde_json::Map<String, Value>, key: &str, default: bool| {
        // The parameter codec's rule (`Convert_Slice_string_To_bool`), as every boolean parameter.
        let on = query.bool(key).unwrap_or(false) || default;
        if on {
            o.insert(key.into(), Value::Bool(true));
        }
    };
    match kind {
        "PodExecOptions" | "PodAttachOptions" => {
            flag(&mut o, "stdin", false);
            flag(&mut o, "stdout", true);
            flag(&mut o, "stderr", true);
            flag(&mut o, "tty", false);
            if let Some(c) = query.get("container").filter(|c| !c.is_empty()) {
                o.insert("container".into(), c.into());
            }
            if kind == "PodExecOptions" {
                let command: Vec<Value> = query.all("command").map(Value::from).collect();
                let command = (!command.is_empty()).then_some(Value::Array(command));
                o.insert("command".into(), command.unwrap_or(Value::Null));
            }
        }
        "PodPortForwardOptions" => {
            let ports: Vec<Value> = query
                .all("ports")
                .filter_map(|p| p.parse::<i32>().ok())
                .map(Value::from)
                .collect();
            if !ports.is_empty() {
                o.insert("ports".into(), Value::Array(ports));
            }
        }
        _ => {
            if let Some(p) = query.get("path").filter(|p| !p.is_empty()) {
                o.insert("path".into(), p.into());
            }
        }
    }
    Value::Object(o)
}

/// Admission of a connect (upstream's `ConnectResource`: before the object is looked up, a
/// CONNECT of the subresource with the options as the object); nothing without a matching
/// webhook or policy.
async fn admit_connect(ctx: &Ctx, sub: &str, name: &str) -> Result<()> {
    let plural = &ctx.target.info().plural;
    let Some(kind) = crate::registry::store::connect_kind(plural, sub) else {
        return Ok(());
    };
    let opts = crate::registry::WriteOptions {
        user: Some(ctx.user.clone()),
        audit_annotations: ctx.audit_annotations.clone(),
        ..Default::default()
    };
    let request = crate::registry::store::SubresourceRequest {
        operation: crate::admission::webhook::Operation::Connect,
        subresource: sub,
        kind,
        name,
        opts: &opts,
    };
    let options = connect_options(kind.kind, &ctx.query);
    // A mutating webhook's change of the options has nothing to act on: nothing connects.
    ctx.store()
        .admit_subresource::<Value>(request, &options)
        .await
        .map(|_| ())
}

/// Answers a streaming subresource request (see the module docs).
pub async fn not_simulated(ctx: Ctx, method: Method, sub: &str) -> Result<Response> {
    if !takes(sub, &method) {
        return Err(ApiError::method_not_allowed());
    }
    let target = ctx.target.require_name()?;
    admit_connect(&ctx, sub, target).await?;
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

    /// The options upstream's parameter codec decodes from a connect's query, defaulted.
    #[test]
    fn connect_options_from_the_query() {
        let q = |s: &str| crate::http::query::Query::parse(Some(s));
        assert_eq!(
            connect_options(
                "PodExecOptions",
                &q("command=sh&command=-c&command=ls&container=app&stdin=true&tty=1&stdout=false")
            ),
            serde_json::json!({"kind": "PodExecOptions", "apiVersion": "v1", "stdin": true,
                "stdout": true, "stderr": true, "tty": true, "container": "app",
                "command": ["sh", "-c", "ls"]})
        );
        assert_eq!(
            connect_options("PodExecOptions", &q("")),
            serde_json::json!({"kind": "PodExecOptions", "apiVersion": "v1", "stdout": true,
                "stderr": true, "command": null})
        );
        // Only `0` and `false` are false, as upstream's codec reads them.
        assert_eq!(
            connect_options("PodAttachOptions", &q("stdin=yes&tty=false")),
            serde_json::json!({"kind": "PodAttachOptions", "apiVersion": "v1", "stdin": true,
                "stdout": true, "stderr": true})
        );
        assert_eq!(
            connect_options("PodPortForwardOptions", &q("ports=8080&ports=x&ports=9090")),
            serde_json::json!({"kind": "PodPortForwardOptions", "apiVersion": "v1",
                "ports": [8080, 9090]})
        );
        assert_eq!(
            connect_options("ServiceProxyOptions", &q("path=/healthz")),
            serde_json::json!({"kind": "ServiceProxyOptions", "apiVersion": "v1",
                "path": "/healthz"})
        );
    }
}
