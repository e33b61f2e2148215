//! mcpvisor: an actor-model runtime that keeps many MCP servers alive and
//! usable at once.
//!
//! The map of the crate:
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`actors`] | everything with a mailbox: [`actors::Hub`] (supervisor), [`actors::Connection`] (one server), [`actors::Registry`] (tool catalog and routing); typed operations ([`actors::operation`]), progress, the server's requests to the client ([`actors::client_requests`]) |
//! | [`handle`] | [`Runtime::start`] and the `Send + Sync + Clone` [`Handle`] for non-actix programs |
//! | [`protocol`] | the JSON-RPC envelope, MCP method names and versions, the agreed era ([`protocol::Session`]), tool schema checks |
//! | [`codec`] | newline-delimited JSON-RPC framing with a frame-size limit |
//! | `sse` | server-sent events decoded in one linear pass, for the HTTP transports and the model client |
//! | [`transport`] | child processes over stdio (process groups, environment, shutdown, orphans, parent-death signal); in-process servers ([`ToolHandler`]); remote servers over Streamable HTTP and HTTP+SSE ([`transport::http`]) with their credentials |
//! | [`config`] | the server configuration model, the files it is read from (TOML and editors' JSON) and written to |
//! | [`oauth`] | OAuth 2.1 for remote servers: discovery, registration, PKCE logins, refresh, step-up, client credentials, tokens on disk |
//! | [`restart`] | restart policy, backoff, intensity and cool-down, as plain data |
//! | [`rate_limit`] | calls per second (token bucket) and calls at once, per server and per tool |
//! | [`naming`] | exposed tool names `mcp__{server}__{tool}`, and how names that read alike are told apart |
//! | [`error`] | typed errors: [`CallError`], [`ConnectError`], [`ManageError`], [`ConfigError`] |
//! | [`demo_server`] | the bundled MCP server with fault knobs (`mcpvisor demo-server`) |
//! | [`llm`] | model providers (OpenAI-compatible, Anthropic) behind one [`llm::ChatModel`] seam |
//! | [`telemetry`] | call metrics (Prometheus text for `/metrics`) and the audit log, fed by every tool call |
//! | [`sessions`] | the agent's saved conversations: one JSON-lines file each, secrets masked, resumable |
//! | [`skills`] | servers' skills (SEP-2640): entries listed without reading files, files verified by size, digest and frontmatter |
//! | [`task_store`] | the server side of 2025-11-25 tasks, for the demo server and the gateway |
//! | [`tool_search`] | ranking a catalog's tools against a query (`tools --search`, the agent's `search_tools`) |
//! | [`catalog_cache`] | each server's tool list kept on disk, so searches need not start every server |
//! | [`user_dirs`] | where data and caches live (XDG base directories) |
//! | [`builtin_tools`] | the agent's built-in tools (read, write, list, run a command) as the in-process server `builtin` |
//! | [`server`] | the one MCP server side: eras, paging, listen filters, tasks, parked calls, error constructors |
//! | [`gateway`] | the gateway's fronts (`mcpvisor serve` over stdio and HTTP); the session actor is [`actors::gateway`] |
//! | [`acp`] | the agent served to editors over the Agent Client Protocol (`mcpvisor acp`) |
//! | [`cli`] | the `mcpvisor` command line |
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

pub mod acp;
#[path = "../actors/mod.rs"]
pub mod actors;
pub mod builtin_tools;
pub mod catalog_cache;
mod civil_date;
pub mod cli;
pub mod codec;
pub mod config;
pub mod demo_server;
pub mod error;
pub mod gateway;
pub mod handle;
pub mod llm;
pub mod naming;
pub mod oauth;
pub mod protocol;
pub mod rate_limit;
pub mod restart;
pub mod sandbox;
pub mod server;
pub mod sessions;
pub mod skills;
mod sse;
pub mod task_store;
pub mod telemetry;
pub mod tool_search;
pub mod transport;
pub mod user_dirs;

pub use actors::client_requests::{ClientHandlers, ElicitationRequest, Refusal, Root, RootsRequest, SamplingRequest};
pub use actors::operation::LogLevel;
pub use actors::{CallTool, Event, IntoArguments, Progress, ProgressSink, ServerState, ServerStatus, ToolEntry};
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
