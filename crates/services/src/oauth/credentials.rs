//! [`OAuthCredentials`]: the OAuth 2.1 side of one remote server behind the
//! transport's [`Credentials`] seam.
//!
//! - `headers` sends the stored access token; one that expires within
//!   [`EXPIRY_MARGIN_SECS`] is refreshed first. Callers share one lock, so a
//!   token that expires while calls wait is refreshed once, and every call
//!   goes on with the new one.
//! - `refused` after a 401: discovery (from the challenge's
//!   `resource_metadata`), then a refresh, else new tokens: the
//!   grant of a machine client (client credentials, JWT bearer), a login through the
//!   configured [`Authorizer`], else [`Renewal::NeedsLogin`]. A 401 within
//!   [`RENEWAL_GRACE`] of a renewal was sent with the old token: it is
//!   retried without renewing again, unless the resource's metadata now
//!   names another authorization server (SEP-2352). The token file is read
//!   again first, so a login made meanwhile by `mcpvisor auth` is picked up.
//! - a resource that moved to another authorization server gets new tokens
//!   there, with a client of that server: nothing of the old one (refresh
//!   token, registered client) is sent to it; each issuer keeps its entry.
//! - after a 403 `insufficient_scope`: step-up to the union of the scopes
//!   held and those the challenge names (a refusal of scopes already held,
//!   just after a renewal, is retried as it is); after [`MAX_STEP_UPS`]
//!   tries for the same scopes it gives up with an error.
//!
//! - DPoP (see `dpop`): when the authorization server offers it, token
//!   requests carry proofs of the login's key, and a DPoP-bound token goes
//!   out as `Authorization: DPoP` with a proof per request; a refusal
//!   asking for a nonce the server just sent is retried with it.
//!
//! Tokens never appear in errors or logs: messages name servers, issuers
//! and scopes only.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio::sync::Mutex;

use super::challenge::BearerChallenge;
use super::discovery::{self, Discovery};
use super::dpop::{self, DpopKey, Nonces, Prover};
use super::flow::Target;
use super::grants;
use super::http::Http;
use super::login::{self, Authorizer};
use super::registration::{self, Client, ClientAuth, ClientOrigin};
use super::store::{Entry, ServerTokens, TokenStore, Tokens};
use super::OAuthError;
use crate::config::{Auth, Grant, OAuthConfig, ServerConfig};
use crate::protocol::LATEST_LEGACY_VERSION;
use crate::transport::credentials::{Challenge, Credentials, CredentialsError, Renewal, RequestLine};

/// A token this close to its end is refreshed before it is sent.
pub const EXPIRY_MARGIN_SECS: u64 = 30;
/// A refusal this soon after a renewal is taken as sent with the old token.
pub const RENEWAL_GRACE: Duration = Duration::from_secs(5);
/// Tries (step-ups, and retries of calls refused just after one) for the
/// same scopes before giving up.
pub const MAX_STEP_UPS: u32 = 3;
/// How long a login through an [`Authorizer`] may take.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The OAuth credentials of one remote server.
pub struct OAuthCredentials {
    server: String,
    endpoint: String,
    config: OAuthConfig,
    store: Option<TokenStore>,
    http: Http,
    authorizer: Option<Arc<dyn Authorizer>>,
    /// The DPoP nonces of the servers (authorization and MCP) by origin.
    nonces: Arc<Nonces>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    kept: Option<ServerTokens>,
    discovery: Option<Discovery>,
    renewed_at: Option<Instant>,
    /// The scopes of the last step-up and how often they were asked for.
    step_up: Option<(Vec<String>, u32)>,
    /// The DPoP key in use, with the stored text it was read from (`None`:
    /// made for a login whose tokens are not kept yet).
    dpop_key: Option<(Option<String>, Arc<DpopKey>)>,
}

/// A login sent to the authorization server by a gateway's login route.
pub(super) struct BegunLogin {
    discovery: Discovery,
    http: Http,
    begun: login::Begun,
}

impl BegunLogin {
    /// Where to send the user.
    pub(super) fn url(&self) -> String {
        self.begun.pending.url.to_string()
    }

    /// The `state` its redirect must carry.
    pub(super) fn state(&self) -> &str {
        self.begun.pending.state.secret()
    }
}

/// What a login obtained, for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedIn {
    pub issuer: String,
    pub scopes: Vec<String>,
}

