//! Who opens a login link ([`super::LoginDesk`]): before a link given to a
//! caller of the gateway's issuer sends the browser on to the third party,
//! the browser logs in at that issuer (authorization code with PKCE, the
//! gateway a client of it: `[serve.auth] login`), and the token it gets
//! must name the same subject. MCP 2025-11-25 asks this of URL-mode
//! elicitation: without it, a caller could hand its own link to someone
//! else, whose third-party login would then be stored as the caller's.
//!
//! ```text
//! GET /login/{link} ─▶ 302 to the issuer (state, PKCE)                 (LinkCheck::begin)
//! GET /login/identity?code&state ─▶ code exchanged, token verified by the front,
//!                                   subject compared, then on to the third party (LinkCheck::finish)
//! ```
//!
//! Invariants: a check is bound to one link and its caller, single use,
//! at most [`super::LINK_TTL`] old, and at most [`super::MAX_PENDING`] wait
//! at once; the token is only compared, never kept or logged.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use super::discovery::{server_metadata, ServerMetadata};
use super::flow::{PendingLogin, Target};
use super::http::Http;
use super::registration::{Client, ClientAuth, ClientOrigin};
use super::{OAuthError, LINK_TTL, MAX_PENDING};

/// The redirect of the browser's login at the gateway's issuer.
pub const LOGIN_IDENTITY_PATH: &str = "/login/identity";

/// A browser sent to the issuer, waiting for its redirect.
struct Check {
    link: String,
    caller: String,
    login: PendingLogin,
    expires: Instant,
}

/// What a finished check gives the front to verify.
pub struct Proved {
    /// The link the check was for (not yet used).
    pub link: String,
    /// The caller the link was given to (`Identity::caller_key`).
    pub caller: String,
    /// The issuer's access token for the browser's user: the front verifies
    /// it as it verifies any caller's, then drops it.
    pub access_token: String,
}

/// The gateway as a client of its own issuer, checking browsers.
pub struct LinkCheck {
    issuer: String,
    /// The gateway's audience: the token is asked for it (`resource`), so
    /// the front's own verification applies unchanged.
    audience: String,
    client: Client,
    /// `openid` and the scopes the gateway requires of every token.
    scopes: Vec<String>,
    redirect_uri: String,
    http: Http,
    metadata: tokio::sync::OnceCell<ServerMetadata>,
    checks: Mutex<HashMap<String, Check>>,
}

impl LinkCheck {
    /// The check of a gateway reached at `public_url`, whose callers' tokens
    /// come from `issuer` for `audience` with `required_scopes`.
    pub fn new(
        (issuer, audience, required_scopes): (&str, &str, &[String]),
        (client_id, client_secret): (&str, &str),
        public_url: &str,
    ) -> Result<LinkCheck, OAuthError> {
        Ok(LinkCheck {
            issuer: issuer.to_owned(),
            audience: audience.to_owned(),
            client: Client {
                client_id: client_id.to_owned(),
                auth: ClientAuth::SecretBasic(client_secret.to_owned()),
                origin: ClientOrigin::Configured,
            },
            scopes: std::iter::once("openid".to_owned()).chain(required_scopes.iter().cloned()).collect(),
            redirect_uri: format!("{}{LOGIN_IDENTITY_PATH}", public_url.trim_end_matches('/')),
            http: Http::new()?,
            metadata: tokio::sync::OnceCell::new(),
            checks: Mutex::default(),
        })
    }

    async fn metadata(&self) -> Result<&ServerMetadata, OAuthError> {
        self.metadata.get_or_try_init(|| server_metadata(&self.http, &self.issuer)).await
    }

    /// Sends the browser that opened `link` (given to `caller`) to the
    /// issuer: the authorization URL to redirect to.
    pub async fn begin(&self, link: &str, caller: &str) -> Result<String, OAuthError> {
        let metadata = self.metadata().await?;
        let target = Target { server: metadata, resource: &self.audience, client: &self.client };
        let login = target.authorization_url(&self.redirect_uri, &self.scopes)?;
        let url = login.url.to_string();
        let now = Instant::now();
        let mut checks = self.lock();
        checks.retain(|_, check| check.expires > now);
        if checks.len() >= MAX_PENDING {
            return Err(OAuthError::new(format!("{MAX_PENDING} logins are under way at this gateway; retry in a few minutes")));
        }
        let check = Check { link: link.to_owned(), caller: caller.to_owned(), login, expires: now + LINK_TTL };
        checks.insert(check.login.state.secret().clone(), check);
        Ok(url)
    }

    /// Ends the check the redirect's `state` names: the issuer's token for
    /// the browser's user, to be verified and compared by the front.
    pub async fn finish(&self, state: Option<&str>, code: Option<String>, error: Option<&str>) -> Result<Proved, OAuthError> {
        let check = state.and_then(|state| self.lock().remove(state)).filter(|check| check.expires > Instant::now());
        let check = check.ok_or_else(|| OAuthError::new("this login is unknown or expired (or a forged redirect); start it again"))?;
        if let Some(error) = error {
            return Err(OAuthError::new(format!("the gateway's issuer refused the login: {error}")));
        }
        let code = code.ok_or_else(|| OAuthError::new("the issuer's redirect carries no code"))?;
        let metadata = self.metadata().await?;
        let target = Target { server: metadata, resource: &self.audience, client: &self.client };
        let tokens = target.exchange_code(&self.http, check.login, code).await?;
        Ok(Proved { link: check.link, caller: check.caller, access_token: tokens.access_token })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Check>> {
        self.checks.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
