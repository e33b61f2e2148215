//! Streamable HTTP at `/mcp`, both eras, as a server.
//!
//! `initialize` era: a POST of `initialize` without `Mcp-Session-Id` opens
//! a session and answers with its id; every later request carries it (an
//! unknown or expired one gets 404, so the client initializes again; none
//! at all gets 400). `MCP-Protocol-Version`, when sent, must be a version
//! served here (400). A request is answered with JSON when its first
//! message is the answer, else with an SSE stream (progress, log messages,
//! the server's own requests, then the answer); notifications and
//! responses get 202. GET opens the session's stream of messages that
//! belong to no request (one at a time: a second gets 409); DELETE ends
//! the session. SSE events carry ids, and a GET with `Last-Event-ID`
//! resumes the stream that id belongs to, from the bounded buffer.
//!
//! 2026-07-28 era: a POST without a session whose version (header or
//! `_meta`) is modern is served alone, after the checks of [`super::modern`],
//! by a gateway session of its own that ends with its answer, or when the
//! client closes the stream before it (the era's cancellation).
//! GET and DELETE do not exist in that era (405 without a session).
//!
//! Decision: JSON-RPC batches (arrays, allowed by 2025-03-26 only) are
//! refused with -32600; no client we know of sends them.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde_json::Value;
use tokio::sync::mpsc;

use super::event_log::{parse_event_id, seq_of, EventLog, LoggedEvent};
use super::sessions::{Busy, Session};
use super::{
    header_text, modern, require_json, rpc_error, rpc_refusal, unsupported_version, Front, InFlight, Port, LAST_EVENT_ID, PROTOCOL_VERSION,
    SESSION_ID,
};
use crate::gateway::outbox::{Frame, Outbox};
use crate::protocol::{error_codes, is_modern_version, is_supported_legacy_version, methods, Message};

/// How often an idle SSE stream gets a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// What a POST body holds, once parsed.
struct Posted {
    value: Value,
    bytes: Vec<u8>,
}

impl Posted {
    fn method(&self) -> Option<&str> {
        self.value.get("method").and_then(Value::as_str)
    }
    fn id(&self) -> Option<&Value> {
        self.value.get("id")
    }
    /// A request expects an answer; notifications and responses do not.
    fn is_request(&self) -> bool {
        self.method().is_some() && self.id().is_some()
    }
}

/// Parses one JSON-RPC message, or the HTTP answer refusing it.
fn parse(body: &Bytes) -> Result<Posted, Box<Response>> {
    let refuse = |id: Option<&Value>, code: i64, message: String| Box::new(rpc_refusal(StatusCode::BAD_REQUEST, id, code, message));
    let value: Value = serde_json::from_slice(body).map_err(|e| refuse(None, error_codes::PARSE_ERROR, format!("Parse error: {e}")))?;
    if value.is_array() {
        let message = "Invalid request: JSON-RPC batches are not supported; send one message per POST";
        return Err(refuse(None, error_codes::INVALID_REQUEST, message.into()));
    }
    if let Err(problem) = Message::parse(body) {
        return Err(refuse(value.get("id"), error_codes::INVALID_REQUEST, format!("Invalid request: {problem}")));
    }
    Ok(Posted { value, bytes: body.to_vec() })
}

/// Copies an outbox into a log until the request's answer (then the log
/// closes) or the end of the session. A request left unanswered gets an
/// error answer, so no stream waits forever.
pub(super) fn pump(mut frames: mpsc::Receiver<Frame>, log: Arc<EventLog>, request: Option<Value>, hold: Vec<Box<dyn Send>>) {
    tokio::spawn(async move {
        let _hold = hold;
        while let Some(frame) = frames.recv().await {
            let text: Arc<str> = String::from_utf8_lossy(frame.json()).into();
            let answers = request.as_ref().is_some_and(|id| {
                frame.is_response() && serde_json::from_str::<Value>(&text).ok().and_then(|v| v.get("id").cloned()).as_ref() == Some(id)
            });
            log.push(text);
            if answers {
                log.close();
                return;
            }
        }
        if let Some(id) = request {
            let error = serde_json::json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": error_codes::INTERNAL_ERROR, "message": "The gateway session ended before answering; send the request again"}});
            log.push(error.to_string().into());
        }
        log.close();
    });
}

/// An event of a log as a server-sent event.
fn sse_event(event: &LoggedEvent) -> Result<Event, Infallible> {
    Ok(Event::default().id(event.id.clone()).data(&*event.data))
}

fn with_session_header(mut response: Response, session: Option<&Session>) -> Response {
    if let Some(value) = session.and_then(|session| HeaderValue::from_str(&session.id).ok()) {
        response.headers_mut().insert(SESSION_ID, value);
    }
    response
}

