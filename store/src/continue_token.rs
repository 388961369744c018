//! Continue tokens of paginated lists: opaque to callers, `base64url(JSON {"v":1,"rv":N,"start":K})`,
//! like the Kubernetes apiserver's `{"v":"meta.k8s.io/v1","rv":N,"start":K}`.
//!
//! A token names the revision every page of the list is served at, and the last key already returned;
//! the next page starts strictly after that key. Decoding rejects anything malformed (`None`), never
//! panics.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::Revision;

const TOKEN_VERSION: u32 = 1;

/// A decoded continue token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContinueToken {
    pub(crate) revision: Revision,
    pub(crate) after_key: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    v: u32,
    rv: Revision,
    start: String,
}

impl ContinueToken {
    pub(crate) fn encode(&self) -> String {
        let wire = Wire {
            v: TOKEN_VERSION,
            rv: self.revision,
            start: self.after_key.clone(),
        };
        // Serializing a struct of a number and a string cannot fail.
        let json = serde_json::to_vec(&wire).unwrap_or_default();
        URL_SAFE_NO_PAD.encode(json)
    }

    pub(crate) fn decode(token: &str) -> Option<Self> {
        let json = URL_SAFE_NO_PAD.decode(token.as_bytes()).ok()?;
        let wire: Wire = serde_json::from_slice(&json).ok()?;
        if wire.v != TOKEN_VERSION {
            return None;
        }
        Some(Self {
            revision: wire.rv,
            after_key: wire.start,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trips(revision in any::<u64>(), after_key in ".*") {
            let token = ContinueToken { revision, after_key };
            prop_assert_eq!(ContinueToken::decode(&token.encode()), Some(token));
        }

        #[test]
        fn is_url_safe(revision in any::<u64>(), after_key in ".*") {
            let encoded = ContinueToken { revision, after_key }.encode();
            prop_assert!(encoded.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        }

        #[test]
        fn garbage_is_rejected_without_panic(s in ".*") {
            if let Some(token) = ContinueToken::decode(&s) {
                // Anything accepted must be a canonical encoding.
                prop_assert_eq!(token.encode(), s);
            }
        }

        #[test]
        fn garbage_json_is_rejected(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = ContinueToken::decode(&URL_SAFE_NO_PAD.encode(bytes));
        }
    }

    #[test]
    fn rejects_other_versions_and_extra_fields() {
        let v2 = URL_SAFE_NO_PAD.encode(br#"{"v":2,"rv":1,"start":"a"}"#);
        assert_eq!(ContinueToken::decode(&v2), None);
        let extra = URL_SAFE_NO_PAD.encode(br#"{"v":1,"rv":1,"start":"a","x":1}"#);
        assert_eq!(ContinueToken::decode(&extra), None);
        let ok = URL_SAFE_NO_PAD.encode(br#"{"v":1,"rv":7,"start":"a"}"#);
        assert_eq!(
            ContinueToken::decode(&ok),
            Some(ContinueToken {
                revision: 7,
                after_key: "a".into()
            })
        );
    }
}
