//! Token exchange for a server that acts as each caller of the gateway
//! (`auth = { type = "token_exchange" }`): the caller's own access token is
//! exchanged at the issuer (RFC 8693) for a token meant for this server,
//! and the catalog is listed with a client-credentials token of the same
//! client, audience and scopes. Both grants go through the JWT-bearer
//! grant's [`TokenRequest`] (same client, same body limit, same masking).
//!
//! With `authorization_server` (enterprise-managed authorization, SEP-990)
//! a caller's token is obtained in two steps, the ones a user's login takes
//! in `grants` ([`IdJagRequest`], [`redeem`]): the caller's access token is
//! exchanged at the issuer for an ID-JAG whose audience is the server's
//! authorization server and whose resource is the server; the ID-JAG is
//! redeemed there by the JWT-bearer grant (RFC 7523), the gateway
//! authenticating as its client at that server. The catalog is listed with
//! a client-credentials token of that client. Everything below holds for
//! the two steps as one: one flow per (caller, server) at a time, its
//! result kept, a refusal at either step ends it.
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

use futures::future::BoxFuture;
use serde::Deserialize;

use super::credentials::EXPIRY_MARGIN_SECS;
use super::discovery::ServerMetadata;
use super::grants::{redeem, IdJagRequest, TokenRequest, ACCESS_TOKEN, TOKEN_EXCHANGE};
use super::http::{require_secure, Http};
use super::registration::{Client, ClientAuth, ClientOrigin};
use super::OAuthError;
use crate::caller_token::{CallerToken, CallerTokens};
use crate::config::{Auth, ServerConfig, TokenExchangeConfig};
use crate::transport::credentials::{Challenge, Credentials, CredentialsError, Renewal, RequestLine};
/// How long a token whose answer says no `expires_in` is used.
const UNDATED_LIFETIME: Duration = Duration::from_secs(60);
/// The longest a token is kept, whatever its `expires_in` says.
const MAX_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// The key of the gateway's own (catalog) token among the callers' keys
/// (theirs all have a `kind:` prefix, see `Identity::grant_key`).
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

/// The server's own authorization server, which redeems ID-JAGs.
struct IdJagServer {
    /// Its issuer identifier, as configured.
    issuer: String,
    /// The gateway as its client (HTTP Basic).
    client_id: String,
    client_secret: String,
    /// Its metadata (RFC 8414), once known.
    metadata: tokio::sync::OnceCell<ServerMetadata>,
}

impl IdJagServer {
    fn client(&self) -> Client {
        let auth = ClientAuth::SecretBasic(self.client_secret.clone());
        Client { client_id: self.client_id.clone(), auth, origin: ClientOrigin::Configured }
    }
}

/// The exchanges of one server.
pub struct Exchanger {
    server: String,
    settings: TokenExchangeConfig,
    /// `resource` as sent: the configured one, else the server's URL when no audience is set.
    resource: Option<String>,
    http: Http,
    /// The token endpoint, once known.
    endpoint: tokio::sync::OnceCell<String>,
    /// Enterprise-managed authorization: where ID-JAGs are redeemed.
    id_jag: Option<IdJagServer>,
    /// Where the gateway keeps each caller's latest token.
    book: CallerTokens,
    slots: Mutex<HashMap<String, Slot>>,
    exchanges: AtomicU64,
}

