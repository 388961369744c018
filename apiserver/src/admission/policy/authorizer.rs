//! The server's authorizer behind the `authorizer` variable of ValidatingAdmissionPolicy
//! expressions (upstream binds the apiserver's authorizer, behind a per-request cache).
//!
//! A check is the decision [`crate::authz::authorize`] gives a request with those attributes:
//! the privileged groups, the Node authorizer, then RBAC over the RBAC objects in the watch
//! cache at the moment of the check. The principal is the requesting user, or for
//! `authorizer.serviceAccount(ns, name)` the account's user as its tokens authenticate it
//! (`system:serviceaccount:<ns>:<name>` in `system:serviceaccounts` and
//! `system:serviceaccounts:<ns>`, upstream's `ServiceAccountInfo.UserInfo`). A server that does
//! not authorize (no authentication) allows every check, as upstream's `AlwaysAllow` does. The
//! questions of one request are answered at most once each (upstream's `cachingAuthorizer`),
//! within a bound. A check's `fieldSelector`/`labelSelector` reach the attributes parsed (or
//! their parse error in place of requirements), which the authorizers here ignore, as upstream's
//! RBAC does.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_cel::library::authz::{
    Answer, Authorize, AuthorizerVal, Principal, Question, RequestResource,
};
use parking_lot::Mutex;

use crate::authn::UserInfo;
use crate::authz;
use crate::registry::store::CachedObjects;
use crate::state::AppState;

/// How many distinct questions one request keeps answers to; later ones are asked each time.
const MAX_REMEMBERED: usize = 64;

/// The authorizer for one request.
pub struct RequestAuthorizer {
    state: AppState,
    user: UserInfo,
    /// A secure server: decisions are enforced. Otherwise everything is allowed.
    authorizes: bool,
    /// Answers so far (why: an expression evaluated for several bindings and params asks the
    /// same questions again).
    answered: Mutex<HashMap<(Principal, Question), Answer>>,
}

impl RequestAuthorizer {
    /// The `authorizer` value of a request by `user` for `request`.
    pub fn value(
        state: AppState,
        user: &UserInfo,
        authorizes: bool,
        request: RequestResource,
    ) -> AuthorizerVal {
        let backend = RequestAuthorizer {
            state,
            user: user.clone(),
            authorizes,
            answered: Mutex::new(HashMap::new()),
        };
        AuthorizerVal::new(Arc::new(backend), Some(request))
    }

    fn user_of(&self, principal: &Principal) -> UserInfo {
        match principal {
            Principal::Requester => self.user.clone(),
            Principal::ServiceAccount { namespace, name } => UserInfo {
                username: crate::authn::token::service_account_username(namespace, name),
                groups: vec![
                    "system:serviceaccounts".to_string(),
                    format!("system:serviceaccounts:{namespace}"),
                ],
                ..Default::default()
            },
        }
    }

    fn decide(&self, principal: &Principal, question: &Question) -> Answer {
        if !self.authorizes {
            return Answer {
                allowed: true,
                ..Answer::default()
            };
        }
        let user = self.user_of(principal);
        let attrs = match question {
            Question::Resource {
                group,
                resource,
                subresource,
                namespace,
                name,
                verb,
                field_selector,
                label_selector,
            } => authz::Attributes {
                user,
                verb: verb.clone(),
                resource_request: true,
                api_group: group.clone(),
                resource: resource.clone(),
                subresource: subresource.clone(),
                namespace: namespace.clone(),
                name: name.clone(),
                field_selector: field_requirements(field_selector),
                label_selector: label_requirements(label_selector),
                ..Default::default()
            },
            Question::Path { path, verb } => authz::Attributes {
                user,
                verb: verb.clone(),
                path: path.clone(),
                ..Default::default()
            },
        };
        let objects = CachedObjects::new(&self.state);
        let d = authz::authorize(&objects, &attrs);
        Answer {
            allowed: d.allowed,
            reason: d.reason,
            error: None,
        }
    }
}

/// A check's `fieldSelector` as the attributes carry it (upstream's `fields.ParseSelector` then
/// `Requirements`): none when empty, else the requirements or the parse error.
pub fn field_requirements(
    raw: &str,
) -> Option<std::result::Result<Vec<api::fields::FieldRequirement>, String>> {
    (!raw.is_empty()).then(|| {
        api::fields::Selector::parse(raw)
            .map(|s| s.requirements().to_vec())
            .map_err(|e| e.to_string())
    })
}

/// A check's `labelSelector` likewise (`labels.ParseToRequirements`).
pub fn label_requirements(
    raw: &str,
) -> Option<std::result::Result<Vec<api::labels::Requirement>, String>> {
    (!raw.is_empty()).then(|| {
        api::labels::Selector::parse(raw)
            .map(|s| s.requirements().to_vec())
            .map_err(|e| e.to_string())
    })
}

impl Authorize for RequestAuthorizer {
    fn authorize(&self, principal: &Principal, question: &Question) -> Answer {
        let key = (principal.clone(), question.clone());
        if let Some(known) = self.answered.lock().get(&key) {
            return known.clone();
        }
        let answer = self.decide(principal, question);
        let mut answered = self.answered.lock();
        if answered.len() < MAX_REMEMBERED {
            answered.insert(key, answer.clone());
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_reach_the_attributes_parsed_or_as_their_error() {
        assert_eq!(field_requirements(""), None);
        assert_eq!(label_requirements(""), None);
        let fields = field_requirements("spec.nodeName=n1,status.phase!=Failed");
        let fields = fields.and_then(Result::ok).unwrap_or_default();
        let pairs: Vec<(&str, &str)> = fields
            .iter()
            .map(|r| (r.field.as_str(), r.value.as_str()))
            .collect();
        assert_eq!(
            pairs,
            vec![("spec.nodeName", "n1"), ("status.phase", "Failed")]
        );
        assert_eq!(fields[1].op, api::fields::FieldOp::NotEq);
        let labels = label_requirements("app=web,tier in (a,b)");
        let labels = labels.and_then(Result::ok).unwrap_or_default();
        let keys: Vec<&str> = labels.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, vec!["app", "tier"]);
        assert_eq!(
            field_requirements("a b c"),
            Some(Err(
                "invalid selector: 'a b c'; can't understand 'a b c'".to_string()
            ))
        );
        assert!(matches!(label_requirements("a in (b"), Some(Err(_))));
    }
}
