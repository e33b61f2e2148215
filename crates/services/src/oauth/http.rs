//! The HTTP the OAuth client speaks: one `reqwest` client (rustls, the
//! platform's roots, proxies from the environment), JSON documents read
//! with a size limit, and the adapter `oauth2` sends its requests through.
//!
//! Bodies of failed answers are shown only after masking, through the
//! same [`Redactor`] patterns as everything else (an authorization server
//! that echoes a token back never gets it printed).
//!
//! Every URL is checked before anything is sent to it: `https`, or `http`
//! on a loopback host only ([`require_secure`]; the MCP authorization
//! specification requires HTTPS for every authorization-server endpoint,
//! and RFC 8252 §7.3 allows loopback). Redirects are followed only by
//! GETs of metadata, at most [`MAX_REDIRECTS`], and only within the
//! origin asked; a POST (registration, token requests) follows none, so a
//! code, a PKCE verifier or a client secret never goes anywhere else.

use std::sync::OnceLock;
use std::time::Duration;

use serde::de::DeserializeOwned;

use super::dpop::{self, Prover};
use super::OAuthError;
use crate::config::Redactor;
use crate::protocol::LATEST_LEGACY_VERSION;

/// The most bytes a metadata document, registration or token answer may have.
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// How long one request to an authorization server may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of an error body is kept for a message.
const ERROR_BODY_CHARS: usize = 300;
/// Same-origin redirects a metadata GET follows.
pub const MAX_REDIRECTS: usize = 5;

/// Refuses `url` unless it is `https`, or `http` on a loopback host
/// (`localhost`, 127.0.0.0/8, `::1`); `what` names it in the error.
pub fn require_secure(url: &str, what: &str) -> Result<(), OAuthError> {
    let parsed = url::Url::parse(url).map_err(|e| OAuthError::new(format!("{what} {url:?} is not a URL: {e}")))?;
    let loopback = match parsed.host() {
        Some(url::Host::Domain(host)) => host.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        scheme => Err(OAuthError::new(format!(
            "{what} {} uses {scheme}://, which OAuth refuses: authorization servers must be reached over https (plain http only on \
             loopback), or the code, the PKCE verifier and the tokens would cross the network in clear text. Ask the server's operator \
             for its https address",
            parsed.origin().ascii_serialization()
        ))),
    }
}

/// The target of a redirect answer, resolved against `from`.
fn redirect_target(from: &str, response: &reqwest::Response) -> Option<Result<String, OAuthError>> {
    if !response.status().is_redirection() {
        return None;
    }
    let location = response.headers().get(reqwest::header::LOCATION).and_then(|v| v.to_str().ok());
    let target = location.and_then(|location| url::Url::parse(from).ok()?.join(location).ok());
    Some(
        target
            .map(String::from)
            .ok_or_else(|| OAuthError::new(format!("{from} answered HTTP {} with no usable Location", response.status().as_u16()))),
    )
}

fn origin_of(url: &str) -> String {
    dpop::origin(url).unwrap_or_default()
}

/// A JSON answer, or the status and start of the body of a failed one.
pub enum Answer<T> {
    Ok(T),
    /// `body`: its first characters, redacted; `content_type`: as the
    /// answer's header says (empty without one).
    Failed {
        status: u16,
        content_type: String,
        body: String,
    },
}

/// The client of OAuth requests, one per process. Cheap to clone.
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    /// Set for the token requests of a DPoP login: each gets a proof.
    dpop: Option<Prover>,
}

