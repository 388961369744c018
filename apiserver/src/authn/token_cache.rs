//! Successful bearer-token authentications remembered for a while, as kube-apiserver wraps its
//! token authenticators in `cachedTokenAuthenticator` (`TokenSuccessCacheTTL` 10 s; failures are
//! never cached): a service-account token's signature and claims are checked once per 10 s per
//! token rather than on every request, so a controller's requests pay for one map lookup.
//!
//! Guarantees:
//! - Keyed by the SHA-256 of the token: the token itself is not kept, and a lookup's timing
//!   depends on the digest, not on how much of a secret token a guess got right.
//! - An entry never outlives the token's `exp`; like upstream's, it may outlive the token's bound
//!   object by up to the TTL (a deleted pod's token works for at most 10 s more).
//! - Bounded: at most [`MAX_ENTRIES`]; a full cache starts again empty (a flood of distinct valid
//!   tokens costs validations, never memory, and no insert scans the map under its lock).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::identity::UserInfo;

/// Upstream's `TokenSuccessCacheTTL`.
pub const SUCCESS_TTL: Duration = Duration::from_secs(10);
/// The most tokens remembered at once.
pub const MAX_ENTRIES: usize = 16_384;

/// The cache (see the module docs).
#[derive(Default)]
pub struct TokenCache {
    entries: Mutex<HashMap<[u8; 32], Entry>>,
}

struct Entry {
    user: UserInfo,
    until: Instant,
}

impl std::fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCache")
            .field("entries", &self.entries.lock().len())
            .finish()
    }
}

/// The key of `token`.
pub fn key(token: &str) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

impl TokenCache {
    /// The user a token with `key` authenticated as, if remembered and not expired at `now`.
    pub fn get(&self, key: &[u8; 32], now: Instant) -> Option<UserInfo> {
        let entries = self.entries.lock();
        let e = entries.get(key)?;
        (e.until > now).then(|| e.user.clone())
    }

    /// Remembers that the token with `key` authenticated as `user`, for the TTL but not past
    /// `expires_in` from `now`.
    pub fn insert(&self, key: [u8; 32], user: UserInfo, now: Instant, expires_in: Duration) {
        let until = now + SUCCESS_TTL.min(expires_in);
        let mut entries = self.entries.lock();
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(&key) {
            entries.clear();
        }
        entries.insert(key, Entry { user, until });
    }

    /// How many tokens are remembered.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str) -> UserInfo {
        UserInfo {
            username: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn remembers_for_the_ttl_but_never_past_the_token_expiry() {
        let c = TokenCache::default();
        let t0 = Instant::now();
        c.insert(key("a"), user("alice"), t0, Duration::from_secs(3600));
        assert_eq!(
            c.get(&key("a"), t0).map(|u| u.username),
            Some("alice".into())
        );
        assert!(c.get(&key("b"), t0).is_none());
        assert!(c.get(&key("a"), t0 + SUCCESS_TTL).is_none());
        c.insert(key("short"), user("bob"), t0, Duration::from_secs(2));
        assert!(c.get(&key("short"), t0 + Duration::from_secs(1)).is_some());
        assert!(c.get(&key("short"), t0 + Duration::from_secs(2)).is_none());
    }

    #[test]
    fn a_full_cache_starts_again_empty() {
        let c = TokenCache::default();
        let t0 = Instant::now();
        for i in 0..MAX_ENTRIES {
            c.insert(
                key(&i.to_string()),
                user("u"),
                t0,
                Duration::from_secs(3600),
            );
        }
        assert_eq!(c.len(), MAX_ENTRIES);
        // A known token is refreshed in place.
        c.insert(key("0"), user("u"), t0, Duration::from_secs(3600));
        assert_eq!(c.len(), MAX_ENTRIES);
        c.insert(key("new"), user("n"), t0, Duration::from_secs(3600));
        assert_eq!(c.len(), 1);
        assert!(c.get(&key("new"), t0).is_some());
        assert!(c.get(&key("1"), t0).is_none());
    }
}
