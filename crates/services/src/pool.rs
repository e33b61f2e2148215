//! What the pool of servers looks like from outside, as plain data: one
//! catalog entry ([`ToolEntry`]), a server's state ([`ServerState`]) and its
//! status ([`ServerStatus`]).
//!
//! The actors produce these values and re-export them (`actors::ToolEntry`,
//! ...); the services that read them without a mailbox (the catalog cache,
//! tool search) import them from here, so no import points up to the
//! actors. Layer 2, not 1: a status carries the transport's
//! [`RemoteStatus`] and the sandbox's [`SandboxStatus`].

use std::time::Duration;

use rmcp::model::Tool;
use serde::Serialize;

mod kept;
pub use kept::{KeptTool, ParsedSchemas, ToolFields};

// Re-exported: a status shows it, and the sandbox machinery is private.
pub use crate::sandbox::SandboxStatus;
use crate::transport::http::RemoteStatus;

/// One tool of the catalog: a whole rmcp [`Tool`], or a [`KeptTool`]
/// (its schemas as text, as the catalog keeps them).
#[derive(Debug, Clone, Serialize)]
pub struct ToolEntry<T = Tool> {
    /// The exposed name, unique in the catalog.
    pub name: String,
    pub server: String,
    pub tool: T,
}

/// The entries with their tools whole; tools whose schemas have the same
/// text share one parsed schema.
pub fn whole_tools(entries: Vec<ToolEntry<KeptTool>>) -> Vec<ToolEntry> {
    let mut parsed = ParsedSchemas::default();
    entries.into_iter().map(|entry| ToolEntry { tool: entry.tool.tool_with(&mut parsed), name: entry.name, server: entry.server }).collect()
}

/// A server's state, as in DESIGN.md.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ServerState {
    Pending,
    Connected,
    Restarting {
        attempt: u32,
        #[serde(serialize_with = "serialize_millis", rename = "next_in_ms")]
        next_in: Duration,
    },
    Failed {
        error: String,
        stderr_tail: Vec<String>,
        /// When the server is tried again (after a restart-intensity
        /// cool-down), counted from when the state was read; `None`: only a
        /// reconnect starts it again.
        #[serde(serialize_with = "serialize_opt_millis", rename = "retry_in_ms")]
        retry_in: Option<Duration>,
        /// The error that failed it, whole (`error` is its text).
        #[serde(skip)]
        cause: Option<crate::error::Cause>,
    },
    NeedsAuth,
    Disabled,
}

impl ServerState {
    /// Settled states do not change without an outside cause.
    pub fn is_settled(&self) -> bool {
        matches!(self, ServerState::Connected | ServerState::Failed { .. } | ServerState::NeedsAuth | ServerState::Disabled)
    }

    pub fn label(&self) -> &'static str {
        match self {
            ServerState::Pending => "pending",
            ServerState::Connected => "connected",
            ServerState::Restarting { .. } => "restarting",
            ServerState::Failed { .. } => "failed",
            ServerState::NeedsAuth => "needs_auth",
            ServerState::Disabled => "disabled",
        }
    }
}

/// A server's status, as reported by its connection.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerStatus {
    pub name: String,
    #[serde(flatten)]
    pub state: ServerState,
    pub pid: Option<u32>,
    /// `legacy` or `modern`, once connected.
    pub era: Option<String>,
    pub protocol_version: Option<String>,
    pub server_info: Option<String>,
    pub tools: usize,
    pub resources: usize,
    pub prompts: usize,
    pub in_flight: usize,
    pub queued: usize,
    pub restarts: u64,
    #[serde(serialize_with = "serialize_opt_millis", rename = "uptime_ms")]
    pub uptime: Option<Duration>,
    pub last_error: Option<String>,
    pub stderr_tail: Vec<String>,
    /// Problems worth a user's attention: tools left out, names disambiguated or in collision.
    pub warnings: Vec<String>,
    /// Tools withheld by their pins until a change is accepted, or by the scanner (why, in `warnings`).
    pub withheld: Vec<String>,
    /// A remote server's transport: URL, kind, session (`None` for others).
    pub remote: Option<RemoteStatus>,
    /// A sandboxed server's sandbox: what is enforced, what is not, and
    /// the limit its last run hit (`None`: not sandboxed).
    pub sandbox: Option<SandboxStatus>,
    /// A server that acts as each caller (token exchange, `per_caller`):
    /// its callers' connections (`None` for others).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callers: Option<CallerCounts>,
}

/// The per-caller connections of a server that acts as each caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallerCounts {
    /// Open now.
    pub connections: usize,
    /// Whose they are: each caller's key (`issuer:SUBJECT`, `key:NAME`;
    /// for an exchange also the client and scopes of its grant), sorted.
    pub callers: Vec<String>,
    /// The most at once (`auth.max_callers`, `per_caller.max_callers`).
    pub max: usize,
    /// Started, ended for being idle, and callers refused over `max`, so far.
    pub started: u64,
    pub reaped: u64,
    pub refused: u64,
    /// Token requests made at the issuer so far (exchanges and the gateway's own).
    pub exchanges: u64,
    /// Callers' stored logins, for a server whose callers log in themselves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logins: Option<usize>,
}

impl ServerStatus {
    /// A status with nothing known yet but the name and the state.
    pub fn new(name: impl Into<String>, state: ServerState) -> ServerStatus {
        ServerStatus {
            name: name.into(),
            state,
            pid: None,
            era: None,
            protocol_version: None,
            server_info: None,
            tools: 0,
            withheld: Vec::new(),
            resources: 0,
            prompts: 0,
            in_flight: 0,
            queued: 0,
            restarts: 0,
            uptime: None,
            last_error: None,
            stderr_tail: Vec::new(),
            warnings: Vec::new(),
            remote: None,
            sandbox: None,
            callers: None,
        }
    }
}

fn serialize_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

fn serialize_opt_millis<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => serialize_millis(d, s),
        None => s.serialize_none(),
    }
}
