//! The server side of 2025-11-25 tasks: a task-augmented request's task,
//! kept for `tasks/get`, `tasks/result`, `tasks/cancel` and `tasks/list`.
//! Used by the demo server and by the gateway (`serve`), which runs a
//! client's task-augmented `tools/call` as a task of its own.
//!
//! Invariants: a task's status only moves from `working` to `completed`,
//! `failed` or `cancelled`; a task is forgotten `ttl` ms after its creation
//! (checked on every access of the store); a task created for an owner is
//! seen only by that owner (any other gets "no task", as for an unknown id).

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::protocol::{error_codes, ErrorObject};

pub const DEFAULT_TTL_MS: u64 = 60_000;
pub const MAX_TTL_MS: u64 = 3_600_000;
pub const POLL_INTERVAL_MS: u64 = 100;
/// Tasks a store keeps at once; creating one more is refused.
pub const MAX_TASKS: usize = 10_000;
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// Where a task's work stands, as `tasks/result` waits for it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Working,
    Completed(Value),
    /// The request failed with a JSON-RPC error, which `tasks/result` answers.
    Failed(ErrorObject),
    Cancelled,
}

struct Entry {
    /// The task as `tasks/get` shows it.
    task: Value,
    owner: Option<String>,
    expires: Instant,
    outcome: watch::Sender<Outcome>,
    abort: Option<AbortHandle>,
}

#[derive(Default)]
pub struct TaskStore {
    /// In creation order.
    entries: Mutex<Vec<Entry>>,
}

impl std::fmt::Debug for TaskStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskStore").field("tasks", &self.lock().len()).finish()
    }
}

fn unknown(method: &str, id: &str) -> ErrorObject {
    ErrorObject::invalid_params(format!("{method}: no task {id:?} (unknown or expired)"))
}

/// The requested `ttl` of a `params.task` object, bounded to [`MAX_TTL_MS`].
pub fn requested_ttl(task: &Value) -> Result<u64, ErrorObject> {
    let invalid = || {
        ErrorObject::invalid_params(format!("tools/call: `task` must be an object with an optional non-negative integer `ttl`, got {task}"))
    };
    match task.as_object().ok_or_else(invalid)?.get("ttl") {
        None | Some(Value::Null) => Ok(DEFAULT_TTL_MS),
        Some(ttl) => ttl.as_u64().map(|ttl| ttl.min(MAX_TTL_MS)).ok_or_else(invalid),
    }
}

impl TaskStore {
    fn with_live<T>(&self, f: impl FnOnce(&mut Vec<Entry>) -> T) -> T {
        let mut entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        entries.retain(|e| e.expires > now);
        f(&mut entries)
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Creates a working task of `owner`; returns its id and the
    /// `CreateTaskResult`, or an error when [`MAX_TASKS`] are kept.
    pub fn create(&self, ttl_ms: u64, owner: Option<&str>) -> Result<(String, Value), ErrorObject> {
        // An id is how a client reaches its task's result: 128 bits of the
        // system's generator, never a guessable sequence.
        let mut bytes = [0u8; 16];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).map_err(|_| ErrorObject {
            code: crate::protocol::error_codes::INTERNAL_ERROR,
            message: "cannot make a task id: the system's random generator failed; retry later".into(),
            data: None,
        })?;
        let id = format!("task-{}", bytes.iter().map(|byte| format!("{byte:02x}")).collect::<String>());
        let now = now_iso();
        let task = json!({
            "taskId": id, "status": "working", "createdAt": now, "lastUpdatedAt": now,
            "ttl": ttl_ms, "pollInterval": POLL_INTERVAL_MS,
        });
        let entry = Entry {
            task: task.clone(),
            owner: owner.map(str::to_owned),
            expires: Instant::now() + Duration::from_millis(ttl_ms),
            outcome: watch::channel(Outcome::Working).0,
            abort: None,
        };
        self.with_live(|entries| {
            if entries.len() >= MAX_TASKS {
                return Err(ErrorObject {
                    code: error_codes::INTERNAL_ERROR,
                    message: format!("tools/call: {MAX_TASKS} tasks are kept already; wait for some to expire or call without `task`"),
                    data: None,
                });
            }
            entries.push(entry);
            Ok(())
        })?;
        Ok((id, json!({ "task": task })))
    }

    /// Lets `tasks/cancel` stop the work of task `id`.
    pub fn set_abort(&self, id: &str, abort: AbortHandle) {
        self.with_live(|entries| entries.iter_mut().find(|e| e.task["taskId"] == id).map(|e| e.abort = Some(abort)));
    }

    /// Ends `entry` with `status` and `outcome`.
    fn finish(entry: &mut Entry, status: &str, outcome: Outcome) {
        entry.task["status"] = json!(status);
        entry.task["lastUpdatedAt"] = json!(now_iso());
        entry.outcome.send_replace(outcome);
    }

