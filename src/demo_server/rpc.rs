//! JSON-RPC 2.0 on the wire: error codes, the shapes of incoming messages,
//! outgoing frames (one line each, newline included) and tool-result helpers.

use serde_json::{json, Value};
use tokio::sync::mpsc;

pub const RESOURCE_NOT_FOUND: i64 = -32002;
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
pub const URL_ELICITATION_REQUIRED: i64 = -32042;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;

/// Frames for stdout, each one whole line with its newline; one writer task owns stdout.
pub type Out = mpsc::UnboundedSender<Vec<u8>>;

/// A JSON-RPC error answer.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl From<crate::protocol::ErrorObject> for RpcError {
    fn from(error: crate::protocol::ErrorObject) -> RpcError {
        RpcError { code: error.code, message: error.message, data: error.data }
    }
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError { code, message: message.into(), data: None }
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))
    }

    pub fn with_data(self, data: Value) -> Self {
        RpcError { data: Some(data), ..self }
    }

    fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }
}

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

pub fn response_frame(id: &Value, result: Result<Value, RpcError>) -> Vec<u8> {
    frame(match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": e.to_json()}),
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
