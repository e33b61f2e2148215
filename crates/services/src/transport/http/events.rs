//! Reading what a server sends back: JSON bodies (one message or a batch)
//! and server-sent event streams, each message parsed once into the
//! connection's [`Frame`], never more than `max_frame` bytes held for one
//! of them.

use std::pin::Pin;

use futures::{Stream, StreamExt};
use serde_json::value::RawValue;

use crate::codec::{decode_line, Frame};
pub(super) use crate::sse::Event;
use crate::sse::SseError;

/// Bytes of an SSE event beyond its message that are tolerated (field
/// names, `id:` and `event:` lines).
const EVENT_OVERHEAD: usize = 4096;
/// How much of an error body is kept for a message.
const ERROR_BODY_BYTES: usize = 2048;

/// Why an answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ReadError {
    /// One message (a body or an event) is over `max_frame`.
    TooLarge { max: usize },
    /// The stream broke or the body could not be read.
    Broken(String),
    /// Not JSON-RPC.
    Malformed(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::TooLarge { max } => {
                write!(f, "the answer was over this server's max_frame of {max} bytes; it was skipped. Raise max_frame to accept it")
            }
            ReadError::Broken(why) => write!(f, "the answer could not be read: {why}"),
            ReadError::Malformed(why) => write!(f, "the answer is not JSON-RPC: {why}"),
        }
    }
}

/// The messages of a JSON body, at most `max` bytes.
pub(super) async fn json_body(response: reqwest::Response, max: usize) -> Result<Vec<Frame>, ReadError> {
    let body = capped(response, max).await?;
    let trimmed = body.trim_ascii_start();
    if !trimmed.starts_with(b"[") {
        return Ok(vec![decode_line(trimmed)]);
    }
    let batch: Vec<Box<RawValue>> = serde_json::from_slice(trimmed).map_err(|e| ReadError::Malformed(e.to_string()))?;
    Ok(batch.iter().map(|message| decode_line(message.get().as_bytes())).collect())
}

/// The body, or the error once it passes `max` bytes.
async fn capped(response: reqwest::Response, max: usize) -> Result<Vec<u8>, ReadError> {
    if response.content_length().is_some_and(|length| length as usize > max) {
        return Err(ReadError::TooLarge { max });
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| ReadError::Broken(crate::error::error_chain(&e)))?;
        if body.len() + chunk.len() > max {
            return Err(ReadError::TooLarge { max });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The start of an error body, for a message; an HTML page is only named.
pub(super) async fn error_text(response: reqwest::Response) -> String {
    let content_type = response.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if content_type.starts_with("text/html") {
        return "(an HTML page)".into();
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(Ok(chunk)) = chunks.next().await {
        body.extend_from_slice(&chunk);
        if body.len() >= ERROR_BODY_BYTES {
            break;
        }
    }
    body.truncate(ERROR_BODY_BYTES);
    String::from_utf8_lossy(&body).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The server-sent events of `response`; an event over `max` bytes ends
/// the stream with [`ReadError::TooLarge`].
pub(super) type Events = Pin<Box<dyn Stream<Item = Result<Event, ReadError>> + Send>>;

pub(super) fn events(response: reqwest::Response, max: usize) -> Events {
    let bytes = response.bytes_stream().map(|chunk| chunk.map_err(|e| ReadError::Broken(crate::error::error_chain(&e))));
    crate::sse::decode(bytes, max + EVENT_OVERHEAD)
        .map(move |event| {
            event.map_err(|e| match e {
                SseError::TooLarge { .. } => ReadError::TooLarge { max },
                SseError::Transport(e) => e,
            })
        })
        .boxed()
}
