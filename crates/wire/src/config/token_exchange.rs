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
//!
//! Where the server's own authorization server takes identity assertion
//! JWT authorization grants (enterprise-managed authorization, SEP-990),
//! `authorization_server` names it and the gateway's client there:
//!
//! ```toml
//! [servers.jira.auth]
//! type = "token_exchange"
//! issuer = "https://idp.example.com"
//! client_id = "mcpvisor-gateway"
//! client_secret = "${GW_SECRET}"
//! scopes = ["jira:read"]
//!
//! [servers.jira.auth.authorization_server]
//! issuer = "https://auth.jira.example.com"
//! client_id = "mcpvisor-at-jira"
//! client_secret = "${JIRA_AS_SECRET}"
//! ```
//!
//! The caller's token is then exchanged at the issuer for an ID-JAG whose
//! audience is that authorization server (and whose resource is this
//! server), and the ID-JAG is redeemed there by the JWT-bearer grant
//! (RFC 7523) for the server's token. The gateway is a separate client of
//! each authorization server (each registers its own clients and secrets);
//! the catalog is listed with a client-credentials token of the upstream
//! client.

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
    /// Enterprise-managed authorization: the server's authorization server,
    /// which takes ID-JAGs the issuer issues; `None` for a plain exchange.
    pub authorization_server: Option<UpstreamAuthorizationServer>,
}

/// The authorization server of a token-exchange server that takes ID-JAGs,
/// and the gateway as a client of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamAuthorizationServer {
    /// Its issuer identifier: the ID-JAG's audience, and where its metadata
    /// (RFC 8414) names its token endpoint.
    pub issuer: String,
    /// The gateway as its client (the ID-JAG names this client).
    pub client_id: String,
    /// That client's secret (sent in HTTP Basic).
    pub client_secret: String,
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
        if let Some(server) = &self.authorization_server {
            if self.audience.is_some() {
                return Some((
                    "auth.audience",
                    "and auth.authorization_server are both set; an ID-JAG's audience is the authorization server itself, so leave \
                     auth.audience out (auth.resource names the upstream, by default its url)",
                ));
            }
            if server.issuer.is_empty() {
                return Some(("auth.authorization_server.issuer", "is empty; set the issuer of the server's own authorization server"));
            }
            if server.client_id.is_empty() {
                return Some((
                    "auth.authorization_server.client_id",
                    "is empty; the gateway redeems ID-JAGs at the server's authorization server as this client",
                ));
            }
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

#[cfg(test)]
mod tests {
    use crate::config::{native, Auth};
    use std::path::Path;

    const ID_JAG: &str = "[servers.crm]\nurl = \"https://crm.example/mcp\"\n\n[servers.crm.auth]\ntype = \"token_exchange\"\n\
                          issuer = \"https://idp.example\"\nclient_id = \"gw\"\nclient_secret = \"${GW_SECRET}\"\n\
                          authorization_server = { issuer = \"${CRM_AS}\", client_id = \"gw-at-crm\", client_secret = \"${CRM_SECRET}\" }\n";

    #[test]
    fn the_authorization_server_of_an_id_jag_exchange_is_expanded_and_its_secret_alone_redacted() {
        let configs = native::parse(Path::new("servers.toml"), ID_JAG).unwrap();
        let vars = |name: &str| match name {
            "GW_SECRET" => Some("gw-secret-value".to_owned()),
            "CRM_AS" => Some("https://auth.crm.example".to_owned()),
            "CRM_SECRET" => Some("crm-secret-value".to_owned()),
            _ => None,
        };
        let expanded = configs[0].expanded(vars).unwrap();
        let Some(Auth::TokenExchange(exchange)) = &expanded.auth else { panic!("{expanded:?}") };
        let server = exchange.authorization_server.as_ref().unwrap();
        assert_eq!(
            (server.issuer.as_str(), server.client_id.as_str(), server.client_secret.as_str()),
            ("https://auth.crm.example", "gw-at-crm", "crm-secret-value")
        );
        let shown = format!("{:?}", expanded.redacted());
        assert!(!shown.contains("crm-secret-value") && !shown.contains("gw-secret-value"), "{shown}");
        assert!(shown.contains("https://auth.crm.example") && shown.contains("gw-at-crm"), "{shown}");
        let unset = configs[0].expanded(|name| (name != "CRM_SECRET").then(|| "x".to_owned())).unwrap_err().to_string();
        assert!(unset.contains("crm") && unset.contains("auth.authorization_server.client_secret"), "{unset}");
    }
}
