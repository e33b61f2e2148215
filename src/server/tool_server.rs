//! A tools-only server: the [`ToolHandler`] trait an embedding program
//! implements, and the loop that serves one over a pair of byte streams
//! (an in-process server's pipes, `transport::in_process`): it reads
//! requests from its input and writes answers to its output, running tool
//! calls concurrently inside its own task (so a panic in any of them ends
//! the task, as a crash ends a process). `initialize` is answered by
//! [`super::lifecycle`], like every server side of this crate.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::{AbortHandle, Abortable, BoxFuture};
use futures::stream::{FuturesUnordered, StreamExt};
use rmcp::model::{CallToolResult, JsonObject, Tool};
use serde::{Deserialize, Serialize};
use serde_json::json;
use serde_json::value::RawValue;
use tokio::io::{AsyncWriteExt, DuplexStream};
use tokio_util::codec::FramedRead;

use super::lifecycle::{self, ServerInfo};
use crate::codec::JsonRpcCodec;
use crate::protocol::{self, methods, ErrorObject, Message, RequestId};

/// The tools of an in-process server.
///
/// ```
/// use futures::future::BoxFuture;
/// use mcpvisor::config::RuntimeConfig;
/// use mcpvisor::protocol::ErrorObject;
/// use mcpvisor::{CallToolResult, ContentBlock, JsonObject, Runtime, Tool, ToolHandler};
///
/// struct Clock;
///
/// impl ToolHandler for Clock {
///     fn tools(&self) -> Vec<Tool> {
///         let schema = serde_json::json!({"type": "object", "properties": {}});
///         vec![Tool::new("now", "The current Unix time in seconds", schema.as_object().cloned().unwrap_or_default())]
///     }
///
///     fn call<'a>(&'a self, _name: &'a str, _arguments: JsonObject) -> BoxFuture<'a, Result<CallToolResult, ErrorObject>> {
///         Box::pin(async move {
///             let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
///             Ok(CallToolResult::success(vec![ContentBlock::text(now.as_secs().to_string())]))
///         })
///     }
/// }
///
/// // The server `clock` (its tool: mcp__clock__now), served by `Clock`:
/// let runtime = Runtime::builder(RuntimeConfig::default()).in_process("clock", Clock);
/// assert_eq!(runtime.config().servers[0].name, "clock");
/// ```
pub trait ToolHandler: Send + Sync + 'static {
    /// The tools offered. Called once each time the server starts.
    fn tools(&self) -> Vec<Tool>;

    /// Runs tool `name`, one of [`ToolHandler::tools`] (calls to other
    /// names are refused before this is called), with `arguments` already
    /// checked against its `inputSchema`. A failure the caller should read
    /// (a model, a user) is a result with `is_error`; an `Err` is a JSON-RPC
    /// error and reaches the caller as `CallError::Rpc`. Dropping the future
    /// cancels the call.
    fn call<'a>(&'a self, name: &'a str, arguments: JsonObject) -> BoxFuture<'a, Result<CallToolResult, ErrorObject>>;
}

type Answer = Result<serde_json::Value, ErrorObject>;
type Call = BoxFuture<'static, (RequestId, Result<CallToolResult, ErrorObject>)>;

#[derive(Deserialize)]
struct CallParams {
    name: String,
    #[serde(default)]
    arguments: Option<JsonObject>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CancelParams {
    request_id: RequestId,
}

/// Serves `handler` until its input ends (or the task is aborted).
pub async fn serve(handler: Arc<dyn ToolHandler>, name: String, input: DuplexStream, mut output: DuplexStream) {
    let tools = handler.tools();
    let mut frames = FramedRead::new(input, JsonRpcCodec::default());
    let mut calls = FuturesUnordered::new();
    let mut running: HashMap<RequestId, AbortHandle> = HashMap::new();
    loop {
        let frame = tokio::select! {
            frame = frames.next() => frame,
            Some(done) = calls.next(), if !calls.is_empty() => {
                // An aborted call was cancelled: nobody waits for its answer.
                if let Ok((id, outcome)) = done {
                    running.remove(&id);
                    if output.write_all(&answer_frame(&id, &outcome)).await.is_err() {
                        return;
                    }
                }
                continue;
            }
        };
        let message = match frame {
            Some(Ok(Ok(message))) => message,
            Some(Ok(Err(bad))) => {
                tracing::debug!(server = %name, "in-process server skipped a line: {bad}");
                continue;
            }
            // The connection closed our input (or it broke): stop serving.
            None | Some(Err(_)) => return,
        };
        let (id, answer) = match message {
            Message::Request { id, method, params } if method == methods::TOOLS_CALL => match start_call(&handler, &tools, &id, params) {
                Ok(call) => {
                    let (abort, registration) = AbortHandle::new_pair();
                    running.insert(id, abort);
                    calls.push(Abortable::new(call, registration));
                    continue;
                }
                Err(error) => (id, Err(error)),
            },
            Message::Request { id, method, params } => {
                let answer = answer(&name, &tools, &method, params.as_deref());
                (id, answer)
            }
            Message::Notification { method, params } if method == methods::CANCELLED => {
                let cancelled = params.and_then(|raw| serde_json::from_str::<CancelParams>(raw.get()).ok());
                if let Some(abort) = cancelled.and_then(|c| running.remove(&c.request_id)) {
                    abort.abort();
                }
                continue;
            }
            Message::Notification { .. } | Message::Response { .. } => continue,
        };
        if output.write_all(&answer_frame(&id, &answer)).await.is_err() {
            return;
        }
    }
}

/// Answers a request other than `tools/call`.
fn answer(name: &str, tools: &[Tool], method: &str, params: Option<&RawValue>) -> Answer {
    match method {
        methods::INITIALIZE => {
            let asked = params.and_then(|raw| serde_json::from_str::<serde_json::Value>(raw.get()).ok()).unwrap_or_default();
            let info = ServerInfo { name: name.to_string(), title: None, instructions: None };
            Ok(lifecycle::initialize(&info, &asked, json!({"tools": {}})))
        }
        methods::PING => Ok(json!({})),
        methods::TOOLS_LIST => Ok(json!({"tools": tools})),
        _ => Err(ErrorObject::method_not_found(method, "an in-process server offers tools only")),
    }
}

/// The future of a `tools/call`, or why it cannot start.
fn start_call(handler: &Arc<dyn ToolHandler>, tools: &[Tool], id: &RequestId, params: Option<Box<RawValue>>) -> Result<Call, ErrorObject> {
    let params = params.ok_or_else(|| ErrorObject::invalid_params("tools/call needs params with a tool name"))?;
    let CallParams { name, arguments } = serde_json::from_str(params.get())
        .map_err(|e| ErrorObject::invalid_params(format!("tools/call params are not {{name, arguments}}: {e}")))?;
    if !tools.iter().any(|tool| tool.name == name) {
        return Err(ErrorObject::invalid_params(format!("Unknown tool: {name}")));
    }
    let (handler, id) = (handler.clone(), id.clone());
    Ok(Box::pin(async move {
        let outcome = handler.call(&name, arguments.unwrap_or_default()).await;
        (id, outcome)
    }))
}

fn answer_frame<T: Serialize>(id: &RequestId, outcome: &Result<T, ErrorObject>) -> Vec<u8> {
    match outcome {
        Ok(result) => protocol::response_frame(id, Ok(result)),
        Err(error) => protocol::response_frame::<()>(id, Err(error)),
    }
}
