//! How a remote server asks for OAuth 2.1: the `auth = { type = "oauth", ... }`
//! table of mcpvisor's TOML, and what a program may add in code.
//!
//! Every key is optional. With none, mcpvisor does what it does for a remote
//! server without `auth` that answers 401: discovers the authorization
//! server, registers itself (client ID metadata document or dynamic
//! registration) and needs a browser login. A pre-registered client sets
//! `client_id` (and `client_secret` for a confidential one); a machine
//! client sets `grant = "client_credentials"` with a secret or a
//! `private_key` (PEM, for `private_key_jwt`), and needs no browser.
//! Tokens are DPoP-bound when the authorization server offers it, unless
//! `dpop = false`.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use super::Keyword;
use crate::oauth::Authorizer;

/// The OAuth settings of one server. Text values may hold `$VAR` /
/// `${VAR}` references (expanded with the rest of the configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthConfig {
    /// A client registered beforehand with the authorization server.
    pub client_id: Option<String>,
    /// The secret of a confidential pre-registered client.
    pub client_secret: Option<String>,
    /// Scopes to ask for; empty: what the server's challenge or its
    /// metadata says (the MCP specification's order).
    pub scopes: Vec<String>,
    /// The HTTPS URL of this client's metadata document, used as its
    /// `client_id` where the authorization server supports that.
    pub client_metadata_url: Option<String>,
    pub grant: Grant,
    /// A PEM private key (PKCS#8; ECDSA P-256 or RSA) for `private_key_jwt`
    /// client authentication.
    pub private_key: Option<String>,
    /// DPoP-bound tokens (RFC 9449) when the authorization server offers
    /// them (`auth.dpop`, on by default); off: plain bearer tokens.
    pub dpop: bool,
    /// Set in code only: who follows the authorization URL when a login is
    /// needed while connecting. Without one a login is left to the user
    /// (`needs_auth`).
    pub authorizer: Option<AuthorizerHandle>,
    /// Set in code only: where tokens are kept instead of the user's
    /// configuration directory.
    pub token_dir: Option<PathBuf>,
}

impl Default for OAuthConfig {
    fn default() -> Self {
        OAuthConfig {
            client_id: None,
            client_secret: None,
            scopes: Vec::new(),
            client_metadata_url: None,
            grant: Grant::default(),
            private_key: None,
            dpop: true,
            authorizer: None,
            token_dir: None,
        }
    }
}

/// How tokens are obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Grant {
    /// A user logs in in a browser (PKCE); tokens are refreshed.
    #[default]
    AuthorizationCode,
    /// A machine client authenticates itself; no user, no browser.
    ClientCredentials,
}

impl Keyword for Grant {
    const CHOICES: &'static [(&'static str, Self)] =
        &[("authorization_code", Grant::AuthorizationCode), ("client_credentials", Grant::ClientCredentials)];
}

/// An [`Authorizer`] inside a configuration: two are equal when they share it.
#[derive(Clone)]
pub struct AuthorizerHandle(pub Arc<dyn Authorizer>);

impl AuthorizerHandle {
    pub fn new(authorizer: impl Authorizer) -> Self {
        AuthorizerHandle(Arc::new(authorizer))
    }
}

impl fmt::Debug for AuthorizerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AuthorizerHandle")
    }
}

impl PartialEq for AuthorizerHandle {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for AuthorizerHandle {}
