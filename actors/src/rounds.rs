//! Answers that are not final yet, and the rounds that finish them.
//!
//! - `input_required` (modern era, MRTR): the server asks for sampling,
//!   elicitation or roots inside its result; each ask is answered by the
//!   connection's [`Answerer`] and the request is sent again, with a new id,
//!   the `inputResponses` and the unchanged `requestState`. At most
//!   [`MAX_INPUT_ROUNDS`] rounds; a round with only a `requestState` waits
//!   a little longer each time before retrying.
//! - tasks (2025-11-25, and the `resultType: "task"` shape of later
//!   revisions): the answer names a task; `tasks/get` is polled at the
//!   server's `pollInterval` (clamped to [`MIN_POLL`]..[`MAX_POLL`]) until the
//!   task ends or needs input, then `tasks/result` gives the final result.
//!   A caller that stops waiting cancels the task (`tasks/cancel`).

use std::sync::Arc;
use std::time::Duration;

use actix::WeakRecipient;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::client_requests::Answerer;
use super::messages::Request;
use crate::error::CallError;
use crate::protocol::methods;
use crate::protocol::pagination::{ListBounds, Paginator};

pub const MAX_INPUT_ROUNDS: usize = 10;
pub const MIN_POLL: Duration = Duration::from_millis(50);
pub const MAX_POLL: Duration = Duration::from_secs(5);

/// Talks to one connection on a caller's behalf (the typed operations and
/// the rounds of a call). It holds the connection weakly (the Hub holds the
/// only strong address): once the server is removed, its requests fail
/// with `Stopped`.
#[derive(Clone)]
pub struct Requester {
    connection: WeakRecipient<Request>,
    server: String,
    answerer: Arc<Answerer>,
    bounds: ListBounds,
}