impl OAuthCredentials {
    /// The credentials of `server` (its expanded configuration): OAuth with
    /// its `auth` settings, or with every setting at its default when it
    /// has no `auth`. Tokens are kept in `store` (`None`: in memory only).
    pub fn new(
        server: &ServerConfig,
        store: Option<TokenStore>,
        authorizer: Option<Arc<dyn Authorizer>>,
    ) -> Result<OAuthCredentials, OAuthError> {
        let config = match &server.auth {
            Some(Auth::OAuth(config)) => config.clone(),
            None => OAuthConfig::default(),
            Some(_) => return Err(OAuthError::new(format!("server {:?} has static credentials, not OAuth", server.name))),
        };
        let endpoint = server.url.clone().ok_or_else(|| OAuthError::new(format!("server {:?} has no url", server.name)))?;
        Ok(OAuthCredentials {
            server: server.name.clone(),
            endpoint,
            config,
            store,
            http: Http::new()?,
            authorizer,
            nonces: Arc::default(),
            state: Mutex::default(),
        })
    }

    /// What the transport uses for a server with `auth = { type = "oauth" }`
    /// or no `auth`: tokens in the configuration's `token_dir`, else the
    /// user's directory; logins through `authorizer` (the runtime's, given
    /// for this server), else left to the user.
    pub fn for_server(server: &ServerConfig, authorizer: Option<Arc<dyn Authorizer>>) -> Result<Arc<dyn Credentials>, CredentialsError> {
        let oauth = match &server.auth {
            Some(Auth::OAuth(config)) => Some(config),
            _ => None,
        };
        let store = match oauth.and_then(|c| c.token_dir.clone()) {
            Some(dir) => Some(TokenStore::new(dir)),
            None => TokenStore::user(|name| std::env::var(name).ok()),
        };
        let credentials = OAuthCredentials::new(server, store, authorizer).map_err(|e| CredentialsError { message: e.to_string() })?;
        Ok(Arc::new(credentials))
    }

    /// Logs in now (`mcpvisor auth`): asks the server for its challenge,
    /// discovers, and obtains tokens through `authorizer` (or the
    /// client-credentials grant), replacing any kept ones.
    pub async fn log_in(&self, authorizer: &dyn Authorizer, timeout: Duration) -> Result<LoggedIn, OAuthError> {
        let mut state = self.state.lock().await;
        let (discovery, scopes, http) = self.login_target(&mut state).await?;
        let (client, tokens) = self.obtain(&http, &discovery, &scopes, Some(authorizer), timeout).await?;
        let scopes = tokens.scopes.clone();
        self.keep(&mut state, &discovery, &client, tokens)?;
        Ok(LoggedIn { issuer: discovery.server.issuer, scopes })
    }

    /// Begins a login whose redirect comes back to `redirect_uri` (a
    /// gateway's login route): the URL to send the user to is
    /// `begun.url()`; [`OAuthCredentials::finish_login`] ends it.
    pub(super) async fn begin_login(&self, redirect_uri: &str) -> Result<BegunLogin, OAuthError> {
        let mut state = self.state.lock().await;
        let (discovery, scopes, http) = self.login_target(&mut state).await?;
        let begun = login::begin(&http, &self.config, &discovery, &scopes, redirect_uri).await?;
        Ok(BegunLogin { discovery, http, begun })
    }

    /// Ends a login begun by [`OAuthCredentials::begin_login`] with the
    /// redirect's `code` and `iss`, keeping its tokens.
    pub(super) async fn finish_login(&self, begun: BegunLogin, code: String, iss: Option<&str>) -> Result<LoggedIn, OAuthError> {
        let BegunLogin { discovery, http, begun } = begun;
        let (client, tokens) = login::finish(&http, &discovery, begun, code, iss).await?;
        let mut state = self.state.lock().await;
        self.load(&mut state)?;
        let scopes = tokens.scopes.clone();
        self.keep(&mut state, &discovery, &client, tokens)?;
        Ok(LoggedIn { issuer: discovery.server.issuer, scopes })
    }

    /// What a login needs: the server's challenge, discovery made afresh,
    /// the scopes to ask for, and the client of token requests.
    async fn login_target(&self, state: &mut State) -> Result<(Discovery, Vec<String>, Http), OAuthError> {
        let challenge = self.probe().await?;
        self.load(state)?;
        state.discovery = None;
        let discovery = self.discover(state, challenge.resource_metadata.as_deref()).await?;
        let mut wanted = challenge.scopes();
        if let Some(entry) = self.entry(state, &discovery.server.issuer) {
            merge_scopes(&mut wanted, &entry.wanted_scopes);
        }
        let scopes = discovery.scopes(&self.config.scopes, &wanted);
        let http = self.token_http(state, &discovery)?;
        Ok((discovery, scopes, http))
    }

