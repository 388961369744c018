//! Authentication of a secure server: kube-apiserver's union of authenticators, in its order.
//!
//! 1. **X.509 client certificates** verified against the cluster CA ([`crate::http::tls`]): CN
//!    is the user, each O a group.
//! 2. **Bearer tokens** (`Authorization: Bearer <token>`): the static token file
//!    (`--token-auth-file`, [`TokenFile`]), then service-account JWTs from TokenRequest
//!    ([`super::token::validate`]: issuer, audiences, expiry, bound objects still present),
//!    a success remembered for 10 s ([`super::token_cache`]).
//! 3. **Anonymous** (`system:anonymous` in `system:unauthenticated`), only when no authenticator
//!    recognised the request *and none failed* (upstream's `NewFailOnError`): a wrong token or a
//!    certificate of another CA is 401, never anonymous.
//!
//! Every authenticated user gets `system:authenticated` (`AuthenticatedGroupAdder`). Failures
//! are answered with upstream's bare `Unauthorized` Status; why a credential failed is logged at
//! debug level and never sent, and the token itself is never logged.

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::{header, HeaderMap};

use super::identity::UserInfo;
use super::token::{self, Found, Lookup};
use super::token_cache::{key, TokenCache};
use crate::http::tls::PeerCertificate;
use crate::registry::store::CachedObjects;
use crate::registry::Objects;
use crate::state::AppState;

/// `user.AllAuthenticated`.
pub const AUTHENTICATED: &str = "system:authenticated";
/// `user.AllUnauthenticated`.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// `user.Anonymous`.
pub const ANONYMOUS: &str = "system:anonymous";

/// The users of a static token file, by the SHA-256 of their token: a lookup's timing depends
/// on the digest, not on how much of a secret token a guess got right.
#[derive(Default)]
pub struct TokenFile {
    users: HashMap<[u8; 32], UserInfo>,
}

impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenFile")
            .field("users", &self.users.len())
            .finish()
    }
}

/// One CSV record's fields, with `"…"` quoting (`""` inside quotes is a quote), as Go's
/// `encoding/csv` with `TrimLeadingSpace`.
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
            chars.next();
        }
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                if c == '"' {
                    if chars.peek() == Some(&'"') {
                        chars.next();
                        field.push('"');
                    } else {
                        break;
                    }
                } else {
                    field.push(c);
                }
            }
            // Anything between the closing quote and the comma is dropped.
            while chars.peek().is_some_and(|c| *c != ',') {
                chars.next();
            }
        } else {
            while let Some(c) = chars.peek().copied() {
                if c == ',' {
                    break;
                }
                field.push(c);
                chars.next();
            }
        }
        fields.push(field);
        if chars.next().is_none() {
            return fields;
        }
    }
}

impl TokenFile {
    /// Parses upstream's format: `token,user,uid[,"group1,group2,…"]` per line.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut users = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let record = csv_fields(line);
            if record.len() < 3 {
                return Err(format!(
                    "token file is invalid: record on line {} has {} column(s), need at least 3",
                    i + 1,
                    record.len()
                ));
            }
            if record[0].is_empty() {
                return Err(format!(
                    "token file is invalid: line {} has an empty token",
                    i + 1
                ));
            }
            let groups = record
                .get(3)
                .map(|g| {
                    g.split(',')
                        .map(str::trim)
                        .filter(|g| !g.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            let user = UserInfo {
                username: record[1].clone(),
                uid: record[2].clone(),
                groups,
                ..Default::default()
            };
            if users.insert(key(&record[0]), user).is_some() {
                tracing::warn!(
                    line = i + 1,
                    "duplicate token in the token file; the later one wins"
                );
            }
        }
        Ok(TokenFile { users })
    }

    /// The user of `token`.
    pub fn user(&self, token: &str) -> Option<&UserInfo> {
        self.user_by_key(&key(token))
    }

    /// The user of the token whose [`key`] is `key`.
    fn user_by_key(&self, key: &[u8; 32]) -> Option<&UserInfo> {
        self.users.get(key)
    }
}

/// Lookups for token validation from the watch cache, with upstream's getter errors.
pub struct CacheLookup<'a>(pub CachedObjects<'a>);

