//! Which client each controller writes with (upstream's `k8s.io/controller-manager/pkg/clientbuilder`,
//! chosen by kube-controller-manager's `--use-service-account-credentials`).
//!
//! * [`ControllerClients::Simple`]: every controller uses the manager's own client (the flag off).
//! * [`ControllerClients::ServiceAccounts`]: each controller acts as its ServiceAccount in
//!   `kube-system` (`system:serviceaccount:kube-system:<name>`), which the bootstrap policy binds
//!   to `system:controller:<name>`. As upstream's `DynamicControllerClientBuilder`, the manager
//!   (as `system:kube-controller-manager`, whose role may get and create service accounts and
//!   create their tokens) makes the account if it is missing and asks for a token through
//!   TokenRequest; the controller's client then sends that token.
//!
//! Guarantees: obtaining a client is bounded ([`OBTAIN_DEADLINE`], retried with back-off until
//! then); a controller whose client cannot be obtained is reported and not started, as upstream's
//! `ClientOrDie` stops the manager. The shared informers and the event broadcaster keep the
//! manager's own client (upstream's `shared-informers` client comes from the root builder).
//!
//! Tokens are renewed as upstream's: each lasts [`TOKEN_SECONDS`] (an hour) and is asked for
//! again once 80 % of its life has passed (at least ten minutes of life counted, for clock
//! skew), or after the server answered 401 to it (`client::rest::token_source`); a failed
//! renewal keeps the previous token.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ServiceAccount;
use serde_json::json;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use client::rest::token_source::{DynamicToken, Token, TokenFuture, TokenSource};
use client::{Api, Client};

/// The namespace of the controllers' accounts (`metav1.NamespaceSystem`).
pub const CONTROLLER_NAMESPACE: &str = "kube-system";
/// How long the controllers' tokens last (upstream's `defaultExpirationSeconds`).
pub const TOKEN_SECONDS: i64 = 3600;
/// The share of a token's life left when it is renewed (upstream's `defaultLeewayPercent`).
const LEEWAY_PERCENT: u32 = 20;
/// The least life a token is taken to have, whatever its expiry says (clock skew).
const MIN_LIFETIME: Duration = Duration::from_secs(600);
/// How long obtaining one controller's client may take before it is given up.
pub const OBTAIN_DEADLINE: Duration = Duration::from_secs(30);
/// The first retry delay; doubled up to [`MAX_RETRY_DELAY`].
const FIRST_RETRY_DELAY: Duration = Duration::from_millis(100);
const MAX_RETRY_DELAY: Duration = Duration::from_secs(2);

/// How the controllers' clients are built.
#[derive(Clone)]
pub enum ControllerClients {
    /// Every controller uses the manager's client.
    Simple,
    /// Each controller uses a token of its own ServiceAccount; `template` is the connection
    /// (server, CA, user agent) those tokens are sent over. Its client identity, if any, is dropped.
    ServiceAccounts { template: Box<client::Config> },
}

impl std::fmt::Debug for ControllerClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControllerClients::Simple => f.write_str("Simple"),
            ControllerClients::ServiceAccounts { template } => f
                .debug_struct("ServiceAccounts")
                .field("server", &template.server)
                .finish_non_exhaustive(),
        }
    }
}

/// Why a controller's client could not be obtained.
#[derive(Debug, thiserror::Error)]
pub enum ObtainError {
    #[error("service account kube-system/{account}: {source}")]
    ServiceAccount {
        account: String,
        #[source]
        source: Box<client::Error>,
    },
    #[error("token for service account kube-system/{account}: {source}")]
    Token {
        account: String,
        #[source]
        source: Box<client::Error>,
    },
    #[error(
        "token for service account kube-system/{account}: the TokenRequest has no status.token"
    )]
    NoToken { account: String },
    #[error("client for service account kube-system/{account}: {source}")]
    Client {
        account: String,
        #[source]
        source: Box<client::Error>,
    },
}

