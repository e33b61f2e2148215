//! How a remote server behind the gateway acts as each caller: the
//! `auth = { type = "token_exchange", ... }` table of mcpvisor's TOML.
//!
//! ```toml
//! [servers.jira]
//! url = "https://jira-mcp.example.com/mcp"
//! auth = { type = "token_exchange", issuer = "https://idp.example.com",
//!          client_id = "mcpvisor-gateway", client_secret = "${GW_SECRET}",
//!          audience = "https://jira-mcp.example.com", scopes = ["jira:read"] }
//! ```
//!
//! The caller's access token (checked by `[serve.auth]`) is exchanged at
//! the issuer's token endpoint (RFC 8693) for a token meant for this
//! server; the gateway authenticates there as `client_id`. Each caller gets
//! its own connection to the server (at most `max_callers`, ended after
//! `caller_idle` unused). The catalog is listed as the gateway itself: a
//! client-credentials token of the same client, audience and scopes.

use std::time::Duration;

/// Per-caller connections of one server, at most (default).
pub const DEFAULT_MAX_CALLERS: usize = 64;
/// A per-caller connection unused this long is ended (default).
pub const DEFAULT_CALLER_IDLE: Duration = Duration::from_secs(300);

/// The token-exchange settings of one server. Text values may hold
/// `$VAR` / `${VAR}` references (expanded with the rest of the configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenExchangeConfig {
    /// The authorization server whose metadata names the token endpoint
    /// (RFC 8414); one of `issuer` and `token_endpoint` is set.
    pub issuer: Option<String>,
    /// The token endpoint itself.
    pub token_endpoint: Option<String>,
    /// The gateway as a client of that endpoint.
    pub client_id: String,
    /// Its secret (sent in HTTP Basic).
    pub client_secret: String,
    /// `audience` of the exchanged tokens (RFC 8693 §2.1), if the issuer names upstreams so.
    pub audience: Option<String>,
    /// `resource` of the exchanged tokens (RFC 8707); the server's `url`
    /// when neither it nor `audience` is set.
    pub resource: Option<String>,
    /// Scopes asked for; the issuer grants at most the caller's own.
    pub scopes: Vec<String>,
    /// Per-caller connections at once; the next caller is refused.
    pub max_callers: usize,
    /// A per-caller connection unused this long is ended.
    pub caller_idle: Duration,
}

impl TokenExchangeConfig {
    /// What is wrong with the settings, as (field, message).
    pub(crate) fn problem(&self) -> Option<(&'static str, &'static str)> {
        match (&self.issuer, &self.token_endpoint) {
            (None, None) => {
                return Some(("auth.issuer", "is missing; set the issuer (or its token_endpoint) that exchanges callers' tokens"))
            }
            (Some(_), Some(_)) => return Some(("auth.token_endpoint", "and auth.issuer are both set; set one of them")),
            _ => {}
        }
        if self.client_id.is_empty() {
            return Some(("auth.client_id", "is empty; the gateway authenticates at the token endpoint as this client"));
        }
        if self.max_callers == 0 {
            return Some(("auth.max_callers", "must be at least 1"));
        }
        if self.caller_idle.is_zero() {
            return Some(("auth.caller_idle", "must be longer than zero"));
        }
        None
    }
}
