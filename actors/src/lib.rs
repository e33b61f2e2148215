//! The active parts: everything that has a mailbox.
//!
//! ```text
//! System (actix)
//! └── Hub                      one per runtime; holds the only strong Addr of each Connection
//!     ├── Connection "fs"      Supervised; owns child + framed stdio
//!     ├── Connection "git"     Supervised
//!     └── Registry             catalog of every connected server's tools
//! Agent ──CallTool──▶ Registry ──route──▶ Connection ──JSON-RPC──▶ server
//! ```
//!
//! Threads: the Hub and the Registry run on the thread that started the
//! Hub; so does each connection, unless the Hub was given connection
//! threads (`RuntimeConfig::connection_threads`, the gateway's one per
//! core): then each runs whole on one of them ([`threads`], round robin).
//!
//! Their place: layer 3 of the four (docs/architecture.md, "Layers"), the
//! crate `mcpvisor-actors`. The actors import the data and wire layer
//! (protocol, config, errors, restart policy; `mcpvisor-wire`) and the
//! services (transports, OAuth, sandboxes, telemetry, `pool`, skills, tool
//! search; `mcpvisor-services`), named as this crate's own modules
//! (`crate::config`), and each other without a loop
//! (`tests/architecture.rs`); never the fronts above them (`runtime` and
//! the facade, `gateway`'s fronts, `cli`, `acp`, `demo_server`), which drive
//! them: this crate cannot name them. [`Handle`] and
//! [`AgentHandle`] live here too: they only send the
//! actors messages, and the gateway's session actor holds a `Handle`.
//!
//! Restarts: a Connection whose server went down fails the calls in flight,
//! asks its [`crate::restart::RestartTracker`] what to do, and stops its
//! context; actix's `Supervisor` then restarts the actor (its value, with the
//! queue of waiting calls, is kept) and `started()` schedules the next spawn
//! with `run_later`. Because the Hub holds the only strong `Addr`, dropping
//! it ends the actor for good (actix restarts only connected actors): the
//! Registry, calls and operations hold connections weakly.
//!
//! Module dependencies run one way: [`messages`] (what a connection takes)
//! ← `rounds` ([`operation::Requester`]) ← [`connection`] ← [`operation`]
//! ← [`hub`]; the [`registry`] routes to connections, which reach it back
//! only through the [`ToolsChanged`] and [`ServerDown`] messages. `directory`
//! is the hub's table of connections, shared with every `Handle`, whose
//! operations by server name go straight to the connection. [`callers`]
//! holds the per-caller connections of a server that acts as each caller
//! of the gateway (token exchange): the Hub starts them ([`callers::StartCaller`])
//! and ends the idle ones; a `Handle`'s `call_on` reaches them through the directory.
//!
//! Messages (all replies come back as futures; see [`reply::Reply`]):
//!
//! | message | to | reply |
//! | --- | --- | --- |
//! | [`CallTool`] | Registry (exposed name) or Connection (tool name) | `Result<CallToolResult, CallError>` |
//! | [`ListTools`] | Registry | `Vec<ToolEntry>` |
//! | [`ListKeptTools`] | Registry | `Vec<ToolEntry<KeptTool>>` |
//! | [`ToolsStale`], [`ToolsChanged`], [`ServerDown`] | Registry | — |
//! | [`hub::AddServer`], [`hub::AddInProcess`], [`hub::RemoveServer`], [`hub::Shutdown`], [`hub::WaitReady`] | Hub | results |
//! | [`hub::Status`] | Hub | `Vec<ServerStatus>` |
//! | [`gateway::Inbound`], [`gateway::Closed`], [`gateway::CallingServer`], [`gateway::AskClient`] | GatewaySession (one client of `mcpvisor serve`) | — / whether a call to the server is open / the client's answer |
//! | [`Subscribe`] | Hub (server states) / Registry (catalog) | — |
//! | [`messages`]: `Request`, `Routed`, `Forget`, `GetStatus`, `SetLogLevel`, ... | Connection | see each |

pub mod agent;
mod agent_handle;
pub mod callers; // AgentHandle, re-exported here and by `mcpvisor` (the tokio side)
pub mod client_requests;
pub mod connection;
#[doc(hidden)]
pub mod directory; // the hub's table of connections; public for the runtime that starts it
#[doc(hidden)]
pub mod gateway; // the session actor of `mcpvisor serve`, not an embedder's; public for the crate's fronts
#[doc(hidden)]
pub mod guard; // panic isolation and the fault-injection hooks; public for the tests
mod handle; // Handle and Events, re-exported here and by `mcpvisor` (the tokio side)
pub mod hub;
#[doc(hidden)]
pub mod listeners; // who hears events; public for the runtime that starts them
pub mod messages;
pub mod operation;
pub mod outlet;
pub mod parts;
pub mod progress;
pub mod registry;
pub mod reply;
mod rounds;
pub mod skills;
#[doc(hidden)]
pub mod threads; // the arbiters connections run on, the Hub's; public for the gateway's workers

