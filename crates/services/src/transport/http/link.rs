//! What every task of one bridge shares: the HTTP client and endpoint,
//! the credentials, the session, the tools' header annotations, and the
//! ways back to the connection (parsed messages, log lines, the end).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, WWW_AUTHENTICATE};
use reqwest::{RequestBuilder, Response, StatusCode, Url};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, Notify};

use super::headers::{self, ParamHeaders};
use super::RemoteStatus;
use crate::codec::{decode_line, Frame};
use crate::error::{error_chain, Cause};
use crate::protocol::{Message, RequestId};
use crate::transport::credentials::{Challenge, Credentials, Renewal, RequestLine};

/// Requests sent again at most after the credentials were renewed.
const MAX_RENEWALS: usize = 2;
/// A server's nonce for the DPoP proofs of later requests (RFC 9449 §9).
const DPOP_NONCE: &str = "dpop-nonce";

/// Why the bridge ends before its input does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ending {
    /// The server cannot be reached or the connection broke; the sentence
    /// says how, and the error beneath it is kept when there is one.
    Lost(String, Option<Cause>),
    /// Only a user can fix the credentials; the sentence says what to do.
    NeedsLogin(String),
}

/// The request could not be sent; the bridge is ending (see [`Ending`]).
#[derive(Debug)]
pub(super) struct Broken;

/// `url` without its query, fragment or password, which may hold keys.
pub(super) fn shown(url: &Url) -> String {
    let mut url = url.clone();
    url.set_query(None);
    url.set_fragment(None);
    let _ = url.set_password(None);
    url.to_string()
}

/// One frame the connection wrote, and what the bridge needs of it. The
/// frame is read shallowly: its parameters (a call's arguments) are
/// skipped, not built into a tree; [`Outgoing::value`] reads it whole
/// where a rarer path needs more.
#[derive(Debug, Clone)]
pub(super) struct Outgoing {
    /// The frame as written: the body of its POST (shared, not copied, when sent again).
    pub(super) text: bytes::Bytes,
    /// Set on requests (with `method`) and on answers to the server's requests.
    pub(super) id: Option<serde_json::Value>,
    pub(super) method: Option<String>,
    /// The protocol version `params._meta` names in a request of the
    /// 2026-07-28 era; `None` in the `initialize` era.
    pub(super) modern: Option<String>,
}

/// What [`Outgoing::parse`] reads of a frame.
#[derive(Deserialize)]
struct Shallow<'a> {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
}

/// What [`Outgoing::parse`] reads of the parameters.
#[derive(Deserialize)]
struct ShallowParams {
    #[serde(default, rename = "_meta")]
    meta: Option<ShallowMeta>,
}

#[derive(Deserialize)]
struct ShallowMeta {
    /// Always the name [`META_PROTOCOL_VERSION`] holds (a test checks it).
    #[serde(default, rename = "io.modelcontextprotocol/protocolVersion")]
    version: Option<String>,
}

impl Outgoing {
    /// `None` for a line that is not a JSON object (the connection writes none).
    pub(super) fn parse(text: Vec<u8>) -> Option<Outgoing> {
        let shallow: Shallow = serde_json::from_slice(&text).ok()?;
        let params = shallow.params.and_then(|params| serde_json::from_str::<ShallowParams>(params.get()).ok());
        let modern = params.and_then(|params| params.meta?.version);
        let Shallow { id, method, .. } = shallow;
        Some(Outgoing { id, method, modern, text: text.into() })
    }

    pub(super) fn from_value(value: serde_json::Value) -> Outgoing {
        let id = value.get("id").filter(|id| !id.is_null()).cloned();
        let method = value.get("method").and_then(|m| m.as_str()).map(str::to_string);
        let modern = headers::modern_version(&value).map(str::to_string);
        Outgoing { text: value.to_string().into_bytes().into(), id, method, modern }
    }

    /// The whole frame as a tree.
    pub(super) fn value(&self) -> serde_json::Value {
        serde_json::from_slice(&self.text).unwrap_or_default()
    }

