//! The whole pool served as one MCP server.

pub mod http;
pub mod outbox;