/// Ends a 2026-07-28 request's own session when dropped: after its answer,
/// or when the client stops waiting (closing the stream is how that era
/// cancels a request).
struct ClosePort(Arc<dyn Port>);

impl Drop for ClosePort {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Answers a request from its stream: JSON when the first message is the
/// answer, SSE otherwise. `stateless` is the 2026-07-28 request's own
/// session, ended if the response is dropped before its end.
async fn answer(log: Arc<EventLog>, stateless: Option<ClosePort>) -> Response {
    let modern = stateless.is_some();
    let mut events = Box::pin(log.read_from(0));
    let Some(first) = events.next().await else {
        return rpc_refusal(StatusCode::INTERNAL_SERVER_ERROR, None, error_codes::INTERNAL_ERROR, "The request's stream ended empty");
    };
    let value: Value = serde_json::from_str(&first.data).unwrap_or(Value::Null);
    if value.get("method").is_none() && (value.get("result").is_some() || value.get("error").is_some()) {
        let code = value.pointer("/error/code").and_then(Value::as_i64);
        let status = match (modern, code) {
            (true, Some(code)) => modern::status_of_error(code),
            _ => StatusCode::OK,
        };
        return (status, [(header::CONTENT_TYPE, "application/json")], first.data.to_string()).into_response();
    }
    let stream = futures::stream::iter([first]).chain(events).map(move |event| {
        let _ = &stateless;
        sse_event(&event)
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response()
}

/// Delivers one message and answers it: a stream for a request, 202 otherwise.
async fn serve_message(front: &Arc<Front>, posted: Posted, session: Option<Arc<Session>>) -> Response {
    let (outbox, frames) = Outbox::new();
    let busy: Option<Busy> = session.as_ref().map(|session| session.hold());
    let port = match &session {
        Some(session) => session.port.clone(),
        None => match front.gateway.stateless().await {
            Some(port) => port,
            None => return stopping(),
        },
    };
    let own = session.is_none().then(|| ClosePort(port.clone()));
    if !posted.is_request() {
        // Answers to the server's requests and notifications: nothing comes back on this stream.
        port.deliver(posted.bytes, outbox).await;
        drop((frames, busy, own));
        return with_session_header(StatusCode::ACCEPTED.into_response(), session.as_deref());
    }
    let log = match &session {
        Some(session) => session.open_stream(),
        None => EventLog::new(1),
    };
    let mut hold: Vec<Box<dyn Send>> = vec![Box::new(InFlight::new(front))];
    if let Some(busy) = busy {
        hold.push(Box::new(busy));
    }
    if session.is_none() {
        hold.push(Box::new(ClosePort(port.clone())));
    }
    pump(frames, log.clone(), posted.id().cloned(), hold);
    // A session that is gone drops the outbox unread: the pump then answers with an error.
    port.deliver(posted.bytes, outbox).await;
    with_session_header(answer(log, own).await, session.as_deref())
}

pub(super) async fn post(State(front): State<Arc<Front>>, headers: HeaderMap, body: Bytes) -> Response {
    if front.draining.is_cancelled() {
        return stopping();
    }
    if let Some(refusal) = require_json(&headers) {
        return refusal;
    }
    let posted = match parse(&body) {
        Ok(posted) => posted,
        Err(refusal) => return *refusal,
    };
    if let Some(id) = header_text(&headers, SESSION_ID) {
        let Some(session) = front.sessions.get(id) else { return unknown_session(posted.id()) };
        if let Some(version) = header_text(&headers, PROTOCOL_VERSION).map(str::trim) {
            if !is_supported_legacy_version(version) {
                return rpc_error(StatusCode::BAD_REQUEST, posted.id(), unsupported_version(version));
            }
        }
        return serve_message(&front, posted, Some(session)).await;
    }
    let modern_header = header_text(&headers, PROTOCOL_VERSION).is_some_and(|version| is_modern_version(version.trim()));
    if posted.method() == Some(methods::INITIALIZE) && !modern_header {
        return match open_session(&front, None).await {
            Ok(session) => serve_message(&front, posted, Some(session)).await,
            Err(refusal) => *refusal,
        };
    }
    if modern::is_modern(&headers, &posted.value) {
        if let Err(error) = modern::check(&headers, &posted.value) {
            let status = modern::status_of_error(error.code);
            return rpc_error(status, posted.id(), error);
        }
        return serve_message(&front, posted, None).await;
    }
    let message = "Bad request: no Mcp-Session-Id; send `initialize` first (or a 2026-07-28 request with its MCP-Protocol-Version)";
    rpc_refusal(StatusCode::BAD_REQUEST, posted.id(), error_codes::INVALID_REQUEST, message)
}

/// Opens a session, its standalone messages pumped into its GET stream
/// (or, for a legacy HTTP+SSE session, its outbox kept for every message).
pub(super) async fn open_session(front: &Arc<Front>, legacy: Option<()>) -> Result<Arc<Session>, Box<Response>> {
    let full = |max: usize| {
        let message = format!("The gateway serves {max} sessions already; retry later, or end unused sessions with DELETE");
        Box::new(rpc_refusal(StatusCode::SERVICE_UNAVAILABLE, None, error_codes::INTERNAL_ERROR, message))
    };
    front.sessions.has_room().map_err(|f| full(f.max))?;
    let id = front.sessions.new_id().map_err(|_| {
        let message = "The gateway cannot make a session id: the system's random generator failed; retry later";
        Box::new(rpc_refusal(StatusCode::SERVICE_UNAVAILABLE, None, error_codes::INTERNAL_ERROR, message))
    })?;
    let (standalone, frames) = Outbox::new();
    let Some(port) = front.gateway.open(&front.sessions.next_caller(), standalone.clone()).await else { return Err(Box::new(stopping())) };
    let session = front.sessions.insert(id, port).map_err(|f| full(f.max))?;
    pump(frames, session.standalone.clone(), None, Vec::new());
    if legacy.is_some() {
        let _ = session.legacy_outbox.set(standalone);
    }
    Ok(session)
}

pub(super) fn stopping() -> Response {
    rpc_refusal(StatusCode::SERVICE_UNAVAILABLE, None, error_codes::INTERNAL_ERROR, "The gateway is shutting down; retry elsewhere")
}

fn unknown_session(id: Option<&Value>) -> Response {
    let message = "Session not found: it ended or expired; send `initialize` again without Mcp-Session-Id";
    rpc_refusal(StatusCode::NOT_FOUND, id, error_codes::INVALID_REQUEST, message)
}

/// The events of a GET stream: `log` from `seq`, ending at shutdown.
fn get_stream(front: &Arc<Front>, session: Arc<Session>, log: Arc<EventLog>, seq: u64) -> impl Stream<Item = Result<Event, Infallible>> {
    let standalone = log.stream() == 0;
    let busy = session.hold();
    let opened = OpenGet(session, standalone);
    let draining = front.draining.clone().cancelled_owned();
    log.read_from(seq).take_until(draining).map(move |event| {
        let _ = (&busy, &opened);
        if standalone {
            log.mark_delivered(seq_of(&event));
        }
        sse_event(&event)
    })
}

/// Marks the session's GET stream open while it lives.
struct OpenGet(Arc<Session>, bool);

impl Drop for OpenGet {
    fn drop(&mut self) {
        if self.1 {
            self.0.get_open.store(false, std::sync::atomic::Ordering::Release);
        }
    }
}

pub(super) async fn get(State(front): State<Arc<Front>>, headers: HeaderMap) -> Response {
    let Some(id) = header_text(&headers, SESSION_ID) else {
        let message = "Method not allowed: GET needs an Mcp-Session-Id (the 2026-07-28 era has no GET stream)";
        return (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "POST")], message).into_response();
    };
    let Some(session) = front.sessions.get(id) else { return unknown_session(None) };
    let accepts =
        header_text(&headers, header::ACCEPT.as_str()).is_none_or(|accept| accept.contains("text/event-stream") || accept.contains("*/*"));
    if !accepts {
        return (StatusCode::NOT_ACCEPTABLE, "Not acceptable: the GET stream is text/event-stream").into_response();
    }
    let resume = header_text(&headers, LAST_EVENT_ID).and_then(parse_event_id);
    let (log, seq) = match resume {
        Some((stream, seq)) => match session.stream(stream) {
            Some(log) => (log, seq + 1),
            None => return (StatusCode::NOT_FOUND, "Not found: that stream is no longer kept; send the request again").into_response(),
        },
        None => (session.standalone.clone(), session.standalone.undelivered()),
    };
    if log.stream() == 0 && session.get_open.swap(true, std::sync::atomic::Ordering::AcqRel) {
        return (StatusCode::CONFLICT, "Conflict: this session's GET stream is open already (one per session)").into_response();
    }
    let stream = get_stream(&front, session.clone(), log, seq);
    with_session_header(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response(), Some(&session))
}

pub(super) async fn delete(State(front): State<Arc<Front>>, headers: HeaderMap) -> Response {
    let Some(id) = header_text(&headers, SESSION_ID) else {
        return (StatusCode::BAD_REQUEST, "Bad request: DELETE needs the Mcp-Session-Id of the session to end").into_response();
    };
    match front.sessions.end(id) {
        true => StatusCode::NO_CONTENT.into_response(),
        false => unknown_session(None),
    }
}
