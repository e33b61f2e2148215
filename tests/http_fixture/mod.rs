//! A small MCP server over HTTP that the tests control: Streamable HTTP
//! with sessions (JSON or event-stream answers), the stateless 2026-07-28
//! era, or HTTP+SSE; with knobs for faults (sessions forgotten, answer
//! streams dropped, credentials required, the whole server killed and
//! started again on the same port). It runs on a runtime of its own, so
//! killing it closes every socket at once, like a crashed process.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use axum::Router;
use futures::stream::{self, StreamExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// How the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// Streamable HTTP with sessions, answers as JSON bodies.
    Json,
    /// Streamable HTTP with sessions, answers as event streams.
    Events,
    /// Streamable HTTP of 2026-07-28: no sessions, mirrored headers checked.
    Stateless,
    /// HTTP+SSE (2024-11-05).
    LegacySse,
}

/// What the test may change and look at.
#[derive(Default)]
pub struct Knobs {
    /// `Authorization` value required on every request.
    pub token: Option<String>,
    /// Headers of every POST, in order.
    pub posts: Vec<HeaderMap>,
    /// The method of every POSTed message (`-` for answers), in order.
    pub methods: Vec<String>,
    pub deletes: usize,
    /// `initialize` requests seen.
    pub initializes: usize,
    sessions: HashSet<String>,
    next_session: u64,
    /// Answers kept for a GET with `Last-Event-ID`.
    replay: HashMap<String, Value>,
    next_event: u64,
    /// HTTP+SSE: the event stream of each session.
    legacy: HashMap<String, mpsc::UnboundedSender<Value>>,
    /// Streamable HTTP: a GET opens a stream for the server's own messages.
    pub offer_get_stream: bool,
    /// The open GET streams.
    pushers: Vec<mpsc::UnboundedSender<Value>>,
    /// Answer streams the client closed before they ended.
    pub closed_streams: usize,
    /// `Flavour::Events`: the line end of answer streams (`\n` when empty).
    pub line_end: &'static str,
    /// `Flavour::Events`: the answer stream is sent in pieces of this many bytes.
    pub chunk: Option<usize>,
    /// A GET stream sends one event with `retry: 0` and ends at once.
    pub get_ends_at_once: bool,
    /// GETs seen.
    pub gets: usize,
    /// `Flavour::Stateless`: this many `server/discover` requests are refused as busy first.
    pub discover_busy: usize,
}

/// Counts a stream the client closed: dropped before its end.
struct ClosedGuard(Arc<Mutex<Knobs>>);

impl Drop for ClosedGuard {
    fn drop(&mut self) {
        self.0.lock().unwrap().closed_streams += 1;
    }
}

#[derive(Clone)]
struct Shared {
    flavour: Flavour,
    knobs: Arc<Mutex<Knobs>>,
    /// The endpoint under another origin (`localhost` for `127.0.0.1`).
    elsewhere: String,
}

pub struct Fixture {
    pub addr: SocketAddr,
    flavour: Flavour,
    pub knobs: Arc<Mutex<Knobs>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Fixture {
    /// Starts a server on a free loopback port.
    pub fn start(flavour: Flavour) -> Fixture {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        let knobs = Arc::new(Mutex::new(Knobs::default()));
        let runtime = serve(listener, Shared { flavour, knobs: knobs.clone(), elsewhere: elsewhere(addr) });
        Fixture { addr, flavour, knobs, runtime: Some(runtime) }
    }

    /// The MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// A URL of this server at `path` (e.g. `/same-origin`).
    pub fn url_at(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Ends the server at once: every connection is closed, nothing answers.
    pub fn kill(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }

    /// Starts it again on the same port, with no session of before.
    pub fn restart(&mut self) {
        self.kill();
        {
            let mut knobs = self.knobs.lock().unwrap();
            knobs.sessions.clear();
            knobs.legacy.clear();
        }
        // The killed runtime drops its listener on its own threads: poll until the port is free.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let listener = loop {
            match std::net::TcpListener::bind(self.addr) {
                Ok(listener) => break listener,
                Err(_) if std::time::Instant::now() < deadline => std::thread::sleep(std::time::Duration::from_millis(5)),
                Err(e) => panic!("the port {} was not freed within 10 s: {e}", self.addr),
            }
        };
        self.runtime = Some(serve(listener, Shared { flavour: self.flavour, knobs: self.knobs.clone(), elsewhere: elsewhere(self.addr) }));
    }

    /// Sends `message` on every open GET stream; false when none is open.
    pub fn push(&self, message: Value) -> bool {
        let mut knobs = self.knobs.lock().unwrap();
        knobs.pushers.retain(|pusher| pusher.send(message.clone()).is_ok());
        !knobs.pushers.is_empty()
    }

    /// Forgets every session, as a server does when they expire.
    pub fn expire_sessions(&self) {
        self.knobs.lock().unwrap().sessions.clear();
    }

    pub fn knobs(&self) -> std::sync::MutexGuard<'_, Knobs> {
        self.knobs.lock().unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.kill();
    }
}

