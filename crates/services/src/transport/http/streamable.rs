//! Streamable HTTP: one POST per message, answers as JSON or as an event
//! stream; the session of the `initialize` era (`Mcp-Session-Id` kept and
//! echoed, a lost session replaced transparently, the GET stream for
//! server-initiated messages, resumption with `Last-Event-ID`, DELETE at
//! the end), and the 2026-07-28 era's mirrored headers and tool filtering.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::{RequestBuilder, Response, StatusCode};
use serde_json::Value;

use super::events::{self, ReadError};
use super::headers;
use super::link::{answers, Broken, Link, Outgoing};
use crate::codec::{decode_line, Frame};
use crate::protocol::{methods, Message};

/// Times a broken stream is resumed at most before the request fails.
const MAX_RESUMES: u32 = 5;
/// The wait before resuming when the server named none (`retry`).
const DEFAULT_RETRY: Duration = Duration::from_millis(500);
/// The bounds of a server's `retry`: a `retry: 0` must not make the client
/// reconnect as fast as the server answers, nor a huge one stall it.
const RETRY_BOUNDS: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(30));

/// How long to wait before opening a stream again.
fn reconnect_wait(retry: Option<Duration>) -> Duration {
    retry.unwrap_or(DEFAULT_RETRY).clamp(RETRY_BOUNDS.0, RETRY_BOUNDS.1)
}

/// A POST as it was sent.
pub(super) struct Sent {
    pub(super) response: Response,
    /// The session it was sent in, `None` outside one.
    session: Option<u64>,
}

