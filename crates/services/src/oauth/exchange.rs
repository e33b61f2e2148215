//! Token exchange for a server that acts as each caller of the gateway
//! (`auth = { type = "token_exchange" }`): the caller's own access token is
//! exchanged at the issuer (RFC 8693) for a token meant for this server,
//! and the catalog is listed with a client-credentials token of the same
//! client, audience and scopes. Both grants go through the JWT-bearer
//! grant's [`TokenRequest`] (same client, same body limit, same masking).
//!
//! Invariants:
//! - one token per (caller, server), kept until shortly before it expires
//!   (the smaller of [`EXPIRY_MARGIN_SECS`] and a quarter of its life),
//!   never past the caller's own token; concurrent calls of one caller
//!   share one exchange (a lock per caller, held across the request);
//! - the caller's token goes only to the token endpoint, never to the
//!   server: what the server gets is the exchanged token or nothing;
//! - no error or log line holds a token or the client secret; a refusal
//!   says the issuer's error code and description, masked.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use futures::future::BoxFuture;
use serde::Deserialize;

use super::credentials::EXPIRY_MARGIN_SECS;
use super::grants::{TokenRequest, TOKEN_EXCHANGE};
use super::http::{require_secure, Http};
use super::OAuthError;
use crate::caller_token::CallerTokens;
use crate::config::{Auth, ServerConfig, TokenExchangeConfig};
use crate::transport::credentials::{Challenge, Credentials, CredentialsError, Renewal, RequestLine};

const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";
/// How long a token whose answer says no `expires_in` is used.
const UNDATED_LIFETIME: Duration = Duration::from_secs(60);
/// The key of the gateway's own (catalog) token among the callers' keys
/// (theirs all have a `kind:` prefix, see `Identity::caller_key`).
const GATEWAY: &str = "gateway";

/// A token obtained for the server; its value is never shown.
pub struct Exchanged {
    token: String,
    /// Who the server sees: the token's `sub` when it is a JWT, else the
    /// subject it was asked for.
    pub subject: String,
    /// The audience (or resource) it was asked for.
    pub audience: String,
    /// The scopes granted, as the issuer said them.
    pub scope: Option<String>,
    fresh_until: Instant,
}

impl std::fmt::Debug for Exchanged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchanged").field("subject", &self.subject).field("audience", &self.audience).finish_non_exhaustive()
    }
}

/// The token answer of RFC 8693 §2.2.1 (and of RFC 6749 §5.1).
#[derive(Deserialize)]
struct Answer {
    access_token: String,
    issued_token_type: Option<String>,
    token_type: Option<String>,
    expires_in: Option<u64>,
    scope: Option<String>,
}

type Slot = Arc<tokio::sync::Mutex<Option<Arc<Exchanged>>>>;

/// The exchanges of one server.
pub struct Exchanger {
    server: String,
    settings: TokenExchangeConfig,
    /// `resource` as sent: the configured one, else the server's URL when no audience is set.
    resource: Option<String>,
    http: Http,
    /// The token endpoint, once known.
    endpoint: tokio::sync::OnceCell<String>,
    /// Where the gateway keeps each caller's latest token.
    book: CallerTokens,
    slots: Mutex<HashMap<String, Slot>>,
    exchanges: AtomicU64,
}

impl std::fmt::Debug for Exchanger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchanger").field("server", &self.server).field("client_id", &self.settings.client_id).finish_non_exhaustive()
    }
}

impl Exchanger {
    /// The exchanger of `config` (expanded), whose callers' tokens are in
    /// `book`; an error names the server and the setting to fix.
    pub fn new(config: &ServerConfig, book: CallerTokens) -> Result<Arc<Exchanger>, OAuthError> {
        let Some(Auth::TokenExchange(settings)) = &config.auth else {
            return Err(OAuthError::new(format!("server `{}` is not set to auth type \"token_exchange\"", config.name)));
        };
        let at = settings.token_endpoint.as_deref().or(settings.issuer.as_deref()).unwrap_or_default();
        require_secure(at, &format!("server `{}`: auth.issuer (or auth.token_endpoint)", config.name))?;
        let resource = settings.resource.clone().or_else(|| settings.audience.is_none().then(|| config.url.clone()).flatten());
        let endpoint = tokio::sync::OnceCell::new_with(settings.token_endpoint.clone());
        Ok(Arc::new(Exchanger {
            server: config.name.clone(),
            settings: (**settings).clone(),
            resource,
            http: Http::new()?,
            endpoint,
            book,
            slots: Mutex::new(HashMap::new()),
            exchanges: AtomicU64::new(0),
        }))
    }

