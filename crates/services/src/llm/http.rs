//! HTTP for the providers: one `reqwest` client (rustls, the platform's
//! roots, proxies from `HTTPS_PROXY`/`NO_PROXY`), retries with backoff,
//! errors classified into [`LlmError`], and answers read through a
//! [`Decoder`] either as a server-sent event stream or whole.
//!
//! Retries: 429, 500, 502, 503, 504, 529 and failed connections, at most
//! `max_retries` times, waiting what `retry-after-ms` / `Retry-After` (in
//! seconds) say, capped at [`MAX_RETRY_WAIT`], else 0.5 s doubling to 8 s
//! with ±20 % jitter. A request is retried only before any of its answer
//! was read, so nothing the model streamed is lost or repeated.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use reqwest::StatusCode;

use super::{ChatEvent, EventStream, LlmError, ModelSettings};

/// The most bytes one answer may have, streamed or whole.
pub const MAX_RESPONSE_BYTES: usize = 32 << 20;
/// The longest wait a server's `Retry-After` is honoured for.
pub const MAX_RETRY_WAIT: Duration = Duration::from_secs(60);
/// How much of an error body is kept for the message.
const ERROR_BODY_BYTES: usize = 4096;

/// Reads one provider's answers.
pub trait Decoder: Send + 'static {
    /// One server-sent event (its `event:` name, maybe empty, and data).
    fn event(&mut self, name: &str, data: &str) -> Result<Vec<ChatEvent>, LlmError>;
    /// The stream said it is complete; what follows is not read.
    fn done(&self) -> bool;
    /// The last events once the stream is over (assembled tool calls, the
    /// end), or an error when the answer was cut short.
    fn finish(&mut self) -> Result<Vec<ChatEvent>, LlmError>;
    /// A whole, non-streamed answer.
    fn whole(&mut self, body: &[u8]) -> Result<Vec<ChatEvent>, LlmError>;
}

/// The HTTP side of one provider.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    provider: &'static str,
    model: String,
    url: String,
    base_url_var: &'static str,
    max_retries: u32,
    idle_timeout: Duration,
}

impl Client {
    pub fn new(settings: &ModelSettings) -> Result<Client, LlmError> {
        // reqwest is built without a default crypto provider; an embedding
        // program that installed its own keeps it.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .build()
            .map_err(|e| LlmError::Settings { provider: settings.provider.to_string(), message: format!("cannot set up HTTP: {e}") })?;
        Ok(Client {
            http,
            provider: settings.provider.as_str(),
            model: settings.model.clone(),
            url: settings.endpoint(),
            base_url_var: settings.provider.base_url_var(),
            max_retries: settings.max_retries,
            idle_timeout: settings.idle_timeout,
        })
    }

    pub fn provider(&self) -> &'static str {
        self.provider
    }

    /// POSTs `body` as JSON, retrying what can be retried; a non-success
    /// answer becomes an error.
    pub async fn post(&self, headers: &[(&'static str, String)], body: &serde_json::Value) -> Result<reqwest::Response, LlmError> {
        let body = serde_json::to_vec(body).map_err(|e| self.protocol(format!("cannot encode the request: {e}")))?;
        let mut header_map = HeaderMap::new();
        header_map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in headers {
            let value = HeaderValue::from_str(value).map_err(|_| LlmError::Settings {
                provider: self.provider.into(),
                message: format!("the {name} header value has characters HTTP does not allow (check the API key)"),
            })?;
            header_map.insert(HeaderName::from_static(name), value);
        }
        let mut attempt = 0;
        loop {
            let sent = self.http.post(&self.url).headers(header_map.clone()).body(body.clone()).send().await;
            let retry_in = match sent {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) if attempt < self.max_retries && retryable(response.status()) => {
                    retry_after(response.headers()).unwrap_or_else(|| backoff(attempt))
                }
                Ok(response) => {
                    let status = response.status();
                    let text = read_capped(response, ERROR_BODY_BYTES).await;
                    return Err(self.refusal(status, &text, attempt));
                }
                Err(e) if attempt < self.max_retries && (e.is_connect() || e.is_timeout()) => backoff(attempt),
                Err(e) => {
                    return Err(LlmError::Unreachable {
                        provider: self.provider.into(),
                        url: self.url.clone(),
                        message: crate::error::error_chain(&e),
                        hint: self.base_url_var,
                    })
                }
            };
            attempt += 1;
            tracing::debug!(provider = self.provider, attempt, "retrying in {retry_in:?}");
            tokio::time::sleep(retry_in).await;
        }
    }

    /// The events of a streamed answer.
    pub fn stream(&self, response: reqwest::Response, decoder: impl Decoder) -> EventStream {
        let events = crate::sse::decode(capped(response.bytes_stream(), MAX_RESPONSE_BYTES), MAX_RESPONSE_BYTES);
        let reading = Reading { decoder, pending: VecDeque::new(), over: false, client: self.clone() };
        futures::stream::unfold((events, reading), |(mut events, mut reading)| async move {
            loop {
                if let Some(event) = reading.pending.pop_front() {
                    return Some((Ok(event), (events, reading)));
                }
                if reading.over {
                    return None;
                }
                let next = tokio::time::timeout(reading.client.idle_timeout, events.next()).await;
                let step = match next {
                    Err(_) => Err(LlmError::Timeout { provider: reading.client.provider.into(), after: reading.client.idle_timeout }),
                    Ok(None) => reading.decoder.finish().map(|events| (events, true)),
                    Ok(Some(Err(e))) => Err(reading.client.protocol(format!("the event stream broke: {e}"))),
                    Ok(Some(Ok(event))) => reading.decoder.event(&event.event, &event.data).and_then(|mut events| {
                        let done = reading.decoder.done();
                        if done {
                            events.extend(reading.decoder.finish()?);
                        }
                        Ok((events, done))
                    }),
                };
                match step {
                    Ok((events, over)) => {
                        reading.pending.extend(events);
                        reading.over = over;
                    }
                    Err(error) => {
                        reading.over = true;
                        reading.pending.clear();
                        return Some((Err(error), (events, reading)));
                    }
                }
            }
        })
        .boxed()
    }

    /// The events of a whole answer.
    pub async fn whole(&self, response: reqwest::Response, mut decoder: impl Decoder) -> Result<Vec<ChatEvent>, LlmError> {
        let mut body = Vec::new();
        let mut chunks = capped(response.bytes_stream(), MAX_RESPONSE_BYTES);
        loop {
            match tokio::time::timeout(self.idle_timeout, chunks.next()).await {
                Err(_) => return Err(LlmError::Timeout { provider: self.provider.into(), after: self.idle_timeout }),
                Ok(None) => break,
                Ok(Some(Ok(chunk))) => body.extend_from_slice(&chunk),
                Ok(Some(Err(e))) => return Err(self.protocol(format!("the answer broke off: {e}"))),
            }
        }
        decoder.whole(&body)
    }

    pub fn protocol(&self, message: String) -> LlmError {
        LlmError::Protocol { provider: self.provider.into(), message }
    }

    /// A refusal by status and body, classified.
    fn refusal(&self, status: StatusCode, body: &str, retries: u32) -> LlmError {
        let provider = self.provider.to_string();
        let message = error_message(body);
        let lower = message.to_ascii_lowercase();
        let code = status.as_u16();
        match code {
            401 | 403 => LlmError::Auth { provider, status: code, message, key_var: key_var(self.provider) },
            404 if lower.contains("model") => {
                LlmError::UnknownModel { provider, model: self.model.clone(), message, model_var: super::settings::MODEL_VAR }
            }
            404 => LlmError::Status {
                provider,
                status: code,
                message: format!("{message} (is {} right? it is {})", self.base_url_var, self.url),
            },
            400 | 413 if CONTEXT_MARKERS.iter().any(|m| lower.contains(m)) => LlmError::ContextOverflow { provider, message },
            429 | 503 | 529 => LlmError::RateLimited { provider, status: code, retries, message },
            _ => LlmError::Status { provider, status: code, message },
        }
    }
}

