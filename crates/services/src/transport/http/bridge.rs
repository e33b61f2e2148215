//! The bridge task: reads the connection's frames, sends each the way the
//! server's transport wants, and ends on the end of its input (code 0) or
//! when the server is lost ([`super::LOST`]).
//!
//! `transport = "http"` tries Streamable HTTP first: when the first POST is
//! answered 400, 404 or 405 and a GET of the same URL opens an event stream
//! naming an endpoint, the server speaks HTTP+SSE and the bridge switches
//! to it for good (as the TypeScript SDK and Claude Code do).
//! `transport = "sse"` uses HTTP+SSE from the start.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::Url;
use tokio::io::DuplexStream;
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};
use tokio_util::codec::{FramedRead, LinesCodec};

use super::link::{Ending, Link, Outgoing, Server, Ways};
use super::{legacy_sse, streamable, LOST};
use crate::config::Transport;
use crate::protocol::methods;
use crate::transport::ExitInfo;

/// Notifications and answers waiting to be POSTed, in order.
const LANE_QUEUE: usize = 256;

pub(super) struct Settings {
    pub(super) server: Server,
    pub(super) transport: Transport,
    /// At the end, how long deleting the session may take (half of it).
    pub(super) grace: Duration,
    /// The longest a notification or an answer may take to be accepted.
    pub(super) patience: Duration,
}

/// Runs the bridge until its input ends or the server is lost. The
/// connection's message and log streams end when it returns (with the
/// last of its tasks, which hold their senders).
pub(super) async fn run(settings: Settings, input: DuplexStream, ways: Ways, mut end_rx: mpsc::Receiver<Ending>) -> ExitInfo {
    let link = Arc::new(Link::new(settings.server, ways));
    let mut bridge = Bridge { link, tasks: JoinSet::new(), in_flight: HashMap::new(), probing: false, lane: None };
    let exit = bridge.serve(settings.transport, settings.grace, settings.patience, input, &mut end_rx).await;
    bridge.tasks.shutdown().await;
    exit
}

struct Bridge {
    link: Arc<Link>,
    /// Every task of the bridge: they end with it.
    tasks: JoinSet<()>,
    /// Requests whose answer is being read, by id: cancelling one closes its stream.
    in_flight: HashMap<String, AbortHandle>,
    /// The first request is still to be sent (`transport = "http"`: it tells the transport).
    probing: bool,
    lane: Option<mpsc::Sender<Outgoing>>,
}

impl Bridge {
    async fn serve(
        &mut self,
        transport: Transport,
        grace: Duration,
        patience: Duration,
        input: DuplexStream,
        end: &mut mpsc::Receiver<Ending>,
    ) -> ExitInfo {
        let (lane_tx, lane_rx) = mpsc::channel(LANE_QUEUE);
        self.lane = Some(lane_tx);
        self.tasks.spawn(lane(self.link.clone(), lane_rx, patience));
        match transport {
            Transport::Sse => {
                if let Err(why) = self.use_legacy().await {
                    self.link.end(Ending::Lost(format!("no HTTP+SSE server at {}: {why}", self.link.shown_url()), None));
                }
            }
            _ => {
                self.probing = true;
                self.tasks.spawn(streamable::listen(self.link.clone()));
            }
        }
        let mut lines = FramedRead::new(input, LinesCodec::new());
        loop {
            tokio::select! {
                biased;
                Some(_) = end.recv() => return LOST,
                Some(done) = self.tasks.join_next_with_id(), if !self.tasks.is_empty() => {
                    if let Ok((task, ())) = done {
                        self.in_flight.retain(|_, handle| handle.id() != task);
                    }
                }
                line = lines.next() => match line {
                    Some(Ok(text)) => self.dispatch(text.into_bytes()).await,
                    Some(Err(_)) | None => break,
                },
            }
        }
        if self.link.legacy_endpoint.get().is_none() {
            let _ = tokio::time::timeout(grace / 2, streamable::delete_session(&self.link)).await;
        }
        ExitInfo { code: Some(0), signal: None }
    }

