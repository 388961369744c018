//! Bound service-account tokens: the claims upstream puts in (`pkg/serviceaccount/claims.go`),
//! signing them as an ES256 JWT, and validating one the way the service-account token
//! authenticator does (`pkg/serviceaccount/jwt.go` + the claims validator), with upstream's error
//! messages. Reading the service account and bound objects back is the caller's: validation
//! takes a lookup.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::credentials::Credentials;
use super::identity::UserInfo;

/// `jwt.DefaultLeeway`: expiry and not-before are checked with a minute of slack.
pub const LEEWAY_SECONDS: i64 = 60;

/// A name and uid (`ref` upstream).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ref {
    /// Object name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Object uid.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

/// The `kubernetes.io` private claim.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaim {
    /// The service account's namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The service account.
    #[serde(default)]
    pub serviceaccount: Ref,
    /// The pod the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Ref>,
    /// The secret the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Ref>,
    /// The node the token (or its pod) is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<Ref>,
}

/// Every claim of a token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Audiences (always an array, as go-jose writes more than one; one is a string upstream
    /// too, but readers accept both).
    #[serde(deserialize_with = "audiences")]
    pub aud: Vec<String>,
    /// Expiry, seconds since the epoch.
    pub exp: i64,
    /// Issued at.
    pub iat: i64,
    /// Issuer.
    pub iss: String,
    /// Token id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub jti: String,
    /// The Kubernetes claim.
    #[serde(rename = "kubernetes.io", default)]
    pub kubernetes: KubernetesClaim,
    /// Not before.
    pub nbf: i64,
    /// `system:serviceaccount:<ns>:<name>`.
    pub sub: String,
}

fn audiences<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Aud {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Aud::deserialize(d)? {
        Aud::One(s) => vec![s],
        Aud::Many(v) => v,
    })
}

/// What a token is bound to (with the object's name and uid), besides its service account.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Binding {
    /// A pod.
    pub pod: Option<Ref>,
    /// A secret.
    pub secret: Option<Ref>,
    /// A node: the bound object, or the node of the bound pod.
    pub node: Option<Ref>,
}

/// `system:serviceaccount:<ns>:<name>` (`MakeUsername`).
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The claims of a new token for the service account `namespace/name` (uid `uid`), valid for
/// `expiration_seconds` from `now` (seconds since the epoch).
pub fn claims(
    creds: &Credentials,
    (namespace, name, uid): (&str, &str, &str),
    binding: Binding,
    expiration_seconds: i64,
    audiences: Vec<String>,
    now: i64,
) -> Claims {
    Claims {
        aud: audiences,
        exp: now.saturating_add(expiration_seconds),
        iat: now,
        iss: creds.issuer().to_string(),
        jti: uuid::Uuid::new_v4().to_string(),
        kubernetes: KubernetesClaim {
            namespace: namespace.to_string(),
            serviceaccount: Ref {
                name: name.to_string(),
                uid: uid.to_string(),
            },
            pod: binding.pod,
            secret: binding.secret,
            node: binding.node,
        },
        nbf: now,
        sub: service_account_username(namespace, name),
    }
}

/// Signs `claims` with the server's key.
pub fn sign(creds: &Credentials, claims: &Claims) -> Result<String, String> {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some(creds.key_id().to_string());
    // go-jose writes no `typ`.
    header.typ = None;
    jsonwebtoken::encode(&header, claims, creds.encoding_key()).map_err(|e| e.to_string())
}

/// A token's verdict: the user it authenticates, or why not. `Ok(None)`: not a token this
/// authenticator handles (not a JWT, another issuer), which upstream reports as unauthenticated
/// without an error.
pub type Verdict = Result<Option<Authenticated>, String>;

/// An authenticated token.
#[derive(Debug, Clone, PartialEq)]
pub struct Authenticated {
    /// The service account user.
    pub user: UserInfo,
    /// The audiences the token is valid for, of those requested.
    pub audiences: Vec<String>,
    /// When the token expires (`exp`, Unix seconds).
    pub expires: i64,
}

/// The current object of a kind, for validation: (uid, being deleted for longer than the leeway).
pub struct Found {
    /// The object's uid.
    pub uid: String,
    /// Whether it was marked for deletion before now minus the leeway.
    pub deleted: bool,
}

/// Looks up `kind` (`ServiceAccount`, `Pod`, `Secret`, `Node`) `namespace/name`.
pub trait Lookup {
    /// The object, or `Err(message)` as the getter's error (`serviceaccounts "x" not found`).
    fn find(&self, kind: &str, namespace: &str, name: &str) -> Result<Found, String>;
}