    /// A request (it waits for an answer), not a notification or an answer.
    pub(super) fn is_request(&self) -> bool {
        self.id.is_some() && self.method.is_some()
    }

    pub(super) fn is(&self, method: &str) -> bool {
        self.method.as_deref() == Some(method)
    }
}

/// Whether `message` is the answer (result or error) to the request with
/// `id` (an id the server wrote as `1.0` answers request 1, as the
/// connection reads it).
pub(super) fn answers(message: &Frame, id: &serde_json::Value) -> bool {
    let Ok(Message::Response { id: Some(answered), .. }) = message else { return false };
    match (answered, id) {
        (RequestId::Number(answered), serde_json::Value::Number(id)) => id.as_i64() == Some(*answered),
        (RequestId::String(answered), serde_json::Value::String(id)) => answered == id,
        _ => false,
    }
}

/// What was agreed with a Streamable HTTP server in the `initialize` era.
#[derive(Debug, Default)]
pub(super) struct Session {
    /// `Mcp-Session-Id`, echoed on every request once the server gave one.
    pub(super) id: Option<String>,
    /// The version agreed by `initialize`: `MCP-Protocol-Version` after it.
    pub(super) version: Option<String>,
    /// Bumped each time a session is opened, so that several requests
    /// refused for the same lost session open only one new one.
    pub(super) epoch: u64,
    /// The `initialize` request as the connection sent it, for re-initializing.
    pub(super) initialize: Option<serde_json::Value>,
}

pub(super) struct Link {
    pub(super) name: String,
    pub(super) url: Url,
    pub(super) http: reqwest::Client,
    credentials: Arc<dyn Credentials>,
    /// The configuration's raw `headers`.
    headers: HeaderMap,
    pub(super) max_frame: usize,
    pub(super) session: Mutex<Session>,
    /// Tools whose parameters are mirrored as `Mcp-Param-*` headers.
    pub(super) param_headers: Mutex<HashMap<String, ParamHeaders>>,
    /// Set once the server turned out to speak HTTP+SSE: where to POST.
    pub(super) legacy_endpoint: OnceLock<Url>,
    /// The connection speaks the 2026-07-28 era (no session, mirrored headers).
    modern: AtomicBool,
    /// Told each time a session is opened (the GET stream follows it).
    pub(super) opened: Notify,
    /// Held while a lost session is being replaced.
    pub(super) reopening: tokio::sync::Mutex<()>,
    out: mpsc::Sender<Frame>,
    log: mpsc::Sender<String>,
    end: mpsc::Sender<Ending>,
    ending: Arc<Mutex<Option<Ending>>>,
    status: Arc<Mutex<RemoteStatus>>,
}

/// The server a bridge talks to, and where it reports its end and status.
pub(super) struct Server {
    pub(super) name: String,
    pub(super) url: Url,
    pub(super) http: reqwest::Client,
    pub(super) credentials: Arc<dyn Credentials>,
    /// The configuration's raw `headers`.
    pub(super) headers: Vec<(String, String)>,
    pub(super) max_frame: usize,
    pub(super) ending: Arc<Mutex<Option<Ending>>>,
    pub(super) status: Arc<Mutex<RemoteStatus>>,
}

/// The bridge's ways back: parsed messages, log lines, its end.
pub(super) struct Ways {
    pub(super) out: mpsc::Sender<Frame>,
    pub(super) log: mpsc::Sender<String>,
    pub(super) end: mpsc::Sender<Ending>,
}

