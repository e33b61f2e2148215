//! Per-caller logins behind the gateway (`auth = { type = "oauth",
//! per_caller = true }`): each caller of `serve --http` logs in to the
//! server's authorization server itself, with the gateway as the OAuth
//! client, and its calls go out with its own tokens.
//!
//! ```text
//! call, no login ─▶ -32042 {url: {public_url}/login/{link}}      (CallerLogins::link)
//! GET /login/{link} ─▶ 302 to the authorization endpoint, PKCE + state   (LoginDesk::open_link)
//! GET /login/callback?code&state&iss ─▶ code exchanged, tokens sealed    (LoginDesk::callback)
//! next call ─▶ the caller's connection, OAuthCredentials over its sealed store
//! ```
//!
//! Invariants:
//! - a link is bound to one caller and one server, unguessable (256 random
//!   bits), single use and short-lived ([`LINK_TTL`]); a caller asking
//!   again while its link lives gets the same one; links and logins under
//!   way are at most [`MAX_PENDING`] each (the next is refused, saying so);
//! - the redirect's `state` picks the login it ends (single use, at most
//!   [`LINK_TTL`] old); `iss` is checked as for any login (RFC 9207);
//! - tokens are kept per caller and server, sealed with the operator's key
//!   ([`super::sealed`]), at most `max_logins` per server; the caller's
//!   connection refreshes them as any OAuth connection does, and one that
//!   cannot be refreshed is deleted, so the next call asks for a login;
//! - no page, error or log line holds a token, a code or a link of another
//!   caller.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};

use super::credentials::{BegunLogin, OAuthCredentials};
use super::sealed::LoginKey;
use super::store::{escaped, SealedLogin, TokenStore};
use super::OAuthError;
use crate::config::{Auth, Grant, PerCallerLogin, ServerConfig};
use crate::transport::credentials::Credentials;

/// Where login links live: `{public_url}/login/{link}`.
pub const LOGIN_PATH: &str = "/login";
/// The redirect URI's path: `{public_url}/login/callback`.
pub const LOGIN_CALLBACK_PATH: &str = "/login/callback";
/// How long a link, and a login begun from it, may wait.
pub const LINK_TTL: Duration = Duration::from_secs(600);
/// Links, and logins under way, kept at once (each).
pub const MAX_PENDING: usize = 1024;

/// A link a caller was given.
struct Link {
    server: String,
    caller: String,
    /// The URL-mode elicitation it answers.
    elicitation: String,
    expires: Instant,
}

/// A login sent to the authorization server, waiting for its redirect.
struct Flow {
    logins: Arc<CallerLogins>,
    caller: String,
    elicitation: String,
    credentials: OAuthCredentials,
    begun: BegunLogin,
    expires: Instant,
}

/// What a caller is told to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginLink {
    pub url: String,
    pub elicitation_id: String,
}

/// A login that ended well: whose, where, and the elicitation it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedInCaller {
    pub server: String,
    pub caller: String,
    pub elicitation_id: String,
    pub scopes: Vec<String>,
}

/// A stored login, as the admin lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StoredLogin {
    pub server: String,
    pub caller: String,
    pub issuer: Option<String>,
    pub scopes: Vec<String>,
    /// Seconds since the Unix epoch the access token ends at, if said.
    pub expires_at: Option<u64>,
}

/// Links and logins under way, shared by every per-caller server.
#[derive(Default)]
struct Pending {
    links: Mutex<HashMap<String, Link>>,
    flows: Mutex<HashMap<String, Flow>>,
}

/// The gateway's login desk: its public URL, the key of stored logins,
/// and every per-caller server's logins.
pub struct LoginDesk {
    public_url: String,
    key: Arc<LoginKey>,
    /// `{state dir}/logins`: a folder per server.
    dir: PathBuf,
    pending: Arc<Pending>,
    servers: Mutex<HashMap<String, Arc<CallerLogins>>>,
}

