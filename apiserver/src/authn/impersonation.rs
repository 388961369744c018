//! Impersonation (`Impersonate-User`, `-Group`, `-Uid`, `-Extra-<key>`), as upstream's
//! `WithImpersonation` (`staging/src/k8s.io/apiserver/pkg/endpoints/filters/impersonation.go`).
//!
//! Each thing impersonated is one authorization check of the `impersonate` verb by the real
//! user: a user name on `users`, a service account (`system:serviceaccount:<ns>:<name>`) on
//! `serviceaccounts` in its namespace, each group on `groups`, each extra value on
//! `userextras/<key>` and the uid on `uids` (both in `authentication.k8s.io`). The first refusal
//! is a 403 with the refused check's attributes; groups, extras or a uid without a user are a
//! 400. The impersonated user is built by [`UserInfo::impersonated`]: the service-account groups
//! of a service account and `system:authenticated` (or `system:unauthenticated` for
//! `system:anonymous`).

use axum::http::HeaderMap;

use super::identity::UserInfo;
use crate::authz::{self, Attributes};
use crate::error::ApiError;
use crate::registry::Objects;

const AUTHENTICATION_GROUP: &str = "authentication.k8s.io";

fn check(objects: &dyn Objects, attrs: Attributes) -> Result<(), ApiError> {
    let decision = authz::authorize(objects, &attrs);
    if decision.allowed {
        return Ok(());
    }
    Err(authz::request_info::forbidden(&attrs, &decision.reason).into())
}

fn acting_as(actor: &UserInfo, group: &str, resource: &str, name: &str) -> Attributes {
    Attributes {
        user: actor.clone(),
        verb: "impersonate".to_string(),
        resource_request: true,
        api_group: group.to_string(),
        resource: resource.to_string(),
        name: name.to_string(),
        ..Default::default()
    }
}

/// Whether the request impersonates anybody.
pub fn requested(headers: &HeaderMap) -> bool {
    headers.keys().any(|k| {
        let k = k.as_str();
        matches!(
            k,
            "impersonate-user" | "impersonate-group" | "impersonate-uid"
        ) || k.starts_with("impersonate-extra-")
    })
}

/// The user `actor` acts as: itself, or whom the headers impersonate once every check passed.
pub fn impersonate(
    objects: &dyn Objects,
    actor: UserInfo,
    headers: &HeaderMap,
) -> Result<UserInfo, ApiError> {
    if !requested(headers) {
        return Ok(actor);
    }
    let Some(target) = UserInfo::impersonated(headers) else {
        return Err(ApiError::bad_request(
            "requested impersonation of groups, extra or a uid without impersonating a user",
        ));
    };
    match target
        .username
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
    {
        Some((ns, name)) => {
            let mut attrs = acting_as(&actor, "", "serviceaccounts", name);
            attrs.namespace = ns.to_string();
            check(objects, attrs)?;
        }
        None => check(objects, acting_as(&actor, "", "users", &target.username))?,
    }
    for group in headers
        .get_all("Impersonate-Group")
        .iter()
        .filter_map(|v| v.to_str().ok())
    {
        check(objects, acting_as(&actor, "", "groups", group))?;
    }
    for (key, values) in &target.extra {
        for value in values {
            let mut attrs = acting_as(&actor, AUTHENTICATION_GROUP, "userextras", value);
            attrs.subresource = key.clone();
            check(objects, attrs)?;
        }
    }
    if !target.uid.is_empty() {
        check(
            objects,
            acting_as(&actor, AUTHENTICATION_GROUP, "uids", &target.uid),
        )?;
    }
    Ok(target)
}
