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
//! resumes the stream that id belongs to, from the bounded buffer; what
//! a client read is not kept (a JSON answer at once, SSE events once the
//! stream asks for the next), and a resumption of events dropped to keep
//! within the session's buffer bound gets 404 saying so.
//!
//! Every request (POST awaiting or streaming its answer, GET stream)
//! holds a [`Permit`] of the per-client and total bounds while it lasts.
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
use super::guard::Caller;
use super::limits::{Client, ClientKey, Permit};
use super::sessions::{Busy, Session};
use super::{
    header_text, modern, require_json, rpc_error, rpc_refusal, unsupported_version, Front, InFlight, Port, LAST_EVENT_ID, PROTOCOL_VERSION,
    SESSION_ID,
};
use crate::identity::Identity;
use crate::protocol::{error_codes, is_modern_version, is_supported_legacy_version, methods, Message};
use crate::server::outbox::{Frame, Outbox};

/// How often an idle SSE stream gets a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// What a POST body holds, once parsed: as a tree for the checks here, and
/// as the message the session is given (parsed once, not again by the port).
struct Posted {
    value: Value,
    message: Message,
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

    /// The message, and its params as a tree (taken out of the whole one,
    /// which the message was parsed from: they are the same JSON).
    fn into_parts(mut self) -> (Message, Option<Value>) {
        let params = self.value.as_object_mut().map(|message| message.remove("params").unwrap_or(Value::Null));
        (self.message, params)
    }

    /// [`with_trace_context`] into this message (the message follows).
    fn take_trace_context(&mut self, headers: &HeaderMap) {
        if let Some(message) = with_trace_context(&mut self.value, headers) {
            self.message = message;
        }
    }
}

/// [`copy_trace_context`], then the message read again from the tree it
/// changed; `None` when nothing was copied (the message is as it was).
pub(super) fn with_trace_context(message: &mut Value, headers: &HeaderMap) -> Option<Message> {
    if !copy_trace_context(message, headers) {
        return None;
    }
    serde_json::to_vec(message).ok().and_then(|bytes| Message::parse(&bytes).ok())
}

/// Copies the W3C `traceparent` (and `tracestate`) header of the POST that
/// brought request `message` into its `params._meta`, where the gateway
/// reads trace context (SEP-414), unless `_meta` has its own; whether it
/// did. Without the header, or for a notification or response, nothing changes.
fn copy_trace_context(message: &mut Value, headers: &HeaderMap) -> bool {
    let Some(parent) = header_text(headers, TRACEPARENT) else { return false };
    let is_request = message.get("method").is_some_and(Value::is_string) && message.get("id").is_some();
    if !is_request || message.get("params").is_some_and(|params| !params.is_object()) {
        return false;
    }
    let meta = message.as_object_mut().map(|message| message.entry("params").or_insert_with(|| serde_json::json!({})));
    let Some(meta) = meta.and_then(Value::as_object_mut).map(|params| params.entry("_meta").or_insert_with(|| serde_json::json!({})))
    else {
        return false;
    };
    let Some(meta) = meta.as_object_mut().filter(|meta| !meta.contains_key(TRACEPARENT)) else { return false };
    meta.insert(TRACEPARENT.into(), parent.into());
    if let Some(state) = header_text(headers, TRACESTATE) {
        meta.insert(TRACESTATE.into(), state.into());
    }
    true
}

/// The W3C trace context headers.
const TRACEPARENT: &str = "traceparent";
const TRACESTATE: &str = "tracestate";

/// Parses one JSON-RPC message, or the HTTP answer refusing it.
fn parse(body: &Bytes) -> Result<Posted, Box<Response>> {
    let refuse = |id: Option<&Value>, code: i64, message: String| Box::new(rpc_refusal(StatusCode::BAD_REQUEST, id, code, message));
    let value: Value = serde_json::from_slice(body).map_err(|e| refuse(None, error_codes::PARSE_ERROR, format!("Parse error: {e}")))?;
    if value.is_array() {
        let message = "Invalid request: JSON-RPC batches are not supported; send one message per POST";
        return Err(refuse(None, error_codes::INVALID_REQUEST, message.into()));
    }
    match Message::parse(body) {
        Ok(message) => Ok(Posted { value, message }),
        Err(problem) => Err(refuse(value.get("id"), error_codes::INVALID_REQUEST, format!("Invalid request: {problem}"))),
    }
}

