//! The gateway's admin endpoint, what `mcpvisor top --url` reads:
//!
//! | request | answer |
//! | --- | --- |
//! | `GET /admin/status` | the pool now ([`pool_snapshot`]): statuses, each process's CPU ticks and RSS, call counters and latency histograms, the last calls |
//! | `GET /admin/calls?server=NAME` | the last calls (all servers without `server`), oldest first |
//! | `POST /admin/servers/{name}/restart` (`enable`, `disable`) | 200 `{"server", "action", "ok": true}`; 404 for an unknown server |
//! | `GET /admin/logins`, `DELETE /admin/logins/{server}/{caller}` | callers' stored logins, listed and revoked (served by `super::login`) |
//!
//! Invariants:
//! - the guard has checked the token before any of these runs (it needs
//!   one on every path but `/healthz`);
//! - a gateway without credentials serves `/admin` only when it listens on
//!   loopback (403 otherwise), so nobody else on the network can restart
//!   its servers;
//! - with credentials, `/admin` (and `/metrics`) is for the holders of the
//!   shared token and for identities granted the scope [`ADMIN_SCOPE`] (a
//!   key's `scopes`, a token's `scope`); every other caller gets 403 naming the scope;
//! - an admin sees and acts on only the servers its identity may use
//!   something of, by the access policy ([`super::Gateway::heard_by`], the
//!   verdict of the lists): another server's state, calls and stderr tail
//!   are not in its views, and an action on it answers 404 like an unknown one;
//! - every action is a line of the audit log with its caller's subject
//!   ([`crate::telemetry::audit::AuditLog::admin`]), a 404 for a hidden or unknown server too;
//! - nothing here carries a call's arguments or results, a token or a
//!   whole session id: the last calls hold server, tool, outcome, duration
//!   and time only, at most [`RECENT_CALLS`](crate::telemetry::recent::RECENT_CALLS) of them.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::guard::Caller;
use super::Front;
use crate::error::ManageError;
use crate::identity::{Identity, Proof};
use crate::telemetry::{AuditLog, RecentCall};
use crate::Handle;

/// The scope that opens `/admin` to a named key's or an issuer's identity.
pub const ADMIN_SCOPE: &str = "mcpvisor:admin";

/// The admin paths.
pub const STATUS_PATH: &str = "/admin/status";
pub const CALLS_PATH: &str = "/admin/calls";
pub const ACTION_PATH: &str = "/admin/servers/{name}/{action}";

/// What an admin may do to one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminAction {
    Restart,
    Enable,
    Disable,
}

impl AdminAction {
    pub fn parse(text: &str) -> Option<AdminAction> {
        match text {
            "restart" => Some(AdminAction::Restart),
            "enable" => Some(AdminAction::Enable),
            "disable" => Some(AdminAction::Disable),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AdminAction::Restart => "restart",
            AdminAction::Enable => "enable",
            AdminAction::Disable => "disable",
        }
    }
}

/// The pool behind `/admin`.
pub trait Admin: Send + Sync + 'static {
    /// The pool now, as [`pool_snapshot`] makes it.
    fn snapshot(&self) -> BoxFuture<'static, Value>;
    /// The last calls, oldest first; only `server`'s when given.
    fn calls(&self, server: Option<&str>) -> Vec<RecentCall>;
    fn act(&self, server: &str, action: AdminAction) -> BoxFuture<'static, Result<(), ManageError>>;
    /// Where actions are recorded with their caller, if anywhere.
    fn audit(&self) -> Option<AuditLog> {
        None
    }
    /// Ends `caller`'s own connection to `server` (its login was made or
    /// revoked), so its next call starts one with the login as it is now.
    fn end_caller(&self, server: &str, caller: &str) -> BoxFuture<'static, ()> {
        let _ = (server, caller);
        Box::pin(async {})
    }
}

/// A runtime's pool as the admin endpoint serves it.
pub struct PoolAdmin(pub Handle);