/// POSTs `frame` with the session's or the era's headers.
pub(super) async fn post(link: &Link, frame: &Outgoing) -> Result<Sent, Broken> {
    let (extra, session) = request_headers(link, frame);
    let response = link
        .send("POST", |http| {
            let request = http
                .post(link.url.clone())
                .header(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"))
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(frame.text.clone());
            with(request, &extra)
        })
        .await?;
    Ok(Sent { response, session })
}

fn with(mut request: RequestBuilder, headers: &[(String, String)]) -> RequestBuilder {
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    request
}

/// The MCP headers of `frame`, and the session it goes in.
fn request_headers(link: &Link, frame: &Outgoing) -> (Vec<(String, String)>, Option<u64>) {
    if let Some(version) = &frame.modern {
        let value = frame.value();
        let mut sent = headers::mirrored(&value, version);
        if frame.is(methods::TOOLS_CALL) {
            let tool = value.pointer("/params/name").and_then(Value::as_str).unwrap_or_default();
            if let Some(params) = link.param_headers.lock().ok().and_then(|map| map.get(tool).cloned()) {
                sent.extend(headers::param_values(&params, value.pointer("/params/arguments")));
            }
        }
        return (sent, None);
    }
    session_headers(link, !frame.is(methods::INITIALIZE))
}

/// `Mcp-Session-Id` and, after `initialize`, `MCP-Protocol-Version`.
fn session_headers(link: &Link, with_version: bool) -> (Vec<(String, String)>, Option<u64>) {
    let Ok(session) = link.session.lock() else { return (Vec::new(), None) };
    let mut sent = Vec::new();
    if let Some(id) = &session.id {
        sent.push((headers::SESSION_ID.to_string(), id.clone()));
    }
    if let Some(version) = session.version.as_ref().filter(|_| with_version) {
        sent.push((headers::PROTOCOL_VERSION.to_string(), version.clone()));
    }
    (sent, session.id.as_ref().map(|_| session.epoch))
}

/// POSTs request `frame` and answers it.
pub(super) async fn request(link: Arc<Link>, frame: Outgoing) {
    if let Ok(sent) = post(&link, &frame).await {
        answer(link, frame, sent).await;
    }
}

/// Answers request `frame` from its POST's response: the server's answer,
/// or an error answer saying why there is none. A request refused because
/// the server lost the session (404) is sent once more in a new session:
/// the server did not run it.
pub(super) async fn answer(link: Arc<Link>, frame: Outgoing, mut sent: Sent) {
    let id = frame.id.clone().unwrap_or_default();
    if frame.is(methods::INITIALIZE) {
        if let Ok(mut session) = link.session.lock() {
            session.initialize = Some(frame.value());
            session.id = None;
        }
        link.set_modern(false);
    }
    if let (StatusCode::NOT_FOUND, Some(epoch)) = (sent.response.status(), sent.session) {
        if !reinitialize(&link, epoch).await {
            let message = format!("server `{}` ended the session (HTTP 404) and a new one could not be opened", link.name);
            return link.fail(&id, message).await;
        }
        sent = match post(&link, &frame).await {
            Ok(sent) => sent,
            Err(Broken) => return,
        };
    }
    let response = sent.response;
    if !response.status().is_success() {
        return refused(&link, &id, response).await;
    }
    let session_id = session_id(&response);
    match read_answer(&link, response, &id).await {
        Ok(message) if frame.is(methods::INITIALIZE) => {
            opened(&link, &message, session_id);
            link.deliver(message).await;
        }
        Ok(message) if frame.is(methods::TOOLS_LIST) && link.is_modern() => link.deliver(filter_tools(&link, message)).await,
        Ok(message) => link.deliver(message).await,
        Err(error) => link.fail(&id, error).await,
    }
}

fn session_id(response: &Response) -> Option<String> {
    response.headers().get(headers::SESSION_ID).and_then(|v| v.to_str().ok()).map(str::to_string)
}

/// An error status: the server's JSON-RPC answer when the body is one,
/// else an error answer with the status and the start of the body.
async fn refused(link: &Link, id: &Value, response: Response) {
    let status = response.status();
    let body = events::error_text(response).await;
    let message = decode_line(body.as_bytes());
    if answers(&message, id) {
        return link.deliver(message).await;
    }
    let detail = if body.is_empty() { String::new() } else { format!(": {body}") };
    link.fail(id, format!("HTTP {status} from {}{detail}", link.shown_url())).await;
}

/// The answer to request `id` from a successful response; the other
/// messages that come with it are delivered on the way.
async fn read_answer(link: &Link, response: Response, id: &Value) -> Result<Frame, String> {
    if response.status() == StatusCode::ACCEPTED {
        return Err("the server accepted the request (HTTP 202) but sent no answer".into());
    }
    let content_type = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if starts_with_ignoring_case(content_type, "text/event-stream") {
        return stream_answer(link, response, id).await;
    }
    if !starts_with_ignoring_case(content_type, "application/json") {
        let content_type = content_type.to_ascii_lowercase();
        return Err(format!("the answer has content type {content_type:?}, neither application/json nor text/event-stream"));
    }
    let mut answer = None;
    for message in events::json_body(response, link.max_frame).await.map_err(|e| e.to_string())? {
        match answers(&message, id) {
            true => answer = Some(message),
            false => link.deliver(message).await,
        }
    }
    answer.ok_or_else(|| "the JSON answer holds no answer to the request".into())
}

/// Whether header value `value` starts with `prefix`, which is lowercase.
fn starts_with_ignoring_case(value: &str, prefix: &str) -> bool {
    value.get(..prefix.len()).is_some_and(|start| start.eq_ignore_ascii_case(prefix))
}

/// Reads an answer stream up to the answer to `id`, resuming it with
/// `Last-Event-ID` when it breaks (or the server closes it to be polled).
async fn stream_answer(link: &Link, response: Response, id: &Value) -> Result<Frame, String> {
    let mut stream = events::events(response, link.max_frame);
    let (mut last_event, mut retry) = (None::<String>, None);
    for resumes in 0..=MAX_RESUMES {
        if resumes > 0 {
            let Some(from) = last_event.clone() else { break };
            tokio::time::sleep(reconnect_wait(retry)).await;
            link.note(format!("the answer stream of request {id} broke; resuming after event {from}"));
            let resumed = link.send("GET", |http| get(link, http, Some(&from))).await.map_err(|_| "the connection was lost".to_string())?;
            if !resumed.status().is_success() {
                return Err(format!("the answer stream broke and could not be resumed (HTTP {})", resumed.status()));
            }
            stream = events::events(resumed, link.max_frame);
        }
        while let Some(item) = stream.next().await {
            let event = match item {
                Ok(event) => event,
                Err(too_large @ ReadError::TooLarge { .. }) => return Err(too_large.to_string()),
                Err(_) => break,
            };
            if !event.id.is_empty() {
                last_event = Some(event.id.clone());
            }
            retry = event.retry.or(retry);
            if let Some(message) = message_of(&event) {
                if answers(&message, id) {
                    return Ok(message);
                }
                link.deliver(message).await;
            }
        }
        if last_event.is_none() {
            break;
        }
    }
    Err(match last_event {
        None => "the server closed the answer stream before answering, and named no event to resume from".into(),
        Some(_) => format!("the answer stream broke {} times; the request was given up", MAX_RESUMES + 1),
    })
}

/// The message an event carries; `None` for an event without data (a
/// priming event). Data that is not JSON-RPC becomes the connection's
/// report of a bad message, as a bad line of a child process does.
pub(super) fn message_of(event: &events::Event) -> Option<Frame> {
    if event.data.trim().is_empty() {
        return None;
    }
    Some(decode_line(event.data.as_bytes()))
}

/// A GET of the endpoint's event stream in the current session.
fn get(link: &Link, http: &reqwest::Client, last_event: Option<&str>) -> RequestBuilder {
    let (mut sent, _) = session_headers(link, true);
    if let Some(last_event) = last_event {
        sent.push((headers::LAST_EVENT_ID.to_string(), last_event.to_string()));
    }
    with(http.get(link.url.clone()).header(ACCEPT, "text/event-stream"), &sent)
}

/// The result of an answer, `None` for an error answer or another message.
fn result_of(message: &Frame) -> Option<&serde_json::value::RawValue> {
    match message {
        Ok(Message::Response { outcome: Ok(result), .. }) => Some(result),
        _ => None,
    }
}

/// The `initialize` answer `message` came, in session `session_id` if the
/// server opened one: what later requests must carry.
fn opened(link: &Link, message: &Frame, session_id: Option<String>) {
    let result: Value = result_of(message).and_then(|result| serde_json::from_str(result.get()).ok()).unwrap_or_default();
    let version = result.get("protocolVersion").and_then(Value::as_str).map(str::to_string);
    link.show(|status| status.set_session(session_id.as_deref()));
    if let Ok(mut session) = link.session.lock() {
        session.id = session_id;
        session.version = version;
        session.epoch += 1;
    }
    link.opened.notify_one();
}

/// Replaces session `epoch`, which the server no longer knows, by sending
/// the connection's `initialize` again; false when that failed. Requests
/// that find the same session lost wait for one replacement.
async fn reinitialize(link: &Link, epoch: u64) -> bool {
    let _turn = link.reopening.lock().await;
    if link.epoch() != epoch {
        return true;
    }
    let Some(mut initialize) = link.session.lock().ok().and_then(|mut s| {
        s.id = None;
        s.initialize.clone()
    }) else {
        return false;
    };
    let id = Value::from(format!("mcpvisor-reinitialize-{epoch}"));
    let Some(members) = initialize.as_object_mut() else { return false };
    members.insert("id".into(), id.clone());
    let Ok(sent) = post(link, &Outgoing::from_value(initialize)).await else { return false };
    if !sent.response.status().is_success() {
        link.note(format!("re-initializing after a lost session failed: HTTP {}", sent.response.status()));
        return false;
    }
    let session_id = session_id(&sent.response);
    let answer = match read_answer(link, sent.response, &id).await {
        Ok(answer) if result_of(&answer).is_none() => {
            link.note("re-initializing after a lost session failed: the server refused initialize".into());
            return false;
        }
        Ok(answer) => answer,
        Err(error) => {
            link.note(format!("re-initializing after a lost session failed: {error}"));
            return false;
        }
    };
    opened(link, &answer, session_id);
    let initialized = serde_json::json!({"jsonrpc": "2.0", "method": methods::INITIALIZED});
    if let Ok(sent) = post(link, &Outgoing::from_value(initialized)).await {
        drop(sent);
    }
    link.note(format!("server `{}` had ended the session (HTTP 404); a new session was opened", link.name));
    true
}

/// A 2026-07-28 `tools/list` answer without the tools whose `x-mcp-header`
/// annotations are invalid (each noted); the valid ones are remembered.
fn filter_tools(link: &Link, message: Frame) -> Frame {
    let Some(Ok(mut result)) = result_of(&message).map(|result| serde_json::from_str::<Value>(result.get())) else { return message };
    let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else { return message };
    let before = tools.len();
    let mut found = Vec::new();
    tools.retain(|tool| {
        let name = tool.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
        match headers::tool_params(tool) {
            Ok(params) => {
                if !params.is_empty() {
                    found.push((name, params));
                }
                true
            }
            Err(why) => {
                link.note(format!("tool `{name}` was left out: {why}"));
                false
            }
        }
    });
    let changed = tools.len() != before;
    if let Ok(mut map) = link.param_headers.lock() {
        map.extend(found);
    }
    if !changed {
        return message;
    }
    match (serde_json::value::to_raw_value(&result), message) {
        (Ok(result), Ok(Message::Response { id, .. })) => Ok(Message::Response { id, outcome: Ok(result) }),
        (_, message) => message,
    }
}

/// POSTs a notification or an answer to the server's request; nothing
/// waits for it, so a refusal is only noted. Messages that come back are
/// delivered.
pub(super) async fn notify(link: &Link, frame: &Outgoing) {
    let Ok(sent) = post(link, frame).await else { return };
    let response = sent.response;
    let status = response.status();
    let what = frame.method.clone().unwrap_or_else(|| "an answer".into());
    if !status.is_success() {
        let body = events::error_text(response).await;
        return link.note(format!("the server refused {what} with HTTP {status}: {body}"));
    }
    let streamed = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|t| t.starts_with("text/event-stream"));
    if streamed {
        let mut stream = events::events(response, link.max_frame);
        while let Some(Ok(event)) = stream.next().await {
            if let Some(message) = message_of(&event) {
                link.deliver(message).await;
            }
        }
    }
}

