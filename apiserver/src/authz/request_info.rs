//! What a request does, in authorization's terms: upstream's `RequestInfoFactory`
//! (`staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`) and the 403 message of
//! a refusal (`responsewriters.forbiddenMessage` with apimachinery's `NewForbidden`).
//!
//! `/api/<v>/…` and `/apis/<g>/<v>/…` are resource requests: the verb comes from the method
//! (GET on a collection is `list`, or `watch` with `?watch=true` or the legacy `/watch/` prefix;
//! DELETE on a collection is `deletecollection`), then `namespaces/<ns>/` is taken off, and the
//! rest reads `resource/name/subresource`. A list or watch whose field selector requires
//! `metadata.name=<n>` names `n`. Every other path (discovery roots, `/healthz`, `/version`,
//! `/metrics`, OpenAPI) is a non-resource request whose verb is the method in lower case.

use super::rbac::Attributes;
use crate::authn::identity::UserInfo;

/// Attributes of a request by `user` with `method` on `path` and `query` (raw query string).
pub fn attributes(user: UserInfo, method: &str, path: &str, query: Option<&str>) -> Attributes {
    let mut a = Attributes {
        user,
        verb: method.to_ascii_lowercase(),
        path: path.to_string(),
        ..Default::default()
    };
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    if parts.len() < 3 {
        return a;
    }
    let (group, rest) = match parts[0] {
        "api" => ("", &parts[1..]),
        "apis" if parts.len() >= 4 => (parts[1], &parts[2..]),
        _ => return a,
    };
    let mut rest = &rest[1..];
    a.resource_request = true;
    a.api_group = group.to_string();
    a.verb = match method {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
    .to_string();
    if matches!(rest.first(), Some(&"watch") | Some(&"proxy")) {
        if rest.len() < 2 {
            // Upstream answers 500 for `/api/v1/watch`; authorization sees nothing to allow.
            a.verb = rest[0].to_string();
            return a;
        }
        a.verb = rest[0].to_string();
        rest = &rest[1..];
    }
    if rest.first() == Some(&"namespaces") && rest.len() > 1 {
        a.namespace = rest[1].to_string();
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            rest = &rest[2..];
        }
    }
    let subresources_allowed = a.verb != "proxy";
    if rest.len() >= 3 && subresources_allowed {
        a.subresource = rest[2].to_string();
    }
    if rest.len() >= 2 {
        a.name = rest[1].to_string();
    }
    if let Some(r) = rest.first() {
        a.resource = r.to_string();
    }
    if a.name.is_empty() && a.verb == "get" {
        let (watch, name) = list_options(query);
        a.verb = if watch { "watch" } else { "list" }.to_string();
        if let Some(n) = name {
            a.name = n;
        }
    }
    if a.name.is_empty() && a.verb == "delete" {
        a.verb = "deletecollection".to_string();
    }
    a
}

/// `watch` and the `metadata.name` a field selector requires, of a list's query.
fn list_options(query: Option<&str>) -> (bool, Option<String>) {
    let mut watch = false;
    let mut name = None;
    for (k, v) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match k.as_ref() {
            "watch" => watch = !matches!(v.to_ascii_lowercase().as_str(), "false" | "0"),
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
    (watch, name)
}

/// The message of a refusal (`forbiddenMessage`).
pub fn forbidden_message(a: &Attributes) -> String {
    // Go's `%q`.
    let q = api::validation::go_quote;
    let user = q(&a.user.username);
    if !a.resource_request {
        return format!("User {user} cannot {} path {}", a.verb, q(&a.path));
    }
    let mut resource = a.resource.clone();
    if !a.subresource.is_empty() {
        resource = format!("{resource}/{}", a.subresource);
    }
    let (resource, group) = (q(&resource), q(&a.api_group));
    if !a.namespace.is_empty() {
        return format!(
            "User {user} cannot {} resource {resource} in API group {group} in the namespace {}",
            a.verb,
            q(&a.namespace)
        );
    }
    format!(
        "User {user} cannot {} resource {resource} in API group {group} at the cluster scope",
        a.verb
    )
}

/// The 403 Status of a refusal with `reason` (the authorizer's, may be empty), as
/// `responsewriters.Forbidden` renders it.
pub fn forbidden(a: &Attributes, reason: &str) -> api::status::StatusObject {
    let mut msg = forbidden_message(a);
    if !reason.is_empty() {
        msg = format!("{msg}: {reason}");
    }
    if a.resource.is_empty() {
        return api::status::forbidden_request(&format!("forbidden: {msg}"));
    }
    let gr = if a.api_group.is_empty() {
        a.resource.clone()
    } else {
        format!("{}.{}", a.resource, a.api_group)
    };
    let mut st = api::status::forbidden(&gr, &a.name, &msg);
    // `StatusDetails.name` is omitempty upstream.
    if let Some(d) = st.details.as_mut().filter(|_| a.name.is_empty()) {
        d.name = None;
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: &str, uri: &str) -> Attributes {
        let (path, query) = match uri.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (uri, None),
        };
        let user = UserInfo {
            username: "alice".into(),
            ..Default::default()
        };
        attributes(user, method, path, query)
    }

    fn summary(a: &Attributes) -> String {
        format!(
            "{} {} {}/{}/{} ns={} name={}",
            a.resource_request, a.verb, a.api_group, a.resource, a.subresource, a.namespace, a.name
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
            ("GET", "/api/v1/pods?watch=0", "true list /pods/ ns= name="),
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
                "PUT",
                "/api/v1/namespaces/a/finalize",
                "true update /namespaces/finalize ns=a name=a",
            ),
            ("GET", "/api/v1/nodes", "true list /nodes/ ns= name="),
            (
                "GET",
                "/api/v1/namespaces/a/pods?fieldSelector=metadata.name%3Dp",
                "true list /pods/ ns=a name=p",
            ),
            ("GET", "/api", "false get // ns= name="),
            ("GET", "/api/v1", "false get // ns= name="),
            ("GET", "/apis/apps/v1", "false get // ns= name="),
            ("GET", "/healthz", "false get // ns= name="),
        ];
        for (method, uri, want) in cases {
            assert_eq!(summary(&attrs(method, uri)), want, "{method} {uri}");
        }
    }

    #[test]
    fn refusals_read_as_upstream() {
        let a = attrs("GET", "/api/v1/namespaces/default/pods");
        assert_eq!(
            api::status::to_json(&forbidden(&a, ""))["message"],
            "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        );
        let a = attrs("GET", "/apis/apps/v1/namespaces/a/deployments/d/scale");
        assert_eq!(
            api::status::to_json(&forbidden(&a, ""))["message"],
            "deployments.apps \"d\" is forbidden: User \"alice\" cannot get resource \"deployments/scale\" in API group \"apps\" in the namespace \"a\""
        );
        let a = attrs("GET", "/api/v1/nodes");
        assert_eq!(
            api::status::to_json(&forbidden(&a, ""))["message"],
            "nodes is forbidden: User \"alice\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
        );
        let a = attrs("GET", "/metrics");
        let st = api::status::to_json(&forbidden(&a, ""));
        assert_eq!(
            st["message"],
            "forbidden: User \"alice\" cannot get path \"/metrics\""
        );
        assert_eq!(st["reason"], "Forbidden");
        assert_eq!(st["code"], 403);
    }
}
