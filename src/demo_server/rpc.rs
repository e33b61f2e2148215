//! JSON-RPC 2.0 on the wire: error codes, the shapes of incoming messages,
//! outgoing frames (one line each, newline included) and tool-result helpers.

use serde_json::{json, Value};
use tokio::sync::mpsc;

pub use crate::protocol::error_codes::{INVALID_PARAMS, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND, URL_ELICITATION_REQUIRED};
/// The demo's errors are the protocol's, built with its shared constructors.
pub use crate::protocol::ErrorObject;

/// Frames for stdout, each one whole line with its newline; one writer task owns stdout.
pub type Out = mpsc::UnboundedSender<Vec<u8>>;

/// One incoming JSON-RPC message, sorted by shape.
#[derive(Debug, PartialEq)]
pub enum Message {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// A response to one of our requests: its `result`, or its `error` object.
    Response {
        id: Value,
        outcome: Result<Value, Value>,
    },
    Invalid(&'static str),
}

pub fn classify(message: Value) -> Message {
    let Value::Object(mut map) = message else {
        return Message::Invalid("not a JSON object (batches are not supported)");
    };
    let params = map.remove("params").unwrap_or(Value::Null);
    match (map.remove("method"), map.remove("id")) {
        (Some(Value::String(method)), Some(id)) => Message::Request { id, method, params },
        (Some(Value::String(method)), None) => Message::Notification { method, params },
        (Some(_), _) => Message::Invalid("`method` is not a string"),
        (None, id) => match (map.remove("result"), map.remove("error")) {
            (Some(result), None) => Message::Response { id: id.unwrap_or(Value::Null), outcome: Ok(result) },
            (None, Some(error)) => Message::Response { id: id.unwrap_or(Value::Null), outcome: Err(error) },
            _ => Message::Invalid("neither a request, a notification nor a response"),
        },
    }
}

/// A message as one stdout line.
fn frame(message: Value) -> Vec<u8> {
    // Serialising a `Value` cannot fail: its map keys are strings.
    let mut frame = serde_json::to_vec(&message).unwrap_or_default();
    frame.push(b'\n');
    frame
}

pub fn response_frame(id: &Value, result: Result<Value, ErrorObject>) -> Vec<u8> {
    frame(match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": e}),
    })
}

pub fn notification_frame(method: &str, params: Value) -> Vec<u8> {
    frame(json!({"jsonrpc": "2.0", "method": method, "params": params}))
}

pub fn request_frame(id: &str, method: &str, params: Value) -> Vec<u8> {
    frame(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
}

pub fn text_result(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

pub fn structured_result(text: String, structured: Value) -> Value {
    json!({"content": [{"type": "text", "text": text}], "structuredContent": structured})
}

pub fn error_result(text: String) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}