    /// The challenge of an unauthenticated request to the server (empty
    /// when it does not refuse one).
    async fn probe(&self) -> Result<BearerChallenge, OAuthError> {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LATEST_LEGACY_VERSION, "capabilities": {}, "clientInfo": {"name": "mcpvisor", "version": env!("CARGO_PKG_VERSION")}}});
        let response = self
            .http
            .client()
            .post(&self.endpoint)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| OAuthError::new(format!("cannot reach server {:?}: {}", self.server, e.without_url())))?;
        let header = response.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).unwrap_or("");
        Ok(BearerChallenge::parse(header))
    }

    fn load(&self, state: &mut State) -> Result<(), OAuthError> {
        if state.kept.is_none() {
            state.kept = Some(match &self.store {
                Some(store) => store.load(&self.server)?,
                None => ServerTokens::default(),
            });
        }
        Ok(())
    }

    /// The kept login with `issuer`, if it is for this endpoint.
    fn entry<'s>(&self, state: &'s State, issuer: &str) -> Option<&'s Entry> {
        let entry = state.kept.as_ref()?.issuers.get(issuer)?;
        let resource = entry.resource.trim_end_matches('/');
        let endpoint = self.endpoint.trim_end_matches('/');
        let covered = endpoint == resource || endpoint.strip_prefix(resource).is_some_and(|rest| rest.starts_with('/'));
        covered.then_some(entry)
    }

    fn current_entry<'s>(&self, state: &'s State) -> Option<(&'s str, &'s Entry)> {
        let issuer = state.kept.as_ref()?.current.as_deref()?;
        Some((issuer, self.entry(state, issuer)?))
    }

    async fn discover(&self, state: &mut State, resource_metadata: Option<&str>) -> Result<Discovery, OAuthError> {
        if let Some(discovery) = &state.discovery {
            return Ok(discovery.clone());
        }
        let discovery = discovery::discover(&self.http, &self.endpoint, resource_metadata).await?;
        state.discovery = Some(discovery.clone());
        Ok(discovery)
    }

    /// What refreshing the current login needs: the discovery made, else
    /// only the current issuer's metadata (not kept: it lacks the
    /// resource's metadata a login would need).
    async fn refresh_endpoints(&self, state: &mut State) -> Result<Discovery, OAuthError> {
        if let Some(discovery) = &state.discovery {
            return Ok(discovery.clone());
        }
        let current = self.current_entry(state).map(|(issuer, entry)| (issuer.to_owned(), entry.resource.clone()));
        if let Some((issuer, resource)) = current {
            // A 2025-03-26 server's issuer need not be where its metadata is:
            // then discovery finds it again.
            if let Ok(server) = discovery::server_metadata(&self.http, &issuer).await {
                return Ok(Discovery { resource, resource_metadata: Default::default(), server });
            }
        }
        self.discover(state, None).await
    }

    /// The client that holds the kept tokens of `entry`.
    fn client_of(&self, entry: &Entry, discovery: &Discovery) -> Option<Client> {
        if let Some(client) = registration::configured(&self.config, &discovery.server) {
            return Some(client);
        }
        if let Some(stored) = &entry.client {
            return Some(Client::stored(stored));
        }
        let url = self.config.client_metadata_url.clone()?;
        Some(Client { client_id: url, auth: ClientAuth::None, origin: ClientOrigin::MetadataDocument })
    }

    /// The DPoP key of the login with `issuer`: the kept one, else the one
    /// made for it, else a new one.
    fn dpop_key(&self, state: &mut State, issuer: &str) -> Result<Arc<DpopKey>, OAuthError> {
        let stored = self.entry(state, issuer).and_then(|entry| entry.dpop_key.clone());
        let key = match (&state.dpop_key, stored) {
            (Some((Some(text), key)), Some(stored)) if *text == stored => return Ok(key.clone()),
            (_, Some(stored)) => (Some(stored.clone()), Arc::new(DpopKey::from_stored(&stored)?)),
            (Some((None, key)), None) => return Ok(key.clone()),
            (_, None) => (None, Arc::new(DpopKey::generate()?)),
        };
        state.dpop_key = Some(key.clone());
        Ok(key.1)
    }

    /// The client of token requests to `discovery`'s server: with DPoP
    /// proofs when it offers DPoP or the login already has a key.
    fn token_http(&self, state: &mut State, discovery: &Discovery) -> Result<Http, OAuthError> {
        let issuer = &discovery.server.issuer;
        let has_key = self.entry(state, issuer).is_some_and(|entry| entry.dpop_key.is_some());
        if !(discovery.wants_dpop(&self.config) || (self.config.dpop && has_key)) {
            return Ok(self.http.clone());
        }
        let key = self.dpop_key(state, issuer)?;
        Ok(self.http.with_dpop(Prover { key, nonces: self.nonces.clone() }))
    }

    /// New tokens for `scopes`: a machine grant (client credentials, JWT bearer), or a login.
    async fn obtain(
        &self,
        http: &Http,
        discovery: &Discovery,
        scopes: &[String],
        authorizer: Option<&dyn Authorizer>,
        timeout: Duration,
    ) -> Result<(Client, Tokens), OAuthError> {
        if self.config.grant.is_machine() {
            let client = registration::configured(&self.config, &discovery.server).ok_or_else(|| {
                OAuthError::new("this grant needs auth.client_id (with a secret or a private key for client credentials)")
            })?;
            let tokens = match self.config.grant {
                Grant::JwtBearer => grants::jwt_bearer(http, &self.config, discovery, &client, scopes).await?,
                _ => {
                    let target = Target { server: &discovery.server, resource: &discovery.resource, client: &client };
                    target.client_credentials(http, scopes).await?
                }
            };
            return Ok((client, tokens));
        }
        let authorizer = authorizer.ok_or_else(|| OAuthError::new("a login is needed"))?;
        login::login(http, &self.config, discovery, scopes, authorizer, timeout).await
    }

    /// Keeps new tokens as the current login, on disk when there is a store.
    fn keep(&self, state: &mut State, discovery: &Discovery, client: &Client, tokens: Tokens) -> Result<(), OAuthError> {
        let issuer = discovery.server.issuer.clone();
        let wanted_scopes = tokens.scopes.clone();
        let dpop_key = match (&mut state.dpop_key, tokens.dpop) {
            (Some((stored, key)), true) => Some(stored.get_or_insert_with(|| key.stored()).clone()),
            _ => None,
        };
        let entry =
            Entry { resource: discovery.resource.clone(), client: client.to_store(), tokens: Some(tokens), wanted_scopes, dpop_key };
        let kept = state.kept.get_or_insert_with(ServerTokens::default);
        kept.issuers.insert(issuer.clone(), entry);
        kept.current = Some(issuer);
        state.renewed_at = Some(Instant::now());
        self.save(state)
    }

    fn save(&self, state: &State) -> Result<(), OAuthError> {
        match (&self.store, &state.kept) {
            (Some(store), Some(kept)) => store.save(&self.server, kept),
            _ => Ok(()),
        }
    }

    /// The access token to send, refreshed first when it is about to end,
    /// and the DPoP key it is bound to, if it is.
    async fn access_token(&self) -> Result<Option<(String, Option<Arc<DpopKey>>)>, OAuthError> {
        let mut state = self.state.lock().await;
        self.load(&mut state)?;
        let Some((_, entry)) = self.current_entry(&state) else { return Ok(None) };
        let Some(tokens) = entry.tokens.clone() else { return Ok(None) };
        if tokens.expires_within(EXPIRY_MARGIN_SECS) {
            match self.renew(&mut state, &tokens.scopes).await {
                Ok(Some(_)) => {}
                Ok(None) => return Ok(None),
                Err(error) => {
                    tracing::warn!(server = %self.server, "the OAuth token expired and could not be renewed: {error}");
                    return Ok(None);
                }
            }
        }
        let Some((issuer, entry)) = self.current_entry(&state) else { return Ok(None) };
        let Some(tokens) = entry.tokens.clone() else { return Ok(None) };
        let issuer = issuer.to_owned();
        let key = if tokens.dpop { Some(self.dpop_key(&mut state, &issuer)?) } else { None };
        Ok(Some((tokens.access_token, key)))
    }

    /// Renews the current login without a user: refresh token, else the
    /// machine grant again. `None` when neither applies.
    async fn renew(&self, state: &mut State, scopes: &[String]) -> Result<Option<String>, OAuthError> {
        let discovery = self.refresh_endpoints(state).await?;
        let Some((issuer, entry)) = self.current_entry(state) else { return Ok(None) };
        if issuer != discovery.server.issuer {
            // The resource moved to another authorization server: nothing of
            // the old one (refresh token, client) is sent to the new one.
            return Ok(None);
        }
        let entry = entry.clone();
        if let (Some(refresh), Some(client)) =
            (entry.tokens.as_ref().and_then(|t| t.refresh_token.clone()), self.client_of(&entry, &discovery))
        {
            let target = Target { server: &discovery.server, resource: &discovery.resource, client: &client };
            let http = self.token_http(state, &discovery)?;
            match target.refresh(&http, &refresh, scopes).await {
                Ok(tokens) => {
                    let access = tokens.access_token.clone();
                    self.keep(state, &discovery, &client, tokens)?;
                    return Ok(Some(access));
                }
                Err(error) if !self.config.grant.is_machine() => {
                    self.drop_tokens(state)?;
                    return Err(error);
                }
                Err(_) => {}
            }
        }
        if self.config.grant.is_machine() {
            let http = self.token_http(state, &discovery)?;
            let (client, tokens) = self.obtain(&http, &discovery, scopes, None, LOGIN_TIMEOUT).await?;
            let access = tokens.access_token.clone();
            self.keep(state, &discovery, &client, tokens)?;
            return Ok(Some(access));
        }
        Ok(None)
    }

    /// Whether a refusal of a token just obtained is because the resource
    /// now names another authorization server (SEP-2352): its metadata is
    /// read again. Metadata that cannot be read says nothing: the refusal
    /// is then taken as sent with the old token.
    async fn moved(&self, state: &State, resource_metadata: Option<&str>) -> bool {
        let Some(url) = resource_metadata else { return false };
        let Some(current) = state.kept.as_ref().and_then(|kept| kept.current.clone()) else { return false };
        let Ok(discovery) = discovery::discover(&self.http, &self.endpoint, Some(url)).await else { return false };
        if discovery.server.issuer == current {
            return false;
        }
        tracing::info!(server = %self.server, "the server moved from the authorization server {current} to {}", discovery.server.issuer);
        true
    }

    /// Forgets the current tokens (they were refused and cannot be renewed).
    fn drop_tokens(&self, state: &mut State) -> Result<(), OAuthError> {
        let Some(kept) = state.kept.as_mut() else { return Ok(()) };
        if let Some(entry) = kept.current.clone().and_then(|issuer| kept.issuers.get_mut(&issuer)) {
            entry.tokens = None;
        }
        self.save(state)
    }

    async fn after_refusal(&self, challenge: Challenge) -> Result<Renewal, OAuthError> {
        let parsed = BearerChallenge::parse(challenge.www_authenticate.as_deref().unwrap_or(""));
        if parsed.error.as_deref() == Some(dpop::USE_NONCE) && self.nonces.get(&challenge.resource).is_some() {
            // The nonce came with the refusal (`nonce_offered`): the next proof carries it.
            return Ok(Renewal::Retry);
        }
        let mut state = self.state.lock().await;
        self.load(&mut state)?;
        let held: Vec<String> =
            self.current_entry(&state).and_then(|(_, e)| e.tokens.as_ref()).map(|t| t.scopes.clone()).unwrap_or_default();
        let recently_renewed = state.renewed_at.is_some_and(|at| at.elapsed() < RENEWAL_GRACE);
        if challenge.status == 403 {
            if !parsed.is_insufficient_scope() {
                return Ok(Renewal::NeedsLogin {
                    message: format!("server {:?} refuses access (403) with the credentials it was given", self.server),
                });
            }
            let challenged = parsed.scopes();
            let mut wanted = held.clone();
            merge_scopes(&mut wanted, &challenged);
            let tries = match &state.step_up {
                Some((scopes, tries)) if *scopes == wanted => tries + 1,
                _ => 1,
            };
            if tries > MAX_STEP_UPS {
                return Err(OAuthError::new(format!(
                    "server {:?} still answers insufficient_scope after {MAX_STEP_UPS} tries with the scopes {:?}; giving up",
                    self.server,
                    wanted.join(" ")
                )));
            }
            state.step_up = Some((wanted.clone(), tries));
            if recently_renewed && challenged.iter().all(|scope| held.contains(scope)) {
                return Ok(Renewal::Retry);
            }
            let discovery = self.discover(&mut state, parsed.resource_metadata.as_deref()).await?;
            return self.new_tokens(&mut state, &discovery, &wanted).await;
        }
        if recently_renewed && !self.moved(&state, parsed.resource_metadata.as_deref()).await {
            return Ok(Renewal::Retry);
        }
        // A login made since by another process (`mcpvisor auth`) is on disk.
        let sent = self.current_entry(&state).and_then(|(_, e)| e.tokens.as_ref()).map(|t| t.access_token.clone());
        if self.store.is_some() {
            state.kept = None;
            self.load(&mut state)?;
        }
        let kept = self.current_entry(&state).and_then(|(_, e)| e.tokens.as_ref()).map(|t| t.access_token.clone());
        if kept.is_some() && kept != sent {
            return Ok(Renewal::Retry);
        }
        if parsed.resource_metadata.is_some() {
            state.discovery = None;
        }
        let discovery = self.discover(&mut state, parsed.resource_metadata.as_deref()).await?;
        let has_refresh = self.current_entry(&state).and_then(|(_, e)| e.tokens.as_ref()).is_some_and(|t| t.refresh_token.is_some());
        if has_refresh {
            match self.renew(&mut state, &held).await {
                Ok(Some(_)) => return Ok(Renewal::Retry),
                Ok(None) => {}
                Err(error) => tracing::info!(server = %self.server, "refreshing the OAuth token failed: {error}"),
            }
        }
        let scopes = discovery.scopes(&self.config.scopes, &parsed.scopes());
        self.new_tokens(&mut state, &discovery, &scopes).await
    }

    /// Tokens for `scopes` without the user where possible; else what the
    /// user must do.
    async fn new_tokens(&self, state: &mut State, discovery: &Discovery, scopes: &[String]) -> Result<Renewal, OAuthError> {
        let authorizer = self.authorizer.as_deref();
        if self.config.grant.is_machine() || authorizer.is_some() {
            let http = self.token_http(state, discovery)?;
            let (client, tokens) = self.obtain(&http, discovery, scopes, authorizer, LOGIN_TIMEOUT).await?;
            self.keep(state, discovery, &client, tokens)?;
            return Ok(Renewal::Retry);
        }
        let issuer = discovery.server.issuer.clone();
        let kept = state.kept.get_or_insert_with(ServerTokens::default);
        let entry = kept.issuers.entry(issuer.clone()).or_insert_with(|| Entry {
            resource: discovery.resource.clone(),
            client: None,
            tokens: None,
            wanted_scopes: Vec::new(),
            dpop_key: None,
        });
        entry.wanted_scopes = scopes.to_vec();
        kept.current = Some(issuer.clone());
        self.save(state)?;
        let scopes = if scopes.is_empty() { String::new() } else { format!(" for the scopes {:?}", scopes.join(" ")) };
        Ok(Renewal::NeedsLogin { message: format!("server {:?} needs a user to log in with {issuer}{scopes}", self.server) })
    }
}

