//! The HTTP+SSE transport of 2024-11-05, for clients that still speak it.
//!
//! `GET /sse` opens a session and its stream; the first event is
//! `endpoint`, whose data is the URL to POST messages to
//! (`/message?sessionId=ID`). Every answer and every other message of the
//! session goes down that one stream as `message` events; a POST gets 202
//! at once. Closing the stream ends the session. The stream counts as an
//! open request of its client while it lasts.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use super::guard::Caller;
use super::limits::Client;
use super::streamable::{open_session, stopping, with_trace_context};
use super::{rpc_refusal, Front, MESSAGE_PATH};
use crate::protocol::{error_codes, Message};

/// Ends the session when the stream holding it is dropped.
struct EndOnDrop(Arc<Front>, String);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.0.sessions.end(&self.1);
    }
}

pub(super) async fn open(State(front): State<Arc<Front>>, Client(client): Client, Caller(caller): Caller) -> Response {
    if front.draining.is_cancelled() {
        return stopping();
    }
    let permit = match front.requests.admit(&client, false) {
        Ok(permit) => permit,
        Err(refused) => return front.refusals.count(refused).response(None),
    };
    let session = match open_session(&front, &client, caller, Some(())).await {
        Ok(session) => session,
        Err(refusal) => return *refusal,
    };
    let endpoint = Event::default().event("endpoint").data(format!("{MESSAGE_PATH}?sessionId={}", session.id));
    let ending = EndOnDrop(front.clone(), session.id.clone());
    let busy = session.hold();
    let messages = session.standalone.read_from(0, true).take_until(front.draining.clone().cancelled_owned()).map(move |event| {
        let _ = (&ending, &busy, &permit);
        Ok::<_, Infallible>(Event::default().event("message").data(&*event.data))
    });
    let stream = futures::stream::iter([Ok(endpoint)]).chain(messages);
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

pub(super) async fn post(
    State(front): State<Arc<Front>>,
    Caller(caller): Caller,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refusal) = super::require_json(&headers) {
        return refusal;
    }
    let id = url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(key, _)| key == "sessionId")
        .map(|(_, value)| value.into_owned());
    let Some(id) = id else {
        return (StatusCode::BAD_REQUEST, "Bad request: the message URL needs ?sessionId= (from the `endpoint` event)").into_response();
    };
    let Some(session) = front.sessions.get(&id, caller.as_deref()) else {
        return (StatusCode::NOT_FOUND, "Session not found: open a new stream at /sse").into_response();
    };
    let mut message = match Message::parse(&body) {
        Ok(message) => message,
        Err(problem) => return rpc_refusal(StatusCode::BAD_REQUEST, None, error_codes::PARSE_ERROR, format!("Invalid message: {problem}")),
    };
    let Some(outbox) = session.legacy_outbox.get().cloned() else {
        return (StatusCode::NOT_FOUND, "Session not found: open a new stream at /sse").into_response();
    };
    let _busy = session.hold();
    // As on the streamable path: a `traceparent` header goes into the request's `_meta`.
    if let Some(mut value) = headers.contains_key("traceparent").then(|| serde_json::from_slice::<serde_json::Value>(&body).ok()).flatten()
    {
        if let Some(traced) = with_trace_context(&mut value, &headers) {
            message = traced;
        }
    }
    match session.port.deliver(message, None, outbox).await {
        true => StatusCode::ACCEPTED.into_response(),
        false => (StatusCode::NOT_FOUND, "Session not found: it ended; open a new stream at /sse").into_response(),
    }
}
