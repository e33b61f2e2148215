//! `mcpvisor acp`: the [`Agent`](crate::actors::agent::Agent) served to
//! editors over the Agent Client Protocol (ACP v1: JSON-RPC 2.0 over
//! newline-delimited stdio, the types of `agent-client-protocol-schema`).
//!
//! ```text
//! editor ──stdin──▶ serve ──Incoming──▶ AcpConnection (actor, one per connection)
//!   ▲                                     │ session/new: Session { Agent, own MCP servers, Relay }
//!   └──stdout── Peer ◀── Relay (session/update, prompt answers in order)
//!               Peer ──▶ editor: fs/*, terminal/* (EditorHost), session/request_permission
//! ```
//!
//! The pieces, one concept each: `peer` (frames out, requests to the
//! editor), `connection` (the actor: methods, state), `session` (opening,
//! servers, scope, closing), `relay` (agent events → `session/update`),
//! `tool_view` (kind, title, locations of a tool call), `host` (the
//! built-in tools through the editor), `room` (what a session's parts
//! share), `permission` (confirmation → `session/request_permission`),
//! `modes`, `command` (slash commands), `prompt` (prompt content → model
//! parts), `replay` (a saved conversation → updates on `session/load`).
//!
//! The decisions where the protocol is silent are in docs/acp.md.

mod command;
mod connection;
mod host;
mod modes;
mod peer;
mod permission;
mod prompt;
mod relay;
mod replay;
mod room;
mod session;
mod tool_view;

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio_util::codec::FramedRead;

use crate::actors::agent::{AgentLimits, ConfirmPolicy};
use crate::actors::hub;
use crate::codec::{names_a_method, peek_id, peek_tail_id, FrameError, JsonRpcCodec, DEFAULT_MAX_FRAME};
use crate::config::Redactor;
use crate::llm::ChatModel;
use crate::protocol::Message;
use crate::sessions::SessionStore;
use crate::Handle;

pub use connection::AcpConnection;

/// Whether sessions may bring http/sse MCP servers (`mcpCapabilities`):
/// the runtime's remote transports connect them like any configured one.
pub const REMOTE_SERVERS: bool = true;

/// What every session's agent starts with.
pub struct AcpOptions {
    pub model: Arc<dyn ChatModel>,
    /// The configured confirmation (its mode is mode `ask`'s) and overrides.
    pub policy: ConfirmPolicy,
    pub limits: AgentLimits,
    /// The configured system prompt; `None`: the default for the session's cwd.
    pub system_prompt: Option<String>,
    /// Each session gets the built-in tools working in its cwd.
    pub builtin_tools: bool,
    /// The variables their `run_command` inherits beyond the safe set (`[agent] command_env`).
    pub command_env: Vec<String>,
    /// Where sessions are saved (`None`: unsaved, and `loadSession` is off).
    pub store: Option<SessionStore>,
    /// Masks secrets in saved sessions.
    pub redactor: Redactor,
    /// The key's variable when the model is a provider's own endpoint and
    /// no key is set: offered as the auth method to tell the user about.
    pub missing_key: Option<&'static str>,
    /// Connects to another model of the same provider (`/model NAME`);
    /// the error says why it cannot.
    pub switch_model: Option<ModelSwitch>,
}

/// See [`AcpOptions::switch_model`].
pub type ModelSwitch = Arc<dyn Fn(&str) -> Result<Arc<dyn ChatModel>, String> + Send + Sync>;

/// Serves one editor on `input`/`output` until `input` ends; then every
/// session's turn is cancelled and its servers removed. The runtime behind
/// `handle` (the configured servers) is left running for the caller to shut down.
pub async fn serve<R, W>(handle: Handle, options: AcpOptions, input: R, mut output: W)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let configured: HashSet<String> = handle.status().await.into_iter().map(|status| status.name).collect();
    let (peer, mut frames) = peer::Peer::new();
    let mut writer = tokio::spawn(async move {
        while let Some(frame) = frames.recv().await {
            if output.write_all(&frame).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    });
    let (started, connection) = tokio::sync::oneshot::channel();
    let starting = AcpConnection::new(peer.clone(), handle.clone(), options, configured);
    handle.hub().do_send(hub::Spawn(Box::new(move || {
        let _ = started.send(actix::Actor::start(starting));
    })));
    let Ok(connection) = connection.await else { return };
    let mut input = FramedRead::new(input, JsonRpcCodec::new(DEFAULT_MAX_FRAME));
    while let Some(frame) = input.next().await {
        let message = match frame {
            Ok(Ok(message)) => message,
            Ok(Err(error)) => {
                refuse(&peer, error);
                continue;
            }
            Err(_) => break,
        };
        let incoming = match message {
            Message::Response { id, outcome } => {
                peer.resolve(id, outcome);
                continue;
            }
            Message::Request { id, method, params } => connection::Incoming { id: Some(id), method, params },
            Message::Notification { method, params } => connection::Incoming { id: None, method, params },
        };
        if connection.send(incoming).await.is_err() {
            break;
        }
    }
    let _ = connection.send(connection::Closed).await;
    drop(peer);
    drop(connection);
    // The writer ends once the actor and the sessions' relays are gone, after
    // writing what they sent (the answers to the editor's last requests).
    let flushed = tokio::time::timeout(FLUSH, &mut writer).await;
    if flushed.is_err() {
        writer.abort();
    }
}

/// How long the answers already sent may take to be written once the editor closed stdin.
const FLUSH: std::time::Duration = std::time::Duration::from_secs(2);

/// Answers a line that is no usable message, with its id when it can be
/// read; an oversized answer fails the request it answers.
fn refuse(peer: &peer::Peer, error: FrameError) {
    if let FrameError::TooLarge { size, max, head, tail } = &error {
        if !names_a_method(head, tail) {
            return peer.fail_too_large(peek_id(head).or_else(|| peek_tail_id(tail)), *size, *max);
        }
    }
    match error.refusal() {
        None => {}
        Some((Some(id), error)) => peer.respond::<()>(&id, Err(error)),
        Some((None, error)) => peer.respond_unidentified(error),
    }
}
