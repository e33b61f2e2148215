//! A user's login (authorization code with PKCE): a loopback listener on
//! 127.0.0.1 with a random port receives the redirect, the `state` and the
//! issuer (`iss`, RFC 9207) are checked, and the code is exchanged. The
//! listener serves connections side by side, each with a time-out, so a
//! local process that connects and stalls cannot hold the browser's
//! redirect; the browser's page says "Logged in" only after the exchange.
//!
//! Who takes the user to the authorization URL is an [`Authorizer`]:
//! [`SystemBrowser`] opens it (`xdg-open`, `open`), [`FollowRedirects`]
//! GETs it and follows the redirects itself, for tests and the conformance
//! client, where the authorization server approves without a person.

use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use oauth2::CsrfToken;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::discovery::Discovery;
use super::flow::{PendingLogin, Target};
use super::http::Http;
use super::registration::{self, Client};
use super::store::Tokens;
use super::OAuthError;
use crate::config::OAuthConfig;

/// The path of the loopback redirect.
pub const CALLBACK_PATH: &str = "/callback";
/// The largest request head the loopback listener reads.
const MAX_REQUEST_HEAD: usize = 16 * 1024;
/// How long one connection to the loopback listener may take to send its
/// request, and to take the page back.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections the loopback listener serves at once; more are closed at
/// once. Any local process may connect: none may stall the browser's redirect.
const MAX_CONNECTIONS: usize = 32;

/// Takes the user (or a program acting for one) to the authorization URL.
/// The login goes on when the authorization server redirects to the
/// loopback listener; `open` may return before that (a browser) or after
/// it (following the redirects).
pub trait Authorizer: Send + Sync + 'static {
    fn open<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<(), OAuthError>>;
}

/// Opens the URL in the user's browser with `xdg-open` (or `open` on macOS).
pub struct SystemBrowser;

impl Authorizer for SystemBrowser {
    fn open<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<(), OAuthError>> {
        Box::pin(async move {
            for program in ["xdg-open", "open"] {
                let status = tokio::process::Command::new(program)
                    .arg(url)
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status()
                    .await;
                if matches!(status, Ok(status) if status.success()) {
                    return Ok(());
                }
            }
            Err(OAuthError::new("no browser could be opened (neither xdg-open nor open worked)"))
        })
    }
}

/// GETs the authorization URL and follows its redirects to the loopback
/// listener: for an authorization server that approves without a person
/// (tests, the conformance suite).
pub struct FollowRedirects {
    /// A client of its own: the OAuth client follows no redirect, and
    /// following them back to the loopback listener is this one's job.
    client: reqwest::Client,
}

impl FollowRedirects {
    pub fn new() -> Result<FollowRedirects, OAuthError> {
        Http::new()?; // the process's TLS provider
        let client = reqwest::Client::builder()
            .timeout(super::http::REQUEST_TIMEOUT)
            .build()
            .map_err(|e| OAuthError::new(format!("cannot set up HTTP for OAuth: {e}")))?;
        Ok(FollowRedirects { client })
    }
}

impl Authorizer for FollowRedirects {
    fn open<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<(), OAuthError>> {
        Box::pin(async move {
            let response = self
                .client
                .get(url)
                .send()
                .await
                .map_err(|e| OAuthError::new(format!("following the authorization URL failed: {}", e.without_url())))?;
            let landed = response.url().clone();
            let on_loopback = landed.host_str() == Some("127.0.0.1") && landed.path() == CALLBACK_PATH;
            if on_loopback {
                Ok(())
            } else {
                Err(OAuthError::new(format!(
                    "the authorization server answered {} at {}{} instead of redirecting back; this login needs a browser",
                    response.status().as_u16(),
                    landed.origin().ascii_serialization(),
                    landed.path()
                )))
            }
        })
    }
}

/// What the authorization server sent back to the loopback listener.
struct Callback {
    code: String,
    iss: Option<String>,
}

/// The listener the authorization server redirects the user to.
struct Loopback {
    listener: TcpListener,
    redirect_uri: String,
}