impl Requester {
    pub(crate) fn new(
        connection: WeakRecipient<Request>,
        server: impl Into<String>,
        answerer: Arc<Answerer>,
        bounds: ListBounds,
    ) -> Requester {
        Requester { connection, server: server.into(), answerer, bounds }
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    pub(crate) fn answerer(&self) -> &Arc<Answerer> {
        &self.answerer
    }

    /// Sends one request, finishes it if the server needs more rounds
    /// (see `actors/src/rounds.rs`), and parses the result as `T`.
    pub async fn request<T: DeserializeOwned>(&self, method: &str, params: Value, label: String) -> Result<T, CallError> {
        let raw = self.finished(method, params, label.clone()).await?;
        self.parse(&raw, label)
    }

    /// Sends one request and parses its result as `T`, with no further rounds.
    pub async fn request_once<T: DeserializeOwned>(&self, method: &str, params: Value, label: String) -> Result<T, CallError> {
        let raw = self.raw(Request { method: method.into(), params, label: label.clone(), timeout: None, progress: None }).await?;
        self.parse(&raw, label)
    }

    /// Sends one request and finishes it if the server needs more rounds.
    async fn finished(&self, method: &str, params: Value, label: String) -> Result<Box<RawValue>, CallError> {
        let request = Request { method: method.into(), params: params.clone(), label: label.clone(), timeout: None, progress: None };
        let raw = self.raw(request).await?;
        match may_need_rounds(&raw) {
            true => Box::pin(finish(self, method, params, &label, raw)).await,
            false => Ok(raw),
        }
    }

    fn parse<T: DeserializeOwned>(&self, raw: &RawValue, label: String) -> Result<T, CallError> {
        serde_json::from_str(raw.get()).map_err(|e| CallError::Protocol {
            server: self.server.clone(),
            tool: label,
            message: e.to_string(),
        })
    }

    pub async fn raw(&self, request: Request) -> Result<Box<RawValue>, CallError> {
        let label = request.label.clone();
        let Some(connection) = self.connection.upgrade() else {
            return Err(CallError::Stopped { server: self.server.clone(), tool: label });
        };
        match connection.send(request).await {
            Ok(answer) => answer,
            Err(_) => Err(CallError::Stopped { server: self.server.clone(), tool: label }),
        }
    }

    /// Every item of a paginated list: the `field` array of each page,
    /// followed with the connection's one bounded [`Paginator`].
    pub async fn list_all<T: DeserializeOwned>(&self, method: &'static str, field: &'static str) -> Result<Vec<T>, CallError> {
        let mut pages = Paginator::new(method, field, self.bounds);
        let mut items = Vec::new();
        loop {
            let raw = self.finished(method, pages.params(), method.to_string()).await?;
            let (found, more) = pages.take::<T>(&raw).map_err(|message| CallError::Protocol {
                server: self.server.clone(),
                tool: method.to_string(),
                message,
            })?;
            items.extend(found);
            if !more {
                return Ok(items);
            }
        }
    }
}

/// A cheap look at a raw result: could it need more rounds? (A final
/// result has no `resultType` other than "complete" and no task.)
pub(crate) fn may_need_rounds(raw: &RawValue) -> bool {
    let text = raw.get();
    text.contains("\"input_required\"") || text.contains("\"taskId\"")
}

enum Stage {
    Final,
    InputRequired { requests: Map<String, Value>, state: Option<Value> },
    Task { id: String, poll: Option<u64> },
}

fn stage(result: &Value) -> Stage {
    match result.get("resultType").and_then(Value::as_str) {
        Some("input_required") => Stage::InputRequired {
            requests: result.get("inputRequests").and_then(Value::as_object).cloned().unwrap_or_default(),
            state: result.get("requestState").cloned(),
        },
        Some("task") => task_stage(result),
        _ => match result.get("task") {
            Some(task) if task.get("taskId").is_some() && result.get("content").is_none() => task_stage(task),
            _ => Stage::Final,
        },
    }
}

fn task_stage(task: &Value) -> Stage {
    let id = task.get("taskId").and_then(Value::as_str).unwrap_or_default().to_string();
    Stage::Task { id, poll: poll_interval(task) }
}

fn poll_interval(task: &Value) -> Option<u64> {
    task.get("pollInterval").or_else(|| task.get("pollIntervalMs")).and_then(Value::as_u64)
}

/// Finishes a request whose first answer was `raw`: answers input
/// requests and follows tasks until the result is final.
pub(crate) async fn finish(
    requester: &Requester,
    method: &str,
    mut params: Value,
    label: &str,
    mut raw: Box<RawValue>,
) -> Result<Box<RawValue>, CallError> {
    let protocol = |message: String| CallError::Protocol { server: requester.server().to_string(), tool: label.to_string(), message };
    let mut state_only_rounds = 0u32;
    for _ in 0..MAX_INPUT_ROUNDS {
        if !may_need_rounds(&raw) {
            return Ok(raw);
        }
        let result: Value = serde_json::from_str(raw.get()).map_err(|e| protocol(e.to_string()))?;
        match stage(&result) {
            Stage::Final => return Ok(raw),
            Stage::Task { id, poll } if !id.is_empty() => return follow_task(requester, label, id, poll).await,
            Stage::Task { .. } => return Err(protocol("the server created a task without a taskId".into())),
            Stage::InputRequired { requests, state } => {
                if requests.is_empty() {
                    if state.is_none() {
                        return Err(protocol("input_required without inputRequests or requestState".into()));
                    }
                    state_only_rounds += 1;
                    tokio::time::sleep(MIN_POLL * 2u32.pow(state_only_rounds.min(6))).await;
                }
                let responses = answer_all(requester.answerer(), label, requests).await?;
                let Value::Object(fields) = &mut params else {
                    return Err(protocol("the server answered input_required, which only the 2026-07-28 era has".into()));
                };
                fields.insert("inputResponses".into(), Value::Object(responses));
                match state {
                    Some(state) => fields.insert("requestState".into(), state),
                    None => fields.remove("requestState"),
                };
                let retry = Request { method: method.into(), params: params.clone(), label: label.into(), timeout: None, progress: None };
                raw = requester.raw(retry).await?;
            }
        }
    }
    Err(protocol(format!("still asking for input after {MAX_INPUT_ROUNDS} rounds")))
}

/// Answers every input request of one `input_required` result.
async fn answer_all(answerer: &Arc<Answerer>, label: &str, requests: Map<String, Value>) -> Result<Map<String, Value>, CallError> {
    let mut responses = Map::new();
    for (key, request) in requests {
        let method = request.get("method").and_then(Value::as_str).unwrap_or_default().to_string();
        let params = request.get("params").cloned();
        match answerer.answer(&method, params).await {
            Ok(result) => {
                responses.insert(key, result);
            }
            Err(refusal) => {
                return Err(CallError::Rpc {
                    server: answerer.server.clone(),
                    tool: label.to_string(),
                    code: refusal.code,
                    message: format!("the server needs {method}, which mcpvisor could not give: {}", refusal.message),
                    data: None,
                })
            }
        }
    }
    Ok(responses)
}

/// Polls a task until it ends, then fetches its result. Dropping the
/// future cancels the task on the server.
async fn follow_task(requester: &Requester, label: &str, id: String, mut poll: Option<u64>) -> Result<Box<RawValue>, CallError> {
    let mut guard = CancelTaskOnDrop { requester: Some(requester.clone()), id: id.clone() };
    loop {
        let wait = poll.map_or(Duration::from_millis(500), Duration::from_millis).clamp(MIN_POLL, MAX_POLL);
        tokio::time::sleep(wait).await;
        let task: Value = requester.request_once(methods::TASKS_GET, json!({ "taskId": id }), format!("{label} (task {id})")).await?;
        let task = task.get("task").filter(|t| t.get("status").is_some()).unwrap_or(&task);
        poll = poll_interval(task).or(poll);
        match task.get("status").and_then(Value::as_str) {
            Some("working") => continue,
            Some("completed" | "failed" | "cancelled" | "input_required") => break,
            other => {
                return Err(CallError::Protocol {
                    server: requester.server().to_string(),
                    tool: label.to_string(),
                    message: format!("task {id} has an unknown status {other:?}"),
                })
            }
        }
    }
    let result = requester.raw(Request {
        method: methods::TASKS_RESULT.into(),
        params: json!({ "taskId": id }),
        label: format!("{label} (task {id})"),
        timeout: None,
        progress: None,
    });
    let result = result.await;
    guard.requester = None;
    result
}

struct CancelTaskOnDrop {
    requester: Option<Requester>,
    id: String,
}

impl Drop for CancelTaskOnDrop {
    fn drop(&mut self) {
        let Some(requester) = self.requester.take() else { return };
        let id = std::mem::take(&mut self.id);
        actix_rt::spawn(async move {
            let cancelled =
                requester.request_once::<Value>(methods::TASKS_CANCEL, json!({ "taskId": id }), methods::TASKS_CANCEL.into()).await;
            if let Err(error) = cancelled {
                tracing::debug!(server = %requester.server(), "cancelling task {id}: {error}");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_are_told_apart() {
        let input = json!({"resultType": "input_required", "inputRequests": {"a": {"method": "roots/list"}}, "requestState": "s"});
        assert!(matches!(stage(&input), Stage::InputRequired { requests, state: Some(_) } if requests.len() == 1));
        let legacy_task = json!({"task": {"taskId": "t1", "status": "working", "pollInterval": 200}});
        assert!(matches!(stage(&legacy_task), Stage::Task { id, poll: Some(200) } if id == "t1"));
        let modern_task = json!({"resultType": "task", "taskId": "t2", "status": "working", "pollIntervalMs": 100});
        assert!(matches!(stage(&modern_task), Stage::Task { id, poll: Some(100) } if id == "t2"));
        let final_result = json!({"content": [{"type": "text", "text": "a taskId in text"}]});
        assert!(matches!(stage(&final_result), Stage::Final));
        let raw = RawValue::from_string(r#"{"content":[{"type":"text","text":"hi"}]}"#.into()).unwrap();
        assert!(!may_need_rounds(&raw));
    }
}