/// The session a log belongs to, whose buffer bounds each push is trimmed to.
pub(super) type Keeper = Option<(Arc<Front>, Arc<Session>)>;

/// Copies an outbox into a log until the request's answer (then the log
/// closes) or the end of the session. A request left unanswered gets an
/// error answer, so no stream waits forever.
pub(super) fn pump(frames: mpsc::Receiver<Frame>, log: Arc<EventLog>, request: Option<Value>, hold: Vec<Box<dyn Send>>, keeper: Keeper) {
    pump_from(None, frames, log, request, hold, keeper);
}

/// [`pump`], `first` (already taken from `frames`) first.
fn pump_from(
    mut first: Option<Frame>,
    mut frames: mpsc::Receiver<Frame>,
    log: Arc<EventLog>,
    request: Option<Value>,
    hold: Vec<Box<dyn Send>>,
    keeper: Keeper,
) {
    tokio::spawn(async move {
        let _hold = hold;
        loop {
            let frame = match first.take() {
                Some(frame) => frame,
                None => match frames.recv().await {
                    Some(frame) => frame,
                    None => break,
                },
            };
            let text: Arc<str> = String::from_utf8_lossy(frame.json()).into();
            let answers = request.as_ref().is_some_and(|id| Message::parse(frame.json()).is_ok_and(|message| answers(&message, id)));
            log.push(text);
            if let Some((front, session)) = &keeper {
                front.sessions.trim(session, &log);
            }
            if answers {
                log.close();
                return;
            }
        }
        if let Some(id) = request {
            log.push(unanswered(id).into());
        }
        log.close();
    });
}

/// The error answer to request `id` whose session ended before answering it.
fn unanswered(id: Value) -> String {
    let message = "The gateway session ended before answering; send the request again";
    serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": error_codes::INTERNAL_ERROR, "message": message}}).to_string()
}

/// Whether `message` is the response to the request of id `id` (read by
/// [`Message::parse`], which leaves the result unparsed).
fn answers(message: &Message, id: &Value) -> bool {
    match message {
        Message::Response { id: Some(answered), .. } => serde_json::to_value(answered).is_ok_and(|answered| answered == *id),
        _ => false,
    }
}

/// A request's stream until its first message. When that is the answer it
/// becomes the JSON response at once: no log, no pump task, no second
/// parse. Otherwise, or when the response is dropped before the first
/// message (the client went), the stream goes on in a [`pump`] as before,
/// holding the request's permit and its count in flight until it is
/// answered or its session ends.
struct Waiting {
    frames: Option<mpsc::Receiver<Frame>>,
    request: Value,
    hold: Vec<Box<dyn Send>>,
    keeper: Keeper,
}

/// The first message of a request's stream.
enum First {
    /// The answer, as the JSON text of the response, and its error's code if it is one.
    Answer(String, Option<i64>),
    /// Another message: the answer comes as an SSE stream.
    Other(Frame),
}

impl Waiting {
    async fn first(&mut self) -> First {
        let Some(frames) = self.frames.as_mut() else { return First::Answer(unanswered(self.request.clone()), None) };
        let Some(frame) = frames.recv().await else {
            self.frames = None;
            return First::Answer(unanswered(self.request.clone()), Some(error_codes::INTERNAL_ERROR));
        };
        match Message::parse(frame.json()) {
            Ok(message) if answers(&message, &self.request) => {
                self.frames = None;
                let code = match message {
                    Message::Response { outcome: Err(error), .. } => Some(error.code),
                    _ => None,
                };
                let mut bytes = frame.0;
                if bytes.last() == Some(&b'\n') {
                    bytes.pop();
                }
                let text = String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
                First::Answer(text, code)
            }
            _ => First::Other(frame),
        }
    }