impl Link {
    /// A link; a configured header that HTTP cannot carry is left out with a log line.
    pub(super) fn new(server: Server, ways: Ways) -> Link {
        let mut headers = HeaderMap::new();
        let mut bad = Vec::new();
        for (name, value) in &server.headers {
            match (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) {
                (Ok(name), Ok(value)) => {
                    headers.insert(name, value);
                }
                _ => bad.push(name.clone()),
            }
        }
        let link = Link {
            name: server.name,
            url: server.url,
            http: server.http,
            credentials: server.credentials,
            headers,
            max_frame: server.max_frame,
            session: Mutex::new(Session::default()),
            param_headers: Mutex::new(HashMap::new()),
            legacy_endpoint: OnceLock::new(),
            modern: AtomicBool::new(false),
            opened: Notify::new(),
            reopening: tokio::sync::Mutex::new(()),
            out: ways.out,
            log: ways.log,
            end: ways.end,
            ending: server.ending,
            status: server.status,
        };
        for name in bad {
            link.note(format!("the configured header `{name}` has a name or value HTTP cannot carry; it is not sent"));
        }
        link
    }

    pub(super) fn is_modern(&self) -> bool {
        self.modern.load(Ordering::Relaxed)
    }

    pub(super) fn set_modern(&self, modern: bool) {
        self.modern.store(modern, Ordering::Relaxed);
    }

    /// The number of the current session (see [`Session::epoch`]).
    pub(super) fn epoch(&self) -> u64 {
        self.session.lock().map(|s| s.epoch).unwrap_or_default()
    }

    /// The endpoint, for messages (see [`shown`]).
    pub(super) fn shown_url(&self) -> String {
        shown(&self.url)
    }

    /// Changes what the server's status shows of the transport.
    pub(super) fn show(&self, change: impl FnOnce(&mut RemoteStatus)) {
        if let Ok(mut status) = self.status.lock() {
            change(&mut status);
        }
    }

    /// Hands one message, parsed once here, to the connection, waiting
    /// while its queue is full.
    pub(super) async fn deliver(&self, message: Frame) {
        let _ = self.out.send(message).await;
    }

    /// Hands one message's JSON text to the connection (see [`Link::deliver`]).
    pub(super) async fn deliver_text(&self, text: &[u8]) {
        self.deliver(decode_line(text)).await;
    }