// The layers below, named as this crate's own (`crate::protocol`,
// `crate::transport`, ...), so a path reads the same in every layer.
pub(crate) use mcpvisor_services::{
    builtin_tools, caller_secrets, integrity, llm, oauth, policy, pool, sandbox, server, sessions, telemetry, tool_search, transport,
};
pub(crate) use mcpvisor_wire::{caller_token, codec, config, error, identity, naming, protocol, rate_limit, restart, task_store};

use std::time::Duration;

use actix::prelude::*;
use rmcp::model::{CallToolResult, JsonObject};
use serde::Serialize;

use crate::error::CallError;

pub use crate::pool::{CallerCounts, KeptTool, ServerState, ServerStatus, ToolEntry};
pub use agent_handle::{AgentHandle, TurnAnswer};
pub use connection::Connection;
pub use handle::{hub_of, Events, Handle, EVENT_BUFFER};
pub use hub::Hub;
pub use progress::{Progress, ProgressSink};
pub use registry::Registry;

/// Calls a tool. Sent to the Registry, `name` is the exposed name
/// (`mcp__server__tool`); sent to a Connection, it is the server's own name.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<CallToolResult, CallError>")]
pub struct CallTool {
    pub name: String,
    pub arguments: Option<JsonObject>,
    /// Overrides the server's call time-out.
    pub timeout: Option<Duration>,
    /// Where the call's progress notifications go; each one also pushes
    /// the time-out out (up to the server's `max_call`).
    pub progress: Option<ProgressSink>,
    /// Set by [`CallTool::new`] when the arguments were not a JSON object:
    /// the connection refuses the call with `CallError::InvalidArguments`.
    pub arguments_error: Option<String>,
    /// Who asks, for the audit log (a gateway puts its client's session here).
    pub caller: Option<String>,
    /// The caller's identity, when a gateway checked its credentials (the
    /// audit log names its subject and client).
    pub identity: Option<std::sync::Arc<crate::identity::Identity>>,
    /// Who the call reaches its server as, when the server acts as each
    /// caller (set on the way to the caller's own connection; audited).
    pub upstream: Option<std::sync::Arc<crate::identity::Upstream>>,
    /// The least severe log messages a 2026-07-28 server sends during this
    /// call (`_meta["io.modelcontextprotocol/logLevel"]`), over the
    /// connection's own level; not sent to a handshake-era server.
    pub log_level: Option<messages::LogLevel>,
    /// The span this call belongs to (OpenTelemetry on): the request a
    /// gateway serves, then, past the connection's seam, the call's own,
    /// sent on in `_meta.traceparent`.
    pub(crate) trace: Option<opentelemetry::Context>,
}

