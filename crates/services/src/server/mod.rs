//! The one MCP server side: the protocol parts every server this crate
//! serves shares (the gateway's sessions, the demo server, in-process
//! servers), below the actors and the fronts that use them.
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`request`] | the one typed inbound request ([`request::ClientRequest`]), parsed once: rmcp's params where it has the method, the crate's own where not |
//! | [`dispatch`] | the [`dispatch::ServerHandler`] trait and the one dispatcher: lifecycle, paging, method-not-found, the rest to the handler |
//! | [`era`] | which era serves a request, the -32022 refusal, the modern era's result fields |
//! | [`lifecycle`] | `initialize` and `server/discover` answers: server info, capabilities, negotiated version |
//! | [`paging`] | the one pager of every `*/list`, with the one cursor format |
//! | [`listen`] | 2026-07-28 `subscriptions/listen` filters and the changes they select |
//! | [`subscriptions`] | who hears about changes: legacy `resources/subscribe`d URIs and listen streams |
//! | [`tasks`] | task-augmented `tools/call` and `tasks/*` over a [`crate::task_store::TaskStore`] |
//! | [`input`] | 2026-07-28 calls parked on `input_required` while a server's request waits for the client (MRTR) |
//! | [`errors`] | the shared error constructors: a [`crate::error::CallError`] as the JSON-RPC error or `isError` result MCP expects |
//! | [`tool_server`] | the [`tool_server::ToolHandler`] trait and the loop serving one (in-process servers) |
//! | [`outbox`] | the bounded channels frames leave a session by, and the frames themselves |
//!
//! The supported versions are one list in [`crate::protocol`]. Layer 2:
//! nothing here imports the actors, the gateway fronts, the demo server,
//! the CLI, ACP or the handle.

pub mod dispatch;
pub mod era;
pub mod errors;
pub mod input;
pub mod lifecycle;
pub mod listen;
pub mod outbox;
pub mod paging;
pub mod request;
pub mod subscriptions;
pub mod tasks;
pub mod tool_server;

/// The name the gateway gives itself in `initialize` and `server/discover`.
pub const SERVER_NAME: &str = "mcpvisor";

/// The gateway's built-in resource with every server's status.
pub const STATUS_URI: &str = "mcpvisor://status";
