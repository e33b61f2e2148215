//! mcpvisor: an actor-model runtime that keeps many MCP servers alive and
//! usable at once.
//!
//! The map of the crate, in layers from the bottom up. Every import points
//! down a layer or stays in its own (without a loop); `tests/architecture.rs`
//! reads this very table, so a new module needs a row here, and the test fails
//! on an import that points up a layer or a loop between modules. The
//! actors live in the top-level folder `actors/`, mounted as `crate::actors`
//! (docs/architecture.md, "Layers").
//!
//! | module | layer | what it holds |
//! | --- | --- | --- |
//! | `protocol` | 1 data and wire | the JSON-RPC envelope, MCP method names and versions, the agreed era (`protocol::Session`), tool schema checks |
//! | `codec` | 1 data and wire | newline-delimited JSON-RPC framing with a frame-size limit |
//! | `sse` | 1 data and wire | server-sent events decoded in one linear pass, for the HTTP transports and the model client |
//! | [`naming`] | 1 data and wire | exposed tool names `mcp__{server}__{tool}`, and how names that read alike are told apart |
//! | [`error`] | 1 data and wire | typed errors: [`CallError`], [`ConnectError`], [`ManageError`], [`ConfigError`] |
//! | [`config`] | 1 data and wire | the server configuration model, the files it is read from (TOML and editors' JSON) and written to |
//! | [`restart`] | 1 data and wire | restart policy, backoff, intensity and cool-down, as plain data |
//! | [`rate_limit`] | 1 data and wire | calls per second (token bucket) and calls at once, per server and per tool |
//! | `task_store` | 1 data and wire | the server side of 2025-11-25 tasks, for the demo server and the gateway |
//! | `civil_date` | 1 data and wire | calendar dates from day counts, for session ids and audit lines (no date-time dependency) |
//! | `user_dirs` | 1 data and wire | where data and caches live (XDG base directories) |
//! | `identity` | 1 data and wire | who called the gateway, as authentication proved it (`Identity`), for policies, logs, limits and traces |
//! | [`transport`] | 2 services | child processes over stdio (process groups, environment, shutdown, orphans, parent-death signal); in-process servers ([`ToolHandler`]); remote servers over Streamable HTTP and HTTP+SSE ([`transport::http`]) with their credentials |
//! | [`oauth`] | 2 services | OAuth 2.1 for remote servers: discovery, registration, PKCE logins, refresh, step-up, client credentials, tokens on disk |
//! | `sandbox` | 2 services | sandboxes for the processes mcpvisor starts: Landlock, a network namespace, rlimits, a cgroup, seccomp |
//! | [`telemetry`] | 2 services | call metrics (Prometheus text for `/metrics`) and the audit log, fed by every tool call |
//! | [`llm`] | 2 services | model providers (OpenAI-compatible, Anthropic) behind one [`llm::ChatModel`] seam |
//! | [`builtin_tools`] | 2 services | the agent's built-in tools (read, write, list, run a command) as the in-process server `builtin` |
//! | [`sessions`] | 2 services | the agent's saved conversations: one JSON-lines file each, secrets masked, resumable |
//! | [`skills`] | 2 services | servers' skills (SEP-2640): entries listed without reading files, files verified by size, digest and frontmatter |
//! | [`pool`] | 2 services | the pool as plain data: catalog entries ([`ToolEntry`]), server states and statuses |
//! | `tool_search` | 2 services | ranking a catalog's tools against a query (`tools --search`, the agent's `search_tools`) |
//! | `catalog_cache` | 2 services | each server's tool list kept on disk, so searches need not start every server |
//! | `policy` | 2 services | the gateway's access rules (`[serve.policy]`): which identity may list and use which server's tools, prompts and resources, `when` expressions in CEL |
//! | `server` | 2 services | the one MCP server side: eras, `initialize`/`server/discover` answers, paging, listen filters, tasks, parked calls, error constructors |
//! | [`actors`] | 3 actors | everything with a mailbox: [`actors::Hub`] (supervisor), [`actors::Connection`] (one server), [`actors::Registry`] (tool catalog and routing), the agent, a gateway client's session; [`Handle`] and [`AgentHandle`], the runtime and an agent as seen from any tokio program; typed operations ([`actors::operation`]), progress, the server's requests to the client ([`actors::client_requests`]) |
//! | `runtime` | 4 fronts | [`Runtime::start`] and [`RuntimeBuilder`]: the runtime thread for non-actix programs, which hands out the `Send + Sync + Clone` [`Handle`] (with this crate root's re-exports, the facade) |
//! | `gateway` | 4 fronts | the whole pool served as one MCP server (`mcpvisor serve`): the HTTP and stdio fronts, the session actor, its routing tables and client bridge are `actors::gateway` |
//! | `demo_server` | 4 fronts | the bundled MCP server with fault knobs (`mcpvisor demo-server`) |
//! | `acp` | 4 fronts | the agent served to editors over the Agent Client Protocol (`mcpvisor acp`) |
//! | `cli` | 4 fronts | the `mcpvisor` command line |
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
pub mod actors; // actix users' side: the actors, their messages and addresses
pub mod builtin_tools; // the Agent's built-in tools, an in-process server an embedder can add
pub mod config; // what a configuration file can say
pub mod error; // every error a caller gets
pub mod llm; // the models an Agent talks to
pub mod naming; // exposed tool names, as `Handle::call_tool` takes them
pub mod oauth; // the credentials of remote servers (`config::Auth`)
pub mod pool; // the pool as data: server states and statuses, catalog entries
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
mod catalog_cache;
mod civil_date;
mod identity;
mod policy;
mod runtime;
mod sandbox; // applied from `config::SandboxSpec`
mod server; // the MCP server side of the gateway, the demo server and in-process servers
mod sse;
mod task_store;
mod tool_search;
mod user_dirs;

pub use actors::agent::{
    AgentConfig, AgentError, AgentEvent, AgentLimits, AgentStop, ConfirmPolicy, ConfirmRequest, Conversation, Decision, TurnEnded,
};
pub use actors::agent_handle::{AgentHandle, TurnAnswer};
pub use actors::client_requests::{ClientHandlers, ElicitationRequest, Refusal, Root, RootsRequest, SamplingRequest};
pub use actors::handle::{Events, Handle, EVENT_BUFFER};
pub use actors::hub::SetServersResult;
pub use actors::operation::LogLevel;
pub use actors::{CallTool, Event, IntoArguments, Progress, ProgressSink};
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
