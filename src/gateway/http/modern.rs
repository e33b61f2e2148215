//! The 2026-07-28 era's HTTP rules on the server side, mirroring what our
//! client sends (`transport::http` headers): the standard headers must
//! agree with the body, and some errors carry an HTTP status of their own.
//!
//! - `MCP-Protocol-Version` must be present and equal the body's
//!   `_meta` version; `Mcp-Method` must equal the body's method; `Mcp-Name`
//!   must equal `params.name` (`tools/call`, `prompts/get`) or `params.uri`
//!   (`resources/read`, `resources/subscribe`, `resources/unsubscribe`)
//!   when the body has one. Values are compared after trimming optional
//!   white space, and decoded when sent as `=?base64?…?=`; header names
//!   ignore case. A failure is HTTP 400 with JSON-RPC error -32020.
//! - A request without `_meta` or without its protocol version or client
//!   capabilities is HTTP 400 with -32602 (`server/discover` too).
//! - The methods this era removed (`initialize`, `ping`,
//!   `logging/setLevel`, `resources/subscribe`, `resources/unsubscribe`)
//!   are HTTP 404 with -32601.
//! - An answer that is an error maps to a status: -32601 → 404;
//!   -32602, -32020, -32021, -32022 → 400; any other → 200.
//!
//! Not checked: `Mcp-Param-*` headers of tools' `x-mcp-header` parameters
//! (they would need each tool's schema here; the body is what is served).

use axum::http::{HeaderMap, StatusCode};
use base64::Engine;
use serde_json::Value;

use crate::protocol::session::{META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION};
use crate::protocol::{error_codes, is_modern_version, ErrorObject};

/// JSON-RPC error: a standard header disagrees with the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// JSON-RPC error: the request needs a client capability it did not declare.
pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;

/// Methods of the `initialize` era that the 2026-07-28 era removed.
const REMOVED_METHODS: [&str; 5] = ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"];

/// Whether a session-less POST belongs to the 2026-07-28 era.
pub fn is_modern(headers: &HeaderMap, message: &Value) -> bool {
    let header = super::header_text(headers, super::PROTOCOL_VERSION);
    let body = message.pointer("/params/_meta").and_then(|meta| meta.get(META_PROTOCOL_VERSION)).and_then(Value::as_str);
    header.is_some_and(is_modern_version)
        || body.is_some_and(is_modern_version)
        || message.get("method").and_then(Value::as_str) == Some(crate::protocol::methods::DISCOVER)
}

/// A header's value as the specification reads it: trimmed, and decoded
/// from `=?base64?…?=`.
fn decoded(value: &str) -> Option<String> {
    let value = value.trim();
    match value.strip_prefix("=?base64?").and_then(|rest| rest.strip_suffix("?=")) {
        Some(encoded) => String::from_utf8(base64::engine::general_purpose::STANDARD.decode(encoded).ok()?).ok(),
        None => Some(value.to_string()),
    }
}

fn mismatch(message: String) -> ErrorObject {
    ErrorObject { code: HEADER_MISMATCH, message, data: None }
}

