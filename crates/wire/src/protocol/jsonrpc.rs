//! The JSON-RPC 2.0 envelope.
//!
//! Incoming frames are parsed once into [`Message`], whose payload stays raw
//! JSON ([`RawValue`]) until the code that owns the request knows its type.
//! Outgoing frames are written straight to bytes by [`request_frame`] and
//! friends: one serialisation, no intermediate `Value`.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Standard JSON-RPC and MCP error codes.
pub mod error_codes {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// MCP: the resource does not exist.
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// MCP 2026-07-28: the request's protocol version is not one the server speaks.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
    /// MCP: the tool needs the user to visit a URL first (URL-mode elicitation).
    pub const URL_ELICITATION_REQUIRED: i64 = -32042;
}

/// A request id: MCP allows numbers and strings (never null for requests).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(untagged)]
pub enum RequestId {
    Number(i64),
    String(String),
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{s:?}"),
        }
    }
}

impl<'de> Deserialize<'de> for RequestId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IdVisitor;
        impl Visitor<'_> for IdVisitor {
            type Value = RequestId;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON-RPC id (integer or string)")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RequestId, E> {
                Ok(RequestId::Number(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RequestId, E> {
                i64::try_from(v).map(RequestId::Number).map_err(|_| E::custom("id out of range"))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<RequestId, E> {
                // Some servers echo integer ids as floats (1.0); accept exact integers only.
                if v.fract() == 0.0 && v.abs() < 9.0e15 {
                    Ok(RequestId::Number(v as i64))
                } else {
                    Err(E::custom("id is not an integer"))
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RequestId, E> {
                Ok(RequestId::String(v.to_owned()))
            }
        }
        deserializer.deserialize_any(IdVisitor)
    }
}

/// The `error` member of a JSON-RPC error response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

/// The shared error constructors of every server side (the gateway, the
/// demo server, in-process servers, the task store).
impl ErrorObject {
    pub fn new(code: i64, message: impl Into<String>) -> ErrorObject {
        ErrorObject { code, message: message.into(), data: None }
    }

    /// `-32602`, naming what is missing or wrong in a request's params.
    pub fn invalid_params(message: impl Into<String>) -> ErrorObject {
        ErrorObject::new(error_codes::INVALID_PARAMS, message)
    }

    /// `-32601` for `method`; `why` (may be empty) says what is served instead.
    pub fn method_not_found(method: &str, why: &str) -> ErrorObject {
        let why = if why.is_empty() { String::new() } else { format!(" ({why})") };
        ErrorObject::new(error_codes::METHOD_NOT_FOUND, format!("Method not found: {method}{why}"))
    }

    pub fn with_data(self, data: serde_json::Value) -> ErrorObject {
        ErrorObject { data: Some(data), ..self }
    }
}

/// One incoming JSON-RPC message. Invariant: a `Request` has an id and a
/// method; a `Response` has an id (null only for errors about unparseable
/// requests) and exactly one of result or error; a member given twice makes
/// the message malformed.
#[derive(Debug)]
pub enum Message {
    Request { id: RequestId, method: String, params: Option<Box<RawValue>> },
    Notification { method: String, params: Option<Box<RawValue>> },
    Response { id: Option<RequestId>, outcome: Result<Box<RawValue>, ErrorObject> },
}

impl Message {
    /// Parses one frame. The error is a short human description of what is wrong.
    pub fn parse(frame: &[u8]) -> Result<Message, String> {
        serde_json::from_slice(frame).map_err(|e| e.to_string())
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(MessageVisitor)
    }
}

struct MessageVisitor;

/// The members of a message that mean something here.
const MEMBERS: [&str; 5] = ["id", "method", "params", "result", "error"];

/// `id` present-and-null differs from absent: a response with `"id": null` is
/// an error about an unparseable request, a message without `id` is a notification.
#[derive(Default)]
enum IdField {
    #[default]
    Absent,
    Null,
    Id(RequestId),
}

impl<'de> Visitor<'de> for MessageVisitor {
    type Value = Message;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC 2.0 message object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Message, M::Error> {
        let mut id = IdField::Absent;
        let mut method: Option<String> = None;
        let mut params: Option<Box<RawValue>> = None;
        let mut result: Option<Box<RawValue>> = None;
        let mut error: Option<ErrorObject> = None;
        let mut seen = [false; 5];
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            // A member given twice is malformed: which one counts is not defined.
            if let Some(at) = MEMBERS.iter().position(|m| *m == key.as_ref()) {
                if std::mem::replace(&mut seen[at], true) {
                    return Err(de::Error::duplicate_field(MEMBERS[at]));
                }
            }
            match key.as_ref() {
                "id" => {
                    id = match map.next_value::<Option<RequestId>>()? {
                        Some(v) => IdField::Id(v),
                        None => IdField::Null,
                    }
                }
                "method" => method = Some(map.next_value()?),
                "params" => params = Some(map.next_value()?),
                "result" => result = Some(map.next_value()?),
                "error" => error = Some(map.next_value()?),
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        match (method, id) {
            (Some(method), IdField::Id(id)) => Ok(Message::Request { id, method, params }),
            (Some(method), IdField::Absent) => Ok(Message::Notification { method, params }),
            (Some(_), IdField::Null) => Err(de::Error::custom("a request's id must not be null")),
            (None, id) => {
                let id = match id {
                    IdField::Id(id) => Some(id),
                    IdField::Null => None,
                    IdField::Absent => return Err(de::Error::custom("neither a method nor an id: not JSON-RPC")),
                };
                let outcome = match (result, error) {
                    (Some(r), None) => Ok(r),
                    (None, Some(e)) => Err(e),
                    (Some(_), Some(_)) => return Err(de::Error::custom("a response has both result and error")),
                    (None, None) => return Err(de::Error::custom("a response has neither result nor error")),
                };
                Ok(Message::Response { id, outcome })
            }
        }
    }
}

#[derive(Serialize)]
struct OutRequest<'a, P> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct OutNotification<'a, P> {
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct OutResponse<'a, R> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a R>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorObject>,
}

fn frame<T: Serialize>(message: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    // Serialising our own plain structs into a Vec cannot fail.
    serde_json::to_writer(&mut out, message).expect("serialising a JSON-RPC frame");
    out.push(b'\n');
    // Frames may wait in a queue: do not keep the doubling growth's slack.
    if out.capacity() - out.len() > 4096 {
        out.shrink_to_fit();
    }
    out
}

/// A newline-terminated request frame.
pub fn request_frame<P: Serialize>(id: &RequestId, method: &str, params: &P) -> Vec<u8> {
    frame(&OutRequest { jsonrpc: "2.0", id, method, params })
}

/// A newline-terminated notification frame.
pub fn notification_frame<P: Serialize>(method: &str, params: &P) -> Vec<u8> {
    frame(&OutNotification { jsonrpc: "2.0", method, params })
}

/// A newline-terminated response frame answering a request of the server.
pub fn response_frame<R: Serialize>(id: &RequestId, outcome: Result<&R, &ErrorObject>) -> Vec<u8> {
    let (result, error) = match outcome {
        Ok(r) => (Some(r), None),
        Err(e) => (None, Some(e)),
    };
    frame(&OutResponse { jsonrpc: "2.0", id, result, error })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_kind() {
        let m = Message::parse(br#"{"jsonrpc":"2.0","id":7,"result":{"a":1}}"#).unwrap();
        assert!(matches!(m, Message::Response { id: Some(RequestId::Number(7)), outcome: Ok(ref r) } if r.get() == r#"{"a":1}"#));
        let m = Message::parse(br#"{"jsonrpc":"2.0","id":"x","method":"ping"}"#).unwrap();
        assert!(matches!(m, Message::Request { id: RequestId::String(ref s), ref method, params: None } if s == "x" && method == "ping"));
        let m = Message::parse(br#"{"method":"notifications/message","params":{"level":"info"},"jsonrpc":"2.0"}"#).unwrap();
        assert!(matches!(m, Message::Notification { ref method, params: Some(_) } if method == "notifications/message"));
        let m = Message::parse(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}"#).unwrap();
        assert!(matches!(m, Message::Response { id: None, outcome: Err(ErrorObject { code: -32700, .. }) }));
    }

    #[test]
    fn rejects_what_is_not_json_rpc() {
        for bad in [&br#"{"foo":1}"#[..], br#"[1,2]"#, br#"{"id":1}"#, br#"{"id":1,"result":1,"error":{"code":1,"message":""}}"#, b"12"] {
            assert!(Message::parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    /// Found by fuzzing (fuzz target `answer`): with two ids the last one
    /// counted, while the id read from the head of an oversized frame is the first.
    #[test]
    fn rejects_a_member_given_twice() {
        let twice = br#"{"jsonrpc":"2.0","id":"4","id":1,"result":{}}"#;
        assert!(Message::parse(twice).unwrap_err().starts_with("duplicate field `id`"));
        assert!(Message::parse(br#"{"jsonrpc":"2.0","id":1,"result":1,"result":2}"#).is_err());
        assert!(Message::parse(br#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"result":1,"extra":1,"extra":2}"#).is_ok());
    }

    #[test]
    fn frames_round_trip() {
        let id = RequestId::Number(3);
        let f = request_frame(&id, "tools/call", &serde_json::json!({"name":"echo"}));
        assert_eq!(f.last(), Some(&b'\n'));
        let m = Message::parse(&f).unwrap();
        assert!(matches!(m, Message::Request { id: RequestId::Number(3), .. }));
        let f = response_frame::<()>(&id, Err(&ErrorObject { code: -1, message: "no".into(), data: None }));
        assert!(matches!(Message::parse(&f).unwrap(), Message::Response { outcome: Err(_), .. }));
    }
}