fn elsewhere(addr: SocketAddr) -> String {
    format!("http://localhost:{}/mcp", addr.port())
}

fn serve(listener: std::net::TcpListener, shared: Shared) -> tokio::runtime::Runtime {
    listener.set_nonblocking(true).expect("non-blocking");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime");
    let app = Router::new()
        .route("/mcp", post(on_post).get(on_get).delete(on_delete))
        .route("/same-origin", post(|| async { Redirect::temporary("/mcp") }))
        .route("/other-origin", post(|State(shared): State<Shared>| async move { Redirect::temporary(&shared.elsewhere) }))
        .route("/messages", post(on_legacy_post))
        .with_state(shared);
    runtime.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
        let _ = axum::serve(listener, app).await;
    });
    runtime
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn refusal(status: StatusCode, code: i64, message: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    (status, [("content-type", "application/json")], body.to_string()).into_response()
}

fn json_answer(answer: &Value) -> Response {
    ([("content-type", "application/json")], answer.to_string()).into_response()
}

fn event_stream(events: impl futures::Stream<Item = String> + Send + 'static) -> Response {
    let body = Body::from_stream(events.map(|text| Ok::<_, Infallible>(Bytes::from(text))));
    ([("content-type", "text/event-stream")], body).into_response()
}

/// Checks the credentials; the refusal when they are wrong.
fn unauthorised(shared: &Shared, headers: &HeaderMap) -> Option<Response> {
    let token = shared.knobs.lock().unwrap().token.clone()?;
    if header(headers, "authorization") == Some(token.as_str()) {
        return None;
    }
    let mut refusal = refusal(StatusCode::UNAUTHORIZED, -32001, "unauthorised");
    refusal.headers_mut().insert("www-authenticate", "Bearer realm=\"fixture\"".parse().unwrap());
    Some(refusal)
}

