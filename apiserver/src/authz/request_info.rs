//! A request in authorization's terms ([`attributes`] of its
//! [`RequestInfo`](crate::http::request_info)) and the 403 message of a refusal
//! (`responsewriters.forbiddenMessage` with apimachinery's `NewForbidden`).

use super::rbac::Attributes;
use crate::authn::identity::UserInfo;
use crate::http::request_info::RequestInfo;

/// Attributes of a request by `user` that does what `info` says.
pub fn attributes(user: UserInfo, info: &RequestInfo) -> Attributes {
    Attributes {
        user,
        verb: info.verb.clone(),
        resource_request: info.resource_request,
        namespace: info.namespace.clone(),
        api_group: info.api_group.clone(),
        resource: info.resource.clone(),
        subresource: info.subresource.clone(),
        name: info.name.clone(),
        path: info.path.clone(),
        ..Default::default()
    }
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
        let method = axum::http::Method::from_bytes(method.as_bytes()).unwrap();
        attributes(user, &RequestInfo::parse(&method, path, query))
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