impl Lookup for CacheLookup<'_> {
    fn find(&self, kind: &str, namespace: &str, name: &str) -> Result<Found, String> {
        let (plural, ns) = match kind {
            "ServiceAccount" => ("serviceaccounts", Some(namespace)),
            "Pod" => ("pods", Some(namespace)),
            "Secret" => ("secrets", Some(namespace)),
            _ => ("nodes", None),
        };
        let obj = self
            .0
            .get("", plural, ns, name)
            .ok_or_else(|| format!("{plural} \"{name}\" not found"))?;
        let deleted = api::meta::deletion_timestamp(&obj)
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .is_some_and(|t| t.as_second() < now() - token::LEEWAY_SECONDS);
        Ok(Found {
            uid: api::meta::uid(&obj).unwrap_or("").to_string(),
            deleted,
        })
    }
}

/// Now, Unix seconds.
pub fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// What one authenticator made of a request (`user, ok, err`).
enum Step {
    /// Not this authenticator's kind of credential.
    Skip,
    /// Authenticated.
    User(UserInfo),
    /// A credential of its kind that failed; the reason is logged only.
    Failed(String),
}

fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    // Upstream splits the trimmed value on single spaces: `Bearer  x` has an empty token.
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = value.split(' ');
    let scheme = parts.next()?;
    let token = parts.next()?.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn token_step(state: &AppState, security: &Security, headers: &HeaderMap) -> Step {
    let Some(token) = bearer_token(headers) else {
        return Step::Skip;
    };
    let key = key(token);
    if let Some(user) = security.tokens.user_by_key(&key) {
        return Step::User(user.clone());
    }
    let at = std::time::Instant::now();
    if let Some(user) = security.token_cache.get(&key, at) {
        return Step::User(user);
    }
    let lookup = CacheLookup(CachedObjects::new(state));
    let now = now();
    match token::validate(&state.credentials, token, &[], now, &lookup) {
        Ok(Some(found)) => {
            let left = u64::try_from(found.expires.saturating_sub(now)).unwrap_or(0);
            security.token_cache.insert(
                key,
                found.user.clone(),
                at,
                std::time::Duration::from_secs(left),
            );
            Step::User(found.user)
        }
        // Upstream's bearer authenticator: a token nobody recognised is an invalid token.
        Ok(None) => Step::Failed("invalid bearer token".to_string()),
        Err(e) => Step::Failed(e),
    }
}

/// The connection's client certificate at `now` (Unix seconds): verified at the handshake, its
/// expiry checked again for each request (a long-lived connection outlives its certificate).
fn certificate_step(peer: Option<&PeerCertificate>, now: i64) -> Step {
    let expired = || Step::Failed("x509: certificate has expired or is not yet valid".to_string());
    match peer {
        None => Step::Skip,
        Some(
            PeerCertificate::Verified { not_after, .. } | PeerCertificate::Unnamed { not_after },
        ) if now > *not_after => expired(),
        Some(PeerCertificate::Verified { user, groups, .. }) => Step::User(UserInfo {
            username: user.clone(),
            groups: groups.clone(),
            ..Default::default()
        }),
        // `CommonNameUserConversion`: an empty CN is "not authenticated", not an error.
        Some(PeerCertificate::Unnamed { .. }) => Step::Skip,
        Some(PeerCertificate::Rejected(why)) => Step::Failed(why.clone()),
    }
}

/// `AuthenticatedGroupAdder`.
fn with_authenticated_group(mut user: UserInfo) -> UserInfo {
    if user.username != ANONYMOUS && !user.in_group(AUTHENTICATED) {
        user.groups.push(AUTHENTICATED.to_string());
    }
    user
}

/// The anonymous user.
pub fn anonymous() -> UserInfo {
    UserInfo {
        username: ANONYMOUS.to_string(),
        groups: vec![UNAUTHENTICATED.to_string()],
        ..Default::default()
    }
}

/// Authenticates a request: its user, or `None` for 401.
pub fn authenticate(
    state: &AppState,
    security: &Security,
    headers: &HeaderMap,
    peer: Option<&PeerCertificate>,
) -> Option<UserInfo> {
    let mut failed = Vec::new();
    // Lazily: a request a certificate authenticates never pays for its token's validation.
    let steps: [&dyn Fn() -> Step; 2] = [&|| certificate_step(peer, now()), &|| {
        token_step(state, security, headers)
    }];
    for step in steps {
        match step() {
            Step::User(user) => return Some(with_authenticated_group(user)),
            Step::Failed(why) => failed.push(why),
            Step::Skip => {}
        }
    }
    if !failed.is_empty() {
        tracing::debug!(errors = ?failed, "unable to authenticate the request");
        return None;
    }
    security.anonymous.then(anonymous)
}