fn header_issuer_matches(token: &str, issuer: &str) -> bool {
    use base64::Engine;
    // `hasCorrectIssuer`: the payload's `iss`, read before the signature is checked.
    let Some(payload) = token.split('.').nth(1) else {
        return false;
    };
    let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload) else {
        return false;
    };
    serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v.get("iss").and_then(Value::as_str).map(|s| s == issuer))
        .unwrap_or(false)
}

fn go_quote_list(items: &[String]) -> String {
    let inner: Vec<String> = items.iter().map(|s| api::validation::go_quote(s)).collect();
    format!("[{}]", inner.join(" "))
}

/// Validates `token` for `requested` audiences (empty: the API audiences) at `now`.
pub fn validate(
    creds: &Credentials,
    token: &str,
    requested: &[String],
    now: i64,
    lookup: &dyn Lookup,
) -> Verdict {
    if token.split('.').count() != 3 || !header_issuer_matches(token, creds.issuer()) {
        return Ok(None);
    }
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    validation.required_spec_claims.clear();
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    let data = match jsonwebtoken::decode::<Claims>(token, creds.decoding_key(), &validation) {
        Ok(d) => d,
        Err(e) => {
            return Err(match e.kind() {
                jsonwebtoken::errors::ErrorKind::InvalidSignature
                | jsonwebtoken::errors::ErrorKind::InvalidEcdsaKey
                | jsonwebtoken::errors::ErrorKind::InvalidAlgorithm => {
                    "go-jose/go-jose: error in cryptographic primitive".to_string()
                }
                _ => "go-jose/go-jose: invalid token claims".to_string(),
            })
        }
    };
    let claims = data.claims;
    let api = creds.api_audiences();
    let token_auds = if claims.aud.is_empty() {
        api.clone()
    } else {
        claims.aud.clone()
    };
    let requested: Vec<String> = if requested.is_empty() {
        api
    } else {
        requested.to_vec()
    };
    let auds: Vec<String> = token_auds
        .iter()
        .filter(|a| requested.contains(a))
        .cloned()
        .collect();
    if auds.is_empty() {
        return Err(format!(
            "token audiences {} is invalid for the target audiences {}",
            go_quote_list(&token_auds),
            go_quote_list(&requested)
        ));
    }
    if now > claims.exp.saturating_add(LEEWAY_SECONDS) {
        return Err("service account token has expired".to_string());
    }
    if now < claims.nbf.saturating_sub(LEEWAY_SECONDS) {
        return Err("service account token is not valid yet".to_string());
    }
    let k = &claims.kubernetes;
    let ns = k.namespace.as_str();
    let sa = lookup.find("ServiceAccount", ns, &k.serviceaccount.name)?;
    if sa.deleted {
        return Err(format!(
            "service account {ns}/{} has been deleted",
            k.serviceaccount.name
        ));
    }
    if sa.uid != k.serviceaccount.uid {
        return Err(format!(
            "service account UID ({}) does not match claim ({})",
            sa.uid, k.serviceaccount.uid
        ));
    }
    let invalidated = || "service account token has been invalidated".to_string();
    if let Some(secret) = &k.secret {
        let found = lookup
            .find("Secret", ns, &secret.name)
            .map_err(|_| invalidated())?;
        if found.deleted {
            return Err(invalidated());
        }
        if found.uid != secret.uid {
            return Err(format!(
                "secret UID ({}) does not match service account secret ref claim ({})",
                found.uid, secret.uid
            ));
        }
    }
    if let Some(pod) = &k.pod {
        let found = lookup
            .find("Pod", ns, &pod.name)
            .map_err(|_| invalidated())?;
        if found.deleted {
            return Err(invalidated());
        }
        if found.uid != pod.uid {
            return Err(format!(
                "pod UID ({}) does not match service account pod ref claim ({})",
                found.uid, pod.uid
            ));
        }
    }
    if let (Some(node), None) = (&k.node, &k.pod) {
        // A node-bound token: the node must still be there (a pod-bound token only names its
        // pod's node).
        let found = lookup
            .find("Node", "", &node.name)
            .map_err(|_| invalidated())?;
        if found.deleted {
            return Err(invalidated());
        }
        if found.uid != node.uid {
            return Err(format!(
                "node UID ({}) does not match service account node ref claim ({})",
                found.uid, node.uid
            ));
        }
    }
    let mut extra = std::collections::BTreeMap::new();
    if let Some(pod) = &k.pod {
        extra.insert(
            "authentication.kubernetes.io/pod-name".to_string(),
            vec![pod.name.clone()],
        );
        extra.insert(
            "authentication.kubernetes.io/pod-uid".to_string(),
            vec![pod.uid.clone()],
        );
    }
    if let Some(node) = &k.node {
        extra.insert(
            "authentication.kubernetes.io/node-name".to_string(),
            vec![node.name.clone()],
        );
        extra.insert(
            "authentication.kubernetes.io/node-uid".to_string(),
            vec![node.uid.clone()],
        );
    }
    if !claims.jti.is_empty() {
        extra.insert(
            "authentication.kubernetes.io/credential-id".to_string(),
            vec![format!("JTI={}", claims.jti)],
        );
    }
    let mut user = UserInfo::service_account(ns, &k.serviceaccount.name);
    user.uid = k.serviceaccount.uid.clone();
    user.extra = extra;
    Ok(Some(Authenticated {
        user,
        audiences: auds,
        expires: claims.exp,
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::authn::credentials::DEFAULT_ISSUER;

    struct Fixed(Vec<(&'static str, &'static str, &'static str)>);

    impl Lookup for Fixed {
        fn find(&self, kind: &str, _ns: &str, name: &str) -> Result<Found, String> {
            self.0
                .iter()
                .find(|(k, n, _)| *k == kind && *n == name)
                .map(|(_, _, uid)| Found {
                    uid: uid.to_string(),
                    deleted: false,
                })
                .ok_or_else(|| format!("{kind} {name} not found"))
        }
    }

    fn token(creds: &Credentials, binding: Binding, auds: &[&str], now: i64) -> String {
        let c = claims(
            creds,
            ("default", "default", "sa-uid"),
            binding,
            3600,
            auds.iter().map(|s| s.to_string()).collect(),
            now,
        );
        sign(creds, &c).unwrap()
    }

    #[test]
    fn a_signed_token_validates_with_upstreams_user() {
        let creds = Credentials::load_or_generate(None, DEFAULT_ISSUER).unwrap();
        let now = 1_700_000_000;
        let binding = Binding {
            pod: Some(Ref {
                name: "p".into(),
                uid: "pod-uid".into(),
            }),
            ..Default::default()
        };
        let t = token(&creds, binding, &[DEFAULT_ISSUER], now);
        let lookup = Fixed(vec![
            ("ServiceAccount", "default", "sa-uid"),
            ("Pod", "p", "pod-uid"),
        ]);
        let got = validate(&creds, &t, &[], now + 10, &lookup)
            .unwrap()
            .unwrap();
        assert_eq!(got.user.username, "system:serviceaccount:default:default");
        assert_eq!(got.user.uid, "sa-uid");
        assert_eq!(
            got.user.groups,
            vec![
                "system:serviceaccounts",
                "system:serviceaccounts:default",
                "system:authenticated"
            ]
        );
        assert_eq!(
            got.user.extra["authentication.kubernetes.io/pod-name"],
            vec!["p"]
        );
        assert_eq!(got.audiences, vec![DEFAULT_ISSUER]);
    }

    #[test]
    fn rejections_carry_upstreams_messages() {
        let creds = Credentials::load_or_generate(None, DEFAULT_ISSUER).unwrap();
        let other = Credentials::load_or_generate(None, DEFAULT_ISSUER).unwrap();
        let now = 1_700_000_000;
        let lookup = Fixed(vec![("ServiceAccount", "default", "sa-uid")]);
        let t = token(&creds, Binding::default(), &["a"], now);
        assert_eq!(
            validate(&creds, &t, &["b".into()], now, &lookup).unwrap_err(),
            r#"token audiences ["a"] is invalid for the target audiences ["b"]"#
        );
        assert_eq!(
            validate(&creds, &t, &["a".into()], now + 3600 + 61, &lookup).unwrap_err(),
            "service account token has expired"
        );
        assert!(validate(&creds, &t, &["a".into()], now + 3600 + 59, &lookup).is_ok());
        assert_eq!(
            validate(&other, &t, &["a".into()], now, &lookup).unwrap_err(),
            "go-jose/go-jose: error in cryptographic primitive"
        );
        let gone = Fixed(vec![("ServiceAccount", "default", "new-uid")]);
        assert_eq!(
            validate(&creds, &t, &["a".into()], now, &gone).unwrap_err(),
            "service account UID (new-uid) does not match claim (sa-uid)"
        );
        assert_eq!(validate(&creds, "abc", &[], now, &lookup), Ok(None));
    }
}
