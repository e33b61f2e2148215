//! The gateway's fronts: the whole pool served as one MCP server over
//! stdio ([`stdio`]) and Streamable HTTP ([`http`]).
//!
//! A front owns the bytes and talks to one session actor,
//! [`crate::actors::gateway::GatewaySession`], only through the seam
//! described there: [`crate::actors::gateway::Inbound`] messages in,
//! `crate::server::outbox::Frame`s out. The session's passive parts (eras,
//! paging, listen filters, tasks, parked calls, error constructors) are the
//! one server side, `crate::server`; its routing tables, client bridge
//! and roots live beside the actor in `actors/src/gateway/`.

pub mod http;
pub mod stdio;

/// The caller label (`CallTool::with_caller`, the audit log's `caller`)
/// of the calls of a client over stdio. Over HTTP a session's label is its
/// `Mcp-Session-Id`.
pub const STDIO_CALLER: &str = "stdio";

/// The caller label of a stateless 2026-07-28 request over HTTP: it has
/// no session, and its peer address would often be a proxy's.
pub const STATELESS_CALLER: &str = "http:stateless";