/// The security settings of a secure server, built once at start.
pub struct Security {
    /// The TLS configuration (serving certificate, client certificate request).
    pub tls: Arc<tokio_rustls::rustls::ServerConfig>,
    /// The CA's certificate, DER, which client certificates must chain to.
    pub ca_der: Vec<u8>,
    /// The static token file's users.
    pub tokens: TokenFile,
    /// Whether requests without credentials are served as `system:anonymous`.
    pub anonymous: bool,
    /// Service-account tokens that authenticated lately.
    pub token_cache: TokenCache,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security")
            .field("tokens", &self.tokens)
            .field("anonymous", &self.anonymous)
            .finish_non_exhaustive()
    }
}

impl Security {
    /// Issues the serving certificate for `config.tls_hosts`, reads the token file.
    pub fn new(
        creds: &super::Credentials,
        config: &crate::config::SecureConfig,
    ) -> Result<Self, String> {
        let serving = super::pki::serving(creds, &config.tls_hosts)?;
        let tls =
            crate::http::tls::server_config(creds.ca_pem(), &serving.cert_pem, &serving.key_pem)?;
        let ca_der = pem::parse(creds.ca_pem())
            .map(pem::Pem::into_contents)
            .map_err(|e| format!("the CA certificate: {e}"))?;
        let tokens = match &config.token_auth_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("reading {}: {e}", path.display()))?;
                TokenFile::parse(&text)?
            }
            None => TokenFile::default(),
        };
        Ok(Security {
            tls,
            ca_der,
            tokens,
            anonymous: config.anonymous,
            token_cache: TokenCache::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn token_file_records_as_upstream() {
        let f = TokenFile::parse(
            "abc,alice,1001,\"devs,ops\"\n\n def, bob ,1002\nxyz,carol,1003,solo\n",
        )
        .unwrap();
        let alice = f.user("abc").unwrap();
        assert_eq!(alice.username, "alice");
        assert_eq!(alice.uid, "1001");
        assert_eq!(alice.groups, vec!["devs", "ops"]);
        // TrimLeadingSpace trims only the leading space of a field.
        assert_eq!(f.user("def").unwrap().username, "bob ");
        assert_eq!(f.user("xyz").unwrap().groups, vec!["solo"]);
        assert!(f.user("ab").is_none());
        assert!(TokenFile::parse("abc,alice\n").is_err());
        assert!(TokenFile::parse(",alice,1\n").is_err());
    }

    #[test]
    fn bearer_tokens_need_the_bearer_scheme() {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, "Bearer tok ".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("tok"));
        h.insert(header::AUTHORIZATION, "Bearer  tok".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
        h.insert(header::AUTHORIZATION, "Basic dXNlcjpwYXNz".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
        h.insert(header::AUTHORIZATION, "bearer x".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("x"));
    }

    #[test]
    fn every_authenticated_user_is_in_system_authenticated_once() {
        let u = with_authenticated_group(UserInfo {
            username: "a".into(),
            groups: vec![AUTHENTICATED.into()],
            ..Default::default()
        });
        assert_eq!(u.groups, vec![AUTHENTICATED]);
        let anon = with_authenticated_group(anonymous());
        assert_eq!(anon.groups, vec![UNAUTHENTICATED]);
    }

    #[test]
    fn a_connections_certificate_stops_authenticating_when_it_expires() {
        let peer = PeerCertificate::Verified {
            user: "alice".into(),
            groups: vec![],
            not_after: 1_000,
        };
        assert!(matches!(
            certificate_step(Some(&peer), 1_000),
            Step::User(u) if u.username == "alice"
        ));
        assert!(matches!(
            certificate_step(Some(&peer), 1_001),
            Step::Failed(why) if why.contains("expired")
        ));
        let unnamed = PeerCertificate::Unnamed { not_after: 1_000 };
        assert!(matches!(
            certificate_step(Some(&unnamed), 1_000),
            Step::Skip
        ));
        assert!(matches!(
            certificate_step(Some(&unnamed), 1_001),
            Step::Failed(_)
        ));
    }
}
