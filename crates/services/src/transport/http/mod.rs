//! Remote servers over HTTP: Streamable HTTP (the `initialize` era with
//! sessions, and the stateless 2026-07-28 era) and the older HTTP+SSE
//! transport (2024-11-05), behind the same seam as a child process.
//!
//! [`start`] runs a *bridge* task beside the connection: it reads the
//! newline-delimited JSON-RPC frames the connection writes into an
//! in-memory pipe, sends each over HTTP, and hands every message that
//! comes back (JSON bodies, server-sent events of a POST's answer, the GET
//! stream) to the connection already parsed, as the [`Frame`] its codec
//! would have made of a child's line: one parse per message, and no pipe
//! or writer task on the way back. Its notes and HTTP errors are lines of
//! the log stream, so they become the status's stderr tail. So a remote server gets names, status,
//! time-outs, cancellation, back-pressure and restarts from the connection
//! like any other; the bridge only knows HTTP.
//!
//! Invariants:
//! - every request frame gets exactly one answer line: the server's, or an
//!   error answer the bridge writes (an HTTP error status, an answer over
//!   `max_frame`, a stream that ended without the answer);
//! - a failure of the connection to the server itself (refused, reset, a
//!   TLS error) ends the bridge with [`LOST`]: the connection fails the
//!   calls in flight (never resent) and reconnects with its backoff;
//! - a refusal the credentials cannot fix ends the bridge with
//!   [`LOST`] and leaves [`RemoteTask::needs_login`] set: the connection
//!   then waits for a login instead of restarting;
//! - the end of the input (the connection stopping the server) ends the
//!   bridge with code 0, after the session is deleted (`DELETE`);
//! - every task the bridge starts ends with it: killing it aborts them all,
//!   and the message and log streams end once they have;
//! - at most `MESSAGE_QUEUE` messages (each at most `max_frame` bytes) and
//!   `LOG_QUEUE` log lines wait for the connection: a message waits for
//!   room, a log line finding none is dropped.

mod bridge;
mod client;
pub mod credentials;
mod events;
mod headers;
mod legacy_sse;
mod link;
mod streamable;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::DuplexStream;
use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;

use super::{ExitInfo, ExitWatch};
use crate::codec::Frame;
use crate::config::ServerConfig;
use crate::error::{Cause, ConnectError};
use crate::transport::credentials::Credentials;

pub use credentials::StaticCredentials;
use link::Ending;

/// Bytes the input pipe holds before the connection has to wait.
pub const PIPE_BYTES: usize = 64 * 1024;
/// Messages for the connection waiting while it is busy.
const MESSAGE_QUEUE: usize = 64;
/// Log lines waiting for the connection; more are dropped.
const LOG_QUEUE: usize = 256;

/// How the end of a bridge that lost its server is reported.
pub const LOST: ExitInfo = ExitInfo { code: Some(1), signal: None };

/// A started bridge: the connection's ends, its task and its exit.
pub struct RemotePeer {
    /// Where frames for the server are written.
    pub input: DuplexStream,
    /// The server's messages, parsed; ends with the bridge.
    #[doc(hidden)]
    pub messages: mpsc::Receiver<Frame>,
    /// The bridge's notes and the server's HTTP errors, one line each.
    #[doc(hidden)]
    pub log: mpsc::Receiver<String>,
    pub task: RemoteTask,
    pub exit: ExitWatch,
}

/// What a remote server's status shows of its transport.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct RemoteStatus {
    /// The endpoint without its query, fragment or password (they may hold keys).
    pub url: String,
    /// `streamable-http`, or `http+sse` once the server turned out to speak it.
    pub transport: String,
    /// The server answered at least once.
    pub reached: bool,
    /// The start of the session id (`Mcp-Session-Id`, or the HTTP+SSE
    /// endpoint's), enough to tell sessions apart; the whole id lets anyone
    /// use the session, so it is not shown.
    pub session: Option<String>,
}

/// How much of a session id a status shows.
const SESSION_SHOWN: usize = 8;

impl RemoteStatus {
    pub(crate) fn set_session(&mut self, id: Option<&str>) {
        self.session = id.map(|id| match id.char_indices().nth(SESSION_SHOWN) {
            Some((end, _)) => format!("{}…", &id[..end]),
            None => id.to_string(),
        });
    }
}