impl Admin for PoolAdmin {
    fn snapshot(&self) -> BoxFuture<'static, Value> {
        let handle = self.0.clone();
        Box::pin(async move { pool_snapshot(&handle).await })
    }

    fn calls(&self, server: Option<&str>) -> Vec<RecentCall> {
        self.0.telemetry().recent().list(server)
    }

    fn audit(&self) -> Option<AuditLog> {
        self.0.telemetry().audit().cloned()
    }

    fn end_caller(&self, server: &str, caller: &str) -> BoxFuture<'static, ()> {
        let (handle, server, caller) = (self.0.clone(), server.to_owned(), caller.to_owned());
        Box::pin(async move { handle.end_caller(&server, &caller).await })
    }

    fn act(&self, server: &str, action: AdminAction) -> BoxFuture<'static, Result<(), ManageError>> {
        let (handle, server) = (self.0.clone(), server.to_string());
        Box::pin(async move {
            match action {
                AdminAction::Restart => handle.reconnect(&server).await,
                AdminAction::Enable => handle.set_enabled(&server, true).await,
                AdminAction::Disable => handle.set_enabled(&server, false).await,
            }
        })
    }
}

/// The pool now, as JSON: `taken_at_ms` (Unix milliseconds),
/// `clock_ticks_per_second` (the unit of `cpu_ticks`), `servers` (each
/// server's status plus `process`: `{"cpu_ticks", "rss_bytes"}` of its
/// pid, read from `/proc`, `null` without a live process), `tools` (calls by
/// outcome and latency histogram per server and tool) and `calls` (the last
/// calls, oldest first). `mcpvisor top` reads this shape from both sources.
pub async fn pool_snapshot(handle: &Handle) -> Value {
    let statuses = handle.status().await;
    let telemetry = handle.telemetry();
    let servers: Vec<Value> = statuses
        .iter()
        .map(|status| {
            let mut value = serde_json::to_value(status).unwrap_or_else(|_| json!({"name": status.name}));
            let usage =
                status.pid.and_then(process_usage).map(|(cpu_ticks, rss_bytes)| json!({"cpu_ticks": cpu_ticks, "rss_bytes": rss_bytes}));
            value["process"] = usage.unwrap_or(Value::Null);
            value
        })
        .collect();
    json!({
        "taken_at_ms": SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64),
        "clock_ticks_per_second": clock_ticks_per_second(),
        "servers": servers,
        "tools": telemetry.metrics().calls(),
        "calls": telemetry.recent().list(None),
    })
}

/// CPU time (user + system, in clock ticks) and resident memory (bytes) of
/// process `pid`, from `/proc/PID/stat` and `/proc/PID/statm`; `None` when
/// it is gone or unreadable.
pub fn process_usage(pid: u32) -> Option<(u64, u64)> {
    let ticks = crate::transport::stdio::proc_info(i32::try_from(pid).ok()?)?.cpu_ticks;
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let resident_pages = statm.split_whitespace().nth(1)?.parse::<u64>().ok()?;
    Some((ticks, resident_pages.saturating_mul(page_size())))
}

fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|t| *t > 0).unwrap_or(100)
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|s| *s > 0).unwrap_or(4096)
}

/// Whether `caller` may use the admin endpoint and `/metrics` of `front`,
/// or the 403 that says why not.
pub(super) fn authorised(front: &Front, caller: Option<&Identity>, path: &str) -> Result<(), Box<Response>> {
    if let Some(caller) = caller {
        if caller.proof == Proof::SharedToken || caller.has_scope(ADMIN_SCOPE) {
            return Ok(());
        }
        let message = format!(
            "Forbidden: {path} needs the gateway's shared token or the scope `{ADMIN_SCOPE}`, and `{}` has neither; \
             grant it to the key (`scopes` in [serve.keys.NAME]) or the token",
            caller.subject
        );
        return Err(Box::new((StatusCode::FORBIDDEN, message).into_response()));
    }
    if !front.admin_open {
        let message = format!(
            "Forbidden: {path} needs the gateway's token when it listens beyond loopback: set MCPVISOR_SERVE_TOKEN \
             (or `token` in the [serve] table), or listen on 127.0.0.1"
        );
        return Err(Box::new((StatusCode::FORBIDDEN, message).into_response()));
    }
    Ok(())
}

/// The admin of `front`, or why `caller` may not use it.
pub(super) fn admin_of<'a>(front: &'a Front, caller: Option<&Identity>) -> Result<&'a Arc<dyn Admin>, Box<Response>> {
    let Some(admin) = &front.admin else {
        return Err(Box::new((StatusCode::NOT_FOUND, "Not Found: this gateway has no admin endpoint").into_response()));
    };
    authorised(front, caller, "/admin")?;
    Ok(admin)
}