impl Http {
    /// The process's one OAuth client (made at the first use: every remote
    /// server may need OAuth, and making a client loads the root certificates).
    pub fn new() -> Result<Http, OAuthError> {
        static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
        let client = CLIENT.get_or_init(|| {
            // reqwest is built without a default crypto provider; a program that
            // installed its own keeps it.
            let _ = rustls::crypto::ring::default_provider().install_default();
            reqwest::Client::builder()
                .timeout(REQUEST_TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .user_agent(concat!("mcpvisor/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(|e| format!("cannot set up HTTP for OAuth: {e}"))
        });
        client.clone().map(|client| Http { client, dpop: None }).map_err(OAuthError::new)
    }

    /// This client, with a DPoP proof on every token request it sends for
    /// `oauth2`, and a retry when the server asks for a nonce.
    pub fn with_dpop(&self, prover: Prover) -> Http {
        Http { client: self.client.clone(), dpop: Some(prover) }
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// GETs a JSON document, following redirects within its origin;
    /// 4xx/5xx answers are [`Answer::Failed`].
    pub async fn get_json<T: DeserializeOwned>(&self, url: &str) -> Result<Answer<T>, OAuthError> {
        let mut at = url.to_owned();
        for _ in 0..=MAX_REDIRECTS {
            // The protocol version, as MCP clients send it on discovery requests.
            let request = self.client.get(&at).header("Accept", "application/json").header("MCP-Protocol-Version", LATEST_LEGACY_VERSION);
            let response = self.send_checked(&at, request).await?;
            match redirect_target(&at, &response) {
                None => return read_json(&at, response).await,
                Some(target) => {
                    let target = target?;
                    if origin_of(&target) != origin_of(url) {
                        return Err(OAuthError::new(format!(
                            "{url} redirected to another origin ({}); OAuth follows redirects only within the origin it asked",
                            origin_of(&target)
                        )));
                    }
                    at = target;
                }
            }
        }
        Err(OAuthError::new(format!("{url} redirected more than {MAX_REDIRECTS} times")))
    }

    /// POSTs `body` as JSON and reads a JSON answer; a redirect is refused.
    pub async fn post_json<T: DeserializeOwned>(&self, url: &str, body: &serde_json::Value) -> Result<Answer<T>, OAuthError> {
        let request =
            self.client.post(url).header("Accept", "application/json").header("Content-Type", "application/json").body(body.to_string());
        let response = self.send_checked(url, request).await?;
        if let Some(target) = redirect_target(url, &response) {
            return Err(refused_redirect(url, response.status().as_u16(), &target.map(|t| origin_of(&t)).unwrap_or_default()));
        }
        read_json(url, response).await
    }

    /// Sends `request` to `url` once that URL is known to be safe.
    /// POSTs a form with HTTP Basic client authentication and reads a JSON
    /// answer (RFC 7662 introspection); a redirect is refused.
    pub async fn post_form<T: DeserializeOwned>(
        &self,
        url: &str,
        form: &[(&str, &str)],
        client: (&str, &str),
    ) -> Result<Answer<T>, OAuthError> {
        let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        let request = self
            .client
            .post(url)
            .header("Accept", "application/json")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .basic_auth(form_encoded(client.0), Some(form_encoded(client.1)))
            .body(body);
        let response = self.send_checked(url, request).await?;
        if let Some(target) = redirect_target(url, &response) {
            return Err(refused_redirect(url, response.status().as_u16(), &target.map(|t| origin_of(&t)).unwrap_or_default()));
        }
        read_json(url, response).await
    }

    async fn send_checked(&self, url: &str, request: reqwest::RequestBuilder) -> Result<reqwest::Response, OAuthError> {
        require_secure(url, "the OAuth endpoint")?;
        request.send().await.map_err(|e| OAuthError::new(format!("cannot reach {url}: {}", without_url(e))))
    }

    /// Sends one request `oauth2` built, with a DPoP proof when this
    /// client has a [`Prover`]: a refusal with `use_dpop_nonce` and a new
    /// nonce is sent once more with it (RFC 9449 §8).
    pub async fn send(&self, request: oauth2::HttpRequest) -> Result<oauth2::HttpResponse, HttpError> {
        let Some(prover) = &self.dpop else { return self.send_once(request).await };
        let (parts, body) = request.into_parts();
        let url = parts.uri.to_string();
        let mut retried = false;
        loop {
            let proof = prover.token_request_proof(parts.method.as_str(), &url).map_err(|e| HttpError(e.message))?;
            let mut request = http::Request::from_parts(parts.clone(), body.clone());
            let proof = http::HeaderValue::from_str(&proof).map_err(|e| HttpError(format!("unusable DPoP proof: {e}")))?;
            request.headers_mut().insert("DPoP", proof);
            let answer = self.send_once(request).await?;
            let nonce = answer.headers().get(dpop::NONCE_HEADER).and_then(|v| v.to_str().ok());
            let new_nonce = nonce.is_some_and(|nonce| prover.nonces.offer(&url, nonce));
            if !retried && new_nonce && answer.status().is_client_error() && dpop::asks_for_nonce(answer.body()) {
                retried = true;
                continue;
            }
            return Ok(answer);
        }
    }

    /// Sends one request; its body is bounded like every other.
    async fn send_once(&self, request: oauth2::HttpRequest) -> Result<oauth2::HttpResponse, HttpError> {
        let (parts, body) = request.into_parts();
        let url = parts.uri.to_string();
        require_secure(&url, "the token endpoint").map_err(|e| HttpError(e.message))?;
        let builder = self.client.request(parts.method, &url).headers(parts.headers).body(body);
        let response = builder.send().await.map_err(|e| HttpError(format!("cannot reach the token endpoint: {}", without_url(e))))?;
        if let Some(target) = redirect_target(&url, &response) {
            let origin = target.map(|target| origin_of(&target)).unwrap_or_default();
            return Err(HttpError(refused_redirect(&url, response.status().as_u16(), &origin).message));
        }
        let mut answer = http::Response::builder().status(response.status());
        for (name, value) in response.headers() {
            answer = answer.header(name, value);
        }
        let body = read_limited(response).await.map_err(HttpError)?;
        answer.body(body).map_err(|e| HttpError(e.to_string()))
    }
}

impl<'c> oauth2::AsyncHttpClient<'c> for Http {
    type Error = HttpError;
    type Future = std::pin::Pin<Box<dyn std::future::Future<Output = Result<oauth2::HttpResponse, HttpError>> + Send + 'c>>;

    fn call(&'c self, request: oauth2::HttpRequest) -> Self::Future {
        Box::pin(self.send(request))
    }
}

/// The JSON document of `response`, or its status and the start of its body.
async fn read_json<T: DeserializeOwned>(url: &str, response: reqwest::Response) -> Result<Answer<T>, OAuthError> {
    let status = response.status().as_u16();
    let content_type = response.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let body = read_limited(response).await.map_err(|e| OAuthError::new(format!("{url}: {e}")))?;
    if status >= 400 {
        return Ok(Answer::Failed { status, content_type: shown_body(content_type.as_bytes()), body: shown_body(&body) });
    }
    serde_json::from_slice(&body)
        .map(Answer::Ok)
        .map_err(|e| OAuthError::new(format!("{url} answered with a document that is not what OAuth expects: {e}")))
}

/// The error for a POST answered with a redirect (to `origin`).
fn refused_redirect(url: &str, status: u16, origin: &str) -> OAuthError {
    OAuthError::new(format!(
        "{url} answered HTTP {status}, a redirect to {origin}; OAuth requests that carry a code, a verifier or a secret follow no \
         redirect. Configure the endpoint's final address"
    ))
}

/// A transport failure of a request `oauth2` made.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HttpError(pub String);

async fn read_limited(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("the answer was cut short: {}", without_url(e)))? {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(format!("the answer is larger than {MAX_BODY_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// `text` form-urlencoded, as HTTP Basic client credentials must be (RFC 6749 §2.3.1).
fn form_encoded(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The start of an error body, with anything shaped like a secret masked.
pub fn shown_body(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text: String = text.chars().take(ERROR_BODY_CHARS).collect();
    Redactor::default().text(text.trim()).into_owned()
}

/// reqwest's error without the URL it repeats (it may carry a query).
fn without_url(error: reqwest::Error) -> String {
    crate::error::error_chain(&error.without_url())
}