/// Adds to `scopes` those of `more` it lacks, keeping the order.
fn merge_scopes(scopes: &mut Vec<String>, more: &[String]) {
    for scope in more {
        if !scopes.contains(scope) {
            scopes.push(scope.clone());
        }
    }
}

impl Credentials for OAuthCredentials {
    fn headers(&self, request: RequestLine<'_>) -> BoxFuture<'_, Result<Vec<(String, String)>, CredentialsError>> {
        let (method, url) = (request.method.to_owned(), request.url.to_owned());
        Box::pin(async move {
            let failed = |e: OAuthError| CredentialsError { message: e.to_string() };
            Ok(match self.access_token().await.map_err(failed)? {
                None => Vec::new(),
                Some((token, None)) => vec![("Authorization".to_owned(), format!("Bearer {token}"))],
                Some((token, Some(key))) => {
                    let proof = key.proof(&method, &url, Some(&token), self.nonces.get(&url).as_deref()).map_err(failed)?;
                    vec![("Authorization".to_owned(), format!("DPoP {token}")), ("DPoP".to_owned(), proof)]
                }
            })
        })
    }

    fn nonce_offered(&self, url: &str, nonce: &str) {
        self.nonces.offer(url, nonce);
    }

    fn refused(&self, challenge: Challenge) -> BoxFuture<'_, Result<Renewal, CredentialsError>> {
        Box::pin(async move { self.after_refusal(challenge).await.map_err(|e| CredentialsError { message: e.to_string() }) })
    }
}
