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
//!
//! `grant = "jwt_bearer"` (RFC 7523) presents a signed JWT the client did not
//! make, with its `client_id` (and a secret or key if it has one):
//!
//! - workload identity: the platform's token, `assertion = "${TOKEN}"` or
//!   `assertion_file = "/var/run/secrets/tokens/mcp"` (read again at every
//!   token request, as platforms rotate it);
//! - enterprise-managed authorization (SEP-990): an `identity_provider =
//!   { token_endpoint, client_id, client_secret, id_token | id_token_file }`
//!   table; the user's ID token from the enterprise's identity provider is
//!   exchanged there (RFC 8693) for an identity assertion grant (ID-JAG)
//!   for this server's authorization server, which is then presented.
//!
//! Exactly one of `assertion`, `assertion_file` and `identity_provider` goes
//! with `jwt_bearer`, and none with another grant.
//!
//! Behind `serve --http`, `per_caller = true` makes each caller of the
//! gateway log in to the server itself (the gateway is the OAuth client,
//! with the pre-registered `client_id`; its redirect URI is
//! `{serve.public_url}/login/callback`): see [`PerCallerLogin`]. `grant` then
//! says how the gateway's own connection, which only lists the catalog, gets
//! its token.

use std::path::PathBuf;
use std::time::Duration;

use super::token_exchange::{DEFAULT_CALLER_IDLE, DEFAULT_MAX_CALLERS};
use super::Keyword;

/// Stored logins of one per-caller server, at most (default).
pub const DEFAULT_MAX_LOGINS: usize = 1000;

/// `per_caller = true`: each caller of the gateway logs in to the server
/// itself; its tokens are kept per identity, encrypted with
/// `[serve] login_key`, and its calls go through a connection of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerCallerLogin {
    /// Per-caller connections at once; the next caller is refused.
    pub max_callers: usize,
    /// A per-caller connection unused this long is ended (its login is kept).
    pub caller_idle: Duration,
    /// Stored logins at most; a login past it is refused until an admin revokes one.
    pub max_logins: usize,
}

impl Default for PerCallerLogin {
    fn default() -> Self {
        PerCallerLogin { max_callers: DEFAULT_MAX_CALLERS, caller_idle: DEFAULT_CALLER_IDLE, max_logins: DEFAULT_MAX_LOGINS }
    }
}

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
    /// `jwt_bearer`: the assertion itself.
    pub assertion: Option<String>,
    /// `jwt_bearer`: the file holding the assertion.
    pub assertion_file: Option<String>,
    /// `jwt_bearer`: the identity provider that exchanges the user's ID
    /// token for the assertion (enterprise-managed authorization). Boxed:
    /// few configurations have one.
    pub identity_provider: Option<Box<IdentityProvider>>,
    /// Set in code only: where tokens are kept instead of the user's
    /// configuration directory.
    pub token_dir: Option<PathBuf>,
    /// Behind the gateway, each caller logs in itself (`per_caller = true`).
    pub per_caller: Option<PerCallerLogin>,
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
            assertion: None,
            assertion_file: None,
            identity_provider: None,
            token_dir: None,
            per_caller: None,
        }
    }
}

impl OAuthConfig {
    /// What is wrong with the per-caller settings, as (field, message).
    pub(crate) fn per_caller_problem(&self) -> Option<(&'static str, &'static str)> {
        let per_caller = self.per_caller.as_ref()?;
        if self.client_id.is_none() {
            return Some((
                "auth.client_id",
                "is missing; with per_caller the gateway logs each caller in as a client registered beforehand (its redirect URI \
                 is {serve.public_url}/login/callback)",
            ));
        }
        if per_caller.max_callers == 0 {
            return Some(("auth.max_callers", "must be at least 1"));
        }
        if per_caller.caller_idle.is_zero() {
            return Some(("auth.caller_idle", "must be longer than zero"));
        }
        if per_caller.max_logins == 0 {
            return Some(("auth.max_logins", "must be at least 1"));
        }
        None
    }