    /// Answers request `id` with a JSON-RPC error in the server's stead.
    pub(super) async fn fail(&self, id: &serde_json::Value, message: String) {
        let answer = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": { "code": crate::protocol::error_codes::INTERNAL_ERROR, "message": message },
        });
        self.deliver_text(answer.to_string().as_bytes()).await;
    }

    /// Lines of the server's log (its status's stderr tail), one per line
    /// of `text`. Dropped when the connection is not reading its log,
    /// rather than waiting.
    pub(super) fn note(&self, text: String) {
        if !text.contains(['\n', '\r']) {
            let _ = self.log.try_send(text);
            return;
        }
        for line in text.lines() {
            let _ = self.log.try_send(line.trim_end_matches('\r').to_string());
        }
    }

    /// Ends the bridge; the first reason given is the one kept.
    pub(super) fn end(&self, ending: Ending) {
        if let Ok(mut slot) = self.ending.lock() {
            slot.get_or_insert_with(|| ending.clone());
        }
        let line = match &ending {
            Ending::Lost(message, _) | Ending::NeedsLogin(message) => message.clone(),
        };
        self.note(line);
        let _ = self.end.try_send(ending);
    }

    /// The configured headers, the credentials' and what `build` adds, on
    /// the request `build` makes; a refusal (401, or 403 for a scope) goes
    /// to the credentials, and the request is sent again when they renewed
    /// what they could. A failure to reach the server ends the bridge.
    pub(super) async fn send(&self, what: &str, build: impl Fn(&reqwest::Client) -> RequestBuilder) -> Result<Response, Broken> {
        for renewals in 0.. {
            let lost = |error: reqwest::Error| {
                Ending::Lost(format!("{what} {} failed: {}", self.shown_url(), error_chain(&error)), Some(Cause::new(error)))
            };
            let mut request = match build(&self.http).headers(self.headers.clone()).build() {
                Ok(request) => request,
                Err(error) => {
                    self.end(lost(error));
                    return Err(Broken);
                }
            };
            let line = RequestLine { method: request.method().as_str(), url: request.url().as_str() };
            let credentials = match self.credentials.headers(line).await {
                Ok(credentials) => credentials,
                Err(error) => {
                    self.end(Ending::Lost(format!("no credentials for {}: {error}", self.shown_url()), None));
                    return Err(Broken);
                }
            };
            for (name, value) in credentials {
                let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(&value)) else {
                    self.end(Ending::Lost(format!("the credentials for {} made a header HTTP cannot carry", self.shown_url()), None));
                    return Err(Broken);
                };
                request.headers_mut().insert(name, value);
            }
            let response = match self.http.execute(request).await {
                Ok(response) => response,
                Err(error) => {
                    self.end(lost(error));
                    return Err(Broken);
                }
            };
            if let Some(nonce) = response.headers().get(DPOP_NONCE).and_then(|v| v.to_str().ok()) {
                self.credentials.nonce_offered(response.url().as_str(), nonce);
            }
            let Some(challenge) = self.challenge(&response) else {
                self.show(|status| status.reached = true);
                return Ok(response);
            };
            let status = challenge.status;
            match self.credentials.refused(challenge).await {
                Ok(Renewal::Retry) if renewals < MAX_RENEWALS => continue,
                Ok(Renewal::Retry) => {
                    let message = format!(
                        "server `{}` still refused the request with HTTP {status} after the credentials were renewed {MAX_RENEWALS} times",
                        self.name
                    );
                    self.end(Ending::NeedsLogin(message));
                }
                Ok(Renewal::NeedsLogin { message }) => self.end(Ending::NeedsLogin(message)),
                Err(error) => self.end(Ending::Lost(format!("server `{}`: credentials: {error}", self.name), None)),
            }
            return Err(Broken);
        }
        Err(Broken)
    }

    /// A refusal the credentials should see: 401, or 403 naming a scope.
    fn challenge(&self, response: &Response) -> Option<Challenge> {
        let www_authenticate = response.headers().get(WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()).map(str::to_string);
        let refused = match response.status() {
            StatusCode::UNAUTHORIZED => true,
            StatusCode::FORBIDDEN => www_authenticate.as_deref().is_some_and(|w| w.contains("insufficient_scope")),
            _ => false,
        };
        refused.then(|| Challenge { status: response.status().as_u16(), www_authenticate, resource: self.url.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_told_from_requests_and_other_ids() {
        let id = serde_json::json!(3);
        assert!(answers(&decode_line(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#), &id));
        assert!(answers(&decode_line(br#"{"jsonrpc":"2.0","id":3.0,"error":{"code":1,"message":"no"}}"#), &id));
        assert!(!answers(&decode_line(br#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#), &id));
        assert!(!answers(&decode_line(br#"{"jsonrpc":"2.0","id":"3","result":{}}"#), &id));
        assert!(!answers(&decode_line(b"not json"), &id));
        assert!(answers(&decode_line(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#), &serde_json::json!("a")));
    }

    #[test]
    fn frames_are_read_shallowly_as_a_whole_reading_would() {
        use crate::protocol::session::META_PROTOCOL_VERSION;
        let frames = [
            serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "hi", "n": [1, 2]}, "_meta": {META_PROTOCOL_VERSION: "2026-07-28"}}}),
            serde_json::json!({"jsonrpc": "2.0", "id": "s", "method": "tools/list", "params": {"_meta": {"progressToken": 1}}}),
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            serde_json::json!({"jsonrpc": "2.0", "id": 3, "result": {}}),
            serde_json::json!({"jsonrpc": "2.0", "id": null, "method": "x", "params": [1, 2]}),
        ];
        for value in frames {
            let whole = Outgoing::from_value(value.clone());
            let shallow = Outgoing::parse(value.to_string().into_bytes()).expect("an object");
            assert_eq!((&shallow.id, &shallow.method, &shallow.modern), (&whole.id, &whole.method, &whole.modern), "{value}");
            assert_eq!(shallow.value(), value);
        }
    }
}