impl Loopback {
    async fn bind() -> Result<Loopback, OAuthError> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| OAuthError::new(format!("cannot listen on 127.0.0.1 for the login's redirect: {e}")))?;
        let port = listener.local_addr().map_err(|e| OAuthError::new(format!("cannot listen on 127.0.0.1: {e}")))?.port();
        Ok(Loopback { listener, redirect_uri: format!("http://127.0.0.1:{port}{CALLBACK_PATH}") })
    }

    /// Serves connections, at most [`MAX_CONNECTIONS`] at once and each for
    /// at most [`CONNECTION_TIMEOUT`], until the redirect of this login
    /// arrives; other paths (a browser's favicon) get a 404. The redirect's
    /// connection is returned unanswered when it carries a code: the page
    /// says "Logged in" only once the login did ([`Loopback::tell`]).
    async fn wait(&self, state: &CsrfToken) -> Result<(Callback, TcpStream), OAuthError> {
        let mut connections = FuturesUnordered::new();
        loop {
            tokio::select! {
                accepted = self.listener.accept() => {
                    let (stream, _) = accepted.map_err(|e| OAuthError::new(format!("the login's listener failed: {e}")))?;
                    if connections.len() < MAX_CONNECTIONS {
                        connections.push(tokio::time::timeout(CONNECTION_TIMEOUT, read_redirect(stream, state)));
                    }
                }
                Some(served) = connections.next(), if !connections.is_empty() => match served {
                    // Stalled, or not the login's redirect: the wait goes on.
                    Err(_) | Ok(None) => {}
                    Ok(Some((Ok(callback), stream))) => return Ok((callback, stream)),
                    Ok(Some((Err(error), mut stream))) => {
                        Loopback::tell(&mut stream, false).await;
                        return Err(error);
                    }
                },
            }
        }
    }

    /// The page the browser gets once the login ended.
    async fn tell(stream: &mut TcpStream, logged_in: bool) {
        let (status, page) = match logged_in {
            true => ("200 OK", "Logged in: you can close this page and go back to mcpvisor."),
            false => ("400 Bad Request", "The login failed: mcpvisor says why."),
        };
        let _ = tokio::time::timeout(CONNECTION_TIMEOUT, respond(stream, status, page)).await;
    }
}

/// Reads one connection's request: `None` when it is not the login's
/// redirect (answered 404, or unreadable); else what the redirect says and
/// the connection, to answer once the login ended.
async fn read_redirect(mut stream: TcpStream, state: &CsrfToken) -> Option<(Result<Callback, OAuthError>, TcpStream)> {
    let target = read_request_target(&mut stream).await?;
    let url = url::Url::parse(&format!("http://127.0.0.1{target}")).ok()?;
    if url.path() != CALLBACK_PATH {
        let _ = respond(&mut stream, "404 Not Found", "Not the login's redirect.").await;
        return None;
    }
    let param = |name: &str| url.query_pairs().find(|(key, _)| key == name).map(|(_, value)| value.into_owned());
    let result = if let Some(error) = param("error") {
        let description = param("error_description").map(|d| format!(" ({d})")).unwrap_or_default();
        Err(OAuthError::new(format!("the authorization server refused the login: {error}{description}")))
    } else if param("state").as_deref() != Some(state.secret().as_str()) {
        Err(OAuthError::new("the login's redirect carries a state that is not this login's; refusing it (a forged redirect?)"))
    } else if let Some(code) = param("code") {
        Ok(Callback { code, iss: param("iss") })
    } else {
        Err(OAuthError::new("the login's redirect carries no code"))
    };
    Some((result, stream))
}

/// The target of a `GET` request line; `None` for anything else.
async fn read_request_target(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buffer = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let read = stream.read(&mut buffer).await.ok()?;
        if read == 0 || head.len() + read > MAX_REQUEST_HEAD {
            return None;
        }
        head.extend_from_slice(&buffer[..read]);
    }
    let line = std::str::from_utf8(&head).ok()?.lines().next()?.to_owned();
    let mut parts = line.split(' ');
    match (parts.next(), parts.next()) {
        (Some("GET"), Some(target)) if target.starts_with('/') => Some(target.to_owned()),
        _ => None,
    }
}

