//! The HTTP+SSE transport of protocol 2024-11-05: a GET opens the event
//! stream, whose first `endpoint` event names where to POST messages
//! (within the same origin only); every message of the server arrives on
//! that stream as a `message` event. The stream is the connection: when it
//! ends, the bridge ends.

use std::sync::Arc;

use futures::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::Url;

use super::events::{self, Events, ReadError};
use super::link::{Ending, Link, Outgoing};
use super::streamable::message_of;

/// How long the event stream has to name its endpoint.
const ENDPOINT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Opens the event stream and waits for its `endpoint`: where to POST,
/// and the rest of the stream.
pub(super) async fn open(link: &Link) -> Result<(Url, Events), String> {
    let response = link
        .send("GET", |http| http.get(link.url.clone()).header(ACCEPT, "text/event-stream"))
        .await
        .map_err(|_| "the connection was lost".to_string())?;
    let status = response.status();
    let content_type = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    if !status.is_success() || !content_type.starts_with("text/event-stream") {
        return Err(format!("a GET answered HTTP {status} with content type {content_type:?}, not an event stream"));
    }
    let mut stream = events::events(response, link.max_frame);
    match tokio::time::timeout(ENDPOINT_WAIT, endpoint(link, &mut stream)).await {
        Ok(endpoint) => endpoint.map(|endpoint| (endpoint, stream)),
        Err(_) => Err(format!("the event stream named no endpoint within {ENDPOINT_WAIT:?}")),
    }
}

/// The URL the first `endpoint` event names.
async fn endpoint(link: &Link, stream: &mut Events) -> Result<Url, String> {
    while let Some(item) = stream.next().await {
        let event = item.map_err(|e| format!("the event stream ended before naming its endpoint: {e}"))?;
        if event.event != "endpoint" {
            continue;
        }
        let endpoint = link.url.join(event.data.trim()).map_err(|e| format!("the endpoint {:?} is not a URL: {e}", event.data))?;
        if endpoint.origin() != link.url.origin() {
            return Err(format!(
                "the endpoint is on another origin ({}); messages are only sent to the configured server's origin",
                endpoint.origin().ascii_serialization()
            ));
        }
        return Ok(endpoint);
    }
    Err("the event stream ended before naming its endpoint".into())
}

/// Delivers the server's messages until the stream ends, which ends the bridge.
pub(super) async fn read(link: Arc<Link>, mut stream: Events) {
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) if event.event.is_empty() || event.event == "message" => {
                if let Some(message) = message_of(&event) {
                    link.deliver(message).await;
                }
            }
            Ok(_) => {}
            Err(error @ ReadError::TooLarge { .. }) => {
                return link
                    .end(Ending::Lost(format!("the event stream of {} carried a message it cannot take: {error}", link.shown_url()), None))
            }
            Err(error) => return link.end(Ending::Lost(format!("the event stream of {} broke: {error}", link.shown_url()), None)),
        }
    }
    link.end(Ending::Lost(format!("the server closed the event stream of {}", link.shown_url()), None))
}

/// POSTs `frame` to the endpoint; a refused request is answered with the
/// error (its answer would otherwise never come).
pub(super) async fn post(link: Arc<Link>, endpoint: Url, frame: Outgoing) {
    let sent =
        link.send("POST", |http| http.post(endpoint.clone()).header(CONTENT_TYPE, "application/json").body(frame.text.clone())).await;
    let Ok(response) = sent else { return };
    let status = response.status();
    if status.is_success() {
        return;
    }
    let body = events::error_text(response).await;
    let message = format!("HTTP {status} from {}: {body}", link.shown_url());
    match &frame.id {
        Some(id) if frame.is_request() => link.fail(id, message).await,
        _ => link.note(message),
    }
}
