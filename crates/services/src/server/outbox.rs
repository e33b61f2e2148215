//! Frames leaving a gateway session, and the bounded channels they go by.
//!
//! Invariants: every channel here is bounded ([`OUTBOX_CAPACITY`]); a
//! response waits for room (so a client that stops reading holds its
//! request's slot and the session stops admitting new requests), while a
//! notification that finds the channel full is dropped and counted, never
//! queued: memory does not grow with a slow client.

use serde::Serialize;
use tokio::sync::mpsc;

use crate::protocol::{notification_frame, request_frame, response_frame, ErrorObject, RequestId};

/// Frames one outbox holds before its writers wait (responses) or drop
/// (notifications).
pub const OUTBOX_CAPACITY: usize = 64;

/// One JSON-RPC message to the client, serialised, ending with `\n`.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame(pub Vec<u8>);

impl Frame {
    /// The message's JSON text, without the line end.
    pub fn json(&self) -> &[u8] {
        self.0.strip_suffix(b"\n").unwrap_or(&self.0)
    }

    /// Whether this frame answers a request (a transport may end a
    /// request's stream after it).
    pub fn is_response(&self) -> bool {
        matches!(crate::protocol::Message::parse(self.json()), Ok(crate::protocol::Message::Response { .. }))
    }

    pub fn response<R: Serialize>(id: &RequestId, outcome: Result<R, ErrorObject>) -> Frame {
        Frame(match &outcome {
            Ok(result) => response_frame(id, Ok(result)),
            Err(error) => response_frame::<()>(id, Err(error)),
        })
    }

    pub fn notification<P: Serialize>(method: &str, params: &P) -> Frame {
        Frame(notification_frame(method, params))
    }

    pub fn request<P: Serialize>(id: &RequestId, method: &str, params: &P) -> Frame {
        Frame(request_frame(id, method, params))
    }

    /// An error answering a message whose id could not be read.
    pub fn unidentified(error: ErrorObject) -> Frame {
        let mut bytes = serde_json::to_vec(&serde_json::json!({"jsonrpc": "2.0", "id": null, "error": error})).unwrap_or_default();
        bytes.push(b'\n');
        Frame(bytes)
    }
}

/// Where a session's frames go: to a stdio writer, or to one HTTP
/// response's SSE stream. Cloning shares the channel.
#[derive(Debug, Clone)]
pub struct Outbox(mpsc::Sender<Frame>);

impl Outbox {
    /// An outbox of [`OUTBOX_CAPACITY`] frames, and the receiver its transport drains.
    pub fn new() -> (Outbox, mpsc::Receiver<Frame>) {
        Outbox::with_capacity(OUTBOX_CAPACITY)
    }

    pub fn with_capacity(capacity: usize) -> (Outbox, mpsc::Receiver<Frame>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (Outbox(tx), rx)
    }

    /// Sends a frame that must arrive (a response, a request to the
    /// client): waits while the outbox is full. `false` when the client is gone.
    pub async fn send(&self, frame: Frame) -> bool {
        self.0.send(frame).await.is_ok()
    }

    /// Sends a frame that may be lost (a notification): dropped when the
    /// outbox is full or closed. `false` when it was dropped.
    pub fn offer(&self, frame: Frame) -> bool {
        self.0.try_send(frame).is_ok()
    }

    /// Whether the transport stopped reading for good.
    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }

    /// Whether both send to the same channel.
    pub fn same_as(&self, other: &Outbox) -> bool {
        self.0.same_channel(&other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_outbox_drops_notifications_and_keeps_responses_waiting() {
        let (outbox, mut rx) = Outbox::with_capacity(1);
        assert!(outbox.offer(Frame::notification("a", &serde_json::json!({}))));
        assert!(!outbox.offer(Frame::notification("b", &serde_json::json!({}))));
        let response = Frame::response(&RequestId::Number(1), Ok(serde_json::json!({})));
        let waiting = tokio::spawn({
            let outbox = outbox.clone();
            let response = response.clone();
            async move { outbox.send(response).await }
        });
        assert!(!rx.recv().await.unwrap().is_response());
        assert_eq!(rx.recv().await.unwrap(), response);
        assert!(waiting.await.unwrap());
        assert_eq!(response.json().last(), Some(&b'}'));
    }
}
