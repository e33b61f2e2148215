//! OAuth 2.1 for remote MCP servers, as the MCP authorization
//! specifications (2025-11-25 and 2026-07-28) ask, behind the transport's
//! [`Credentials`](crate::transport::credentials::Credentials) seam.
//!
//! | file | concept |
//! | --- | --- |
//! | `challenge` | the `WWW-Authenticate: Bearer` challenge of a 401/403 |
//! | `discovery` | protected-resource and authorization-server metadata, scope selection |
//! | `registration` | which client: configured, metadata document, dynamic registration |
//! | `flow` | token requests with `oauth2`: PKCE, code exchange, refresh, client credentials |
//! | `jwt` | `private_key_jwt` client assertions |
//! | `dpop` | DPoP (RFC 9449): the key pair, proofs, nonces |
//! | `grants` | the JWT-bearer grant: workload identity, enterprise-managed (token exchange) |
//! | `login` | a user's login: loopback redirect listener, [`Authorizer`]s, `iss` check |
//! | `store` | tokens on disk, per server and issuer, 0600 |
//! | `credentials` | [`OAuthCredentials`]: the seam's implementation (refresh once, step-up) |
//! | `http` | the HTTP client and the adapter `oauth2` sends through |
//!
//! No error or log line holds a token or a secret: messages name the
//! server, the issuer and the scopes only, and the bodies of failed
//! answers are shown masked.

mod challenge;
mod credentials;
mod discovery;
mod dpop;
mod flow;
mod grants;
mod http;
mod jwt;
mod login;
mod registration;
mod store;

pub use challenge::BearerChallenge;
pub use credentials::{LoggedIn, OAuthCredentials, EXPIRY_MARGIN_SECS, LOGIN_TIMEOUT, MAX_STEP_UPS, RENEWAL_GRACE};
pub use login::{Authorizer, FollowRedirects, SystemBrowser, CALLBACK_PATH};
pub use store::TokenStore;

/// Why OAuth could not obtain or keep credentials; the text names the
/// server or issuer and what to do, never a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct OAuthError {
    pub message: String,
}

impl OAuthError {
    pub fn new(message: impl Into<String>) -> OAuthError {
        OAuthError { message: message.into() }
    }
}
