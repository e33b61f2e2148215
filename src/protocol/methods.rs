//! JSON-RPC method names used by MCP (2025-11-25).

pub const INITIALIZE: &str = "initialize";
pub const INITIALIZED: &str = "notifications/initialized";
pub const PING: &str = "ping";
pub const TOOLS_LIST: &str = "tools/list";
pub const TOOLS_CALL: &str = "tools/call";
pub const CANCELLED: &str = "notifications/cancelled";
pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
pub const LOG_MESSAGE: &str = "notifications/message";