/// Checks a modern-era message against its headers (see the module docs).
pub fn check(headers: &HeaderMap, message: &Value) -> Result<(), ErrorObject> {
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
    let meta = message.pointer("/params/_meta");
    let body_version = meta.and_then(|meta| meta.get(META_PROTOCOL_VERSION)).and_then(Value::as_str);
    let header_version = super::header_text(headers, super::PROTOCOL_VERSION).map(str::trim);
    let is_request = message.get("id").is_some();
    if is_request && REMOVED_METHODS.contains(&method) {
        return Err(ErrorObject {
            code: error_codes::METHOD_NOT_FOUND,
            message: format!("Method not found: `{method}` is not part of the 2026-07-28 era (use server/discover and per-request _meta)"),
            data: None,
        });
    }
    if is_request {
        let complete = body_version.is_some() && meta.and_then(|meta| meta.get(META_CLIENT_CAPABILITIES)).is_some();
        if !complete {
            return Err(ErrorObject {
                code: error_codes::INVALID_PARAMS,
                message: format!(
                    "Invalid params: a 2026-07-28 request carries `_meta` with `{META_PROTOCOL_VERSION}` and `{META_CLIENT_CAPABILITIES}`"
                ),
                data: None,
            });
        }
    }
    match (header_version, body_version) {
        (None, _) => return Err(mismatch("Header mismatch: the MCP-Protocol-Version header is missing".into())),
        (Some(header), Some(body)) if header != body => {
            return Err(mismatch(format!("Header mismatch: MCP-Protocol-Version is {header:?} but the body's _meta says {body:?}")))
        }
        (Some(header), _) if !is_modern_version(header) => return Err(super::unsupported_version(header)),
        _ => {}
    }
    if method.is_empty() {
        return Ok(());
    }
    match super::header_text(headers, "mcp-method").and_then(decoded) {
        None => return Err(mismatch(format!("Header mismatch: the Mcp-Method header is missing (the body's method is {method:?})"))),
        Some(header) if header != method => {
            return Err(mismatch(format!("Header mismatch: Mcp-Method is {header:?} but the body's method is {method:?}")))
        }
        Some(_) => {}
    }
    let name_key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => "uri",
        _ => return Ok(()),
    };
    let Some(body_name) = message.pointer(&format!("/params/{name_key}")).and_then(Value::as_str) else { return Ok(()) };
    match super::header_text(headers, "mcp-name").and_then(decoded) {
        None => Err(mismatch(format!("Header mismatch: the Mcp-Name header is missing (the body's {name_key} is {body_name:?})"))),
        Some(header) if header != body_name => {
            Err(mismatch(format!("Header mismatch: Mcp-Name is {header:?} but the body's {name_key} is {body_name:?}")))
        }
        Some(_) => Ok(()),
    }
}

/// The HTTP status of a modern-era answer whose error has `code`.
pub fn status_of_error(code: i64) -> StatusCode {
    match code {
        error_codes::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        error_codes::INVALID_PARAMS | HEADER_MISMATCH | MISSING_CLIENT_CAPABILITY | error_codes::UNSUPPORTED_PROTOCOL_VERSION => {
            StatusCode::BAD_REQUEST
        }
        _ => StatusCode::OK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs.iter().map(|(name, value)| (axum::http::HeaderName::from_static(name), HeaderValue::from_str(value).unwrap())).collect()
    }

    fn call(name: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": {},
            "_meta": {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}}})
    }

    #[test]
    fn headers_must_agree_with_the_body() {
        let good = headers(&[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "  echo ")]);
        assert_eq!(check(&good, &call("echo")), Ok(()));
        let encoded = headers(&[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "=?base64?ZWNobw==?=")]);
        assert_eq!(check(&encoded, &call("echo")), Ok(()));
        for (bad, code) in [
            (headers(&[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "other")]), HEADER_MISMATCH),
            (headers(&[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call")]), HEADER_MISMATCH),
            (headers(&[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "Tools/Call"), ("mcp-name", "echo")]), HEADER_MISMATCH),
            (headers(&[("mcp-method", "tools/call"), ("mcp-name", "echo")]), HEADER_MISMATCH),
            (headers(&[("mcp-protocol-version", "2025-06-18"), ("mcp-method", "tools/call"), ("mcp-name", "echo")]), HEADER_MISMATCH),
        ] {
            assert_eq!(check(&bad, &call("echo")).unwrap_err().code, code, "{bad:?}");
        }
        let bare = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
        let list = headers(&[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list")]);
        assert_eq!(check(&list, &bare).unwrap_err().code, error_codes::INVALID_PARAMS);
        let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
        assert_eq!(check(&list, &ping).unwrap_err().code, error_codes::METHOD_NOT_FOUND);
        assert_eq!(status_of_error(error_codes::METHOD_NOT_FOUND), StatusCode::NOT_FOUND);
        assert_eq!(status_of_error(HEADER_MISMATCH), StatusCode::BAD_REQUEST);
        assert_eq!(status_of_error(-32000), StatusCode::OK);
    }
}
