//! Tasks (2025-11-25) as the gateway serves them: a client's task-augmented
//! `tools/call` becomes a task of the gateway's own, answered at once with
//! its `CreateTaskResult`, while the call runs upstream like any other (its
//! server's own task, if it has to be one, is run by the connection).
//! `tasks/get`, `tasks/result`, `tasks/cancel` and `tasks/list` are then
//! answered from the gateway's `TaskStore`.
//!
//! Decisions:
//! - A task belongs to the session that created it (its caller label: an
//!   HTTP session id, `stdio`): another session finds no such task. It
//!   outlives its session until its `ttl` (default 60 s, at most 1 hour),
//!   so a result can still be fetched by the same session after a slow call.
//! - `tasks/cancel` drops the running call, which cancels it upstream.
//! - Declared in the `initialize` era only (`tasks: {list, cancel,
//!   requests.tools.call}`); every served tool says
//!   `execution.taskSupport: "optional"`. A 2026-07-28 request's `task` is
//!   ignored (answered when done), as that era has no such tasks.

use std::future::Future;
use std::sync::Arc;

use serde_json::{json, Value};

use super::request::{TaskMethod, TaskRequest};
use crate::protocol::ErrorObject;
use crate::task_store::{requested_ttl, TaskStore};

type Answer = Result<Value, ErrorObject>;

/// The `tasks` capability the gateway declares at `initialize`.
pub fn capability() -> Value {
    json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } })
}

/// What every served tool says of tasks.
pub fn execution() -> Value {
    json!({ "taskSupport": "optional" })
}

/// Starts `work` (the call) as a task of `owner` with the client's `task`
/// params; answers the `CreateTaskResult` at once.
pub fn start(store: &Arc<TaskStore>, owner: &str, task: &Value, work: impl Future<Output = Answer> + 'static) -> Answer {
    let (id, created) = store.create(requested_ttl(task)?, Some(owner))?;
    let (done, task_id) = (store.clone(), id.clone());
    let running = tokio::task::spawn_local(async move {
        let answer = work.await;
        done.end(&task_id, answer);
    });
    store.set_abort(&id, running.abort_handle());
    Ok(created)
}

/// `tasks/get`, `tasks/result` (waits for the end) and `tasks/cancel` of
/// one of `owner`'s tasks (`tasks/list` is a list the dispatcher pages).
pub async fn answer(store: &TaskStore, request: &TaskRequest, owner: &str) -> Answer {
    match request.kind {
        TaskMethod::Result => {
            let (id, outcome) = store.watch(&request.task_id, Some(owner))?;
            crate::task_store::result(id, outcome).await
        }
        kind => store.get_or_cancel(kind.method(), &request.task_id, Some(owner)),
    }
}