/// One per-caller server's logins.
pub struct CallerLogins {
    server: String,
    /// The server's configuration as each caller's connection uses it:
    /// authorization code, no DPoP, no `per_caller`.
    config: ServerConfig,
    max_logins: usize,
    dir: PathBuf,
    key: Arc<LoginKey>,
    public_url: String,
    pending: Arc<Pending>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl LoginDesk {
    /// The desk of a gateway reached at `public_url` (checked by the
    /// configuration), its logins under `dir`, sealed with `key`.
    pub fn new(public_url: &str, key: LoginKey, dir: PathBuf) -> LoginDesk {
        LoginDesk {
            public_url: public_url.trim_end_matches('/').to_owned(),
            key: Arc::new(key),
            dir,
            pending: Arc::default(),
            servers: Mutex::default(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The logins of `config`'s server (an OAuth server with `per_caller`),
    /// kept for the routes; `Err` names what is missing.
    pub fn server(&self, config: &ServerConfig) -> Result<Arc<CallerLogins>, OAuthError> {
        let Some(Auth::OAuth(oauth)) = &config.auth else {
            return Err(OAuthError::new(format!("server `{}` has no OAuth settings for per-caller logins", config.name)));
        };
        let per_caller = oauth.per_caller.unwrap_or_default();
        let mut caller_config = config.clone();
        let mut own = oauth.clone();
        // Each caller logs in itself; its tokens are bearer tokens (a DPoP key per caller is not kept).
        (own.grant, own.dpop, own.per_caller) = (Grant::AuthorizationCode, false, None);
        caller_config.auth = Some(Auth::OAuth(own));
        let logins = Arc::new(CallerLogins {
            server: config.name.clone(),
            config: caller_config,
            max_logins: per_caller.max_logins,
            dir: self.dir.join(escaped(&config.name)),
            key: self.key.clone(),
            public_url: self.public_url.clone(),
            pending: self.pending.clone(),
        });
        lock(&self.servers).insert(config.name.clone(), logins.clone());
        Ok(logins)
    }

    fn logins(&self, server: &str) -> Option<Arc<CallerLogins>> {
        lock(&self.servers).get(server).cloned()
    }

    /// Follows link `id`: begins its caller's login and gives the
    /// authorization URL to redirect to. The link is used up.
    pub async fn open_link(&self, id: &str) -> Result<String, OAuthError> {
        let now = Instant::now();
        let link = lock(&self.pending.links)
            .remove(id)
            .filter(|link| link.expires > now)
            .ok_or_else(|| OAuthError::new("this login link is unknown, used or expired; call the tool again for a new one"))?;
        let logins = self.logins(&link.server).ok_or_else(|| OAuthError::new(format!("server `{}` is gone", link.server)))?;
        let credentials = OAuthCredentials::new(&logins.config, Some(logins.store(&link.caller)), None)?;
        let redirect_uri = format!("{}{LOGIN_CALLBACK_PATH}", self.public_url);
        let begun = credentials.begin_login(&redirect_uri).await?;
        let url = begun.url();
        let mut flows = lock(&self.pending.flows);
        flows.retain(|_, flow| flow.expires > now);
        if flows.len() >= MAX_PENDING {
            return Err(OAuthError::new(format!("{MAX_PENDING} logins are under way at this gateway; retry in a few minutes")));
        }
        let flow = Flow { logins, caller: link.caller, elicitation: link.elicitation, credentials, begun, expires: now + LINK_TTL };
        flows.insert(flow.begun.state().to_owned(), flow);
        Ok(url)
    }

    /// Ends the login the redirect's `state` names with its `code` (or its
    /// `error`), storing the caller's tokens.
    pub async fn callback(
        &self,
        state: Option<&str>,
        code: Option<String>,
        iss: Option<&str>,
        error: Option<&str>,
    ) -> Result<LoggedInCaller, OAuthError> {
        let flow = state.and_then(|state| lock(&self.pending.flows).remove(state)).filter(|flow| flow.expires > Instant::now());
        let flow = flow.ok_or_else(|| OAuthError::new("this login is unknown or expired (or a forged redirect); start it again"))?;
        if let Some(error) = error {
            return Err(OAuthError::new(format!("the authorization server refused the login: {error}")));
        }
        let code = code.ok_or_else(|| OAuthError::new("the login's redirect carries no code"))?;
        let logins = flow.logins;
        if !logins.has_login(&flow.caller) && logins.stored() >= logins.max_logins {
            return Err(OAuthError::new(format!(
                "server `{}` already keeps {} logins, its auth.max_logins; an admin revokes unused ones (DELETE /admin/logins/…)",
                logins.server, logins.max_logins
            )));
        }
        let logged_in = flow.credentials.finish_login(flow.begun, code, iss).await?;
        tracing::info!(server = %logins.server, caller = %flow.caller, issuer = %logged_in.issuer, "a caller logged in");
        Ok(LoggedInCaller {
            server: logins.server.clone(),
            caller: flow.caller,
            elicitation_id: flow.elicitation,
            scopes: logged_in.scopes,
        })
    }

    /// Every stored login (of `server` only, when given).
    pub fn list(&self, server: Option<&str>) -> Vec<StoredLogin> {
        let servers: Vec<Arc<CallerLogins>> = lock(&self.servers).values().cloned().collect();
        let mut all: Vec<StoredLogin> =
            servers.iter().filter(|logins| server.is_none_or(|name| name == logins.server)).flat_map(|logins| logins.list()).collect();
        all.sort_by(|a, b| (&a.server, &a.caller).cmp(&(&b.server, &b.caller)));
        all
    }

    /// Deletes `caller`'s login to `server`; false when it had none.
    pub fn revoke(&self, server: &str, caller: &str) -> Result<bool, OAuthError> {
        match self.logins(server) {
            Some(logins) => logins.store(caller).forget(server),
            None => Ok(false),
        }
    }

    /// The server and the caller of link `id`, if it is live (not used up).
    pub fn link_owner(&self, id: &str) -> Option<(String, String)> {
        let now = Instant::now();
        lock(&self.pending.links).get(id).filter(|link| link.expires > now).map(|link| (link.server.clone(), link.caller.clone()))
    }

    /// Uses up link `id` without a login: the browser that opened it is not its caller's.
    pub fn burn(&self, id: &str) {
        lock(&self.pending.links).remove(id);
    }

    /// The gateway's base URL as browsers reach it.
    pub fn public_url(&self) -> &str {
        &self.public_url
    }

    /// Whether `server` takes per-caller logins here.
    pub fn serves(&self, server: &str) -> bool {
        self.logins(server).is_some()
    }

    /// A random id of 256 bits, URL-safe.
    fn random_id(random: &SystemRandom) -> Result<String, OAuthError> {
        let mut bytes = [0u8; 32];
        random.fill(&mut bytes).map_err(|_| OAuthError::new("the system's random generator failed; retry"))?;
        Ok(URL_SAFE_NO_PAD.encode(bytes))
    }
}

impl CallerLogins {
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The MCP endpoint the logins are for.
    pub fn endpoint(&self) -> &str {
        self.config.url.as_deref().unwrap_or_default()
    }

    /// `caller`'s sealed store.
    fn store(&self, caller: &str) -> TokenStore {
        TokenStore::sealed(self.dir.clone(), self.key.clone(), caller)
    }

    /// Whether `caller` has a stored login (its file exists: one that
    /// could not be refreshed was deleted).
    pub fn has_login(&self, caller: &str) -> bool {
        self.store(caller).file(&self.server).exists()
    }

    /// The credentials of `caller`'s connection: its stored login, refreshed
    /// as needed; a refusal that refreshing cannot fix deletes it.
    pub fn credentials(&self, caller: &str) -> Result<Arc<dyn Credentials>, OAuthError> {
        Ok(Arc::new(OAuthCredentials::new(&self.config, Some(self.store(caller)), None)?))
    }

    /// The link `caller` logs in by: the one it was given if it still
    /// lives, else a new one.
    pub fn link(&self, caller: &str) -> Result<LoginLink, OAuthError> {
        let now = Instant::now();
        let mut links = lock(&self.pending.links);
        links.retain(|_, link| link.expires > now);
        let url = |id: &str| format!("{}{LOGIN_PATH}/{id}", self.public_url);
        if let Some((id, link)) = links.iter().find(|(_, link)| link.server == self.server && link.caller == caller) {
            return Ok(LoginLink { url: url(id), elicitation_id: link.elicitation.clone() });
        }
        if links.len() >= MAX_PENDING {
            return Err(OAuthError::new(format!("{MAX_PENDING} login links are waiting at this gateway; retry in a few minutes")));
        }
        let random = SystemRandom::new();
        let id = LoginDesk::random_id(&random)?;
        let elicitation = LoginDesk::random_id(&random)?;
        let link =
            Link { server: self.server.clone(), caller: caller.to_owned(), elicitation: elicitation.clone(), expires: now + LINK_TTL };
        links.insert(id.clone(), link);
        Ok(LoginLink { url: url(&id), elicitation_id: elicitation })
    }

    /// How many logins are stored (those that open with the key: files of
    /// another key, after `login_key` changed, are not logins).
    pub fn stored(&self) -> usize {
        self.list().len()
    }

    /// The stored logins: each file opened (one that does not open is
    /// skipped, with a warning naming it).
    fn list(&self) -> Vec<StoredLogin> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        let mut logins = Vec::new();
        for path in entries.filter_map(Result::ok).map(|entry| entry.path()) {
            let Some(name) = path.file_name().map(|name| name.to_string_lossy().into_owned()) else { continue };
            if !name.ends_with(".login") {
                continue;
            }
            let place = format!("{}/{name}", self.server);
            let opened = std::fs::read(&path).ok().and_then(|bytes| self.key.open(&place, &bytes));
            let Some(login) = opened.and_then(|plain| serde_json::from_slice::<SealedLogin>(&plain).ok()) else {
                tracing::warn!(server = %self.server, file = %path.display(), "a stored login does not open with serve.login_key");
                continue;
            };
            let current = login.tokens.current.clone();
            let tokens = login.tokens.current().and_then(|entry| entry.tokens.clone());
            logins.push(StoredLogin {
                server: self.server.clone(),
                caller: login.caller,
                issuer: current,
                scopes: tokens.as_ref().map(|t| t.scopes.clone()).unwrap_or_default(),
                expires_at: tokens.and_then(|t| t.expires_at),
            });
        }
        logins
    }
}

/// The settings of a per-caller server, if `config` is one.
pub fn per_caller_login(config: &ServerConfig) -> Option<PerCallerLogin> {
    match &config.auth {
        Some(Auth::OAuth(oauth)) => oauth.per_caller,
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{OAuthConfig, Transport};

    fn desk(dir: &Path) -> (LoginDesk, Arc<CallerLogins>) {
        let key = LoginKey::from_base64(&base64::engine::general_purpose::STANDARD.encode([3u8; 32])).unwrap();
        let desk = LoginDesk::new("https://gw.example/", key, dir.join("logins"));
        let mut config = ServerConfig::remote("gh", Transport::Http, "http://127.0.0.1:9/mcp");
        let per_caller = Some(PerCallerLogin::default());
        config.auth = Some(Auth::OAuth(OAuthConfig { client_id: Some("gw".into()), per_caller, ..OAuthConfig::default() }));
        let logins = desk.server(&config).unwrap();
        (desk, logins)
    }

    #[test]
    fn links_are_one_per_caller_bounded_and_used_once() {
        let dir = tempfile::tempdir().unwrap();
        let (desk, logins) = desk(dir.path());
        let alice = logins.link("key:alice").unwrap();
        assert!(alice.url.starts_with("https://gw.example/login/") && alice.url.len() > 60, "{}", alice.url);
        assert_eq!(logins.link("key:alice").unwrap(), alice, "asking again while it lives gives the same link");
        assert_ne!(logins.link("key:bob").unwrap().url, alice.url);
        for n in 2..MAX_PENDING {
            logins.link(&format!("key:caller-{n}")).unwrap();
        }
        let refused = logins.link("key:one-too-many").unwrap_err().to_string();
        assert!(refused.contains("1024 login links"), "{refused}");
        assert_eq!(logins.link("key:alice").unwrap(), alice, "a caller with a live link still gets it");
        let id = alice.url.rsplit('/').next().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        // Following it uses it up, whatever happens next (here: nothing listens on port 9).
        assert!(runtime.block_on(desk.open_link(id)).is_err());
        let used = runtime.block_on(desk.open_link(id)).unwrap_err().to_string();
        assert!(used.contains("unknown, used or expired"), "{used}");
        let forged = runtime.block_on(desk.callback(Some("forged"), Some("code".into()), None, None)).unwrap_err().to_string();
        assert!(forged.contains("unknown or expired"), "{forged}");
    }

    #[test]
    fn nothing_is_stored_until_a_login_and_revoking_nothing_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let (desk, logins) = desk(dir.path());
        assert!(!logins.has_login("key:alice"));
        assert!(desk.list(None).is_empty());
        assert!(!desk.revoke("gh", "key:alice").unwrap());
        assert!(!desk.revoke("other", "key:alice").unwrap());
        assert!(desk.serves("gh") && !desk.serves("other"));
    }
}
