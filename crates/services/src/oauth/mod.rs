//! OAuth 2.1 for remote MCP servers, as the MCP authorization
//! specifications (2025-11-25 and 2026-07-28) ask, behind the transport's
//! [`Credentials`] seam.
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
//! | `exchange` | a gateway's caller's token exchanged for an upstream's (RFC 8693, or for an ID-JAG the upstream's server redeems), kept per caller |
//! | `login` | a user's login: loopback redirect listener, [`Authorizer`]s, `iss` check |
//! | `store` | tokens on disk, per server and issuer, 0600 (a gateway's callers': sealed, per caller) |
//! | `sealed` | the encryption of callers' stored logins (AES-256-GCM, keyed file names) |
//! | `caller_login` | per-caller logins behind the gateway: links, the redirect route's flows, the stored logins |
//! | `credentials` | [`OAuthCredentials`]: the seam's implementation (refresh once, step-up) |
//! | `http` | the HTTP client and the adapter `oauth2` sends through |
//!
//! No error or log line holds a token or a secret: messages name the
//! server, the issuer and the scopes only, and the bodies of failed
//! answers are shown masked.

mod caller_login;
mod challenge;
mod credentials;
mod discovery;
mod dpop;
mod exchange;
mod flow;
mod grants;
#[doc(hidden)]
pub mod http;
mod jwt;
mod link_check;
mod login;
mod registration;
mod sealed;
mod store;

use std::sync::Arc;

use crate::config::{Auth, ServerConfig};
use crate::transport::credentials::Credentials;
use crate::transport::http::StaticCredentials;

pub use caller_login::{
    per_caller_login, CallerLogins, LoggedInCaller, LoginDesk, LoginLink, StoredLogin, LINK_TTL, LOGIN_CALLBACK_PATH, LOGIN_PATH,
    MAX_PENDING,
};
pub use challenge::BearerChallenge;
pub use credentials::{LoggedIn, OAuthCredentials, EXPIRY_MARGIN_SECS, LOGIN_TIMEOUT, MAX_STEP_UPS, RENEWAL_GRACE};
pub use exchange::{refusing, Exchanged, Exchanger};
pub use link_check::{LinkCheck, Proved, LOGIN_IDENTITY_PATH};
pub use login::{Authorizer, FollowRedirects, SystemBrowser, CALLBACK_PATH};
pub use sealed::{LoginKey, LOGIN_KEY_LEN};
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

/// The credentials of `config`'s remote server: the one place that picks
/// their kind. OAuth for `auth = { type = "oauth" }` and for a server
/// without `auth` (a 401 starts discovery), its logins through
/// `authorizer`; the static kind otherwise, or when the OAuth client cannot
/// be made (its refusal then says what to configure).
pub fn credentials_for(config: &ServerConfig, authorizer: Option<Arc<dyn Authorizer>>) -> Arc<dyn Credentials> {
    match &config.auth {
        None | Some(Auth::OAuth(_)) => match OAuthCredentials::for_server(config, authorizer) {
            Ok(credentials) => credentials,
            Err(error) => {
                tracing::warn!(server = %config.name, "OAuth is not available for this server: {error}");
                Arc::new(StaticCredentials::new(config))
            }
        },
        // Its connections are given their credentials by the hub that serves each caller (`Exchanger`).
        Some(Auth::TokenExchange(_)) => refusing(format!(
            "server `{}` acts as each caller of the gateway (auth type \"token_exchange\"): it is served only behind `mcpvisor serve \
             --http` with [serve.auth], which exchanges each caller's token",
            config.name
        )),
        Some(_) => Arc::new(StaticCredentials::new(config)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Transport;
    use crate::transport::credentials::RequestLine;

    fn sent(auth: Option<Auth>) -> Vec<(String, String)> {
        let mut config = ServerConfig::remote("r", Transport::Http, "http://x/mcp");
        config.auth = auth;
        let request = RequestLine { method: "POST", url: "http://x/mcp" };
        futures::executor::block_on(credentials_for(&config, None).headers(request)).unwrap()
    }

    #[test]
    fn static_auth_gets_its_header_and_no_auth_gets_oauth_which_sends_none_before_a_login() {
        assert_eq!(sent(Some(Auth::Bearer { token: "t0k".into() })), [("Authorization".into(), "Bearer t0k".into())]);
        assert_eq!(sent(None), Vec::<(String, String)>::new());
    }
}
