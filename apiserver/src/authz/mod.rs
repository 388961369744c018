//! Authorization decisions: enforced on every request of a secure server ([`filter`], with
//! upstream's request attributes from [`request_info`]) and answering the review APIs
//! (SubjectAccessReview and friends) on every server.
//!
//! The decision is kube-apiserver's union of authorizers: the privileged-group authorizer first
//! (`system:masters` may do everything, with no reason given), then the [`node`] authorizer for
//! kubelets, then [`rbac`] over the stored RBAC objects (the bootstrap policy and whatever roles
//! and bindings were created) — kube-apiserver's `--authorization-mode=Node,RBAC`. A refusal
//! carries the reasons of every authorizer that gave one, joined with newlines (`union.Authorize`). A server without
//! authentication does not enforce it: every request acts as the admin.

pub mod filter;
pub mod node;
pub mod policy_cache;
pub mod rbac;
pub mod request_info;
pub mod rule_resolver;
pub mod selectors;

pub use rbac::{Attributes, Decision, Rule};

use crate::authn::identity::UserInfo;
use crate::registry::Objects;

/// `user.SystemPrivilegedGroup`.
pub const PRIVILEGED_GROUP: &str = "system:masters";

/// The authorizer of the union that made a decision (upstream's authorizer `type` and `name`
/// labels of `apiserver_authorization_decisions_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authorizer {
    /// The `system:masters` short cut.
    PrivilegedGroups = 0,
    Node = 1,
    Rbac = 2,
}

impl Authorizer {
    /// Every authorizer, in the union's order.
    pub const ALL: [Authorizer; 3] = [
        Authorizer::PrivilegedGroups,
        Authorizer::Node,
        Authorizer::Rbac,
    ];

    /// Its type (`Node`, `RBAC`).
    pub fn kind(self) -> &'static str {
        match self {
            Authorizer::PrivilegedGroups => "PrivilegedGroups",
            Authorizer::Node => "Node",
            Authorizer::Rbac => "RBAC",
        }
    }

    /// Its name (`node`, `rbac`).
    pub fn name(self) -> &'static str {
        match self {
            Authorizer::PrivilegedGroups => "privileged-groups",
            Authorizer::Node => "node",
            Authorizer::Rbac => "rbac",
        }
    }
}

/// The union of the privileged-group and RBAC authorizers.
pub fn authorize(objects: &dyn Objects, attrs: &Attributes) -> Decision {
    authorize_by(objects, attrs).0
}

/// [`authorize`], with the authorizer whose decision it is (a refusal is the last one's, RBAC).
pub fn authorize_by(objects: &dyn Objects, attrs: &Attributes) -> (Decision, Authorizer) {
    if attrs.user.in_group(PRIVILEGED_GROUP) {
        let d = Decision {
            allowed: true,
            reason: String::new(),
        };
        return (d, Authorizer::PrivilegedGroups);
    }
    let mut reasons = Vec::new();
    if let Some(d) = node::authorize(objects, attrs) {
        if d.allowed {
            return (d, Authorizer::Node);
        }
        reasons.push(d.reason);
    }
    let d = rbac::authorize(objects, attrs);
    if d.allowed {
        return (d, Authorizer::Rbac);
    }
    reasons.push(d.reason);
    reasons.retain(|r| !r.is_empty());
    let d = Decision {
        allowed: false,
        reason: reasons.join("\n"),
    };
    (d, Authorizer::Rbac)
}

/// The rules of `user` in `namespace` over both authorizers (a privileged user first gets
/// everything on everything), with evaluation errors.
pub fn rules_for(
    objects: &dyn Objects,
    user: &UserInfo,
    namespace: &str,
) -> (Vec<Rule>, Vec<String>) {
    let mut rules = Vec::new();
    if user.in_group(PRIVILEGED_GROUP) {
        let all = vec!["*".to_string()];
        rules.push(Rule {
            verbs: all.clone(),
            api_groups: all.clone(),
            resources: all.clone(),
            ..Default::default()
        });
        rules.push(Rule {
            verbs: all.clone(),
            non_resource_urls: all,
            ..Default::default()
        });
    }
    let mut errors = Vec::new();
    // Upstream's Node authorizer does not enumerate a node's rules: the list is incomplete.
    if node::node_identity(user).is_some() {
        errors.push("node authorizer does not support user rule resolution".to_string());
    }
    let (more, rbac_errors) = rbac::rules_for(objects, user, namespace);
    rules.extend(more);
    errors.extend(rbac_errors);
    (rules, errors)
}
