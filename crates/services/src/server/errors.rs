//! A [`CallError`] as MCP expects the gateway to report it.
//!
//! Decision (recorded in docs/gateway.md): what the client got wrong or
//! cannot get now is a JSON-RPC error: an unknown tool or bad arguments
//! (-32602, naming the tool), an overloaded server (-32000 with
//! `data.kind = "overloaded"`, at once), a call refused by the server's
//! rate limits (-32000 with `data.kind = "rate_limited"` and
//! `retryAfterMs`), a server's own JSON-RPC error
//! (passed through with its code). What happened while a tool ran (its
//! server exited, restarted, timed out, answered garbage) is a tool result
//! with `isError: true` and the message, so a model reads it and may retry.
//! Every message names the server.

use serde_json::{json, Value};

use crate::config::Direction;
use crate::error::CallError;
use crate::protocol::{error_codes, ErrorObject};

/// JSON-RPC's implementation-defined server error, used for an overloaded server.
pub const SERVER_ERROR: i64 = -32000;

/// The answer to `tools/call` for a failed call: a JSON-RPC error, or an
/// `isError` result.
pub fn tool_failure(error: CallError) -> Result<Value, ErrorObject> {
    match error {
        CallError::UnknownTool { .. }
        | CallError::UnknownServer { .. }
        | CallError::InvalidArguments { .. }
        | CallError::NotPermitted { .. }
        | CallError::Withheld { .. }
        | CallError::Flagged { .. }
        | CallError::SecretBlocked { direction: Direction::Arguments, .. }
        | CallError::Overloaded { .. }
        | CallError::RateLimited { .. }
        | CallError::Rpc { .. } => Err(rpc_error(error)),
        other => Ok(json!({ "content": [{ "type": "text", "text": other.to_string() }], "isError": true })),
    }
}

/// The JSON-RPC error for a failed request (any method).
pub fn rpc_error(error: CallError) -> ErrorObject {
    let message = error.to_string();
    let (code, data) = match error {
        CallError::UnknownTool { .. } | CallError::UnknownServer { .. } | CallError::InvalidArguments { .. } => {
            (error_codes::INVALID_PARAMS, None)
        }
        CallError::NotPermitted { .. } => (error_codes::INVALID_PARAMS, None),
        CallError::Withheld { server, tool, change } => {
            (error_codes::INVALID_PARAMS, Some(json!({ "kind": "withheld", "server": server, "tool": tool, "change": change })))
        }
        CallError::Flagged { server, tool, finding } => {
            (error_codes::INVALID_PARAMS, Some(json!({ "kind": "flagged", "server": server, "tool": tool, "finding": finding })))
        }
        CallError::SecretBlocked { server, tool, direction, kind } => {
            let data = json!({ "kind": "secret_blocked", "server": server, "tool": tool, "direction": direction.as_str(), "secret": kind.as_str() });
            (error_codes::INVALID_PARAMS, Some(data))
        }
        CallError::Overloaded { server, in_flight, queued, .. } => {
            (SERVER_ERROR, Some(json!({ "kind": "overloaded", "server": server, "inFlight": in_flight, "queued": queued })))
        }
        CallError::RateLimited { server, tool, limit, retry_after } => {
            let retry_after_ms = retry_after.map(|after| after.as_millis() as u64);
            (
                SERVER_ERROR,
                Some(json!({ "kind": "rate_limited", "server": server, "tool": tool, "limit": limit, "retryAfterMs": retry_after_ms })),
            )
        }
        CallError::Rpc { code, message, data, .. } => return ErrorObject { code, message, data },
        CallError::Unsupported { .. } => (error_codes::METHOD_NOT_FOUND, None),
        _ => (error_codes::INTERNAL_ERROR, None),
    };
    ErrorObject { code, message, data }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_errors_are_json_rpc_errors_and_execution_errors_are_results() {
        let unknown = tool_failure(CallError::UnknownTool { name: "x__y".into() }).unwrap_err();
        assert_eq!(unknown.code, error_codes::INVALID_PARAMS);
        assert!(unknown.message.contains("x__y"));
        let busy = CallError::Overloaded { server: "s".into(), tool: "t".into(), in_flight: 4, queued: 8 };
        let busy = tool_failure(busy).unwrap_err();
        assert_eq!((busy.code, busy.data.unwrap()["kind"].as_str()), (SERVER_ERROR, Some("overloaded")));
        assert!(busy.message.contains("overloaded"));
        let limited = CallError::RateLimited {
            server: "s".into(),
            tool: "t".into(),
            limit: "10 calls/s".into(),
            retry_after: Some(std::time::Duration::from_millis(250)),
        };
        let limited = tool_failure(limited).unwrap_err();
        let data = limited.data.unwrap();
        assert_eq!((limited.code, data["kind"].as_str(), data["retryAfterMs"].as_u64()), (SERVER_ERROR, Some("rate_limited"), Some(250)));
        let upstream = CallError::Rpc { server: "s".into(), tool: "t".into(), code: -32042, message: "visit".into(), data: Some(json!(1)) };
        assert_eq!(tool_failure(upstream).unwrap_err(), ErrorObject { code: -32042, message: "visit".into(), data: Some(json!(1)) });
        let down = CallError::Restarting { server: "s".into(), tool: "t".into(), attempt: 2, after: std::time::Duration::from_secs(1) };
        let result = tool_failure(down).unwrap();
        assert_eq!(result["isError"], true);
        assert!(result["content"][0]["text"].as_str().unwrap().contains("server `s` was still restarting"));
    }
}