async fn on_post(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    if shared.flavour == Flavour::LegacySse {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    if let Some(refusal) = unauthorised(&shared, &headers) {
        return refusal;
    }
    shared.knobs.lock().unwrap().posts.push(headers.clone());
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return refusal(StatusCode::BAD_REQUEST, -32700, "Parse error");
    };
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default().to_string();
    shared.knobs.lock().unwrap().methods.push(if method.is_empty() { "-".into() } else { method.clone() });
    let mut session = None;
    match shared.flavour {
        Flavour::Stateless => {
            if message.get("id").is_some() && header(&headers, "mcp-method") != Some(method.as_str()) {
                return refusal(StatusCode::BAD_REQUEST, -32001, "Header mismatch: Mcp-Method");
            }
        }
        _ if method == "initialize" => {
            let mut knobs = shared.knobs.lock().unwrap();
            knobs.next_session += 1;
            knobs.initializes += 1;
            let id = format!("session-{}", knobs.next_session);
            knobs.sessions.insert(id.clone());
            session = Some(id);
        }
        _ => match header(&headers, "mcp-session-id") {
            None => return refusal(StatusCode::BAD_REQUEST, -32000, "Bad Request: No valid session ID provided"),
            Some(id) if !shared.knobs.lock().unwrap().sessions.contains(id) => {
                return refusal(StatusCode::NOT_FOUND, -32001, "Session not found")
            }
            Some(_) => {}
        },
    }
    let Some(id) = message.get("id").cloned().filter(|_| !method.is_empty()) else {
        return StatusCode::ACCEPTED.into_response();
    };
    let name = message.pointer("/params/name").and_then(Value::as_str).unwrap_or_default().to_string();
    if method == "tools/call" && name == "wait" {
        // Never answers: the call is cancelled or the server killed.
        return match shared.flavour {
            Flavour::Events | Flavour::Stateless => {
                let guard = ClosedGuard(shared.knobs.clone());
                let endless = stream::pending::<String>().chain(stream::iter([String::new()]).map(move |text| {
                    let _ = &guard;
                    text
                }));
                event_stream(endless)
            }
            _ => std::future::pending().await,
        };
    }
    if method == "subscriptions/listen" {
        // The stream stays open and carries what the test pushes.
        return listening(&shared);
    }
    if method == "server/discover" && shared.flavour == Flavour::Stateless {
        let mut knobs = shared.knobs.lock().unwrap();
        if knobs.discover_busy > 0 {
            knobs.discover_busy -= 1;
            return json_answer(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": "Too busy: retry later"}}));
        }
    }
    let answer = answer(shared.flavour, &message, &headers);
    let mut response = match shared.flavour {
        Flavour::Events if method == "tools/call" && name == "flaky" => {
            // The stream breaks after a priming event; the answer waits for a resumption.
            let mut knobs = shared.knobs.lock().unwrap();
            knobs.next_event += 1;
            let primed = format!("ev-{}", knobs.next_event);
            knobs.replay.insert(primed.clone(), answer);
            event_stream(stream::iter([format!("id: {primed}\nretry: 10\ndata: \n\n")]))
        }
        Flavour::Events => {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "answering"}});
            let (end, chunk) = {
                let knobs = shared.knobs.lock().unwrap();
                (if knobs.line_end.is_empty() { "\n" } else { knobs.line_end }, knobs.chunk)
            };
            let text = format!("event: message{end}data: {note}{end}{end}event: message{end}data: {answer}{end}{end}");
            let pieces = match chunk {
                Some(size) => text.as_bytes().chunks(size).map(|piece| String::from_utf8_lossy(piece).into_owned()).collect(),
                None => vec![text],
            };
            event_stream(stream::iter(pieces))
        }
        _ => json_answer(&answer),
    };
    if let Some(session) = session {
        response.headers_mut().insert("mcp-session-id", session.parse().unwrap());
    }
    let _ = id;
    response
}

