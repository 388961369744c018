//! What classification reads of a request (upstream's `RequestDigest`: the `RequestInfo` of
//! `endpoints/request/requestinfo.go` and the user).
//!
//! The request info is parsed from the method, path and query alone, as upstream's
//! `RequestInfoFactory` does: `/api/v1/…` and `/apis/<group>/<version>/…` are resource requests
//! (namespace, resource, name, subresource, and the verb `get`, `list`, `watch`, `create`,
//! `update`, `patch`, `delete` or `deletecollection`); every other path is a non-resource request
//! whose verb is the lower-cased HTTP method.

use axum::http::Method;

use crate::authn::identity::UserInfo;

/// A request's attributes for API Priority and Fairness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo {
    pub resource_request: bool,
    pub verb: String,
    pub api_group: String,
    pub api_version: String,
    pub namespace: String,
    /// The resource, with `/subresource` when there is one (as rules name them).
    pub resource: String,
    pub name: String,
    /// The path (for non-resource rules).
    pub path: String,
}

/// What a request is classified by.
#[derive(Debug, Clone)]
pub struct RequestDigest {
    pub info: RequestInfo,
    pub user: UserInfo,
}

impl RequestInfo {
    /// Whether the request only reads (upstream's non-mutating verbs).
    pub fn is_read_only(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "get" | "list" | "watch" | "head" | "options"
        )
    }

    /// Parses `method`, `path` and `query`.
    pub fn parse(method: &Method, path: &str, query: Option<&str>) -> Self {
        let non_resource = || RequestInfo {
            resource_request: false,
            verb: method.as_str().to_ascii_lowercase(),
            api_group: String::new(),
            api_version: String::new(),
            namespace: String::new(),
            resource: String::new(),
            name: String::new(),
            path: path.to_string(),
        };
        let (group, version, rest) = if let Some(rest) = path.strip_prefix("/api/") {
            match rest.split_once('/') {
                Some((version, rest)) => ("", version, rest),
                None => return non_resource(),
            }
        } else if let Some(rest) = path.strip_prefix("/apis/") {
            let mut it = rest.splitn(3, '/');
            match (it.next(), it.next(), it.next()) {
                (Some(g), Some(v), Some(rest)) => (g, v, rest),
                _ => return non_resource(),
            }
        } else {
            return non_resource();
        };
        let mut parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
        if parts.is_empty() {
            return non_resource();
        }
        // The legacy `/watch/` prefix.
        let mut watch_prefix = false;
        if parts[0] == "watch" {
            watch_prefix = true;
            parts.remove(0);
        }
        let mut namespace = "";
        if parts.first() == Some(&"namespaces") && parts.len() > 1 {
            namespace = parts[1];
            // `/namespaces/<ns>` and its `status`/`finalize` are the namespace object itself.
            if parts.len() > 2 && !matches!(parts[2], "status" | "finalize") {
                parts.drain(..2);
            }
        }
        let resource = parts.first().copied().unwrap_or_default();
        let name = parts.get(1).copied().unwrap_or_default();
        let subresource = parts.get(2).copied();
        let q = crate::http::query::Query::parse(query);
        let watch = watch_prefix || matches!(q.bool("watch"), Ok(Some(true)));
        let verb = match *method {
            Method::GET | Method::HEAD if watch => "watch",
            Method::GET | Method::HEAD if name.is_empty() => "list",
            Method::GET | Method::HEAD => "get",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE if name.is_empty() => "deletecollection",
            Method::DELETE => "delete",
            _ => return non_resource(),
        };
        // A watch or list on one name (`fieldSelector=metadata.name=…`) names it, as upstream.
        let name = if name.is_empty() && matches!(verb, "list" | "watch") {
            q.get("fieldSelector")
                .and_then(|s| s.strip_prefix("metadata.name="))
                .filter(|n| !n.contains(','))
                .unwrap_or_default()
        } else {
            name
        };
        RequestInfo {
            resource_request: true,
            verb: verb.to_string(),
            api_group: group.to_string(),
            api_version: version.to_string(),
            namespace: namespace.to_string(),
            resource: match subresource {
                Some(s) => format!("{resource}/{s}"),
                None => resource.to_string(),
            },
            name: name.to_string(),
            path: path.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(m: Method, path: &str, q: Option<&str>) -> RequestInfo {
        RequestInfo::parse(&m, path, q)
    }

    #[test]
    fn resource_requests() {
        let r = parse(Method::GET, "/api/v1/namespaces/ns1/pods", None);
        assert_eq!(
            (
                r.verb.as_str(),
                r.api_group.as_str(),
                r.namespace.as_str(),
                r.resource.as_str()
            ),
            ("list", "", "ns1", "pods")
        );
        let r = parse(Method::PUT, "/api/v1/namespaces/ns1/pods/p/status", None);
        assert_eq!(
            (r.verb.as_str(), r.resource.as_str(), r.name.as_str()),
            ("update", "pods/status", "p")
        );
        let r = parse(
            Method::GET,
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
            Some("watch=true"),
        );
        assert_eq!(
            (r.verb.as_str(), r.api_group.as_str()),
            ("watch", "coordination.k8s.io")
        );
        let r = parse(Method::GET, "/api/v1/namespaces/kube-system", None);
        assert_eq!(
            (
                r.verb.as_str(),
                r.namespace.as_str(),
                r.resource.as_str(),
                r.name.as_str()
            ),
            ("get", "kube-system", "namespaces", "kube-system")
        );
        let r = parse(Method::PUT, "/api/v1/namespaces/a/finalize", None);
        assert_eq!(
            (r.resource.as_str(), r.name.as_str()),
            ("namespaces/finalize", "a")
        );
        let r = parse(Method::DELETE, "/api/v1/namespaces/a/configmaps", None);
        assert_eq!(r.verb, "deletecollection");
        let r = parse(
            Method::GET,
            "/api/v1/nodes",
            Some("fieldSelector=metadata.name%3Dn1"),
        );
        assert!(r.resource_request && r.namespace.is_empty());
        let r = parse(Method::GET, "/api/v1/watch/namespaces/a/pods", None);
        assert_eq!((r.verb.as_str(), r.namespace.as_str()), ("watch", "a"));
    }

    #[test]
    fn non_resource_requests() {
        for (m, p) in [
            (Method::GET, "/healthz"),
            (Method::GET, "/api"),
            (Method::GET, "/apis/apps"),
            (Method::GET, "/openapi/v2"),
        ] {
            let r = parse(m, p, None);
            assert!(!r.resource_request, "{p}");
            assert_eq!((r.verb.as_str(), r.path.as_str()), ("get", p));
        }
        assert!(!parse(Method::GET, "/apis/apps/v1", None).resource_request);
    }
}