    /// Token requests made so far (exchanges and the gateway's own).
    pub fn exchanges(&self) -> u64 {
        self.exchanges.load(Ordering::Relaxed)
    }

    /// The token of `caller` (an `Identity::caller_key`, whose subject is
    /// `subject`) for this server: the kept one, or a new exchange of the
    /// caller's latest token.
    pub async fn for_caller(&self, caller: &str, subject: &str) -> Result<Arc<Exchanged>, OAuthError> {
        self.token(caller, Some(subject)).await
    }

    /// Drops `caller`'s kept token (the server refused it).
    pub fn invalidate(&self, caller: &str) {
        let Some(slot) = self.lock().get(caller).cloned() else { return };
        // A slot being filled right now gets a new token anyway.
        if let Ok(mut kept) = slot.try_lock() {
            *kept = None;
        };
    }

    /// Forgets `caller` (its connection ended).
    pub fn forget(&self, caller: &str) {
        self.lock().remove(caller);
    }

    /// The credentials of `caller`'s own connection to the server.
    pub fn caller_credentials(self: &Arc<Self>, caller: &str, subject: &str) -> Arc<dyn Credentials> {
        Arc::new(ExchangedCredentials { exchanger: self.clone(), caller: caller.to_owned(), subject: Some(subject.to_owned()) })
    }