    /// Pumps the rest of the stream (after `first`) into a log of its own, which it returns.
    fn pump(&mut self, first: Option<Frame>) -> Option<Arc<EventLog>> {
        let frames = self.frames.take()?;
        let log = match &self.keeper {
            Some((_, session)) => session.open_stream(),
            None => EventLog::new(1),
        };
        let hold = std::mem::take(&mut self.hold);
        pump_from(first, frames, log.clone(), Some(self.request.clone()), hold, self.keeper.take());
        Some(log)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        // The client went before the first message: the request goes on as it would have.
        if self.frames.is_some() && tokio::runtime::Handle::try_current().is_ok() {
            self.pump(None);
        }
    }
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

/// A request's answer as a JSON response: 200, or for a 2026-07-28
/// request (`modern`) whose answer is an error, that error's status.
fn json_answer(text: String, code: Option<i64>, modern: bool) -> Response {
    let status = match (modern, code) {
        (true, Some(code)) => modern::status_of_error(code),
        _ => StatusCode::OK,
    };
    (status, [(header::CONTENT_TYPE, "application/json")], text).into_response()
}

/// Answers a request from its log: JSON when the first message is a
/// response (then nothing of it is kept: a JSON answer has no event id to
/// resume from), SSE otherwise. `stateless` is the 2026-07-28 request's own
/// session, ended if the response is dropped before its end; `permit`
/// lasts as long as the response.
async fn answer(log: Arc<EventLog>, stateless: Option<ClosePort>, permit: Arc<Permit>) -> Response {
    let modern = stateless.is_some();
    let mut events = Box::pin(log.read_from(0, true));
    let Some(first) = events.next().await else {
        return rpc_refusal(StatusCode::INTERNAL_SERVER_ERROR, None, error_codes::INTERNAL_ERROR, "The request's stream ended empty");
    };
    // One parse that leaves a result unparsed: only an error's code matters here.
    if let Ok(Message::Response { outcome, .. }) = Message::parse(first.data.as_bytes()) {
        log.release_before(u64::MAX);
        return json_answer(first.data.to_string(), outcome.err().map(|error| error.code), modern);
    }
    let stream = futures::stream::iter([first]).chain(events).map(move |event| {
        let _ = (&stateless, &permit);
        sse_event(&event)
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response()
}

/// Delivers one message and answers it: a stream for a request (counted
/// against `client`'s bounds), 202 otherwise.
async fn serve_message(
    front: &Arc<Front>,
    posted: Posted,
    session: Option<Arc<Session>>,
    client: &ClientKey,
    caller: Option<Arc<Identity>>,
) -> Response {
    let permit = match posted.is_request() {
        true => match front.requests.admit(client, posted.method() == Some(methods::SUBSCRIPTIONS_LISTEN)) {
            Ok(permit) => Some(Arc::new(permit)),
            Err(refused) => return with_session_header(front.refusals.count(refused).response(posted.id()), session.as_deref()),
        },
        false => None,
    };
    let (outbox, frames) = Outbox::new();
    let busy: Option<Busy> = session.as_ref().map(|session| session.hold());
    let port = match &session {
        Some(session) => session.port.clone(),
        None => match front.gateway.stateless(caller).await {
            Some(port) => port,
            None => return stopping(),
        },
    };
    let own = session.is_none().then(|| ClosePort(port.clone()));
    let Some(permit) = permit else {
        // Answers to the server's requests and notifications: nothing comes back on this stream.
        let (message, params) = posted.into_parts();
        port.deliver(message, params, outbox).await;
        drop((frames, busy, own));
        return with_session_header(StatusCode::ACCEPTED.into_response(), session.as_deref());
    };
    let mut hold: Vec<Box<dyn Send>> = vec![Box::new(InFlight::new(front)), Box::new(permit.clone())];
    if let Some(busy) = busy {
        hold.push(Box::new(busy));
    }
    if session.is_none() {
        hold.push(Box::new(ClosePort(port.clone())));
    }
    let keeper = session.clone().map(|session| (front.clone(), session));
    let request = posted.id().cloned().unwrap_or_default();
    let mut waiting = Waiting { frames: Some(frames), request, hold, keeper };
    let (message, params) = posted.into_parts();
    // A session that is gone drops the outbox unread: the request is then answered with an error.
    let (_, first) = tokio::join!(port.deliver(message, params, outbox), waiting.first());
    let response = match first {
        First::Answer(text, code) => {
            drop(waiting);
            json_answer(text, code, own.is_some())
        }
        First::Other(frame) => match waiting.pump(Some(frame)) {
            Some(log) => answer(log, own, permit).await,
            None => rpc_refusal(StatusCode::INTERNAL_SERVER_ERROR, None, error_codes::INTERNAL_ERROR, "The request's stream ended empty"),
        },
    };
    with_session_header(response, session.as_deref())
}

pub(super) async fn post(
    State(front): State<Arc<Front>>,
    Client(client): Client,
    Caller(caller): Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if front.draining.is_cancelled() {
        return stopping();
    }
    if let Some(refusal) = require_json(&headers) {
        return refusal;
    }
    let mut posted = match parse(&body) {
        Ok(posted) => posted,
        Err(refusal) => return *refusal,
    };
    posted.take_trace_context(&headers);
    if let Some(id) = header_text(&headers, SESSION_ID) {
        let Some(session) = front.sessions.get(id, caller.as_deref()) else { return unknown_session(posted.id()) };
        if let Some(version) = header_text(&headers, PROTOCOL_VERSION).map(str::trim) {
            if !is_supported_legacy_version(version) {
                return rpc_error(StatusCode::BAD_REQUEST, posted.id(), unsupported_version(version));
            }
        }
        return serve_message(&front, posted, Some(session), &client, None).await;
    }
    let modern_header = header_text(&headers, PROTOCOL_VERSION).is_some_and(|version| is_modern_version(version.trim()));
    if posted.method() == Some(methods::INITIALIZE) && !modern_header {
        return match open_session(&front, &client, caller, None).await {
            Ok(session) => serve_message(&front, posted, Some(session), &client, None).await,
            Err(refusal) => *refusal,
        };
    }
    if modern::is_modern(&headers, &posted.value) {
        if let Err(error) = modern::check(&headers, &posted.value) {
            let status = modern::status_of_error(error.code);
            return rpc_error(status, posted.id(), error);
        }
        return serve_message(&front, posted, None, &client, caller).await;
    }
    let message = "Bad request: no Mcp-Session-Id; send `initialize` first (or a 2026-07-28 request with its MCP-Protocol-Version)";
    rpc_refusal(StatusCode::BAD_REQUEST, posted.id(), error_codes::INVALID_REQUEST, message)
}

/// Opens a session of `client`, its standalone messages pumped into its GET stream
/// (or, for a legacy HTTP+SSE session, its outbox kept for every message).
pub(super) async fn open_session(
    front: &Arc<Front>,
    client: &ClientKey,
    caller: Option<Arc<Identity>>,
    legacy: Option<()>,
) -> Result<Arc<Session>, Box<Response>> {
    let full = |refused| Box::new(front.refusals.count(refused).response(None));
    front.sessions.has_room(client).map_err(full)?;
    let id = front.sessions.new_id().map_err(|_| {
        let message = "The gateway cannot make a session id: the system's random generator failed; retry later";
        Box::new(rpc_refusal(StatusCode::SERVICE_UNAVAILABLE, None, error_codes::INTERNAL_ERROR, message))
    })?;
    let (standalone, frames) = Outbox::new();
    let Some(port) = front.gateway.open(&front.sessions.next_caller(), caller.clone(), standalone.clone()).await else {
        return Err(Box::new(stopping()));
    };
    let session = front.sessions.insert(id, port, client.clone(), caller).map_err(full)?;
    pump(frames, session.standalone.clone(), None, Vec::new(), Some((front.clone(), session.clone())));
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
fn get_stream(
    front: &Arc<Front>,
    session: Arc<Session>,
    log: Arc<EventLog>,
    seq: u64,
    permit: Permit,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let standalone = log.stream() == 0;
    let busy = session.hold();
    let opened = OpenGet(session, standalone);
    let draining = front.draining.clone().cancelled_owned();
    log.read_from(seq, true).take_until(draining).map(move |event| {
        let _ = (&busy, &opened, &permit);
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

pub(super) async fn get(State(front): State<Arc<Front>>, Client(client): Client, Caller(caller): Caller, headers: HeaderMap) -> Response {
    let Some(id) = header_text(&headers, SESSION_ID) else {
        let message = "Method not allowed: GET needs an Mcp-Session-Id (the 2026-07-28 era has no GET stream)";
        return (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "POST")], message).into_response();
    };
    let Some(session) = front.sessions.get(id, caller.as_deref()) else { return unknown_session(None) };
    let accepts =
        header_text(&headers, header::ACCEPT.as_str()).is_none_or(|accept| accept.contains("text/event-stream") || accept.contains("*/*"));
    if !accepts {
        return (StatusCode::NOT_ACCEPTABLE, "Not acceptable: the GET stream is text/event-stream").into_response();
    }
    let resume = header_text(&headers, LAST_EVENT_ID).and_then(parse_event_id);
    let (log, seq) = match resume {
        Some((stream, seq)) => match session.stream(stream) {
            Some(log) if log.lost(seq + 1) => return dropped_events(&front, stream, seq),
            Some(log) if !log.is_spent() => (log, seq + 1),
            _ if session.opened(stream) => {
                let message = format!(
                    "Not found: stream {stream} is no longer kept (read to its end, or one of the session's oldest {} streams); \
                     send the request again",
                    super::sessions::MAX_STREAMS
                );
                return (StatusCode::NOT_FOUND, message).into_response();
            }
            _ => return (StatusCode::NOT_FOUND, "Not found: this session has no such stream").into_response(),
        },
        None => (session.standalone.clone(), session.standalone.undelivered()),
    };
    if log.stream() == 0 && session.get_open.swap(true, std::sync::atomic::Ordering::AcqRel) {
        return (StatusCode::CONFLICT, "Conflict: this session's GET stream is open already (one per session)").into_response();
    }
    let permit = match front.requests.admit(&client, false) {
        Ok(permit) => permit,
        Err(refused) => {
            if log.stream() == 0 {
                session.get_open.store(false, std::sync::atomic::Ordering::Release);
            }
            return front.refusals.count(refused).response(None);
        }
    };
    let stream = get_stream(&front, session.clone(), log, seq, permit);
    with_session_header(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response(), Some(&session))
}

/// The answer to a resumption of events dropped to keep within the session's buffer bound.
fn dropped_events(front: &Front, stream: u64, seq: u64) -> Response {
    let limits = front.sessions.limits();
    let message = format!(
        "Not found: the events of stream {stream} after {stream}:{seq} were dropped to keep the resumption buffers within their \
         bounds ({} bytes per session, {} in all; the oldest go first); send the request again",
        limits.buffer_per_session, limits.buffer_total
    );
    (StatusCode::NOT_FOUND, message).into_response()
}

pub(super) async fn delete(State(front): State<Arc<Front>>, Caller(caller): Caller, headers: HeaderMap) -> Response {
    let Some(id) = header_text(&headers, SESSION_ID) else {
        return (StatusCode::BAD_REQUEST, "Bad request: DELETE needs the Mcp-Session-Id of the session to end").into_response();
    };
    // Only its opener may end a session.
    if front.sessions.get(id, caller.as_deref()).is_none() {
        return unknown_session(None);
    }
    match front.sessions.end(id) {
        true => StatusCode::NO_CONTENT.into_response(),
        false => unknown_session(None),
    }
}