impl ControllerClients {
    /// The clients of the named controllers (`names` are upstream's account names, e.g.
    /// `replicaset-controller`), obtained through `root`; each is retried until
    /// [`OBTAIN_DEADLINE`]. A name missing from the result could not be obtained (logged).
    pub async fn obtain(&self, root: &Client, names: &[&'static str]) -> Obtained {
        // All at once: the controllers start together, none waits for another's token.
        let attempts = names.iter().map(|&name| async move {
            let client = match self {
                ControllerClients::Simple => Ok(root.clone()),
                ControllerClients::ServiceAccounts { template } => {
                    obtain_with_retries(root, template, name).await
                }
            };
            (name, client)
        });
        let mut clients = HashMap::with_capacity(names.len());
        for (name, client) in futures::future::join_all(attempts).await {
            match client {
                Ok(c) => {
                    clients.insert(name, c);
                }
                Err(e) => {
                    tracing::error!(controller = name, error = %e, "cannot obtain the controller's client: it is not started")
                }
            }
        }
        Obtained { clients }
    }
}

/// The clients obtained, by account name.
#[derive(Debug, Default)]
pub struct Obtained {
    clients: HashMap<&'static str, Client>,
}

impl Obtained {
    /// The client of controller `name`, if it was obtained.
    pub fn get(&self, name: &str) -> Option<Client> {
        self.clients.get(name).cloned()
    }
}

async fn obtain_with_retries(
    root: &Client,
    template: &client::Config,
    name: &str,
) -> Result<Client, ObtainError> {
    let deadline = tokio::time::Instant::now() + OBTAIN_DEADLINE;
    let mut delay = FIRST_RETRY_DELAY;
    loop {
        match service_account_client(root, template, name).await {
            Ok(c) => return Ok(c),
            Err(e) if tokio::time::Instant::now() + delay < deadline => {
                tracing::debug!(controller = name, error = %e, "retrying the controller's client");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(MAX_RETRY_DELAY);
            }
            Err(e) => return Err(e),
        }
    }
}

/// One attempt: ensure the account exists, ask for its token, build the client.
async fn service_account_client(
    root: &Client,
    template: &client::Config,
    name: &str,
) -> Result<Client, ObtainError> {
    let tokens = ServiceAccountTokens {
        root: root.clone(),
        name: name.to_string(),
    };
    let first = tokens.request().await?;
    let mut cfg = template.clone();
    cfg.identity_pem = None;
    cfg.token = None;
    cfg.token_source = Some(DynamicToken::new(Arc::new(tokens), Some(first)));
    Client::new(cfg).map_err(|source| ObtainError::Client {
        account: name.to_string(),
        source: Box::new(source),
    })
}

/// TokenRequests for one controller's account, through the manager's own client (upstream's
/// `tokenSourceImpl`).
struct ServiceAccountTokens {
    root: Client,
    name: String,
}

impl ServiceAccountTokens {
    /// The account made if it is missing, then a token for it.
    async fn request(&self) -> Result<Token, ObtainError> {
        let accounts: Api<ServiceAccount> = self.root.api(Some(CONTROLLER_NAMESPACE));
        let name = self.name.as_str();
        let sa_err = |source: client::Error| ObtainError::ServiceAccount {
            account: name.to_string(),
            source: Box::new(source),
        };
        if accounts.get_opt(name).await.map_err(sa_err)?.is_none() {
            let sa = ServiceAccount {
                metadata: ObjectMeta {
                    name: Some(name.to_string()),
                    namespace: Some(CONTROLLER_NAMESPACE.to_string()),
                    ..Default::default()
                },
                ..Default::default()
            };
            match accounts.create(&sa).await {
                Ok(_) => {}
                Err(e) if e.is_already_exists() => {}
                Err(e) => return Err(sa_err(e)),
            }
        }
        let request = json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": TOKEN_SECONDS},
        });
        let answer = accounts
            .create_subresource(&self.name, "token", &request)
            .await
            .map_err(|source| ObtainError::Token {
                account: self.name.clone(),
                source: Box::new(source),
            })?;
        let token = answer
            .pointer("/status/token")
            .and_then(|t| t.as_str())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ObtainError::NoToken {
                account: self.name.clone(),
            })?;
        let expires = answer
            .pointer("/status/expirationTimestamp")
            .and_then(|t| t.as_str())
            .and_then(|t| t.parse::<jiff::Timestamp>().ok());
        Ok(Token {
            token: token.to_string(),
            renew_at: tokio::time::Instant::now() + renew_after(expires, jiff::Timestamp::now()),
        })
    }
}

impl TokenSource for ServiceAccountTokens {
    fn token(&self) -> TokenFuture<'_> {
        Box::pin(async move {
            self.request().await.map_err(|e| match e {
                // The server's answer (its status and code) goes to the caller as it came.
                ObtainError::ServiceAccount { source, .. } | ObtainError::Token { source, .. } => {
                    *source
                }
                other => client::Error::Config(other.to_string()),
            })
        })
    }
}

/// How long to use a token that expires at `expires` (seen at `now`): its life, at least
/// [`MIN_LIFETIME`], less [`LEEWAY_PERCENT`] of it.
fn renew_after(expires: Option<jiff::Timestamp>, now: jiff::Timestamp) -> Duration {
    let life = expires
        .filter(|e| *e > now)
        .map(|e| e.duration_since(now).unsigned_abs())
        .unwrap_or(Duration::ZERO)
        .max(MIN_LIFETIME);
    life - life * LEEWAY_PERCENT / 100
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_renewed_at_80_percent_of_its_life_counted_as_at_least_ten_minutes() {
        let now: jiff::Timestamp = "2026-12-06T10:00:00Z".parse().unwrap();
        let at = |s: &str| Some(s.parse::<jiff::Timestamp>().unwrap());
        assert_eq!(
            renew_after(at("2026-12-06T11:00:00Z"), now),
            Duration::from_secs(2880)
        );
        // Less than ten minutes left, already expired, or no expiry: ten minutes, less 20 %.
        for expires in [at("2026-12-06T10:01:00Z"), at("2026-12-06T09:00:00Z"), None] {
            assert_eq!(renew_after(expires, now), Duration::from_secs(480));
        }
    }
}
