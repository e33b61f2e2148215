//! The messages a connection takes that are not typed operations: calls
//! and raw requests, their cancellation, status and lifecycle, log level,
//! resource subscriptions. Kept apart so that dependencies run one way:
//! `messages` ← `rounds` ← `connection` ← `operation` ← `hub`, and the
//! `registry` routes to `connection`.

use std::time::Duration;

use actix::dev::OneshotSender;
use actix::prelude::*;
use rmcp::model::CallToolResult;
use serde::Serialize;
use serde_json::value::RawValue;

use super::progress::ProgressSink;
use super::{CallTool, ServerState, ServerStatus};
use crate::error::CallError;
use crate::protocol::RequestId;

/// Sends any request to the server on a caller's behalf and answers with
/// the raw result. It takes one of the `max_in_flight` slots like a tool
/// call, has the same time-out and cancellation, and fails the same way.
#[derive(Message, Debug)]
#[rtype(result = "Result<Box<RawValue>, CallError>")]
pub struct Request {
    pub method: String,
    /// A JSON object, or `Value::Null` for none.
    pub params: serde_json::Value,
    /// Names the request in errors: a tool name, `resources/read URI`, ...
    pub label: String,
    pub timeout: Option<Duration>,
    pub progress: Option<ProgressSink>,
}

/// A call routed here by the Registry together with its caller's reply
/// channel, so the answer goes straight back to the caller (no relay task).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Routed {
    pub call: CallTool,
    pub reply: Option<OneshotSender<Result<CallToolResult, CallError>>>,
}

/// Where a forgotten call was when its caller gave up on it.
#[derive(Debug, Clone, PartialEq)]
pub enum Whereabouts {
    /// Waiting for the server to come up.
    WaitingForServer(ServerState),
    /// Waiting behind other calls for a slot.
    Queued,
    /// Written (or about to be): the server was told to cancel it.
    /// `unusable` describes the lines that arrived meanwhile and could not
    /// be matched to any request (the last few).
    OnTheWire { unusable: Vec<String> },
    /// Already answered or failed.
    Gone,
}

/// Asks the connection to drop a call whose caller stopped waiting.
#[derive(Message)]
#[rtype(result = "Whereabouts")]
pub struct Forget {
    pub id: RequestId,
    pub reason: &'static str,
}

/// Reports this connection's status.
#[derive(Message)]
#[rtype(result = "ServerStatus")]
pub struct GetStatus;

/// Tells a new connection the Hub has registered it with the registry. Its
/// server starts only then, so that what it lists cannot reach the registry
/// before its registration (the two run on different threads).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Registered;

/// Stops the server for good: no restarts; waiting calls fail with `Stopped`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown;

/// A state change, sent to the Hub.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct StateChanged {
    pub server: String,
    /// Which connection under this name (see [`crate::Instance`]).
    pub instance: crate::Instance,
    pub state: ServerState,
}

/// Enables or disables the server: a disabled server keeps its process,
/// its tools leave the catalog and calls to it fail with `Disabled`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetEnabled(pub bool);

/// Restarts the server now (and revives a failed one).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Reconnect;

/// Makes the next handler of the entry named here panic (tests of panic
/// recovery): a tool's name for its next call, `"*"` for any entry.
#[cfg(feature = "fault-injection")]
#[derive(Message)]
#[rtype(result = "()")]
pub struct InjectPanic(pub String);

/// Asks for `notifications/resources/updated` of one resource (legacy:
/// `resources/subscribe`; modern: part of the connection's listen stream).
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<(), CallError>")]
pub struct SubscribeResource {
    pub uri: String,
}

/// Stops the updates of [`SubscribeResource`].
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<(), CallError>")]
pub struct UnsubscribeResource {
    pub uri: String,
}

/// MCP log levels, least to most severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LogLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        }
    }
}

/// Sets the lowest level of `notifications/message` the server sends
/// (legacy: `logging/setLevel`; modern: rides on every later request).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<(), CallError>")]
pub struct SetLogLevel(pub LogLevel);

/// Tells the server its roots changed (`notifications/roots/list_changed`);
/// it will ask for them again. For embedders whose roots handler answers
/// differently over time.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<(), CallError>")]
pub struct RootsChanged;
