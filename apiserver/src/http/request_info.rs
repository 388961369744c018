//! What a request does, parsed once from its method, path and query: upstream's `RequestInfo`
//! and `RequestInfoFactory` (`staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`).
//! The body pre-read parses it and leaves it in the request's extensions; the timeout, priority
//! and fairness, authorization and audit read it from there.
//!
//! `/api/<v>/…` and `/apis/<g>/<v>/…` are resource requests: the verb comes from the method
//! (POST `create`, GET/HEAD `get`, PUT `update`, PATCH `patch`, DELETE `delete`, anything else
//! none), the legacy `/watch/` and `/proxy/` prefixes set the verb; then `namespaces/<ns>/` is
//! taken off (but `namespaces/<ns>`, its `status` and `finalize` are the namespace itself), and the
//! rest reads `resource/name/subresource` (no subresource after `/proxy/`). A `get` without a name
//! is `list`, or `watch` when `watch` is set to anything but `false`/`0`, and names the
//! `metadata.name` its field selector requires; a `delete` without one is `deletecollection`.
//! Every other path (discovery roots, `/healthz`, `/version`, `/metrics`, OpenAPI) is a
//! non-resource request whose verb is the method in lower case.

use super::query::query_bool;
use axum::http::Method;

/// A request's attributes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    pub resource_request: bool,
    pub verb: String,
    pub api_group: String,
    pub api_version: String,
    /// "" for cluster-scoped resources and requests across namespaces.
    pub namespace: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    /// The URL path (what non-resource rules match).
    pub path: String,
}

impl RequestInfo {
    /// The request's info, parsed by the first filter that asks (upstream parses it once, in its
    /// outermost `WithRequestInfo`) and kept in the request's extensions for the filters and handlers
    /// inside.
    pub fn of(req: &mut axum::extract::Request) -> &RequestInfo {
        let parsed = req
            .extensions()
            .get::<RequestInfo>()
            .is_none()
            .then(|| RequestInfo::parse(req.method(), req.uri().path(), req.uri().query()));
        req.extensions_mut()
            .get_or_insert_with(|| parsed.unwrap_or_default())
    }

    /// Parses `method`, `path` and `query` (the raw query string).
    pub fn parse(method: &Method, path: &str, query: Option<&str>) -> Self {
        let mut info = RequestInfo {
            verb: method.as_str().to_ascii_lowercase(),
            path: path.to_string(),
            ..Default::default()
        };
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        if parts.len() < 3 {
            return info;
        }
        let (group, rest) = match parts[0] {
            "api" => ("", &parts[1..]),
            "apis" if parts.len() >= 4 => (parts[1], &parts[2..]),
            _ => return info,
        };
        info.resource_request = true;
        info.api_group = group.to_string();
        info.api_version = rest[0].to_string();
        let mut rest = &rest[1..];
        info.verb = match *method {
            Method::POST => "create",
            Method::GET | Method::HEAD => "get",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "",
        }
        .to_string();
        if let Some(prefix @ ("watch" | "proxy")) = rest.first().copied() {
            info.verb = prefix.to_string();
            if rest.len() < 2 {
                // Upstream answers 500 for `/api/v1/watch`; there is nothing more to read.
                return info;
            }
            rest = &rest[1..];
        }
        if rest.first() == Some(&"namespaces") && rest.len() > 1 {
            info.namespace = rest[1].to_string();
            if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
                rest = &rest[2..];
            }
        }
        if rest.len() >= 3 && info.verb != "proxy" {
            info.subresource = rest[2].to_string();
        }
        if rest.len() >= 2 {
            info.name = rest[1].to_string();
        }
        if let Some(r) = rest.first() {
            info.resource = r.to_string();
        }
        if info.name.is_empty() && info.verb == "get" {
            let (watch, name) = list_options(query);
            info.verb = if watch { "watch" } else { "list" }.to_string();
            if let Some(n) = name {
                info.name = n;
            }
        }
        if info.name.is_empty() && info.verb == "delete" {
            info.verb = "deletecollection".to_string();
        }
        info
    }

    /// Whether the request only reads (upstream's non-mutating verbs).
    pub fn is_read_only(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "get" | "list" | "watch" | "head" | "options"
        )
    }

    /// Whether `pattern` (a rule's resource: `*`, `pods` or `pods/status`) names the request's
    /// resource and subresource, as RBAC and flow-schema rules match them.
    pub fn resource_matches(&self, pattern: &str) -> bool {
        if pattern == "*" {
            return true;
        }
        if self.subresource.is_empty() {
            return pattern == self.resource;
        }
        pattern
            .strip_prefix(self.resource.as_str())
            .and_then(|r| r.strip_prefix('/'))
            == Some(self.subresource.as_str())
    }
}

