//! mcpvisor: an actor-model runtime that keeps many MCP servers alive and
//! usable at once.
//!
//! The map of the crate:
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`actors`] | everything with a mailbox: [`actors::Hub`] (supervisor), [`actors::Connection`] (one server), [`actors::Registry`] (tool catalog and routing); typed operations ([`actors::operation`]), progress, the server's requests to the client ([`actors::client_requests`]) |
//! | `handle` | [`Runtime::start`] and the `Send + Sync + Clone` [`Handle`] for non-actix programs |
//! | `protocol` | the JSON-RPC envelope, MCP method names and versions, the agreed era (`protocol::Session`), tool schema checks |
//! | `codec` | newline-delimited JSON-RPC framing with a frame-size limit |
//! | `sse` | server-sent events decoded in one linear pass, for the HTTP transports and the model client |
//! | [`transport`] | child processes over stdio (process groups, environment, shutdown, orphans, parent-death signal); in-process servers ([`ToolHandler`]); remote servers over Streamable HTTP and HTTP+SSE ([`transport::http`]) with their credentials |
//! | [`config`] | the server configuration model, the files it is read from (TOML and editors' JSON) and written to |
//! | [`oauth`] | OAuth 2.1 for remote servers: discovery, registration, PKCE logins, refresh, step-up, client credentials, tokens on disk |
//! | [`restart`] | restart policy, backoff, intensity and cool-down, as plain data |
//! | [`rate_limit`] | calls per second (token bucket) and calls at once, per server and per tool |
//! | [`naming`] | exposed tool names `mcp__{server}__{tool}`, and how names that read alike are told apart |
//! | [`error`] | typed errors: [`CallError`], [`ConnectError`], [`ManageError`], [`ConfigError`] |
//! | `demo_server` | the bundled MCP server with fault knobs (`mcpvisor demo-server`) |
//! | [`llm`] | model providers (OpenAI-compatible, Anthropic) behind one [`llm::ChatModel`] seam |
//! | [`telemetry`] | call metrics (Prometheus text for `/metrics`) and the audit log, fed by every tool call |
//! | [`sessions`] | the agent's saved conversations: one JSON-lines file each, secrets masked, resumable |
//! | [`skills`] | servers' skills (SEP-2640): entries listed without reading files, files verified by size, digest and frontmatter |
//! | `task_store` | the server side of 2025-11-25 tasks, for the demo server and the gateway |
//! | `tool_search` | ranking a catalog's tools against a query (`tools --search`, the agent's `search_tools`) |
//! | `catalog_cache` | each server's tool list kept on disk, so searches need not start every server |
//! | `user_dirs` | where data and caches live (XDG base directories) |
//! | [`builtin_tools`] | the agent's built-in tools (read, write, list, run a command) as the in-process server `builtin` |
//! | `gateway` | the whole pool served as one MCP server (`mcpvisor serve`): names, routing, eras; the session actor is [`actors::gateway`] |
//! | `acp` | the agent served to editors over the Agent Client Protocol (`mcpvisor acp`) |
//! | `cli` | the `mcpvisor` command line |
//!
//! Embedding from any tokio program (this example runs as a test; it finds
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

// The API (README, "Stability"): the modules an embedder names, and the
// re-exports below. `actors` is the actix side; everything else is for
// tokio programs.
// Actix users' side: the actors, their messages and addresses.
#[path = "../actors/mod.rs"]
pub mod actors;
pub mod builtin_tools; // the Agent's built-in tools, an in-process server an embedder can add
pub mod config; // what a configuration file can say
pub mod error; // every error a caller gets
pub mod llm; // the models an Agent talks to
pub mod naming; // exposed tool names, as `Handle::call_tool` takes them
pub mod oauth; // the credentials of remote servers (`config::Auth`)
pub mod rate_limit; // per-server limits, part of `ServerConfig`
pub mod restart; // restart policy and intensity, part of `ServerConfig`
pub mod sessions; // the Agent's saved conversations (`AgentConfig::journal`)
pub mod skills; // servers' skills, as `Handle::list_skills` returns them
pub mod telemetry; // metrics and the audit log (`Handle::metrics`, `Handle::telemetry`)
pub mod transport; // in-process servers (`ToolHandler`) and remote servers' credentials

// The program: public only so that the binary, the tests, the fuzz targets
// and the benches reach them; hidden from the docs and not covered by semver.
#[doc(hidden)]
pub mod cli; // the binary's command line; public for src/main.rs
#[doc(hidden)]
pub mod codec; // wire framing; public for the fuzz targets
#[doc(hidden)]
pub mod demo_server; // the bundled test server; public for the binary and the tests
#[doc(hidden)]
pub mod gateway; // `mcpvisor serve`; public for its tests
#[doc(hidden)]
pub mod protocol; // the JSON-RPC wire; public for tests and fuzz (the API speaks rmcp's model types, re-exported below)

mod acp; // `mcpvisor acp`, reached through `cli`
mod agent_handle;
mod catalog_cache;
mod civil_date;
mod handle;
mod sandbox; // applied from `config::SandboxSpec`
mod sse;
mod task_store;
mod tool_search;
mod user_dirs;

pub use actors::agent::{
    AgentConfig, AgentError, AgentEvent, AgentLimits, AgentStop, ConfirmPolicy, ConfirmRequest, Conversation, Decision, TurnEnded,
};
pub use actors::client_requests::{ClientHandlers, ElicitationRequest, Refusal, Root, RootsRequest, SamplingRequest};
pub use actors::hub::SetServersResult;
pub use actors::operation::LogLevel;
pub use actors::{CallTool, Event, IntoArguments, Progress, ProgressSink, ServerState, ServerStatus, ToolEntry};
pub use agent_handle::{AgentHandle, TurnAnswer};
pub use error::{CallError, ConfigError, ConnectError, ManageError};
pub use handle::{Events, Handle, Runtime, EVENT_BUFFER};
/// The MCP types of the public API (results, references of completions,
/// elicitation answers, the tools and content of in-process servers), so a
/// program needs no `rmcp` dependency of its own.
pub use rmcp::model::{
    ArgumentInfo, CallToolResult, CompletionInfo, ContentBlock, ElicitRequestParams, ElicitResult, ElicitationAction, GetPromptResult,
    JsonObject, Prompt, PromptReference, ReadResourceResult, Reference, Resource, ResourceTemplate, ResourceTemplateReference, Tool,
    ToolAnnotations,
};
pub use skills::{LoadedSkill, Skill, SkillError, SkillFile, SkillFiles};
pub use transport::in_process::ToolHandler;