    /// The credentials of the server's catalog connection (the gateway's own token).
    pub fn gateway_credentials(self: &Arc<Self>) -> Arc<dyn Credentials> {
        Arc::new(ExchangedCredentials { exchanger: self.clone(), caller: GATEWAY.to_owned(), subject: None })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    async fn token(&self, key: &str, subject: Option<&str>) -> Result<Arc<Exchanged>, OAuthError> {
        let slot = self.lock().entry(key.to_owned()).or_default().clone();
        let mut kept = slot.lock().await;
        if let Some(token) = kept.as_ref().filter(|token| Instant::now() < token.fresh_until) {
            return Ok(token.clone());
        }
        let token = Arc::new(self.request(key, subject).await?);
        *kept = Some(token.clone());
        Ok(token)
    }

    /// One token request: the exchange of `key`'s token, or (no `subject`) client credentials.
    async fn request(&self, key: &str, subject: Option<&str>) -> Result<Exchanged, OAuthError> {
        let caller_token = match subject {
            Some(_) => Some(self.book.latest(key).ok_or_else(|| {
                OAuthError::new(format!(
                    "server `{}` acts as each caller, and the gateway holds no current token of yours to exchange (it expired); \
                     call again with a fresh access token of the gateway's issuer",
                    self.server
                ))
            })?),
            None => None,
        };
        let endpoint = self.endpoint().await?;
        let settings = &self.settings;
        let mut form = match &caller_token {
            Some(token) => vec![
                ("grant_type", TOKEN_EXCHANGE.to_owned()),
                ("subject_token", token.expose().to_owned()),
                ("subject_token_type", ACCESS_TOKEN.to_owned()),
                ("requested_token_type", ACCESS_TOKEN.to_owned()),
            ],
            None => vec![("grant_type", "client_credentials".to_owned())],
        };
        form.extend(settings.audience.iter().map(|audience| ("audience", audience.clone())));
        form.extend(self.resource.iter().map(|resource| ("resource", resource.clone())));
        if !settings.scopes.is_empty() {
            form.push(("scope", settings.scopes.join(" ")));
        }
        let what = if caller_token.is_some() { "the token exchange (RFC 8693)" } else { "the client credentials grant" };
        let request = TokenRequest { endpoint: &endpoint, party: &endpoint, what };
        let basic = Some((settings.client_id.as_str(), settings.client_secret.as_str()));
        let secrets = [caller_token.as_ref().map(|token| token.expose()), Some(settings.client_secret.as_str())];
        self.exchanges.fetch_add(1, Ordering::Relaxed);
        let answer: Answer = request.send(&self.http, &form, basic, &secrets).await.map_err(|refused| {
            OAuthError::new(format!(
                "server `{}` acts as each caller through a token exchange, which failed: {refused}. Ask the issuer's operator to let \
                 client `{}` exchange your tokens for this server, or check the server's auth.audience and auth.scopes",
                self.server, settings.client_id
            ))
        })?;
        if answer.issued_token_type.as_deref().is_some_and(|kind| kind != ACCESS_TOKEN)
            || answer.token_type.as_deref().is_some_and(|kind| !kind.eq_ignore_ascii_case("bearer"))
        {
            return Err(OAuthError::new(format!(
                "{endpoint} issued something other than a bearer access token for server `{}` ({} / {}); the server cannot take it",
                self.server,
                answer.issued_token_type.as_deref().unwrap_or("-"),
                answer.token_type.as_deref().unwrap_or("-")
            )));
        }
        let lifetime = answer.expires_in.map_or(UNDATED_LIFETIME, Duration::from_secs);
        let margin = Duration::from_secs(EXPIRY_MARGIN_SECS).min(lifetime / 4);
        let mut fresh_until = Instant::now() + lifetime - margin;
        if let Some(token) = &caller_token {
            fresh_until = fresh_until.min(token.until());
        }
        let subject = jwt_subject(&answer.access_token).or(subject.map(str::to_owned)).unwrap_or_else(|| settings.client_id.clone());
        let audience = settings.audience.clone().or_else(|| self.resource.clone()).unwrap_or_default();
        Ok(Exchanged { token: answer.access_token, subject, audience, scope: answer.scope, fresh_until })
    }

    async fn endpoint(&self) -> Result<String, OAuthError> {
        let endpoint = self
            .endpoint
            .get_or_try_init(|| async {
                let issuer = self.settings.issuer.as_deref().unwrap_or_default();
                let metadata = super::discovery::server_metadata(&self.http, issuer).await.map_err(|e| {
                    OAuthError::new(format!("server `{}`: the token endpoint of its auth.issuer cannot be found: {e}", self.server))
                })?;
                require_secure(&metadata.token_endpoint, "the issuer's token_endpoint")?;
                Ok::<_, OAuthError>(metadata.token_endpoint)
            })
            .await?;
        Ok(endpoint.clone())
    }
}

/// The `sub` of a JWT, read without checking it (for the audit log only).
fn jwt_subject(token: &str) -> Option<String> {
    let claims = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(claims.trim_end_matches('=')).ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("sub")?.as_str().map(str::to_owned)
}

/// The credentials of one connection of a token-exchange server.
struct ExchangedCredentials {
    exchanger: Arc<Exchanger>,
    caller: String,
    /// The caller's subject; `None` for the gateway's own connection.
    subject: Option<String>,
}

impl Credentials for ExchangedCredentials {
    fn headers(&self, _request: RequestLine<'_>) -> BoxFuture<'_, Result<Vec<(String, String)>, CredentialsError>> {
        Box::pin(async move {
            let token = self.exchanger.token(&self.caller, self.subject.as_deref()).await;
            let token = token.map_err(|e| CredentialsError { message: e.message })?;
            Ok(vec![("Authorization".to_owned(), format!("Bearer {}", token.token))])
        })
    }

    fn refused(&self, _challenge: Challenge) -> BoxFuture<'_, Result<Renewal, CredentialsError>> {
        self.exchanger.invalidate(&self.caller);
        Box::pin(async { Ok(Renewal::Retry) })
    }
}

/// Credentials that refuse with `message`: those of a token-exchange
/// server whose exchanger could not be made (its connection fails saying why).
pub fn refusing(message: String) -> Arc<dyn Credentials> {
    struct Refusing(String);
    impl Credentials for Refusing {
        fn headers(&self, _request: RequestLine<'_>) -> BoxFuture<'_, Result<Vec<(String, String)>, CredentialsError>> {
            Box::pin(async move { Err(CredentialsError { message: self.0.clone() }) })
        }
        fn refused(&self, _challenge: Challenge) -> BoxFuture<'_, Result<Renewal, CredentialsError>> {
            Box::pin(async move { Err(CredentialsError { message: self.0.clone() }) })
        }
    }
    Arc::new(Refusing(message))
}
