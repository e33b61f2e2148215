//! What the pool of servers looks like from outside, as plain data: one
//! catalog entry ([`ToolEntry`]), a server's state ([`ServerState`]) and its
//! status ([`ServerStatus`]).
//!
//! The actors produce these values and re-export them (`actors::ToolEntry`,
//! ...); the services that read them without a mailbox (the catalog cache,
//! tool search) import them from here, so no import points up to the
//! actors. Layer 2, not 1: a status carries the transport's
//! [`RemoteStatus`] and the sandbox's [`SandboxStatus`].

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use rmcp::model::{JsonObject, Tool};
use serde::Serialize;

use crate::protocol::schema::parse_schema;

// Re-exported: a status shows it, and the sandbox machinery is private.
pub use crate::sandbox::SandboxStatus;
use crate::transport::http::RemoteStatus;

/// One tool of the catalog.
#[derive(Debug, Clone, Serialize)]
pub struct ToolEntry {
    /// The exposed name, unique in the catalog.
    pub name: String,
    pub server: String,
    pub tool: Tool,
}

/// A listed tool as the catalog keeps it: rmcp's [`Tool`] whose schemas
/// stay compact JSON text until a [`Tool`] is asked for.
///
/// A parsed schema costs 10 to 20 times its text (a `serde_json::Map` is a
/// B-tree of mostly empty nodes), so a catalog of parsed tools costs many
/// times its listing; the text is parsed again each time [`KeptTool::tool`]
/// hands a tool out, and nothing parsed stays behind.
#[derive(Debug, Clone)]
pub struct KeptTool {
    /// The tool with one shared empty `inputSchema` and no `outputSchema`;
    /// boxed, as maps keep many kept tools inline in half-empty nodes.
    head: Box<Tool>,
    input_schema: Arc<str>,
    output_schema: Option<Arc<str>>,
}

/// The empty schema every kept tool's head shares.
static NO_SCHEMA: LazyLock<Arc<JsonObject>> = LazyLock::new(Default::default);

impl KeptTool {
    /// Keeps `tool` with the texts of its schemas (as `serde_json` writes
    /// the tool's own `input_schema` and `output_schema`; equal texts may
    /// share one allocation).
    pub fn new(mut tool: Tool, input_schema: Arc<str>, output_schema: Option<Arc<str>>) -> KeptTool {
        tool.input_schema = NO_SCHEMA.clone();
        tool.output_schema = None;
        KeptTool { head: Box::new(tool), input_schema, output_schema }
    }

    /// The tool's name on its server.
    pub fn name(&self) -> &str {
        &self.head.name
    }

    /// The `inputSchema` as compact JSON text.
    pub fn input_schema_text(&self) -> &Arc<str> {
        &self.input_schema
    }

    /// The `outputSchema` as compact JSON text, if the tool has one.
    pub fn output_schema_text(&self) -> Option<&Arc<str>> {
        self.output_schema.as_ref()
    }

    /// The whole tool, its schemas parsed afresh.
    pub fn tool(&self) -> Tool {
        self.tool_with(&mut ParsedSchemas::default())
    }

    /// The whole tool, its schemas parsed once per text in `parsed`.
    pub fn tool_with(&self, parsed: &mut ParsedSchemas) -> Tool {
        let mut tool = (*self.head).clone();
        tool.input_schema = parsed.parse(&self.input_schema);
        tool.output_schema = self.output_schema.as_ref().map(|text| parsed.parse(text));
        tool
    }
}

/// Schemas parsed while many kept tools are handed out at once: tools
/// whose schemas have the same text share one parsed schema, as they did
/// when listed.
#[derive(Default)]
pub struct ParsedSchemas {
    by_text: HashMap<Arc<str>, Arc<JsonObject>>,
}

impl ParsedSchemas {
    fn parse(&mut self, text: &Arc<str>) -> Arc<JsonObject> {
        self.by_text.entry(text.clone()).or_insert_with(|| Arc::new(parse_schema(text))).clone()
    }
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
    /// A remote server's transport: URL, kind, session (`None` for others).
    pub remote: Option<RemoteStatus>,
    /// A sandboxed server's sandbox: what is enforced, what is not, and
    /// the limit its last run hit (`None`: not sandboxed).
    pub sandbox: Option<SandboxStatus>,
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