impl std::fmt::Debug for Exchanger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchanger")
            .field("server", &self.server)
            .field("client_id", &self.settings.client_id)
            .field("authorization_server", &self.id_jag.as_ref().map(|server| &server.issuer))
            .finish_non_exhaustive()
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
        let id_jag = match &settings.authorization_server {
            Some(server) => {
                require_secure(&server.issuer, &format!("server `{}`: auth.authorization_server.issuer", config.name))?;
                if resource.is_none() {
                    return Err(OAuthError::new(format!(
                        "server `{}` has no url nor auth.resource: an ID-JAG names the server it is for; set auth.resource",
                        config.name
                    )));
                }
                Some(IdJagServer {
                    issuer: server.issuer.clone(),
                    client_id: server.client_id.clone(),
                    client_secret: server.client_secret.clone(),
                    metadata: tokio::sync::OnceCell::new(),
                })
            }
            None => None,
        };
        Ok(Arc::new(Exchanger {
            server: config.name.clone(),
            settings: (**settings).clone(),
            resource,
            http: Http::new()?,
            endpoint,
            id_jag,
            book,
            slots: Mutex::new(HashMap::new()),
            exchanges: AtomicU64::new(0),
        }))
    }

    /// Tokens asked for so far (exchanges, an ID-JAG's two steps counted
    /// once, and the gateway's own).
    pub fn exchanges(&self) -> u64 {
        self.exchanges.load(Ordering::Relaxed)
    }

    /// The token of `caller` (an `Identity::grant_key`, whose subject is
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
        match self.request(key, subject).await {
            Ok(token) => {
                let token = Arc::new(token);
                *kept = Some(token.clone());
                Ok(token)
            }
            Err(error) => {
                // A caller the issuer refuses leaves nothing behind.
                drop(kept);
                self.lock().remove(key);
                Err(error)
            }
        }
    }

    /// One token: the exchange of `key`'s token, or (no `subject`) client credentials.
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
        self.exchanges.fetch_add(1, Ordering::Relaxed);
        let (answer, party) = match &self.id_jag {
            None => self.at_issuer(caller_token.as_ref()).await?,
            Some(server) => self.by_id_jag(server, caller_token.as_ref()).await?,
        };
        if answer.issued_token_type.as_deref().is_some_and(|kind| kind != ACCESS_TOKEN)
            || answer.token_type.as_deref().is_some_and(|kind| !kind.eq_ignore_ascii_case("bearer"))
        {
            return Err(OAuthError::new(format!(
                "{party} issued something other than a bearer access token for server `{}` ({} / {}); the server cannot take it",
                self.server,
                answer.issued_token_type.as_deref().unwrap_or("-"),
                answer.token_type.as_deref().unwrap_or("-")
            )));
        }
        let lifetime = answer.expires_in.map_or(UNDATED_LIFETIME, Duration::from_secs).min(MAX_LIFETIME);
        let margin = Duration::from_secs(EXPIRY_MARGIN_SECS).min(lifetime / 4);
        let mut fresh_until = Instant::now() + lifetime - margin;
        if let Some(token) = &caller_token {
            fresh_until = fresh_until.min(token.until());
        }
        let settings = &self.settings;
        let subject = jwt_subject(&answer.access_token).or(subject.map(str::to_owned)).unwrap_or_else(|| settings.client_id.clone());
        let audience = settings.audience.clone().or_else(|| self.resource.clone()).unwrap_or_default();
        Ok(Exchanged { token: answer.access_token, subject, audience, scope: answer.scope, fresh_until })
    }

    /// `form` with what every token asks for: the audience, the resource and the scopes.
    fn for_server(&self, mut form: Vec<(&'static str, String)>) -> Vec<(&'static str, String)> {
        form.extend(self.settings.audience.iter().map(|audience| ("audience", audience.clone())));
        form.extend(self.resource.iter().map(|resource| ("resource", resource.clone())));
        if !self.settings.scopes.is_empty() {
            form.push(("scope", self.settings.scopes.join(" ")));
        }
        form
    }

    /// The plain exchange of `caller_token` at the issuer, or (none) the
    /// gateway's own token by client credentials there; with who answered.
    async fn at_issuer(&self, caller_token: Option<&CallerToken>) -> Result<(Answer, String), OAuthError> {
        let endpoint = self.endpoint().await?;
        let settings = &self.settings;
        let form = self.for_server(match caller_token {
            Some(token) => vec![
                ("grant_type", TOKEN_EXCHANGE.to_owned()),
                ("subject_token", token.expose().to_owned()),
                ("subject_token_type", ACCESS_TOKEN.to_owned()),
                ("requested_token_type", ACCESS_TOKEN.to_owned()),
            ],
            None => vec![("grant_type", "client_credentials".to_owned())],
        });
        let what = if caller_token.is_some() { "the token exchange (RFC 8693)" } else { "the client credentials grant" };
        let request = TokenRequest { endpoint: &endpoint, party: &endpoint, what };
        let basic = Some((settings.client_id.as_str(), settings.client_secret.as_str()));
        let secrets = [caller_token.map(|token| token.expose()), Some(settings.client_secret.as_str())];
        let answer = request.send(&self.http, &form, basic, &secrets).await.map_err(|refused| {
            OAuthError::new(format!(
                "server `{}` acts as each caller through a token exchange, which failed: {refused}. Ask the issuer's operator to let \
                 client `{}` exchange your tokens for this server, or check the server's auth.audience and auth.scopes",
                self.server, settings.client_id
            ))
        })?;
        Ok((answer, endpoint))
    }

    /// Enterprise-managed authorization: `caller_token` for an ID-JAG at
    /// the issuer, redeemed at the server's authorization server; or (none)
    /// the gateway's own token by client credentials there.
    async fn by_id_jag(&self, server: &IdJagServer, caller_token: Option<&CallerToken>) -> Result<(Answer, String), OAuthError> {
        let metadata = self.id_jag_metadata(server).await?;
        let resource = self.resource.as_deref().unwrap_or_default();
        let (client_id, secret) = (server.client_id.as_str(), server.client_secret.as_str());
        let Some(token) = caller_token else {
            let form = self.for_server(vec![("grant_type", "client_credentials".to_owned())]);
            let request =
                TokenRequest { endpoint: &metadata.token_endpoint, party: &metadata.issuer, what: "the client credentials grant" };
            let answer = request.send(&self.http, &form, Some((client_id, secret)), &[Some(secret)]).await.map_err(|refused| {
                OAuthError::new(format!(
                    "server `{}`: its authorization server would not give the gateway its own token (client `{client_id}`), with which \
                     its catalog is listed: {refused}. Check auth.authorization_server's client_id and client_secret",
                    self.server
                ))
            })?;
            return Ok((answer, metadata.issuer.clone()));
        };
        let settings = &self.settings;
        let issuer_endpoint = self.endpoint().await?;
        let id_jag = IdJagRequest {
            token_endpoint: &issuer_endpoint,
            client_id: &settings.client_id,
            client_secret: Some(&settings.client_secret),
            subject_token: token.expose(),
            subject_token_type: ACCESS_TOKEN,
            audience: &metadata.issuer,
            resource,
            scopes: &settings.scopes,
        };
        let id_jag = id_jag.send(&self.http).await.map_err(|refused| {
            OAuthError::new(format!(
                "server `{}` acts as each caller through enterprise-managed authorization, and its first step failed: the identity \
                 provider (the gateway's issuer) would not issue an ID-JAG for you: {refused}. Ask the issuer's operator to let client \
                 `{}` exchange your tokens for ID-JAGs for {}, or check the server's auth.scopes",
                self.server, settings.client_id, metadata.issuer
            ))
        })?;
        let client = server.client();
        let redeemed = redeem(&self.http, &metadata.issuer, &metadata.token_endpoint, &client, &id_jag, resource, &settings.scopes);
        let answer = redeemed.await.map_err(|refused| {
            OAuthError::new(format!(
                "server `{}` acts as each caller through enterprise-managed authorization, and its second step failed: its \
                 authorization server would not redeem the ID-JAG the identity provider issued for you: {refused}. Ask that server's \
                 operator to accept ID-JAGs of the gateway's issuer from client `{client_id}`, or check auth.authorization_server",
                self.server
            ))
        })?;
        Ok((answer, metadata.issuer.clone()))
    }

    /// The metadata of the server's authorization server (RFC 8414), found once.
    async fn id_jag_metadata<'a>(&self, server: &'a IdJagServer) -> Result<&'a ServerMetadata, OAuthError> {
        server
            .metadata
            .get_or_try_init(|| async {
                let metadata = super::discovery::server_metadata(&self.http, &server.issuer).await.map_err(|e| {
                    OAuthError::new(format!(
                        "server `{}`: the token endpoint of its auth.authorization_server cannot be found: {e}",
                        self.server
                    ))
                })?;
                require_secure(&metadata.token_endpoint, "the authorization server's token_endpoint")?;
                Ok::<_, OAuthError>(metadata)
            })
            .await
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

