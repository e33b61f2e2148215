//! mcpvisor's layer 1, data and wire: what every other layer speaks and
//! reads, with no process, socket or actor of its own: the JSON-RPC and MCP
//! wire, the configuration model and its files, the typed errors, restart
//! and rate policy as plain data.
//!
//! An internal crate of the workspace (docs/architecture.md, "Layers"): its
//! API is what `mcpvisor` re-exports, and nothing here is covered by semver
//! on its own. It depends on no crate of mcpvisor's, so nothing here can
//! import a service, an actor or a front.

pub mod caller_token; // a gateway caller's bearer token, kept apart from its identity, never shown
pub mod civil_date; // calendar dates from day counts (no date-time dependency)
pub mod codec; // newline-delimited JSON-RPC framing with a frame-size limit
pub mod config; // what a configuration file can say, read and written
pub mod error; // every error a caller gets
pub mod identity; // who called the gateway, as authentication proved it
pub mod naming; // exposed tool names `mcp__{server}__{tool}`
pub mod protocol; // the JSON-RPC envelope, MCP methods, versions and eras
pub mod rate_limit; // calls per second and at once, per server and per tool
pub mod restart; // restart policy, backoff, intensity and cool-down
pub mod secret; // the kinds of secret found in a call, and which way it went
pub mod sse; // server-sent events, decoded in one linear pass
pub mod task_store; // the server side of 2025-11-25 tasks
pub mod user_dirs; // where data and caches live (XDG base directories)
