//! Who a request acts as: [`UserInfo`].
//!
//! A secure server authenticates each request ([`super::authenticator`]). A server without
//! authentication serves every request as one fixed identity, [`UserInfo::admin`] —
//! `system:admin` in the groups `system:masters` and `system:authenticated`, what a cluster's
//! admin kubeconfig authenticates as. On both, a request that impersonates (`kubectl --as`, the
//! `Impersonate-User`/`-Group`/`-Uid`/`-Extra-*` headers) acts as the impersonated user, built as
//! upstream's impersonation filter builds it ([`UserInfo::impersonated`]): a service-account
//! name gets the service-account groups, every non-anonymous user gets `system:authenticated`
//! and `system:anonymous` gets `system:unauthenticated`. Only a secure server checks that the impersonation is allowed
//! ([`super::impersonation`]); without authentication the admin may impersonate anyone.

use std::collections::BTreeMap;

use axum::http::HeaderMap;
use serde_json::{json, Map, Value};

use super::authenticator::{ANONYMOUS, AUTHENTICATED, UNAUTHENTICATED};

/// The identity of every request that does not impersonate.
pub const ADMIN_USER: &str = "system:admin";
/// The admin's groups.
pub const ADMIN_GROUPS: &[&str] = &["system:masters", "system:authenticated"];

/// `user.Info`: a user's name, uid, groups and extra attributes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// User name.
    pub username: String,
    /// Uid (empty when unknown).
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The fixed identity of unauthenticated-by-design requests.
    pub fn admin() -> Self {
        UserInfo {
            username: ADMIN_USER.to_string(),
            groups: ADMIN_GROUPS.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        }
    }

    /// A service account's user (without uid): its name and the service-account groups.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        UserInfo {
            username: super::token::service_account_username(namespace, name),
            groups: vec![
                "system:serviceaccounts".to_string(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".to_string(),
            ],
            ..Default::default()
        }
    }

    /// The identity of a request with `headers` on a server without authentication: the admin,
    /// or whom it impersonates (the admin may impersonate anyone).
    pub fn of_request(headers: &HeaderMap) -> Self {
        Self::impersonated(headers).unwrap_or_else(Self::admin)
    }

    /// The user the `Impersonate-*` headers name, built as upstream's impersonation filter
    /// builds it, or `None` without `Impersonate-User`. Whether the request may impersonate is
    /// [`super::impersonation`]'s question.
    pub fn impersonated(headers: &HeaderMap) -> Option<Self> {
        let values = |name: &str| -> Vec<String> {
            headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .map(str::to_string)
                .collect()
        };
        let username = values("Impersonate-User").into_iter().next()?;
        let requested_groups = values("Impersonate-Group");
        let mut groups = Vec::new();
        // As upstream's impersonation filter: a service account's groups only when no group is
        // requested; `system:authenticated` unless either authentication group is already there.
        if requested_groups.is_empty() {
            if let Some((ns, _)) = username
                .strip_prefix("system:serviceaccount:")
                .and_then(|rest| rest.split_once(':'))
            {
                groups.push("system:serviceaccounts".to_string());
                groups.push(format!("system:serviceaccounts:{ns}"));
            }
        }
        groups.extend(requested_groups);
        // `system:authenticated` for anybody but `system:anonymous`, unless either
        // authentication group is already there; `system:unauthenticated` for `system:anonymous`.
        let has = |g: &str| groups.iter().any(|x| x == g);
        if username == ANONYMOUS {
            if !has(UNAUTHENTICATED) {
                groups.push(UNAUTHENTICATED.to_string());
            }
        } else if !has(AUTHENTICATED) && !has(UNAUTHENTICATED) {
            groups.push(AUTHENTICATED.to_string());
        }
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in headers {
            let Some(key) = name.as_str().strip_prefix("impersonate-extra-") else {
                continue;
            };
            let key: String = percent_decode(key);
            if let Ok(v) = value.to_str() {
                extra.entry(key).or_default().push(v.to_string());
            }
        }
        Some(UserInfo {
            username,
            uid: values("Impersonate-Uid")
                .into_iter()
                .next()
                .unwrap_or_default(),
            groups,
            extra,
        })
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// `authentication.k8s.io/v1` UserInfo JSON (Go's omitempty).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        if !self.username.is_empty() {
            m.insert("username".into(), json!(self.username));
        }
        if !self.uid.is_empty() {
            m.insert("uid".into(), json!(self.uid));
        }
        if !self.groups.is_empty() {
            m.insert("groups".into(), json!(self.groups));
        }
        if !self.extra.is_empty() {
            m.insert("extra".into(), json!(self.extra));
        }
        Value::Object(m)
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn requests_act_as_the_admin_unless_they_impersonate() {
        let admin = UserInfo::of_request(&HeaderMap::new());
        assert_eq!(admin.username, "system:admin");
        assert_eq!(admin.groups, vec!["system:masters", "system:authenticated"]);

        let mut h = HeaderMap::new();
        h.insert(
            "Impersonate-User",
            "system:serviceaccount:ns1:builder".parse().unwrap(),
        );
        let sa = UserInfo::of_request(&h);
        assert_eq!(
            sa.groups,
            vec![
                "system:serviceaccounts",
                "system:serviceaccounts:ns1",
                "system:authenticated"
            ]
        );
        let mut h = HeaderMap::new();
        h.insert("Impersonate-User", "jane".parse().unwrap());
        h.append("Impersonate-Group", "devs".parse().unwrap());
        h.insert("Impersonate-Extra-Scopes%2Fa", "x".parse().unwrap());
        let jane = UserInfo::of_request(&h);
        assert_eq!(jane.groups, vec!["devs", "system:authenticated"]);
        assert_eq!(jane.extra["scopes/a"], vec!["x"]);
    }

    #[test]
    fn impersonating_anonymous_adds_system_unauthenticated() {
        let mut h = HeaderMap::new();
        h.insert("Impersonate-User", "system:anonymous".parse().unwrap());
        let anon = UserInfo::of_request(&h);
        assert_eq!(anon.username, "system:anonymous");
        assert_eq!(anon.groups, vec!["system:unauthenticated"]);
        // With groups requested, the group is added after them, once.
        h.append("Impersonate-Group", "devs".parse().unwrap());
        assert_eq!(
            UserInfo::of_request(&h).groups,
            vec!["devs", "system:unauthenticated"]
        );
        h.append(
            "Impersonate-Group",
            "system:unauthenticated".parse().unwrap(),
        );
        assert_eq!(
            UserInfo::of_request(&h).groups,
            vec!["devs", "system:unauthenticated"]
        );
        // Another user asking for system:unauthenticated does not also get system:authenticated.
        let mut h = HeaderMap::new();
        h.insert("Impersonate-User", "jane".parse().unwrap());
        h.append(
            "Impersonate-Group",
            "system:unauthenticated".parse().unwrap(),
        );
        assert_eq!(
            UserInfo::of_request(&h).groups,
            vec!["system:unauthenticated"]
        );
    }
}
