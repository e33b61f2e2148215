//! The editor as the agent side sees it: one writer of frames to stdout,
//! and requests to the editor (`fs/*`, `terminal/*`,
//! `session/request_permission`) matched with their responses.
//!
//! Invariants: frames are written whole and in the order they are sent
//! (one channel, one writer); a request's waiter is removed when its
//! response arrives, when the request future is dropped, or when the
//! editor goes away ([`Peer::close`]), which fails every waiter at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};

use crate::protocol::{error_codes, notification_frame, request_frame, response_frame, ErrorObject, RequestId};

/// The code of the error a request fails with when the editor's answer
/// was over `max_frame` (mcpvisor's own; never sent on the wire).
pub const ANSWER_TOO_LARGE: i64 = -32099;

type Waiter = oneshot::Sender<Result<Box<RawValue>, ErrorObject>>;

/// A cheap handle on the connection's output; clones share it.
#[derive(Clone)]
pub struct Peer {
    inner: Arc<Inner>,
}

struct Inner {
    out: mpsc::UnboundedSender<Vec<u8>>,
    next_id: AtomicI64,
    /// `None` once the editor is gone.
    waiting: Mutex<Option<HashMap<i64, Waiter>>>,
}

impl Peer {
    /// A peer whose frames arrive, newline-terminated, on the returned receiver.
    pub fn new() -> (Peer, mpsc::UnboundedReceiver<Vec<u8>>) {
        let (out, frames) = mpsc::unbounded_channel();
        let inner = Inner { out, next_id: AtomicI64::new(0), waiting: Mutex::new(Some(HashMap::new())) };
        (Peer { inner: Arc::new(inner) }, frames)
    }

    pub fn notify<P: Serialize>(&self, method: &str, params: &P) {
        let _ = self.inner.out.send(notification_frame(method, params));
    }

    pub fn respond<R: Serialize>(&self, id: &RequestId, outcome: Result<R, ErrorObject>) {
        let _ = self.inner.out.send(match &outcome {
            Ok(result) => response_frame(id, Ok(result)),
            Err(error) => response_frame::<()>(id, Err(error)),
        });
    }

    /// An error response to a message whose id could not be read.
    pub fn respond_unidentified(&self, error: ErrorObject) {
        let frame = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": error});
        let mut bytes = serde_json::to_vec(&frame).unwrap_or_default();
        bytes.push(b'\n');
        let _ = self.inner.out.send(bytes);
    }

    /// Sends a request to the editor and waits for its answer.
    pub async fn request<P: Serialize, R: DeserializeOwned>(&self, method: &str, params: &P) -> Result<R, ErrorObject> {
        self.send_request(method, params)?.answer().await
    }

    /// Writes a request to the editor now, behind every frame sent before
    /// it; its answer is awaited through the returned [`Pending`].
    pub fn send_request<P: Serialize>(&self, method: &str, params: &P) -> Result<Pending, ErrorObject> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, answer) = oneshot::channel();
        match self.lock().as_mut() {
            Some(waiting) => waiting.insert(id, tx),
            None => return Err(gone()),
        };
        let pending = Pending { peer: self.clone(), id, method: method.to_string(), answer };
        let _ = self.inner.out.send(request_frame(&RequestId::Number(id), method, params));
        Ok(pending)
    }

    /// Hands a response of the editor to the request waiting for it; one
    /// that nobody waits for (late, or unknown) is dropped.
    pub fn resolve(&self, id: Option<RequestId>, outcome: Result<Box<RawValue>, ErrorObject>) {
        let Some(RequestId::Number(id)) = id else { return };
        let waiter = self.lock().as_mut().and_then(|waiting| waiting.remove(&id));
        if let Some(waiter) = waiter {
            let _ = waiter.send(outcome);
        }
    }

    /// An answer of the editor over `max_frame` was skipped: the request it
    /// answers (by `id`, else the only one waiting) fails with
    /// [`ANSWER_TOO_LARGE`] instead of waiting for an answer that will not come.
    pub fn fail_too_large(&self, id: Option<RequestId>, size: usize, max: usize) {
        let waiter = self.lock().as_mut().and_then(|waiting| match id {
            Some(RequestId::Number(id)) => waiting.remove(&id),
            Some(RequestId::String(_)) => None,
            None if waiting.len() == 1 => waiting.drain().next().map(|(_, waiter)| waiter),
            None => None,
        });
        let Some(waiter) = waiter else {
            return tracing::warn!(
                "skipped an answer of the editor of {size} bytes or more (over max_frame, {max} bytes) that no request awaits"
            );
        };
        let message =
            format!("the editor's answer was too large ({size} bytes or more, over the {max} byte limit, max_frame) and was dropped");
        let _ = waiter.send(Err(ErrorObject { code: ANSWER_TOO_LARGE, message, data: None }));
    }

    /// The editor is gone: every waiting request fails, and new ones fail at once.
    pub fn close(&self) {
        self.lock().take();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<HashMap<i64, Waiter>>> {
        self.inner.waiting.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A request written to the editor, waiting for its answer. Dropping it
/// forgets the request: a late answer is then dropped.
pub struct Pending {
    peer: Peer,
    id: i64,
    method: String,
    answer: oneshot::Receiver<Result<Box<RawValue>, ErrorObject>>,
}

impl Pending {
    pub async fn answer<R: DeserializeOwned>(mut self) -> Result<R, ErrorObject> {
        let raw = (&mut self.answer).await.map_err(|_| gone())??;
        serde_json::from_str(raw.get()).map_err(|e| ErrorObject {
            code: error_codes::INVALID_PARAMS,
            message: format!("the editor's answer to {} does not fit the ACP schema: {e}", self.method),
            data: None,
        })
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(waiting) = self.peer.lock().as_mut() {
            waiting.remove(&self.id);
        }
    }
}

fn gone() -> ErrorObject {
    ErrorObject { code: error_codes::INTERNAL_ERROR, message: "the editor closed the connection".into(), data: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_response_reaches_its_request_and_closing_fails_the_rest() {
        let (peer, mut frames) = Peer::new();
        let asking = tokio::spawn({
            let peer = peer.clone();
            async move { peer.request::<_, serde_json::Value>("fs/read_text_file", &serde_json::json!({})).await }
        });
        let frame: serde_json::Value = serde_json::from_slice(&frames.recv().await.unwrap()).unwrap();
        assert_eq!(frame["method"], "fs/read_text_file");
        peer.resolve(
            Some(RequestId::Number(frame["id"].as_i64().unwrap())),
            Ok(RawValue::from_string("{\"content\":\"x\"}".into()).unwrap()),
        );
        assert_eq!(asking.await.unwrap().unwrap()["content"], "x");
        let pending = tokio::spawn({
            let peer = peer.clone();
            async move { peer.request::<_, serde_json::Value>("terminal/output", &serde_json::json!({})).await }
        });
        frames.recv().await.unwrap();
        peer.close();
        assert!(pending.await.unwrap().unwrap_err().message.contains("closed"));
    }
}
