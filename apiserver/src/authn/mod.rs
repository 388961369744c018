//! Authentication: who a request acts as ([`identity`]), the server's signing material
//! ([`credentials`]: the service-account token key and the sandbox CA), bound service-account
//! tokens ([`token`]: TokenRequest issues them, TokenReview validates them), the OIDC discovery
//! documents of the token issuer ([`oidc`]) and the CSR signer ([`signer`]).
//!
//! A secure server ([`crate::config::SecureConfig`]) authenticates every request
//! ([`authenticator`]: client certificates, bearer tokens, anonymous) and checks impersonation
//! ([`impersonation`]) in one step, [`filter`]; the certificates it issues for itself and its
//! users are [`pki`]'s. Without it every request acts as [`identity::UserInfo::admin`]
//! (`system:admin` in `system:masters`), or as the user it impersonates.

pub mod authenticator;
pub mod credentials;
pub mod filter;
pub mod identity;
pub mod impersonation;
pub mod oidc;
pub mod pki;
pub mod signer;
pub mod token;
pub mod token_cache;

pub use authenticator::Security;
pub use credentials::{Credentials, CredentialsError, DEFAULT_ISSUER};
pub use identity::UserInfo;