impl CallTool {
    /// `arguments`: a JSON object, or null/`None` for none; anything else
    /// makes the call fail with `CallError::InvalidArguments`.
    pub fn new(name: impl Into<String>, arguments: impl IntoArguments) -> Self {
        let (arguments, arguments_error) = match arguments.into_arguments() {
            Ok(arguments) => (arguments, None),
            Err(message) => (None, Some(message)),
        };
        CallTool {
            name: name.into(),
            arguments,
            timeout: None,
            progress: None,
            arguments_error,
            caller: None,
            identity: None,
            upstream: None,
            log_level: None,
            trace: None,
        }
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    pub fn with_progress(mut self, sink: ProgressSink) -> Self {
        self.progress = Some(sink);
        self
    }

    /// Asks a 2026-07-28 server for its log messages at `level` and above during this call.
    pub fn with_log_level(mut self, level: messages::LogLevel) -> Self {
        self.log_level = Some(level);
        self
    }

    /// Makes the call a child of the span `trace` holds (when OpenTelemetry is on).
    pub(crate) fn with_trace(mut self, trace: Option<opentelemetry::Context>) -> Self {
        self.trace = trace;
        self
    }

    /// Labels the call with who made it; the audit log records it.
    pub fn with_caller(mut self, caller: impl Into<String>) -> Self {
        self.caller = Some(caller.into());
        self
    }

    /// The identity the caller proved; the audit log records its subject and client.
    pub fn with_identity(mut self, identity: Option<std::sync::Arc<crate::identity::Identity>>) -> Self {
        self.identity = identity;
        self
    }
}

/// What a tool call's arguments can be given as: a JSON object
/// (`serde_json::Value`, [`JsonObject`], `Option<JsonObject>`); null and
/// `None` mean none; other JSON values are refused with the message returned.
pub trait IntoArguments {
    fn into_arguments(self) -> Result<Option<JsonObject>, String>;
}

impl IntoArguments for serde_json::Value {
    fn into_arguments(self) -> Result<Option<JsonObject>, String> {
        match self {
            serde_json::Value::Object(map) => Ok(Some(map)),
            serde_json::Value::Null => Ok(None),
            other => Err(format!("arguments must be a JSON object (or absent), not {}", crate::protocol::json_kind(&other))),
        }
    }
}

impl IntoArguments for JsonObject {
    fn into_arguments(self) -> Result<Option<JsonObject>, String> {
        Ok(Some(self))
    }
}

impl IntoArguments for Option<JsonObject> {
    fn into_arguments(self) -> Result<Option<JsonObject>, String> {
        Ok(self)
    }
}

/// Lists the catalog (tools of connected servers only), sorted by name;
/// while a server is re-listing after `tools/list_changed`, the answer
/// waits for its new list (at most [`registry::STALE_WAIT`]).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Vec<ToolEntry>")]
pub struct ListTools;

/// Lists the catalog as [`ListTools`] does, each tool as the registry
/// keeps it (schemas as text, shared with the registry's).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Vec<ToolEntry<KeptTool>>")]
pub struct ListKeptTools;

/// A connection heard `tools/list_changed` and is listing its tools again:
/// until its [`ToolsChanged`] (or [`ServerDown`]), a [`ListTools`] waits
/// for it, so that whoever acts on the change (an agent's next model
/// request) sees the new list.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct ToolsStale {
    pub server: String,
    /// Which of the Hub's connections under this name sent it (see [`Instance`]).
    pub instance: Instance,
}

/// A connection (re)listed its tools.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct ToolsChanged {
    pub server: String,
    /// Which of the Hub's connections under this name sent it (see [`Instance`]).
    pub instance: Instance,
    pub tools: Vec<KeptTool>,
}

/// A connection's server went down; its tools leave the listing but calls
/// to them still route to the connection, which queues them until it is back.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct ServerDown {
    pub server: String,
    /// Which of the Hub's connections under this name sent it (see [`Instance`]).
    pub instance: Instance,
}

/// Which connection of a server name a report comes from: the Hub numbers
/// each connection it starts. A server replaced under the same name
/// (`SetServers`) may still report from its old connection, on another
/// thread, after the new one is registered; the Registry and the Hub heed
/// only the instance they registered.
pub type Instance = u64;

/// Registers a recipient of [`Event`]s.
#[derive(Message, Clone)]
#[rtype(result = "()")]
pub struct Subscribe(pub Recipient<Event>);

/// What subscribers hear about.
#[derive(Message, Debug, Clone, PartialEq, Serialize)]
#[rtype(result = "()")]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    ServerState {
        server: String,
        state: ServerState,
    },
    Catalog {
        server: String,
        added: Vec<String>,
        removed: Vec<String>,
    },
    /// Two tools read alike as `name`: `kept` keeps the readable name, `rejected` is exposed under a disambiguated one.
    NameCollision {
        name: String,
        kept: String,
        rejected: String,
    },
    /// A server's `notifications/message`.
    Log {
        server: String,
        level: String,
        logger: Option<String>,
        data: serde_json::Value,
    },
    /// A subscribed resource changed (`notifications/resources/updated`).
    ResourceUpdated {
        server: String,
        uri: String,
    },
    /// A server's list of `resources` or `prompts` changed (tools: see `Catalog`).
    ListChanged {
        server: String,
        list: String,
    },
    /// A change to a pinned tool of a server set to `pin = "notify"` was
    /// accepted (its new definition pinned); `change` says what changed.
    ToolAccepted {
        server: String,
        tool: String,
        change: String,
    },
    /// A handler of `actor` panicked; the panic was caught (see [`guard`]):
    /// that message was answered with an error and the actor serves on.
    ActorPanicked {
        actor: String,
        during: String,
        message: String,
    },
}

impl Event {
    /// The event telling of a caught panic.
    pub fn panicked(panic: &guard::Panicked) -> Event {
        Event::ActorPanicked { actor: panic.actor.clone(), during: panic.during.clone(), message: panic.message.clone() }
    }
}
