//! Whom API Priority and Fairness classifies a request as: the seam between authentication and
//! classification.
//!
//! Upstream classifies by the authenticated user. This server does not authenticate yet: every
//! request acts as `system:admin` in `system:masters`, which the `exempt` FlowSchema would send
//! to the `exempt` level — no queuing, no fairness. Until authentication lands, the subject is
//! derived (a documented deviation):
//!
//! * a request that already carries an authenticated [`UserInfo`] (a request extension, set by
//!   an authentication filter) or that impersonates (`Impersonate-User`) is classified as that
//!   user — the real user, as upstream;
//! * otherwise by User-Agent. Our own components send upstream's names
//!   (`kube-controller-manager/…`, `kube-scheduler/…`, `kubelet/…`, see
//!   `minik8s::control_plane::user_agent`) and are classified as upstream classifies theirs:
//!   `system:kube-controller-manager`, `system:kube-scheduler`, and `system:node:<node>` in
//!   `system:nodes` (the node named by the path of a Node or node Lease request; other kubelet
//!   requests as `system:node:kubelet`). Any other client becomes a user named after its
//!   User-Agent — and, for a namespaced request, the namespace (`<agent>@<namespace>`) — in
//!   `system:authenticated`, so parallel test clients, each in its own namespace, are separate
//!   flows of `global-default` and share it fairly.

use axum::http::{header, HeaderMap};

use super::request::RequestInfo;
use crate::authn::identity::UserInfo;

/// Longest User-Agent kept in a derived user name (flow names are hashed, not stored, but
/// `Debug` output and metrics never see more than this).
const MAX_AGENT: usize = 128;

const AUTHENTICATED: &str = "system:authenticated";

/// The subject of a request: `authenticated` when an authenticator set one, the impersonated
/// user when the request impersonates, else the identity derived from its User-Agent.
pub fn subject(
    authenticated: Option<&UserInfo>,
    headers: &HeaderMap,
    info: &RequestInfo,
) -> UserInfo {
    if let Some(u) = authenticated {
        return u.clone();
    }
    if headers.contains_key("impersonate-user") {
        return UserInfo::of_request(headers);
    }
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    from_user_agent(agent, info)
}

fn user(name: String, groups: &[&str]) -> UserInfo {
    UserInfo {
        username: name,
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..Default::default()
    }
}

/// The identity derived from a User-Agent (see the module header).
pub fn from_user_agent(agent: &str, info: &RequestInfo) -> UserInfo {
    let product = agent.split('/').next().unwrap_or_default();
    match product {
        "kube-controller-manager" => user(
            "system:kube-controller-manager".to_string(),
            &[AUTHENTICATED],
        ),
        "kube-scheduler" => user("system:kube-scheduler".to_string(), &[AUTHENTICATED]),
        "kubelet" => user(
            format!("system:node:{}", node_of(info).unwrap_or("kubelet")),
            &["system:nodes", AUTHENTICATED],
        ),
        _ => {
            let agent = if agent.is_empty() { "unknown" } else { agent };
            let mut cut = agent.len().min(MAX_AGENT);
            while !agent.is_char_boundary(cut) {
                cut -= 1;
            }
            let agent = &agent[..cut];
            let name = if info.namespace.is_empty() {
                agent.to_string()
            } else {
                format!("{agent}@{}", info.namespace)
            };
            user(name, &[AUTHENTICATED])
        }
    }
}

/// The node a kubelet request is about: its Node or its Lease in `kube-node-lease`.
fn node_of(info: &RequestInfo) -> Option<&str> {
    let named = !info.name.is_empty();
    match (
        info.api_group.as_str(),
        info.resource.as_str(),
        info.namespace.as_str(),
    ) {
        ("", "nodes", _) if named => Some(&info.name),
        ("coordination.k8s.io", "leases", "kube-node-lease") if named => Some(&info.name),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderValue, Method};

    fn info(path: &str) -> RequestInfo {
        RequestInfo::parse(&Method::GET, path, None)
    }

    fn with_agent(agent: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::USER_AGENT, HeaderValue::from_static(agent));
        h
    }

    #[test]
    fn our_components_are_classified_as_upstream_names_them() {
        let cm = subject(
            None,
            &with_agent("kube-controller-manager/v0.1.0 (minik8s)"),
            &info("/api/v1/pods"),
        );
        assert_eq!(cm.username, "system:kube-controller-manager");
        let k = subject(
            None,
            &with_agent("kubelet/v0.1.0 (minik8s)"),
            &info("/api/v1/nodes/n7/status"),
        );
        assert_eq!(k.username, "system:node:n7");
        assert!(k.groups.iter().any(|g| g == "system:nodes"));
        let lease = info("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n3");
        assert_eq!(
            subject(None, &with_agent("kubelet/v1"), &lease).username,
            "system:node:n3"
        );
        let pods = info("/api/v1/namespaces/default/pods/p");
        assert_eq!(
            subject(None, &with_agent("kubelet/v1"), &pods).username,
            "system:node:kubelet"
        );
    }

    #[test]
    fn other_clients_are_flows_by_agent_and_namespace() {
        let a = subject(
            None,
            &with_agent("kubectl/v1.33.0"),
            &info("/api/v1/namespaces/t1/pods"),
        );
        assert_eq!(a.username, "kubectl/v1.33.0@t1");
        assert_eq!(a.groups, vec!["system:authenticated".to_string()]);
        let b = subject(None, &HeaderMap::new(), &info("/api/v1/nodes"));
        assert_eq!(b.username, "unknown");
    }

    #[test]
    fn an_authenticated_or_impersonated_user_wins() {
        let real = UserInfo::service_account("kube-system", "x");
        let got = subject(
            Some(&real),
            &with_agent("kubelet/v1"),
            &info("/api/v1/nodes/n"),
        );
        assert_eq!(got, real);
        let mut h = with_agent("curl/8");
        h.insert("impersonate-user", HeaderValue::from_static("jane"));
        assert_eq!(subject(None, &h, &info("/api")).username, "jane");
    }
}