    /// What is wrong with the assertion settings, as (field, message): a
    /// `jwt_bearer` grant needs exactly one source, another grant none.
    pub(crate) fn assertion_problem(&self) -> Option<(&'static str, &'static str)> {
        let sources = [self.assertion.is_some(), self.assertion_file.is_some(), self.identity_provider.is_some()];
        let count = sources.iter().filter(|set| **set).count();
        if self.grant != Grant::JwtBearer {
            return (count > 0).then_some((
                "auth.grant",
                "is not \"jwt_bearer\", yet an assertion, assertion_file or identity_provider is set; write grant = \"jwt_bearer\"",
            ));
        }
        if count != 1 {
            return Some((
                "auth.grant",
                "\"jwt_bearer\" needs exactly one of auth.assertion, auth.assertion_file and auth.identity_provider",
            ));
        }
        if self.client_id.is_none() {
            return Some(("auth.client_id", "is missing; the jwt_bearer grant presents the assertion for a client_id"));
        }
        match &self.identity_provider {
            Some(idp) if idp.id_token.is_some() == idp.id_token_file.is_some() => {
                Some(("auth.identity_provider", "needs exactly one of id_token and id_token_file"))
            }
            _ => None,
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
    /// A JWT issued by someone else (a workload platform, an enterprise
    /// identity provider) is presented (RFC 7523); no browser.
    JwtBearer,
}

impl Grant {
    /// Whether tokens come without a user (and can be had again at any time).
    pub fn is_machine(self) -> bool {
        self != Grant::AuthorizationCode
    }
}

/// An enterprise identity provider that exchanges the user's ID token for
/// an identity assertion grant (ID-JAG; RFC 8693 token exchange, SEP-990).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IdentityProvider {
    /// The identity provider's token endpoint.
    pub token_endpoint: String,
    /// This client at the identity provider.
    pub client_id: String,
    /// Its secret, for a confidential client (sent in HTTP Basic).
    pub client_secret: Option<String>,
    /// The user's ID token from the identity provider.
    pub id_token: Option<String>,
    /// A file holding it (a single sign-on tool keeps it fresh there).
    pub id_token_file: Option<String>,
}

impl Keyword for Grant {
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("authorization_code", Grant::AuthorizationCode),
        ("client_credentials", Grant::ClientCredentials),
        ("jwt_bearer", Grant::JwtBearer),
    ];
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use crate::config::{native, Auth, PerCallerLogin};

    fn read(auth: &str) -> Result<Auth, String> {
        let text = format!("[servers.gh]\nurl = \"https://gh.example/mcp\"\nauth = {{ type = \"oauth\", {auth} }}\n");
        let configs = native::parse(Path::new("servers.toml"), &text).map_err(|e| e.to_string())?;
        Ok(configs[0].auth.clone().unwrap())
    }

    #[test]
    fn per_caller_logins_are_read_with_their_defaults_and_checked() {
        let Auth::OAuth(oauth) = read("per_caller = true, client_id = \"gw\", client_secret = \"${S}\", max_logins = 3").unwrap() else {
            panic!("not oauth")
        };
        assert_eq!(oauth.per_caller, Some(PerCallerLogin { max_logins: 3, ..PerCallerLogin::default() }));
        let Auth::OAuth(tuned) = read("per_caller = true, client_id = \"gw\", caller_idle = \"90s\", max_callers = 2").unwrap() else {
            panic!("not oauth")
        };
        assert_eq!(tuned.per_caller.map(|p| (p.caller_idle, p.max_callers)), Some((Duration::from_secs(90), 2)));
        let Auth::OAuth(plain) = read("client_id = \"gw\"").unwrap() else { panic!("not oauth") };
        assert_eq!(plain.per_caller, None);
        for (auth, expected) in [
            ("per_caller = true", "`auth.client_id` is missing; with per_caller"),
            ("client_id = \"gw\", max_logins = 3", "`auth.per_caller` is not true"),
            ("per_caller = true, client_id = \"gw\", max_logins = 0", "auth.max_logins"),
        ] {
            let refused = read(auth).unwrap_err();
            assert!(refused.contains(expected) && refused.contains("gh"), "{auth}: {refused}");
        }
    }
}
