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
//! their parse error in place of requirements, [`authz::selectors`]), which the authorizers here
//! ignore, as upstream's RBAC does.

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
                field_selector: authz::selectors::field_selector_from_raw(field_selector),
                label_selector: authz::selectors::label_selector_from_raw(label_selector),
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