/// The servers `caller` may see in the admin views, of those the pool has now.
pub(super) async fn heard(front: &Front, caller: &Option<Arc<Identity>>) -> Vec<String> {
    let servers = front.gateway.servers().await;
    front.gateway.heard_by(caller.clone(), servers).await
}

/// `snapshot` with only `heard`'s servers, their tools and their calls.
fn only_heard(mut snapshot: Value, heard: &[String]) -> Value {
    let keeps = |item: &Value, field: &str| item.get(field).and_then(Value::as_str).is_some_and(|name| heard.iter().any(|h| h == name));
    for (list, field) in [("servers", "name"), ("tools", "server"), ("calls", "server")] {
        if let Some(items) = snapshot.get_mut(list).and_then(Value::as_array_mut) {
            items.retain(|item| keeps(item, field));
        }
    }
    snapshot
}

pub(super) async fn status(State(front): State<Arc<Front>>, Caller(caller): Caller) -> Response {
    match admin_of(&front, caller.as_deref()) {
        Ok(admin) => {
            let snapshot = admin.snapshot().await;
            axum::Json(only_heard(snapshot, &heard(&front, &caller).await)).into_response()
        }
        Err(refusal) => *refusal,
    }
}

pub(super) async fn calls(State(front): State<Arc<Front>>, Caller(caller): Caller, uri: Uri) -> Response {
    let query = uri.query().unwrap_or_default().as_bytes();
    let server = url::form_urlencoded::parse(query).find(|(key, _)| key == "server").map(|(_, value)| value.into_owned());
    match admin_of(&front, caller.as_deref()) {
        Ok(admin) => {
            let heard = heard(&front, &caller).await;
            let calls: Vec<_> = admin.calls(server.as_deref()).into_iter().filter(|call| heard.contains(&call.server)).collect();
            axum::Json(json!({ "calls": calls })).into_response()
        }
        Err(refusal) => *refusal,
    }
}

pub(super) async fn act(State(front): State<Arc<Front>>, Caller(caller): Caller, Path((name, action)): Path<(String, String)>) -> Response {
    let admin = match admin_of(&front, caller.as_deref()) {
        Ok(admin) => admin,
        Err(refusal) => return *refusal,
    };
    let Some(action) = AdminAction::parse(&action) else {
        let message = format!("Not Found: `{action}` is not an admin action; use restart, enable or disable");
        return (StatusCode::NOT_FOUND, message).into_response();
    };
    let who = caller.as_ref().map_or("an unauthenticated caller on loopback", |caller| caller.subject.as_str());
    let outcome = if front.gateway.heard_by(caller.clone(), vec![name.clone()]).await.is_empty() {
        Err(ManageError::UnknownServer(name.clone()))
    } else {
        admin.act(&name, action).await
    };
    tracing::info!(server = %name, action = action.as_str(), caller = %who, ok = outcome.is_ok(), "admin action");
    if let Some(log) = admin.audit() {
        let error = outcome.as_ref().err().map(ToString::to_string);
        log.admin(caller.as_deref(), &name, action.as_str(), error.as_deref());
    }
    match outcome {
        Ok(()) => axum::Json(json!({"server": name, "action": action.as_str(), "ok": true})).into_response(),
        Err(error) => {
            let status = match error {
                ManageError::UnknownServer(_) => StatusCode::NOT_FOUND,
                ManageError::RuntimeStopped => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            (status, axum::Json(json!({"server": name, "action": action.as_str(), "ok": false, "error": error.to_string()})))
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_usage_of_this_very_process_is_read_from_proc() {
        let (ticks, rss) = super::process_usage(std::process::id()).expect("our own /proc entry");
        assert!(rss > 1024 * 1024, "a test process holds more than 1 MiB resident, read {rss}");
        let busy_until = std::time::Instant::now() + std::time::Duration::from_millis(100);
        let mut spin = 0u64;
        while std::time::Instant::now() < busy_until {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
        let (later, _) = super::process_usage(std::process::id()).expect("our own /proc entry");
        assert!(later > ticks, "100 ms of spinning adds CPU ticks ({ticks} then {later})");
        assert!(super::process_usage(u32::MAX).is_none());
    }
}