/// `watch` and the `metadata.name` a field selector requires, of a list's query.
fn list_options(query: Option<&str>) -> (bool, Option<String>) {
    let mut watch = None;
    let mut name = None;
    for (k, v) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match k.as_ref() {
            // The first value counts, as in the handlers' `Query::bool`.
            "watch" if watch.is_none() => watch = Some(query_bool(&v)),
            "fieldSelector" => {
                for term in v.split(',') {
                    let value = term
                        .strip_prefix("metadata.name==")
                        .or_else(|| term.strip_prefix("metadata.name="));
                    // `IsValidPathSegmentName`: no `/`, `%`, and not `.` or `..`.
                    if let Some(n) = value
                        .filter(|n| !n.contains('/') && !n.contains('%') && *n != "." && *n != "..")
                    {
                        name = Some(n.trim().to_string());
                    }
                }
            }
            _ => {}
        }
    }
    (watch.unwrap_or(false), name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(method: &str, uri: &str) -> String {
        let (path, query) = match uri.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (uri, None),
        };
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let i = RequestInfo::parse(&method, path, query);
        format!(
            "{} {} {}/{}/{} ns={} name={}",
            i.resource_request, i.verb, i.api_group, i.resource, i.subresource, i.namespace, i.name
        )
    }

    #[test]
    fn verbs_scopes_and_subresources_as_upstream() {
        let cases = [
            (
                "GET",
                "/api/v1/namespaces/default/pods",
                "true list /pods/ ns=default name=",
            ),
            (
                "GET",
                "/api/v1/pods?watch=true",
                "true watch /pods/ ns= name=",
            ),
            ("GET", "/api/v1/pods?watch=1", "true watch /pods/ ns= name="),
            ("GET", "/api/v1/pods?watch=0", "true list /pods/ ns= name="),
            // Every value but `0`/`false` is true, and the first value counts, as the handlers read it.
            ("GET", "/api/v1/pods?watch=f", "true watch /pods/ ns= name="),
            ("GET", "/api/v1/pods?watch=", "true watch /pods/ ns= name="),
            (
                "GET",
                "/api/v1/pods?watch=0&watch=1",
                "true list /pods/ ns= name=",
            ),
            (
                "GET",
                "/api/v1/pods?watch=False",
                "true list /pods/ ns= name=",
            ),
            (
                "GET",
                "/api/v1/watch/namespaces/a/pods",
                "true watch /pods/ ns=a name=",
            ),
            (
                "GET",
                "/api/v1/namespaces/a/pods/p",
                "true get /pods/ ns=a name=p",
            ),
            (
                "GET",
                "/api/v1/namespaces/a/pods/p/log",
                "true get /pods/log ns=a name=p",
            ),
            (
                "PUT",
                "/api/v1/namespaces/a/pods/p/status",
                "true update /pods/status ns=a name=p",
            ),
            (
                "POST",
                "/api/v1/namespaces/a/pods",
                "true create /pods/ ns=a name=",
            ),
            (
                "DELETE",
                "/api/v1/namespaces/a/pods",
                "true deletecollection /pods/ ns=a name=",
            ),
            (
                "DELETE",
                "/api/v1/namespaces/a/pods/p",
                "true delete /pods/ ns=a name=p",
            ),
            (
                "PATCH",
                "/apis/apps/v1/namespaces/a/deployments/d/scale",
                "true patch apps/deployments/scale ns=a name=d",
            ),
            (
                "GET",
                "/api/v1/namespaces/a",
                "true get /namespaces/ ns=a name=a",
            ),
            (
                "GET",
                "/api/v1/namespaces/kube-system",
                "true get /namespaces/ ns=kube-system name=kube-system",
            ),
            (
                "PUT",
                "/api/v1/namespaces/a/finalize",
                "true update /namespaces/finalize ns=a name=a",
            ),
            ("GET", "/api/v1/nodes", "true list /nodes/ ns= name="),
            (
                "GET",
                "/api/v1/nodes?fieldSelector=metadata.name%3Dn1",
                "true list /nodes/ ns= name=n1",
            ),
            (
                "GET",
                "/api/v1/namespaces/a/pods?fieldSelector=metadata.name%3D%3Dp,spec.nodeName%3Dn",
                "true list /pods/ ns=a name=p",
            ),
            (
                "GET",
                "/api/v1/proxy/namespaces/a/pods/p/x/y",
                "true proxy /pods/ ns=a name=p",
            ),
            ("OPTIONS", "/api/v1/pods", "true  /pods/ ns= name="),
            ("GET", "/api", "false get // ns= name="),
            ("GET", "/api/v1", "false get // ns= name="),
            ("GET", "/apis/apps", "false get // ns= name="),
            ("GET", "/apis/apps/v1", "false get // ns= name="),
            ("GET", "/healthz", "false get // ns= name="),
            ("POST", "/openapi/v2", "false post // ns= name="),
        ];
        for (method, uri, want) in cases {
            assert_eq!(summary(method, uri), want, "{method} {uri}");
        }
        let i = RequestInfo::parse(&Method::GET, "/apis/coordination.k8s.io/v1/leases", None);
        assert_eq!(
            (i.api_group.as_str(), i.api_version.as_str()),
            ("coordination.k8s.io", "v1")
        );
        assert_eq!(i.path, "/apis/coordination.k8s.io/v1/leases");
    }

    #[test]
    fn rule_resources_match_resource_and_subresource() {
        let status = RequestInfo::parse(&Method::PUT, "/api/v1/namespaces/a/pods/p/status", None);
        assert!(status.resource_matches("pods/status"));
        assert!(status.resource_matches("*"));
        assert!(!status.resource_matches("pods"));
        assert!(!status.resource_matches("pods/"));
        assert!(!status.resource_matches("podsstatus"));
        let pods = RequestInfo::parse(&Method::GET, "/api/v1/pods", None);
        assert!(pods.resource_matches("pods"));
        assert!(!pods.resource_matches("pods/status"));
    }
}