/// What providers say when a conversation does not fit.
const CONTEXT_MARKERS: [&str; 6] =
    ["context_length_exceeded", "context length", "context window", "prompt is too long", "too many tokens", "maximum context"];

/// The state of a streamed answer being read.
struct Reading<D> {
    decoder: D,
    pending: VecDeque<ChatEvent>,
    over: bool,
    client: Client,
}

/// Whether a 400 refusal says the server cannot stream.
pub fn refuses_streaming(error: &LlmError) -> bool {
    match error {
        LlmError::Status { status: 400, message, .. } => {
            let lower = message.to_ascii_lowercase();
            lower.contains("stream") && (lower.contains("not supported") || lower.contains("unsupported") || lower.contains("not support"))
        }
        _ => false,
    }
}

fn key_var(provider: &str) -> &'static str {
    match provider {
        "anthropic" => "ANTHROPIC_API_KEY",
        _ => "OPENAI_API_KEY",
    }
}

fn retryable(status: StatusCode) -> bool {
    matches!(status.as_u16(), 429 | 500 | 502 | 503 | 504 | 529)
}

/// `retry-after-ms`, else `Retry-After` in seconds (an HTTP date is not honoured).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<f64>().ok());
    let wait = header("retry-after-ms").map(|ms| ms / 1000.0).or_else(|| header(RETRY_AFTER.as_str()))?;
    (wait.is_finite() && wait >= 0.0).then(|| Duration::from_secs_f64(wait).min(MAX_RETRY_WAIT))
}

fn backoff(attempt: u32) -> Duration {
    let base = Duration::from_millis(500) * 2u32.saturating_pow(attempt.min(4));
    base.min(Duration::from_secs(8)).mul_f64(0.8 + fastrand::f64() * 0.4)
}

/// The `error.message` of an OpenAI or Anthropic error body, else the body.
fn error_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        let error = v.get("error")?;
        error.get("message").and_then(|m| m.as_str()).map(str::to_string).or_else(|| error.as_str().map(str::to_string))
    });
    let text = message.unwrap_or_else(|| body.trim().to_string());
    if text.is_empty() {
        "no explanation given".into()
    } else {
        text
    }
}

/// Up to `limit` bytes of a body, as text.
async fn read_capped(response: reqwest::Response, limit: usize) -> String {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Ok(Some(Ok(chunk))) = tokio::time::timeout(Duration::from_secs(10), chunks.next()).await {
        body.extend_from_slice(&chunk[..chunk.len().min(limit - body.len())]);
        if body.len() >= limit {
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// A body stream that fails once more than `limit` bytes came, and ends after its first error.
fn capped(
    body: impl Stream<Item = reqwest::Result<Bytes>> + Send + 'static,
    limit: usize,
) -> impl Stream<Item = Result<Bytes, String>> + Send {
    body.scan((0usize, false), move |(seen, failed), chunk| {
        if *failed {
            return futures::future::ready(None);
        }
        let item = match chunk {
            Ok(chunk) if *seen + chunk.len() > limit => Err(format!("the answer is larger than {} MiB", limit >> 20)),
            Ok(chunk) => {
                *seen += chunk.len();
                Ok(chunk)
            }
            Err(e) => Err(crate::error::error_chain(&e)),
        };
        *failed = item.is_err();
        futures::future::ready(Some(item))
    })
}
