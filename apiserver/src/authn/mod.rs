//! Authentication: who a request acts as ([`identity`]), the server's signing material
//! ([`credentials`]: the service-account token key and the sandbox CA), bound service-account
//! tokens ([`token`]: TokenRequest issues them, TokenReview validates them), the OIDC discovery
//! documents of the token issuer ([`oidc`]) and the CSR signer ([`signer`]).
//!
//! The server has no authentication configured: every request acts as [`identity::UserInfo::admin`]
//! (`system:admin` in `system:masters`), or as the user it impersonates.

pub mod credentials;
pub mod identity;
pub mod oidc;
pub mod signer;
pub mod token;

pub use credentials::{Credentials, CredentialsError, DEFAULT_ISSUER};
pub use identity::UserInfo;