async fn respond(stream: &mut TcpStream, status: &str, text: &str) -> std::io::Result<()> {
    let body = format!("<!doctype html><title>mcpvisor</title><p>{text}</p>");
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// A login sent to the authorization server: its client, and what checks
/// and redeems the answer.
pub(super) struct Begun {
    pub(super) client: Client,
    pub(super) pending: PendingLogin,
}

/// Begins a login with `scopes` coming back to `redirect_uri`: registers
/// the client if needed and makes the authorization URL (PKCE, state).
pub(super) async fn begin(
    http: &Http,
    config: &OAuthConfig,
    discovery: &Discovery,
    scopes: &[String],
    redirect_uri: &str,
) -> Result<Begun, OAuthError> {
    let server = &discovery.server;
    server.check_pkce()?;
    let client = registration::client_for_login(http, config, server, redirect_uri, scopes).await?;
    let target = Target { server, resource: &discovery.resource, client: &client };
    let pending = target.authorization_url(redirect_uri, scopes)?;
    Ok(Begun { client, pending })
}

/// Ends a login whose redirect brought `code` (and `iss`): the issuer is
/// checked (RFC 9207), then the code exchanged.
pub(super) async fn finish(
    http: &Http,
    discovery: &Discovery,
    begun: Begun,
    code: String,
    iss: Option<&str>,
) -> Result<(Client, Tokens), OAuthError> {
    check_issuer(&discovery.server, iss)?;
    let target = Target { server: &discovery.server, resource: &discovery.resource, client: &begun.client };
    let tokens = target.exchange_code(http, begun.pending, code).await?;
    Ok((begun.client, tokens))
}

/// Logs in with `scopes`: registers the client if needed, sends the user
/// through `authorizer`, checks the redirect and exchanges the code.
/// Gives up after `timeout` without a redirect.
pub async fn login(
    http: &Http,
    config: &OAuthConfig,
    discovery: &Discovery,
    scopes: &[String],
    authorizer: &dyn Authorizer,
    timeout: Duration,
) -> Result<(Client, Tokens), OAuthError> {
    discovery.server.check_pkce()?;
    let loopback = Loopback::bind().await?;
    let begun = begin(http, config, discovery, scopes, &loopback.redirect_uri).await?;
    let url = begun.pending.url.to_string();
    let callback = tokio::time::timeout(timeout, async {
        let open = authorizer.open(&url);
        let wait = loopback.wait(&begun.pending.state);
        tokio::pin!(open, wait);
        let mut opened = false;
        loop {
            tokio::select! {
                result = &mut open, if !opened => { result?; opened = true; }
                callback = &mut wait => return callback,
            }
        }
    })
    .await
    .map_err(|_| OAuthError::new(format!("no login came back within {} s", timeout.as_secs())))??;
    let (callback, mut browser) = callback;
    let finished = finish(http, discovery, begun, callback.code, callback.iss.as_deref()).await;
    Loopback::tell(&mut browser, finished.is_ok()).await;
    finished
}

/// RFC 9207: an `iss` in the redirect must be the issuer; a server that
/// says it sends one must send it.
fn check_issuer(server: &super::discovery::ServerMetadata, iss: Option<&str>) -> Result<(), OAuthError> {
    match iss {
        Some(iss) if iss != server.issuer => Err(OAuthError::new(format!(
            "the login's redirect names the issuer {iss:?}, not {:?}; refusing it (a mix-up attack?)",
            server.issuer
        ))),
        None if server.authorization_response_iss_parameter_supported => {
            Err(OAuthError::new(format!("{} says it names itself in redirects (iss) but this one has no iss; refusing it", server.issuer)))
        }
        _ => Ok(()),
    }
}
