//! Bearer tokens that are renewed (client-go's `transport.NewCachedTokenSource` wrapped by
//! `ResettableTokenSourceWrapTransport`, as kube-controller-manager's controllers use them).
//!
//! A [`TokenSource`] fetches a token and says until when to use it; a [`Client`](super::Client)
//! configured with one keeps the token it last fetched and asks again only once that time has
//! passed. Guarantees:
//! * one fetch at a time: requests that find the token stale wait for the one fetch under way
//!   and use its result; the common path is a read lock and a header clone;
//! * a failed renewal keeps the previous token (client-go logs "Unable to rotate token" and
//!   returns the old one): the server decides whether it still works; the first fetch's error
//!   is the request's;
//! * a 401 answer to a request drops the token it carried (unless a newer one replaced it
//!   meanwhile), so the next request fetches a fresh one.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http::header::HeaderValue;
use parking_lot::RwLock;
use tokio::time::Instant;

use crate::error::{Error, Result};

/// A token and when to stop using it (renewal is asked for at `renew_at`).
#[derive(Clone)]
pub struct Token {
    pub token: String,
    pub renew_at: Instant,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("renew_at", &self.renew_at)
            .finish_non_exhaustive()
    }
}

/// What a fetch returns.
pub type TokenFuture<'a> = Pin<Box<dyn Future<Output = Result<Token>> + Send + 'a>>;

/// Where tokens come from (e.g. TokenRequest for a ServiceAccount).
pub trait TokenSource: Send + Sync {
    /// A fresh token.
    fn token(&self) -> TokenFuture<'_>;
}

/// A [`TokenSource`] shared by a client's configuration, with the token it started with.
#[derive(Clone)]
pub struct DynamicToken {
    pub(crate) source: Arc<dyn TokenSource>,
    pub(crate) initial: Option<Token>,
}

impl DynamicToken {
    /// Tokens from `source`; `initial`, if given, is used until its `renew_at`.
    pub fn new(source: Arc<dyn TokenSource>, initial: Option<Token>) -> Self {
        DynamicToken { source, initial }
    }
}

impl fmt::Debug for DynamicToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynamicToken")
            .field("initial", &self.initial)
            .finish_non_exhaustive()
    }
}

/// The client's side: the cached `Authorization` header and the source to renew it from.
pub(crate) struct CachedToken {
    source: Arc<dyn TokenSource>,
    cached: RwLock<Option<(HeaderValue, Instant)>>,
    fetching: tokio::sync::Mutex<()>,
}

impl CachedToken {
    pub(crate) fn new(dynamic: &DynamicToken) -> Result<Self> {
        let cached = match &dynamic.initial {
            Some(t) => Some((bearer(&t.token)?, t.renew_at)),
            None => None,
        };
        Ok(CachedToken {
            source: dynamic.source.clone(),
            cached: RwLock::new(cached),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    /// The header to send: the cached one while fresh, else a renewed one.
    pub(crate) async fn header(&self) -> Result<HeaderValue> {
        if let Some(h) = self.fresh() {
            return Ok(h);
        }
        let _one_fetch = self.fetching.lock().await;
        if let Some(h) = self.fresh() {
            return Ok(h);
        }
        let fetched = match self.source.token().await {
            Ok(t) => bearer(&t.token).map(|h| (h, t.renew_at)),
            Err(e) => Err(e),
        };
        let mut cached = self.cached.write();
        match fetched {
            Ok((h, renew_at)) => {
                *cached = Some((h.clone(), renew_at));
                Ok(h)
            }
            Err(e) => match cached.as_ref() {
                Some((old, _)) => {
                    tracing::warn!(error = %e, "unable to rotate token: using the previous one");
                    Ok(old.clone())
                }
                None => Err(e),
            },
        }
    }

    /// After a 401 to a request that carried `sent`: forget it, unless already replaced.
    pub(crate) fn reset(&self, sent: &HeaderValue) {
        let mut cached = self.cached.write();
        if cached.as_ref().is_some_and(|(h, _)| h == sent) {
            *cached = None;
        }
    }

    fn fresh(&self) -> Option<HeaderValue> {
        self.cached
            .read()
            .as_ref()
            .filter(|(_, renew_at)| Instant::now() < *renew_at)
            .map(|(h, _)| h.clone())
    }
}

/// `Authorization: Bearer <token>`, marked sensitive.
pub(crate) fn bearer(token: &str) -> Result<HeaderValue> {
    let mut h = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| Error::Config("token is not a valid header value".into()))?;
    h.set_sensitive(true);
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Hands out `t1`, `t2`, … valid 10 s each; fails while `failing` is set.
    #[derive(Default)]
    struct Counting {
        fetched: AtomicUsize,
        failing: std::sync::atomic::AtomicBool,
    }

    impl TokenSource for Counting {
        fn token(&self) -> TokenFuture<'_> {
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                if self.failing.load(Ordering::SeqCst) {
                    return Err(Error::Config("TokenRequest refused".into()));
                }
                let n = self.fetched.fetch_add(1, Ordering::SeqCst) + 1;
                Ok(Token {
                    token: format!("t{n}"),
                    renew_at: Instant::now() + Duration::from_secs(10),
                })
            })
        }
    }

    fn cached(source: &Arc<Counting>) -> Arc<CachedToken> {
        Arc::new(CachedToken::new(&DynamicToken::new(source.clone(), None)).unwrap())
    }

    #[tokio::test(start_paused = true)]
    async fn a_token_is_fetched_once_by_concurrent_requests_and_again_when_stale() {
        let source = Arc::new(Counting::default());
        let tokens = cached(&source);
        let all = futures::future::join_all((0..20).map(|_| {
            let tokens = tokens.clone();
            async move { tokens.header().await.unwrap() }
        }))
        .await;
        assert!(all.iter().all(|h| h == "Bearer t1"));
        assert_eq!(source.fetched.load(Ordering::SeqCst), 1);
        tokio::time::advance(Duration::from_secs(9)).await;
        assert_eq!(tokens.header().await.unwrap(), "Bearer t1");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(tokens.header().await.unwrap(), "Bearer t2");
        assert!(tokens.header().await.unwrap().is_sensitive());
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_renewal_keeps_the_old_token_and_a_first_failure_is_an_error() {
        let source = Arc::new(Counting::default());
        source.failing.store(true, Ordering::SeqCst);
        let tokens = cached(&source);
        assert!(tokens.header().await.is_err());
        source.failing.store(false, Ordering::SeqCst);
        assert_eq!(tokens.header().await.unwrap(), "Bearer t1");
        source.failing.store(true, Ordering::SeqCst);
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(tokens.header().await.unwrap(), "Bearer t1");
    }

    #[tokio::test(start_paused = true)]
    async fn a_401_drops_the_token_it_carried_only() {
        let source = Arc::new(Counting::default());
        let tokens = Arc::new(
            CachedToken::new(&DynamicToken::new(
                source.clone(),
                Some(Token {
                    token: "t0".into(),
                    renew_at: Instant::now() + Duration::from_secs(10),
                }),
            ))
            .unwrap(),
        );
        let sent = tokens.header().await.unwrap();
        assert_eq!(sent, "Bearer t0");
        assert_eq!(source.fetched.load(Ordering::SeqCst), 0);
        tokens.reset(&sent);
        let renewed = tokens.header().await.unwrap();
        assert_eq!(renewed, "Bearer t1");
        // A late 401 for the old token leaves the new one alone.
        tokens.reset(&sent);
        assert_eq!(tokens.header().await.unwrap(), "Bearer t1");
        assert_eq!(source.fetched.load(Ordering::SeqCst), 1);
    }
}