/// The task of a running bridge.
#[derive(Clone, Debug)]
pub struct RemoteTask {
    abort: AbortHandle,
    ending: Arc<Mutex<Option<Ending>>>,
    status: Arc<Mutex<RemoteStatus>>,
}

impl RemoteTask {
    /// Ends the bridge at once, with every request it has under way.
    pub fn kill(&self) {
        self.abort.abort();
    }

    /// Set when the server refused the credentials and only a user can fix
    /// it (a login, other credentials): what to tell them.
    pub fn needs_login(&self) -> Option<String> {
        match self.ending() {
            Some(Ending::NeedsLogin(message)) => Some(message),
            _ => None,
        }
    }

    /// Set when the bridge ended because the server was lost: how, and the error beneath.
    pub fn lost(&self) -> Option<(String, Option<Cause>)> {
        match self.ending() {
            Some(Ending::Lost(message, cause)) => Some((message, cause)),
            _ => None,
        }
    }

    /// The transport's side of the server's status.
    pub fn status(&self) -> RemoteStatus {
        self.status.lock().map(|status| status.clone()).unwrap_or_default()
    }

    fn ending(&self) -> Option<Ending> {
        self.ending.lock().ok().and_then(|slot| slot.clone())
    }
}

/// Starts the bridge to the remote server of `config` (`transport` is
/// `http` or `sse`, values already expanded). Must run inside a tokio runtime.
pub fn start(config: &ServerConfig, credentials: Arc<dyn Credentials>) -> Result<RemotePeer, ConnectError> {
    let url = config.url.as_deref().unwrap_or_default();
    let url = reqwest::Url::parse(url).map_err(|e| ConnectError::Protocol {
        server: config.name.clone(),
        method: "connect".into(),
        message: format!("`url` is not a usable URL ({e})"),
    })?;
    let http = client::build(&config.timeouts, &url).map_err(|message| ConnectError::Protocol {
        server: config.name.clone(),
        method: "connect".into(),
        message,
    })?;
    let (input, bridge_input) = tokio::io::duplex(PIPE_BYTES);
    let (out, messages) = mpsc::channel(MESSAGE_QUEUE);
    let (log_tx, log) = mpsc::channel(LOG_QUEUE);
    let (end, end_rx) = mpsc::channel(4);
    let ending = Arc::new(Mutex::new(None));
    let status =
        Arc::new(Mutex::new(RemoteStatus { url: link::shown(&url), transport: "streamable-http".into(), ..RemoteStatus::default() }));
    let server = link::Server {
        name: config.name.clone(),
        url,
        http,
        credentials,
        headers: config.headers.clone().into_iter().collect(),
        max_frame: config.limits.max_frame,
        ending: ending.clone(),
        status: status.clone(),
    };
    let settings =
        bridge::Settings { server, transport: config.transport, grace: config.timeouts.shutdown_grace, patience: config.timeouts.call };
    let ways = link::Ways { out, log: log_tx, end };
    let running = tokio::spawn(bridge::run(settings, bridge_input, ways, end_rx));
    let task = RemoteTask { abort: running.abort_handle(), ending, status };
    let (exit_tx, exit_rx) = watch::channel(None);
    tokio::spawn(async move {
        // Aborted (killed): dropping the sender reports the end as a kill.
        if let Ok(exit) = running.await {
            let _ = exit_tx.send(Some(exit));
        }
    });
    Ok(RemotePeer { input, messages, log, task, exit: ExitWatch::new(exit_rx) })
}

/// Stops a bridge whose input the caller has already closed: waits `grace`
/// for it to delete its session and end, then kills it.
pub async fn shutdown(task: RemoteTask, exit: ExitWatch, grace: Duration) -> ExitInfo {
    if let Ok(info) = tokio::time::timeout(grace, exit.clone().wait()).await {
        return info;
    }
    task.kill();
    exit.wait().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_shows_no_key_of_the_url_and_only_the_start_of_a_session() {
        let url = reqwest::Url::parse("https://user:pa55@example.com/mcp?key=s3cret#frag").unwrap();
        assert_eq!(link::shown(&url), "https://user@example.com/mcp");
        let mut status = RemoteStatus::default();
        status.set_session(Some("0123456789abcdef"));
        assert_eq!(status.session.as_deref(), Some("01234567…"));
        status.set_session(Some("short"));
        assert_eq!(status.session.as_deref(), Some("short"));
        status.set_session(Some("ééééééééééé"));
        assert_eq!(status.session.as_deref(), Some("éééééééé…"), "cut on a character boundary");
    }
}