async fn on_get(State(shared): State<Shared>, headers: HeaderMap) -> Response {
    if let Some(refusal) = unauthorised(&shared, &headers) {
        return refusal;
    }
    let ends_at_once = {
        let mut knobs = shared.knobs.lock().unwrap();
        knobs.gets += 1;
        knobs.get_ends_at_once
    };
    if ends_at_once {
        return event_stream(stream::iter(["id: g\nretry: 0\ndata: \n\n".to_string()]));
    }
    if shared.flavour == Flavour::LegacySse {
        let (tx, rx) = mpsc::unbounded_channel::<Value>();
        let session = {
            let mut knobs = shared.knobs.lock().unwrap();
            knobs.next_session += 1;
            let session = format!("legacy-{}", knobs.next_session);
            knobs.legacy.insert(session.clone(), tx);
            session
        };
        let endpoint = stream::iter([format!("event: endpoint\ndata: /messages?session={session}\n\n")]);
        let messages = tokio_stream::wrappers::UnboundedReceiverStream::new(rx).map(|m| format!("event: message\ndata: {m}\n\n"));
        return event_stream(endpoint.chain(messages));
    }
    if let Some(last) = header(&headers, "last-event-id") {
        let Some(answer) = shared.knobs.lock().unwrap().replay.remove(last) else {
            return StatusCode::NOT_FOUND.into_response();
        };
        return event_stream(stream::iter([format!("id: {last}-r\ndata: {answer}\n\n")]));
    }
    match header(&headers, "mcp-session-id") {
        None => refusal(StatusCode::BAD_REQUEST, -32000, "Bad Request: No valid session ID provided"),
        Some(_) if shared.knobs.lock().unwrap().offer_get_stream => listening(&shared),
        Some(_) => StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
}

/// An event stream carrying what [`Fixture::push`] sends.
fn listening(shared: &Shared) -> Response {
    let (tx, rx) = mpsc::unbounded_channel::<Value>();
    shared.knobs.lock().unwrap().pushers.push(tx);
    let messages = tokio_stream::wrappers::UnboundedReceiverStream::new(rx).map(|m| format!("data: {m}\n\n"));
    event_stream(stream::iter([": open\n\n".to_string()]).chain(messages))
}

async fn on_delete(State(shared): State<Shared>, headers: HeaderMap) -> StatusCode {
    let mut knobs = shared.knobs.lock().unwrap();
    knobs.deletes += 1;
    if let Some(id) = header(&headers, "mcp-session-id") {
        knobs.sessions.remove(id);
    }
    StatusCode::OK
}

async fn on_legacy_post(State(shared): State<Shared>, uri: Uri, headers: HeaderMap, body: Bytes) -> StatusCode {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else { return StatusCode::BAD_REQUEST };
    let session = uri.query().and_then(|q| q.strip_prefix("session=")).unwrap_or_default().to_string();
    let Some(stream) = shared.knobs.lock().unwrap().legacy.get(&session).cloned() else { return StatusCode::NOT_FOUND };
    {
        let mut knobs = shared.knobs.lock().unwrap();
        knobs.posts.push(headers.clone());
        knobs.methods.push(message.get("method").and_then(Value::as_str).unwrap_or("-").to_string());
    }
    let is_request = message.get("id").is_some() && message.get("method").is_some();
    if is_request && message.pointer("/params/name") != Some(&json!("wait")) {
        let _ = stream.send(answer(shared.flavour, &message, &headers));
    }
    StatusCode::ACCEPTED
}

/// The answer to request `message`.
fn answer(flavour: Flavour, message: &Value, headers: &HeaderMap) -> Value {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let params = message.get("params").cloned().unwrap_or(json!({}));
    let result = match message.get("method").and_then(Value::as_str).unwrap_or_default() {
        "initialize" => json!({
            "protocolVersion": if flavour == Flavour::LegacySse { "2024-11-05" } else { "2025-06-18" },
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "fixture", "version": "1.0"},
        }),
        "server/discover" if flavour == Flavour::Stateless => json!({
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {"listChanged": true}},
            "serverInfo": {"name": "fixture", "version": "1.0"},
        }),
        "tools/list" => json!({"tools": tools(flavour)}),
        "tools/call" => call(&params, headers),
        "ping" => json!({}),
        method => return json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("no method {method}")}}),
    };
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn tools(flavour: Flavour) -> Vec<Value> {
    let text = json!({"type": "object", "properties": {"text": {"type": "string"}}});
    let mut tools = vec![
        json!({"name": "echo", "description": "echoes text", "inputSchema": text}),
        json!({"name": "wait", "description": "never answers", "inputSchema": {"type": "object"}}),
        json!({"name": "big", "description": "answers `size` bytes", "inputSchema": {"type": "object", "properties": {"size": {"type": "integer"}}}}),
        json!({"name": "flaky", "description": "its answer stream breaks once", "inputSchema": text}),
    ];
    if flavour == Flavour::Stateless {
        tools.push(json!({"name": "region", "description": "tells the Mcp-Param-Region header", "inputSchema": {
            "type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}}));
        tools.push(json!({"name": "misannotated", "description": "an invalid x-mcp-header", "inputSchema": {
            "type": "object", "properties": {"where": {"type": "object", "x-mcp-header": "Where"}}}}));
    }
    tools
}

fn call(params: &Value, headers: &HeaderMap) -> Value {
    let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
    let text = match params.get("name").and_then(Value::as_str).unwrap_or_default() {
        "big" => "x".repeat(arguments.get("size").and_then(Value::as_u64).unwrap_or(10) as usize),
        "region" => format!("header {}", header(headers, "mcp-param-region").unwrap_or("missing")),
        _ => arguments.get("text").and_then(Value::as_str).unwrap_or_default().to_string(),
    };
    json!({"content": [{"type": "text", "text": text}], "isError": false})
}