/// The `sub` of a JWT the issuer just issued (for the audit log only).
fn jwt_subject(token: &str) -> Option<String> {
    crate::caller_token::unverified_claims(token)?.get("sub")?.as_str().map(str::to_owned)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caller_token::CallerToken;
    use crate::config::token_exchange::UpstreamAuthorizationServer;
    use crate::config::Transport;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A token endpoint on loopback that answers each request with the next
    /// of `answers` (status, JSON body), and hands back each request's text.
    async fn endpoint(answers: Vec<(u16, serde_json::Value)>) -> (String, tokio::sync::mpsc::UnboundedReceiver<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let url = format!("{base}/token");
        let (seen, requests) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            for (status, body) in answers {
                let Ok((mut socket, _)) = listener.accept().await else { return };
                let mut request = Vec::new();
                let mut buffer = [0u8; 4096];
                // The head, then as much body as it announces.
                while let Ok(read) = socket.read(&mut buffer).await {
                    request.extend_from_slice(&buffer[..read]);
                    let text = String::from_utf8_lossy(&request).to_string();
                    let Some((head, body)) = text.split_once("\r\n\r\n") else { continue };
                    let length = head.lines().find_map(|line| line.to_ascii_lowercase().strip_prefix("content-length: ")?.parse().ok());
                    if read == 0 || body.len() >= length.unwrap_or(0) {
                        break;
                    }
                }
                let _ = seen.send(String::from_utf8_lossy(&request).to_string());
                // `BASE` stands for the server's own address, not known before it listens.
                let body = body.to_string().replace("BASE", &base);
                let answer = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        (url, requests)
    }

    fn exchanger(token_endpoint: &str, book: &CallerTokens) -> Arc<Exchanger> {
        exchanger_with(token_endpoint, book, None)
    }

    fn exchanger_with(token_endpoint: &str, book: &CallerTokens, id_jag: Option<UpstreamAuthorizationServer>) -> Arc<Exchanger> {
        let mut config = ServerConfig::remote("jira", Transport::Http, "https://jira.example/mcp");
        config.auth = Some(Auth::TokenExchange(Box::new(TokenExchangeConfig {
            issuer: None,
            token_endpoint: Some(token_endpoint.into()),
            client_id: "gw".into(),
            client_secret: "gw-secret-value".into(),
            audience: None,
            resource: None,
            scopes: vec!["read".into()],
            max_callers: 4,
            caller_idle: Duration::from_secs(60),
            authorization_server: id_jag,
        })));
        Exchanger::new(&config, book.clone()).unwrap()
    }

    #[tokio::test]
    async fn an_exchange_sends_the_caller_token_to_the_issuer_only_and_survives_a_huge_lifetime() {
        let answer = serde_json::json!({"access_token": "upstream-token", "token_type": "Bearer", "expires_in": u64::MAX, "scope": "read"});
        let (url, mut requests) = endpoint(vec![(200, answer)]).await;
        let book = CallerTokens::default();
        book.offer("issuer:alice", CallerToken::new("alice-opaque-token"));
        let exchanger = exchanger(&url, &book);
        let token = exchanger.for_caller("issuer:alice", "alice").await.unwrap();
        assert_eq!(
            (token.subject.as_str(), token.audience.as_str(), token.scope.as_deref()),
            ("alice", "https://jira.example/mcp", Some("read"))
        );
        assert!(format!("{token:?}").find("upstream-token").is_none(), "a kept token is never shown");
        let sent = requests.recv().await.unwrap();
        for part in
            ["grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange", "subject_token=alice-opaque-token", "resource=https"]
        {
            assert!(sent.contains(part), "{part} missing from {sent}");
        }
        let again = exchanger.for_caller("issuer:alice", "alice").await.unwrap();
        assert!(Arc::ptr_eq(&token, &again), "kept, not exchanged again");
        assert_eq!(exchanger.exchanges(), 1);
    }

    #[tokio::test]
    async fn refusals_name_the_server_and_the_issuer_error_and_show_no_secret() {
        let refusal = serde_json::json!({"error": "invalid_target", "error_description": "not for alice-opaque-token"});
        let not_bearer =
            serde_json::json!({"access_token": "x", "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag", "token_type": "N_A"});
        let (url, _requests) = endpoint(vec![(400, refusal), (200, not_bearer)]).await;
        let book = CallerTokens::default();
        let exchanger = exchanger(&url, &book);
        let none = exchanger.for_caller("issuer:alice", "alice").await.unwrap_err().message;
        assert!(none.contains("`jira`") && none.contains("no current token of yours"), "{none}");
        book.offer("issuer:alice", CallerToken::new("alice-opaque-token"));
        let refused = exchanger.for_caller("issuer:alice", "alice").await.unwrap_err().message;
        assert!(refused.contains("`jira`") && refused.contains("invalid_target") && refused.contains("client `gw`"), "{refused}");
        assert!(!refused.contains("alice-opaque-token") && !refused.contains("gw-secret-value"), "{refused}");
        let wrong = exchanger.for_caller("issuer:alice", "alice").await.unwrap_err().message;
        assert!(wrong.contains("`jira`") && wrong.contains("other than a bearer access token"), "{wrong}");
    }

    #[tokio::test]
    async fn an_id_jag_is_asked_with_the_caller_token_and_redeemed_without_it_and_a_refusal_names_the_step() {
        let metadata = serde_json::json!({"issuer": "BASE", "token_endpoint": "BASE/token"});
        let id_jag = serde_json::json!({"access_token": "the-id-jag", "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                                        "token_type": "N_A"});
        let refusal = serde_json::json!({"error": "invalid_grant", "error_description": "the-id-jag is not one of ours"});
        let (url, mut requests) = endpoint(vec![(200, metadata), (200, id_jag), (400, refusal)]).await;
        let book = CallerTokens::default();
        book.offer("issuer:alice", CallerToken::new("alice-opaque-token"));
        let upstream = UpstreamAuthorizationServer {
            issuer: url.trim_end_matches("/token").to_owned(),
            client_id: "gw-at-jira".into(),
            client_secret: "jira-secret-value".into(),
        };
        let refused = exchanger_with(&url, &book, Some(upstream)).for_caller("issuer:alice", "alice").await.unwrap_err().message;
        for part in ["`jira`", "second step", "authorization server", "invalid_grant", "not one of ours", "client `gw-at-jira`"] {
            assert!(refused.contains(part), "{part:?} missing from {refused}");
        }
        for secret in ["the-id-jag", "alice-opaque-token", "jira-secret-value", "gw-secret-value"] {
            assert!(!refused.contains(secret), "{secret} shown in {refused}");
        }
        assert!(requests.recv().await.unwrap().starts_with("GET /.well-known/oauth-authorization-server"));
        let asked = requests.recv().await.unwrap();
        for part in ["subject_token=alice-opaque-token", "requested_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aid-jag"] {
            assert!(asked.contains(part), "{part} missing from {asked}");
        }
        let redeemed = requests.recv().await.unwrap();
        assert!(redeemed.contains("assertion=the-id-jag") && redeemed.contains("resource=https"), "{redeemed}");
        assert!(!redeemed.contains("alice-opaque-token"), "the caller's token goes only to the issuer: {redeemed}");
        let basic = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "gw-at-jira:jira-secret-value");
        assert!(redeemed.contains(&basic), "the gateway authenticates as its client at the authorization server: {redeemed}");
    }
}
