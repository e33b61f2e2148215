//! A tools-only server: the [`ToolHandler`] trait an embedding program
//! implements, and the loop that serves one over a pair of byte streams
//! (an in-process server's pipes, `transport::in_process`): it reads
//! requests from its input and writes answers to its output, running tool
//! calls concurrently inside its own task (so a panic in any of them ends
//! the task, as a crash ends a process). The lifecycle and `tools/list` are
//! answered by [`super::dispatch`], like every server side of this crate.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::{AbortHandle, Abortable, BoxFuture};
use futures::stream::{FuturesUnordered, StreamExt};
use rmcp::model::{CallToolResult, JsonObject, Tool};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::io::{AsyncWriteExt, DuplexStream};
use tokio_util::codec::FramedRead;

use super::dispatch::{dispatch, parse, Dispatched, Listed, Request, ServerHandler};
use super::era::Served;
use super::lifecycle::ServerInfo;
use super::paging::Pager;
use super::request::{CallToolParams, List};
use crate::codec::JsonRpcCodec;
use crate::protocol::{self, methods, ErrorObject, Message, RequestId};

/// The tools of an in-process server, given to `RuntimeBuilder::in_process`
/// (whose docs show one served by a runtime).
///
/// ```
/// use futures::future::BoxFuture;
/// use mcpvisor_services::server::tool_server::ToolHandler;
/// use mcpvisor_wire::protocol::ErrorObject;
/// use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
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
/// assert_eq!(Clock.tools()[0].name, "now");
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

/// A tool call under way.
type Call = BoxFuture<'static, Result<CallToolResult, ErrorObject>>;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CancelParams {
    request_id: RequestId,
}

/// A [`ToolHandler`] behind the dispatcher: its tools as they were when
/// the server started, and the name it serves under.
struct InProcess {
    handler: Arc<dyn ToolHandler>,
    name: String,
    tools: Vec<Tool>,
}

impl ServerHandler for InProcess {
    type Era = Served;
    type Work = Call;

    fn info(&self) -> ServerInfo {
        ServerInfo { name: self.name.clone(), title: None, instructions: None }
    }

    fn capabilities(&self, _legacy: bool) -> serde_json::Value {
        json!({"tools": {}})
    }

    fn not_offered(&self) -> &'static str {
        "an in-process server offers tools only"
    }

    fn offers(&self, method: &str, _era: &Served) -> bool {
        matches!(method, methods::TOOLS_LIST | methods::TOOLS_CALL)
    }

    fn list(&self, list: List, _pager: Pager, _era: &Served) -> Listed<Call> {
        match list {
            List::Tools => Listed::Items(self.tools.iter().map(|tool| json!(tool)).collect()),
            _ => Listed::NotOffered,
        }
    }

    fn call_tool(&self, call: CallToolParams, _era: &Served) -> Dispatched<Call> {
        match self.start_call(call) {
            Ok(call) => Dispatched::Work(call),
            Err(error) => Dispatched::Answer(Err(error)),
        }
    }
}

impl InProcess {
    /// The future of a `tools/call`, or why it cannot start.
    fn start_call(&self, mut call: CallToolParams) -> Result<Call, ErrorObject> {
        let arguments = match call.params.get_mut("arguments").map(serde_json::Value::take).unwrap_or_default() {
            serde_json::Value::Null => JsonObject::new(),
            serde_json::Value::Object(arguments) => arguments,
            other => {
                let kind = protocol::json_kind(&other);
                return Err(ErrorObject::invalid_params(format!("tools/call: `arguments` must be an object, not {kind}")));
            }
        };
        if !self.tools.iter().any(|tool| tool.name == call.name) {
            return Err(ErrorObject::invalid_params(format!("Unknown tool: {}", call.name)));
        }
        let (handler, name) = (self.handler.clone(), call.name);
        Ok(Box::pin(async move { handler.call(&name, arguments).await }))
    }
}

/// Serves `handler` until its input ends (or the task is aborted).
pub async fn serve(handler: Arc<dyn ToolHandler>, name: String, input: DuplexStream, mut output: DuplexStream) {
    let server = InProcess { tools: handler.tools(), handler, name };
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
                tracing::debug!(server = %server.name, "in-process server skipped a line: {bad}");
                continue;
            }
            // The connection closed our input (or it broke): stop serving.
            None | Some(Err(_)) => return,
        };
        let (id, answer) = match message {
            Message::Request { id, method, params } => {
                let params = params.and_then(|raw| serde_json::from_str(raw.get()).ok()).unwrap_or_default();
                let call = match parse(&server, &method, params, &Served::Legacy) {
                    Ok(call) => call,
                    Err(refusal) => {
                        if output.write_all(&answer_frame::<()>(&id, &Err(refusal))).await.is_err() {
                            return;
                        }
                        continue;
                    }
                };
                match dispatch(&server, Request { id: &json!(id), call, era: Served::Legacy }) {
                    Dispatched::Answer(answer) => (id, answer),
                    Dispatched::Work(call) => {
                        let (abort, registration) = AbortHandle::new_pair();
                        running.insert(id.clone(), abort);
                        calls.push(Abortable::new(Box::pin(async move { (id, call.await) }), registration));
                        continue;
                    }
                }
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

fn answer_frame<T: Serialize>(id: &RequestId, outcome: &Result<T, ErrorObject>) -> Vec<u8> {
    match outcome {
        Ok(result) => protocol::response_frame(id, Ok(result)),
        Err(error) => protocol::response_frame::<()>(id, Err(error)),
    }
}