    async fn dispatch(&mut self, text: Vec<u8>) {
        let Some(frame) = Outgoing::parse(text) else { return };
        if frame.is(methods::CANCELLED) {
            return self.cancel(frame).await;
        }
        if !frame.is_request() {
            if let Some(lane) = &self.lane {
                let _ = lane.send(frame).await;
            }
            return;
        }
        self.link.set_modern(frame.modern.is_some());
        if let Some(endpoint) = self.link.legacy_endpoint.get() {
            self.tasks.spawn(legacy_sse::post(self.link.clone(), endpoint.clone(), frame));
            return;
        }
        if std::mem::take(&mut self.probing) {
            return self.probe(frame).await;
        }
        let key = frame.id.as_ref().map(|id| id.to_string()).unwrap_or_default();
        let handle = self.tasks.spawn(streamable::request(self.link.clone(), frame));
        self.in_flight.insert(key, handle);
    }

    /// A cancellation: the request's stream is closed (the cancellation of
    /// the 2026-07-28 era); in the `initialize` era the server is told too.
    async fn cancel(&mut self, frame: Outgoing) {
        let target = frame.value().pointer("/params/requestId").map(|id| id.to_string()).unwrap_or_default();
        if let Some(handle) = self.in_flight.remove(&target) {
            handle.abort();
        }
        if !self.link.is_modern() {
            if let Some(lane) = &self.lane {
                let _ = lane.send(frame).await;
            }
        }
    }

    /// Sends the first request of `transport = "http"`, and switches to
    /// HTTP+SSE when the server turns out to speak it.
    async fn probe(&mut self, frame: Outgoing) {
        let Ok(sent) = streamable::post(&self.link, &frame).await else { return };
        let status = sent.response.status().as_u16();
        if matches!(status, 400 | 404 | 405) {
            match self.use_legacy().await {
                Ok(endpoint) => {
                    self.link.note(format!(
                        "{} answered HTTP {status} to a Streamable HTTP POST but serves HTTP+SSE; using that",
                        self.link.shown_url()
                    ));
                    self.tasks.spawn(legacy_sse::post(self.link.clone(), endpoint, frame));
                    return;
                }
                Err(why) => tracing::debug!(server = %self.link.name, "not an HTTP+SSE server either: {why}"),
            }
        }
        let key = frame.id.as_ref().map(|id| id.to_string()).unwrap_or_default();
        let handle = self.tasks.spawn(streamable::answer(self.link.clone(), frame, sent));
        self.in_flight.insert(key, handle);
    }

    /// Opens the HTTP+SSE event stream and sends everything through it from now on.
    async fn use_legacy(&mut self) -> Result<Url, String> {
        let (endpoint, stream) = legacy_sse::open(&self.link).await?;
        let _ = self.link.legacy_endpoint.set(endpoint.clone());
        self.link.show(|status| {
            status.transport = "http+sse".into();
            let session = endpoint.query_pairs().find(|(key, _)| key.contains("session")).map(|(_, id)| id.into_owned());
            status.set_session(session.as_deref());
        });
        self.tasks.spawn(legacy_sse::read(self.link.clone(), stream));
        Ok(endpoint)
    }
}

/// POSTs notifications and answers to the server's requests one at a
/// time, in the order the connection wrote them; one the server does not
/// take within `patience` is given up (noted), so the next can go.
async fn lane(link: Arc<Link>, mut frames: mpsc::Receiver<Outgoing>, patience: Duration) {
    while let Some(frame) = frames.recv().await {
        let what = frame.method.clone().unwrap_or_else(|| "an answer".into());
        let sent = async {
            match link.legacy_endpoint.get() {
                Some(endpoint) => legacy_sse::post(link.clone(), endpoint.clone(), frame).await,
                None => streamable::notify(&link, &frame).await,
            }
        };
        if tokio::time::timeout(patience, sent).await.is_err() {
            link.note(format!("the server did not take {what} within {patience:?}; it was given up"));
        }
    }
}