    /// Ends task `id` (if still working) with the request's answer.
    pub fn end(&self, id: &str, answer: Result<Value, ErrorObject>) {
        self.with_live(|entries| {
            if let Some(entry) = entries.iter_mut().find(|e| e.task["taskId"] == id && e.task["status"] == "working") {
                match answer {
                    Ok(result) => Self::finish(entry, "completed", Outcome::Completed(result)),
                    Err(error) => {
                        entry.task["statusMessage"] = json!(error.message);
                        Self::finish(entry, "failed", Outcome::Failed(error));
                    }
                }
            }
        });
    }

    /// `tasks/get` and `tasks/cancel` of task `id` of `owner` (-32602 for a task already terminal).
    pub fn get_or_cancel(&self, method: &str, id: &str, owner: Option<&str>) -> Result<Value, ErrorObject> {
        self.with_live(|entries| {
            let entry = entries.iter_mut().find(|e| e.task["taskId"] == id && e.owner.as_deref() == owner);
            let entry = entry.ok_or_else(|| unknown(method, id))?;
            if method == "tasks/cancel" {
                if entry.task["status"] != "working" {
                    return Err(ErrorObject::invalid_params(format!("tasks/cancel: task {id:?} is already {}", entry.task["status"])));
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
        self.lock().iter().filter_map(|e| e.abort.as_ref()).for_each(AbortHandle::abort);
    }

    /// The live tasks of `owner`, oldest first.
    pub fn list(&self, owner: Option<&str>) -> Vec<Value> {
        self.with_live(|entries| entries.iter().filter(|e| e.owner.as_deref() == owner).map(|e| e.task.clone()).collect())
    }

    /// What `tasks/result` of task `id` of `owner` waits on.
    pub fn watch(&self, id: &str, owner: Option<&str>) -> Result<(String, watch::Receiver<Outcome>), ErrorObject> {
        let outcome = self.with_live(|entries| {
            entries.iter().find(|e| e.task["taskId"] == id && e.owner.as_deref() == owner).map(|e| e.outcome.subscribe())
        });
        outcome.map(|o| (id.to_owned(), o)).ok_or_else(|| unknown("tasks/result", id))
    }
}

/// `tasks/result`: waits until the task ends; its result tagged with the task.
pub async fn result(id: String, mut outcome: watch::Receiver<Outcome>) -> Result<Value, ErrorObject> {
    loop {
        match outcome.borrow_and_update().clone() {
            Outcome::Completed(mut result) => {
                result["_meta"] = json!({ RELATED_TASK: {"taskId": id} });
                return Ok(result);
            }
            Outcome::Failed(error) => return Err(error),
            Outcome::Cancelled => return Err(ErrorObject::invalid_params(format!("tasks/result: task {id:?} was cancelled"))),
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

/// UTC `YYYY-MM-DDTHH:MM:SSZ` of a Unix time.
fn iso8601(secs: u64) -> String {
    let (year, month, day) = crate::civil_date::civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
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
        let (id, created) = store.create(60_000, None).unwrap();
        assert_eq!(created["task"]["status"], "working");
        assert_eq!(created["task"]["ttl"], 60_000);
        store.end(&id, Ok(json!({"content": []})));
        assert_eq!(store.get_or_cancel("tasks/get", &id, None).unwrap()["status"], "completed");
        assert!(store.get_or_cancel("tasks/cancel", &id, None).unwrap_err().message.contains("already \"completed\""));
        let (other, _) = store.create(60_000, None).unwrap();
        let cancelled = store.get_or_cancel("tasks/cancel", &other, None).unwrap();
        assert_eq!(cancelled["status"], "cancelled");
        store.end(&other, Ok(json!({})));
        assert_eq!(store.list(None).len(), 2);
        let (short, _) = store.create(0, None).unwrap();
        assert!(store.get_or_cancel("tasks/get", &short, None).is_err(), "expired at once");
    }

    #[test]
    fn ttls_are_checked_and_bounded() {
        assert_eq!(requested_ttl(&json!({})), Ok(DEFAULT_TTL_MS));
        assert_eq!(requested_ttl(&json!({"ttl": 5})), Ok(5));
        assert_eq!(requested_ttl(&json!({"ttl": u64::MAX})), Ok(MAX_TTL_MS));
        assert!(requested_ttl(&json!({"ttl": -1})).is_err() && requested_ttl(&json!(3)).is_err());
    }

    #[test]
    fn an_owners_tasks_are_its_own_and_failures_are_kept() {
        let store = TaskStore::default();
        let (id, _) = store.create(60_000, Some("a")).unwrap();
        assert!(store.get_or_cancel("tasks/get", &id, Some("b")).is_err(), "another owner sees no such task");
        assert!(store.watch(&id, None).is_err());
        assert_eq!((store.list(Some("a")).len(), store.list(Some("b")).len()), (1, 0));
        let refusal = ErrorObject { code: -32000, message: "overloaded".into(), data: None };
        store.end(&id, Err(refusal.clone()));
        let task = store.get_or_cancel("tasks/get", &id, Some("a")).unwrap();
        assert_eq!((task["status"].as_str(), task["statusMessage"].as_str()), (Some("failed"), Some("overloaded")));
        let (_, outcome) = store.watch(&id, Some("a")).unwrap();
        assert_eq!(*outcome.borrow(), Outcome::Failed(refusal));
    }
}
