//! The MCP wire: the JSON-RPC 2.0 envelope, method names and protocol eras.
//!
//! Payload types (tools, results, capabilities) come from `rmcp::model`; this
//! module owns only what travels around them, so that a frame can be routed
//! by its id before its payload is parsed.

mod jsonrpc;
pub mod methods;
pub mod pagination;
pub mod schema;
pub mod session;
#[doc(hidden)]
pub mod uri;
mod version;

pub use jsonrpc::{error_codes, notification_frame, request_frame, response_frame, ErrorObject, Message, RequestId};
pub use session::{Era, Session};
pub use version::{
    is_modern_version, is_supported_legacy_version, negotiated_legacy_version, supported_versions, LATEST_LEGACY_VERSION, MODERN_VERSIONS,
    SUPPORTED_LEGACY_VERSIONS,
};

/// A JSON value's kind as a phrase, for error messages ("null", "a string", ...).
pub fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}
