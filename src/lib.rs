//! mcpvisor: an actor-model runtime that keeps many MCP servers alive and
//! usable at once.
//!
//! # Embedding
//!
//! [`Runtime::start`] runs the actors on a thread of their own and hands
//! back a [`Handle`]: `Send + Sync + Clone`, usable from any tokio task.
//! Each configured server becomes a supervised connection that owns its
//! child process (or HTTP session) and is restarted by its policy; the
//! registry collects every server's tools under exposed names
//! (`mcp__{server}__{tool}`, [`naming`]); a call is routed, bounded and
//! answered, or fails with a [`CallError`] that names the server, the tool
//! and what to do. Nothing here panics on what a server sends.
//!
//! An example (it runs as a test; it finds
//! the `mcpvisor` binary in the target directory, where `cargo test`
//! builds it before running doc tests):
//!
//! ```
//! use mcpvisor::{Runtime, config::{RuntimeConfig, ServerConfig}};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| format!("{}/target", env!("CARGO_MANIFEST_DIR")));
//! # let mcpvisor = format!("{target}/{}/mcpvisor", if cfg!(debug_assertions) { "debug" } else { "release" });
//! # assert!(std::path::Path::new(&mcpvisor).exists(), "{mcpvisor} is missing: build the binary first (cargo build)");
//! let handle = Runtime::start(RuntimeConfig::new([ServerConfig::stdio("demo", mcpvisor, ["demo-server"])]))?;
//! // No need to wait for the server: a call made before it has listed its tools waits for it.
//! let result = handle.call_tool("mcp__demo__echo", serde_json::json!({"text": "hi"})).await?;
//! assert_eq!(result.content[0].as_text().map(|text| text.text.as_str()), Some("hi"));
//! handle.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! - **Calls**: [`Handle::call_tool`] by exposed name, [`Handle::call_on`]
//!   by a server's own name with a [`CallTool`] (time-out, progress,
//!   cancellation on drop); resources, prompts, completions and skills
//!   likewise.
//! - **The pool**: [`Handle::status`], [`Handle::set_servers`] (add, change,
//!   remove without a restart), [`Handle::subscribe`] for [`Event`]s.
//! - **Requests from servers** (sampling, elicitation, roots):
//!   [`ClientHandlers`], given to [`RuntimeBuilder`].
//! - **A model using the tools**: [`AgentHandle`] with an [`AgentConfig`].
//! - **Errors keep their causes**: [`Cause::find`] reaches the
//!   `std::io::Error` beneath a failed spawn, for instance.
//! - **Inside actix**: the actors and their messages are [`actors`].
//!
//! How the crate is layered, and why, is docs/architecture.md ("Layers");
//! its module table is what `tests/architecture.rs` holds the imports to.

// The API (README, "Stability"): the modules an embedder names (in this
// order: the first path that reaches an item is the one its docs use), and the
// re-exports below. The modules are the workspace's lower crates'
// (docs/architecture.md, "Layers"): `actors` is the actix side; everything
// else is for tokio programs.
#[doc(inline)]
pub use mcpvisor_actors as actors; // actix users' side: the actors, their messages and addresses
#[doc(inline)]
pub use mcpvisor_services::{
    builtin_tools, // the Agent's built-in tools, an in-process server an embedder can add
    llm,           // the models an Agent talks to
    oauth,         // the credentials of remote servers (`config::Auth`)
    pool,          // the pool as data: server states and statuses, catalog entries
    sessions,      // the Agent's saved conversations (`AgentConfig::journal`)
    skills,        // servers' skills, as `Handle::list_skills` returns them
    telemetry,     // metrics and the audit log (`Handle::metrics`, `Handle::telemetry`)
    transport,     // in-process servers (`ToolHandler`) and remote servers' credentials
};
#[doc(inline)]
pub use mcpvisor_wire::{
    config,     // what a configuration file can say
    error,      // every error a caller gets
    naming,     // exposed tool names, as `Handle::call_tool` takes them
    rate_limit, // per-server limits, part of `ServerConfig`
    restart,    // restart policy and intensity, part of `ServerConfig`
};

// The program: public only so that the binary, the tests, the fuzz targets
// and the benches reach them; hidden from the docs and not covered by semver.
#[doc(hidden)]
pub mod cli; // the binary's command line; public for src/main.rs
#[doc(hidden)]
pub mod demo_server; // the bundled test server; public for the binary and the tests
#[doc(hidden)]
pub mod gateway; // `mcpvisor serve`; public for its tests
#[doc(hidden)]
pub use mcpvisor_wire::{
    codec,    // wire framing; public for the fuzz targets
    protocol, // the JSON-RPC wire; public for tests and fuzz (the API speaks rmcp's model types, re-exported below)
};

mod acp; // `mcpvisor acp`, reached through `cli`
mod runtime;

// The lower layers' other modules, named as this crate's own
// (`crate::server`, `crate::policy`, ...) for the fronts.
use mcpvisor_services::{catalog_cache, integrity, policy, sandbox, server, tool_search};
use mcpvisor_wire::{caller_token, civil_date, identity, task_store, user_dirs};

pub use actors::agent::{
    AgentConfig, AgentError, AgentEvent, AgentLimits, AgentStop, ConfirmPolicy, ConfirmRequest, Conversation, Decision, TurnEnded,
};
pub use actors::client_requests::{ClientHandlers, ElicitationRequest, Refusal, Root, RootsRequest, SamplingRequest};
pub use actors::hub::SetServersResult;
pub use actors::operation::LogLevel;
pub use actors::{AgentHandle, TurnAnswer};
pub use actors::{CallTool, Event, IntoArguments, Progress, ProgressSink};
pub use actors::{Events, Handle, EVENT_BUFFER};
pub use error::{CallError, Cause, ConfigError, ConnectError, ManageError};
pub use pool::{ServerState, ServerStatus, ToolEntry};
/// The MCP types of the public API (results, references of completions,
/// elicitation answers, the tools and content of in-process servers), so a
/// program needs no `rmcp` dependency of its own.
pub use rmcp::model::{
    ArgumentInfo, CallToolResult, CompletionInfo, ContentBlock, ElicitRequestParams, ElicitResult, ElicitationAction, GetPromptResult,
    JsonObject, Prompt, PromptReference, ReadResourceResult, Reference, Resource, ResourceTemplate, ResourceTemplateReference, Tool,
    ToolAnnotations,
};
pub use runtime::{Runtime, RuntimeBuilder};
pub use skills::{LoadedSkill, Skill, SkillError, SkillFile, SkillFiles};
pub use transport::in_process::ToolHandler;
