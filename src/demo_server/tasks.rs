//! 2025-11-25 tasks: task-augmented `tools/call` and `tasks/get`, `tasks/result`,
//! `tasks/cancel`, `tasks/list`.
//!
//! Invariant: a task's status only moves from `working` to `completed` or
//! `cancelled`; a task is forgotten `ttl` ms after its creation (checked on
//! every access of the store).

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::lock;
use super::rpc::RpcError;

pub const DEFAULT_TTL_MS: u64 = 60_000;
pub const MAX_TTL_MS: u64 = 3_600_000;
pub const POLL_INTERVAL_MS: u64 = 100;
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// Where a task's work stands, as `tasks/result` waits for it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Working,
    Completed(Value),
    Cancelled,
}

struct Entry {
    /// The task as `tasks/get` shows it.
    task: Value,
    expires: Instant,
    outcome: watch::Sender<Outcome>,
    abort: Option<AbortHandle>,
}

#[derive(Default)]
pub struct TaskStore {
    /// In creation order.
    entries: Mutex<Vec<Entry>>,
}

fn task_id(params: &Value, method: &str) -> Result<String, RpcError> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| RpcError::invalid_params(format!("{method}: `taskId` must be a string")))
}

fn unknown(method: &str, id: &str) -> RpcError {
    RpcError::invalid_params(format!("{method}: no task {id:?} (unknown or expired)"))
}

/// The requested `ttl` of a `params.task` object, bounded to [`MAX_TTL_MS`].
pub fn requested_ttl(task: &Value) -> Result<u64, RpcError> {
    let invalid = || {
        RpcError::invalid_params(format!("tools/call: `task` must be an object with an optional non-negative integer `ttl`, got {task}"))
    };
    match task.as_object().ok_or_else(invalid)?.get("ttl") {
        None | Some(Value::Null) => Ok(DEFAULT_TTL_MS),
        Some(ttl) => ttl.as_u64().map(|ttl| ttl.min(MAX_TTL_MS)).ok_or_else(invalid),
    }
}

impl TaskStore {
    fn with_live<T>(&self, f: impl FnOnce(&mut Vec<Entry>) -> T) -> T {
        let mut entries = lock(&self.entries);
        let now = Instant::now();
        entries.retain(|e| e.expires > now);
        f(&mut entries)
    }

    /// Creates a working task; returns its id and the `CreateTaskResult`.
    pub fn create(&self, ttl_ms: u64) -> (String, Value) {
        let id = format!("task-{:016x}", fastrand::u64(..));
        let now = now_iso();
        let task = json!({
            "taskId": id, "status": "working", "createdAt": now, "lastUpdatedAt": now,
            "ttl": ttl_ms, "pollInterval": POLL_INTERVAL_MS,
        });
        let entry = Entry {
            task: task.clone(),
            expires: Instant::now() + Duration::from_millis(ttl_ms),
            outcome: watch::channel(Outcome::Working).0,
            abort: None,
        };
        self.with_live(|entries| entries.push(entry));
        (id, json!({ "task": task }))
    }

    /// Lets `tasks/cancel` stop the work of task `id`.
    pub fn set_abort(&self, id: &str, abort: AbortHandle) {
        self.with_live(|entries| entries.iter_mut().find(|e| e.task["taskId"] == id).map(|e| e.abort = Some(abort)));
    }

    /// Ends task `id` (if still working) with `status` and `outcome`.
    fn finish(entry: &mut Entry, status: &str, outcome: Outcome) {
        entry.task["status"] = json!(status);
        entry.task["lastUpdatedAt"] = json!(now_iso());
        entry.outcome.send_replace(outcome);
    }

    pub fn complete(&self, id: &str, result: Value) {
        self.with_live(|entries| {
            if let Some(entry) = entries.iter_mut().find(|e| e.task["taskId"] == id && e.task["status"] == "working") {
                Self::finish(entry, "completed", Outcome::Completed(result));
            }
        });
    }