/// The GET stream of each session: messages the server sends outside
/// answers, resumed with `Last-Event-ID` when it breaks. A server without
/// one (405) is fine.
pub(super) async fn listen(link: Arc<Link>) {
    loop {
        link.opened.notified().await;
        if !link.is_modern() {
            listen_in_session(&link).await;
        }
    }
}

async fn listen_in_session(link: &Link) {
    let epoch = link.epoch();
    let (mut last_event, mut retry, mut failures) = (None::<String>, None, 0);
    while link.epoch() == epoch && failures <= MAX_RESUMES {
        let Ok(response) = link.send("GET", |http| get(link, http, last_event.as_deref())).await else { return };
        match response.status() {
            StatusCode::METHOD_NOT_ALLOWED => return,
            status if !status.is_success() => {
                return link.note(format!("the server refused its GET stream (HTTP {status}); its own messages come only with answers"));
            }
            _ => {}
        }
        let mut stream = events::events(response, link.max_frame);
        while let Some(item) = stream.next().await {
            let event = match item {
                Ok(event) => event,
                Err(error) => {
                    link.note(format!("the GET stream broke: {error}"));
                    break;
                }
            };
            failures = 0;
            if !event.id.is_empty() {
                last_event = Some(event.id.clone());
            }
            retry = event.retry.or(retry);
            if let Some(message) = message_of(&event) {
                link.deliver(message).await;
            }
        }
        failures += 1;
        tokio::time::sleep(reconnect_wait(retry) * failures).await;
    }
}

/// Ends the session, if any, with DELETE (a server that does not allow it is fine).
pub(super) async fn delete_session(link: &Link) {
    let (sent, session) = session_headers(link, true);
    if session.is_none() {
        return;
    }
    let _ = link.send("DELETE", |http| with(http.delete(link.url.clone()), &sent)).await;
}
