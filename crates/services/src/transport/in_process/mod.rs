//! In-process servers: tools written in Rust, served inside the runtime's
//! own process through the same seam as a child process.
//!
//! An embedding program implements [`ToolHandler`], names the server in its
//! configuration ([`ServerConfig::in_process`]) and gives the handler to the
//! runtime under that name (`Runtime::builder(config).in_process(name,
//! handler)`, or `Handle::add_in_process` later). Each time its connection
//! starts it, [`start`] runs a serve loop as a task of the runtime, joined
//! to the connection by in-memory pipes (`tokio::io::duplex`, one per
//! direction, each holding at most [`PIPE_BYTES`]) that carry the same
//! newline-delimited JSON-RPC as a child's stdin and stdout, and a third
//! pipe for what a child would write on stderr. So an in-process server
//! gets the registry names, status, time-outs, cancellation, back-pressure
//! and restarts of a stdio server; only its status has no pid.
//!
//! Invariants:
//! - the serve loop answers `initialize`, `ping`, `tools/list` and
//!   `tools/call`; any other request gets "method not found";
//! - `notifications/cancelled` (sent on a time-out or when the caller gives
//!   up) drops the call's future, and with it whatever the future owns;
//! - a panic in the handler ends the server like a crash: its exit is
//!   reported as code 101 (what a Rust program that panics exits with) and
//!   the panic message is its last stderr line; calls in flight fail with
//!   `ServerExited` and the restart policy applies;
//! - the end of its input (the connection closing it, to stop the server)
//!   ends the loop with code 0, dropping the calls still running;
//! - killing it aborts its task, which is reported as SIGKILL;
//! - a restart runs a new serve loop over the same handler value: the
//!   handler's own state is kept.
//!
//! The handler's futures run on the runtime's thread, beside every
//! connection: do blocking work in `tokio::task::spawn_blocking`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWriteExt, DuplexStream};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::{ExitInfo, ExitWatch};
use crate::config::ServerConfig;

/// Bytes each in-memory pipe holds before its writer has to wait: the
/// bound that makes a peer that stops reading slow its writer down.
pub const PIPE_BYTES: usize = 64 * 1024;

/// How the end of a serve loop that panicked is reported.
pub const PANICKED: ExitInfo = ExitInfo { code: Some(101), signal: None };

pub use crate::server::tool_server::ToolHandler;

/// A [`ToolHandler`] as a server configuration holds it: cloning shares
/// the handler, two are equal when they share it, and `Debug` shows the
/// handler's type name.
#[derive(Clone)]
pub struct InProcessHandler {
    handler: Arc<dyn ToolHandler>,
    type_name: &'static str,
}

impl InProcessHandler {
    pub fn new<H: ToolHandler>(handler: H) -> Self {
        InProcessHandler { handler: Arc::new(handler), type_name: std::any::type_name::<H>() }
    }
}

impl fmt::Debug for InProcessHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("InProcessHandler").field(&self.type_name).finish()
    }
}

impl PartialEq for InProcessHandler {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.handler, &other.handler)
    }
}

impl<H: ToolHandler> From<H> for InProcessHandler {
    fn from(handler: H) -> Self {
        InProcessHandler::new(handler)
    }
}

/// An in-process server as a runtime is given it: its configuration (plain
/// data that names it) and its handler (the live part).
#[derive(Debug, Clone)]
pub struct InProcessServer {
    pub config: ServerConfig,
    pub handler: InProcessHandler,
}

/// A started in-process server: the connection's ends of its pipes, its
/// task and its exit.
pub struct InProcessPeer {
    /// Where requests are written (the server's stdin).
    pub input: DuplexStream,
    /// Where answers are read (the server's stdout).
    pub output: DuplexStream,
    /// Its log lines (the server's stderr).
    pub log: DuplexStream,
    pub task: ServerTask,
    pub exit: ExitWatch,
}

/// The task of a running serve loop.
#[derive(Clone, Debug)]
pub struct ServerTask(AbortHandle);

impl ServerTask {
    /// Ends the server at once: its task, and every call future it holds,
    /// is dropped.
    pub fn kill(&self) {
        self.0.abort();
    }
}

/// Starts serving `handler` as server `name`. Must run inside a tokio
/// runtime (the serve loop and its watcher are tasks).
pub fn start(handler: &InProcessHandler, name: &str) -> InProcessPeer {
    let (input, server_input) = tokio::io::duplex(PIPE_BYTES);
    let (server_output, output) = tokio::io::duplex(PIPE_BYTES);
    let (mut log_writer, log) = tokio::io::duplex(PIPE_BYTES);
    let serving = tokio::spawn(crate::server::tool_server::serve(handler.handler.clone(), name.to_string(), server_input, server_output));
    let task = ServerTask(serving.abort_handle());
    let (exit_tx, exit_rx) = watch::channel(None);
    tokio::spawn(async move {
        let exit = match serving.await {
            Ok(()) => ExitInfo { code: Some(0), signal: None },
            Err(error) if error.is_panic() => {
                let line = format!("the in-process server panicked: {}\n", panic_message(error.into_panic()));
                let _ = log_writer.write_all(line.as_bytes()).await;
                PANICKED
            }
            // Aborted: dropping the sender reports the end as a kill.
            Err(_) => return,
        };
        drop(log_writer);
        let _ = exit_tx.send(Some(exit));
    });
    InProcessPeer { input, output, log, task, exit: ExitWatch::new(exit_rx) }
}

/// Stops a server whose input the caller has already closed: waits `grace`
/// for its serve loop to end, then kills it. Returns once it has ended.
pub async fn shutdown(task: ServerTask, exit: ExitWatch, grace: Duration) -> ExitInfo {
    if let Ok(info) = tokio::time::timeout(grace, exit.clone().wait()).await {
        return info;
    }
    task.kill();
    exit.wait().await
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}
