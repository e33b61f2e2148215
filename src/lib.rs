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
//! | [`transport`] | child processes over stdio: process groups, environment, shutdown |
//! | [`config`] | the server configuration model, the files it is read from (TOML and editors' JSON) and written to |
//! | [`restart`] | restart policy, backoff and intensity, as plain data |
//! | [`naming`] | exposed tool names `mcp__{server}__{tool}` |
//! | [`error`] | typed errors: [`CallError`], [`ConnectError`], [`ManageError`], [`ConfigError`] |
//! | [`demo_server`] | the bundled MCP server with fault knobs (`mcpvisor demo-server`) |
//! | [`llm`] | model providers (OpenAI-compatible, Anthropic) behind one [`llm::ChatModel`] seam |
//! | [`cli`] | the `mcpvisor` command line |
//!
//! Embedding from any tokio program:
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use mcpvisor::{Runtime, config::{RuntimeConfig, ServerConfig}};
//! let handle = Runtime::start(RuntimeConfig::new([ServerConfig::stdio("demo", "mcpvisor", ["demo-server"])]))?;
//! let args = serde_json::json!({"text": "hi"}).as_object().cloned();
//! let result = handle.call_tool("mcp__demo__echo", args).await;
//! # Ok(()) }
//! ```

#[path = "../actors/mod.rs"]
pub mod actors;
pub mod cli;
pub mod codec;
pub mod config;
pub mod demo_server;
pub mod error;
pub mod handle;
pub mod llm;
pub mod naming;
pub mod protocol;
pub mod restart;
pub mod transport;

pub use actors::{CallTool, Event, Progress, ProgressSink, ServerState, ServerStatus, ToolEntry};
pub use error::{CallError, ConfigError, ConnectError, ManageError};
pub use handle::{Handle, Runtime};
pub use rmcp::model::{CallToolResult, JsonObject, Tool};