    /// `tasks/get` and `tasks/cancel` (-32602 for a task already terminal).
    pub fn get_or_cancel(&self, method: &str, params: &Value) -> Result<Value, RpcError> {
        let id = task_id(params, method)?;
        self.with_live(|entries| {
            let entry = entries.iter_mut().find(|e| e.task["taskId"] == id.as_str()).ok_or_else(|| unknown(method, &id))?;
            if method == "tasks/cancel" {
                if entry.task["status"] != "working" {
                    return Err(RpcError::invalid_params(format!("tasks/cancel: task {id:?} is already {}", entry.task["status"])));
                }
                if let Some(abort) = &entry.abort {
                    abort.abort();
                }
                Self::finish(entry, "cancelled", Outcome::Cancelled);
            }
            Ok(entry.task.clone())
        })
    }

    /// Stops every task's work (shutdown).
    pub fn abort_all(&self) {
        lock(&self.entries).iter().filter_map(|e| e.abort.as_ref()).for_each(AbortHandle::abort);
    }

    pub fn list(&self) -> Vec<Value> {
        self.with_live(|entries| entries.iter().map(|e| e.task.clone()).collect())
    }

    /// What `tasks/result` waits on.
    pub fn watch(&self, params: &Value) -> Result<(String, watch::Receiver<Outcome>), RpcError> {
        let id = task_id(params, "tasks/result")?;
        let outcome = self.with_live(|entries| entries.iter().find(|e| e.task["taskId"] == id.as_str()).map(|e| e.outcome.subscribe()));
        outcome.map(|o| (id.clone(), o)).ok_or_else(|| unknown("tasks/result", &id))
    }
}

/// `tasks/result`: waits until the task ends; its `CallToolResult` tagged with the task.
pub async fn result(id: String, mut outcome: watch::Receiver<Outcome>) -> Result<Value, RpcError> {
    loop {
        match outcome.borrow_and_update().clone() {
            Outcome::Completed(mut result) => {
                result["_meta"] = json!({ RELATED_TASK: {"taskId": id} });
                return Ok(result);
            }
            Outcome::Cancelled => return Err(RpcError::invalid_params(format!("tasks/result: task {id:?} was cancelled"))),
            Outcome::Working => {}
        }
        if outcome.changed().await.is_err() {
            return Err(unknown("tasks/result", &id));
        }
    }
}

fn now_iso() -> String {
    iso8601(SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()))
}

/// UTC `YYYY-MM-DDTHH:MM:SSZ` of a Unix time (H. Hinnant's civil-from-days).
fn iso8601(secs: u64) -> String {
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let (era, doe) = (z.div_euclid(146_097), z.rem_euclid(146_097));
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso_8601_utc() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso8601(1_785_196_800 + 3_723), "2026-07-28T01:02:03Z");
    }

    #[test]
    fn tasks_complete_cancel_and_expire() {
        let store = TaskStore::default();
        let (id, created) = store.create(60_000);
        assert_eq!(created["task"]["status"], "working");
        assert_eq!(created["task"]["ttl"], 60_000);
        store.complete(&id, json!({"content": []}));
        let params = json!({ "taskId": id });
        assert_eq!(store.get_or_cancel("tasks/get", &params).unwrap()["status"], "completed");
        assert!(store.get_or_cancel("tasks/cancel", &params).unwrap_err().message.contains("already \"completed\""));
        let (other, _) = store.create(60_000);
        let cancelled = store.get_or_cancel("tasks/cancel", &json!({ "taskId": other })).unwrap();
        assert_eq!(cancelled["status"], "cancelled");
        store.complete(&other, json!({}));
        assert_eq!(store.list().len(), 2);
        let (short, _) = store.create(0);
        assert!(store.get_or_cancel("tasks/get", &json!({ "taskId": short })).is_err(), "expired at once");
        assert!(store.get_or_cancel("tasks/get", &json!({})).is_err());
    }

    #[test]
    fn ttls_are_checked_and_bounded() {
        assert_eq!(requested_ttl(&json!({})), Ok(DEFAULT_TTL_MS));
        assert_eq!(requested_ttl(&json!({"ttl": 5})), Ok(5));
        assert_eq!(requested_ttl(&json!({"ttl": u64::MAX})), Ok(MAX_TTL_MS));
        assert!(requested_ttl(&json!({"ttl": -1})).is_err() && requested_ttl(&json!(3)).is_err());
    }
}
