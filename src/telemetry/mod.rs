//! What operators watch: call metrics ([`metrics`], rendered for
//! Prometheus by [`prometheus`]) and the audit log ([`audit`]).
//!
//! One [`Telemetry`] per runtime (a live part, given with
//! `Runtime::builder(config).telemetry(..)`), shared by every connection.
//! Each tool call that enters a connection
//! (the seam of `actors::connection::calls`, which every call passes,
//! routed or sent directly) gets a `CallWatch`; when the call is answered
//! the watch counts it, times it and writes its audit line. A call whose
//! caller went away first is counted as `cancelled`.
//!
//! For embedding programs and the gateway: `Handle::metrics()` returns a
//! [`MetricsSnapshot`] (counters plus each server's in-flight, queued,
//! restarts and state), and [`MetricsSnapshot::to_prometheus`] renders it
//! for `/metrics` (answer with [`prometheus::CONTENT_TYPE`]). The audit
//! log is opt-in: `Telemetry::default().with_audit(AuditConfig { .. })`;
//! a gateway sets each call's caller label with `CallTool::with_caller`.

pub mod audit;
pub mod metrics;
pub mod prometheus;
pub mod recent;

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{CallToolResult, JsonObject};

use crate::config::redact::Redactor;
use crate::error::CallError;
pub use audit::{AuditArguments, AuditConfig, AuditLog, AuditTarget};
pub use metrics::{Histogram, Metrics, MetricsSnapshot, Outcome, ServerGauges, ToolCalls, ToolStats};
pub use recent::{RecentCall, RecentCalls};

/// The metrics and the audit log of one runtime; cheap to clone.
#[derive(Clone, Default, Debug)]
pub struct Telemetry {
    metrics: Arc<Metrics>,
    audit: Option<AuditLog>,
    recent: Arc<RecentCalls>,
}

impl Telemetry {
    /// Adds an audit log (starts its writer thread; opens the file).
    pub fn with_audit(mut self, config: AuditConfig) -> std::io::Result<Telemetry> {
        self.audit = Some(AuditLog::start(config)?);
        Ok(self)
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn audit(&self) -> Option<&AuditLog> {
        self.audit.as_ref()
    }

    /// The last calls (at most [`recent::RECENT_CALLS`]), without arguments.
    pub fn recent(&self) -> &RecentCalls {
        &self.recent
    }

    /// Starts watching one call of `tool` on `server`.
    pub(crate) fn watch(&self, call: CallStart<'_>) -> CallWatch {
        let audit = self.audit.as_ref().map(|log| (log.clone(), log.draft(&call)));
        let recent = (self.recent.clone(), call.server.to_string(), call.tool.to_string());
        CallWatch { stats: call.stats, started: Instant::now(), audit, recent, finished: false }
    }
}

/// What is known of a call when it arrives.
pub(crate) struct CallStart<'a> {
    pub server: &'a str,
    pub tool: &'a str,
    pub caller: Option<&'a str>,
    /// Who the caller proved to be, if a gateway checked.
    pub identity: Option<&'a crate::identity::Identity>,
    pub arguments: Option<&'a JsonObject>,
    /// Masks the server's configured secrets in redacted arguments.
    pub redactor: &'a Redactor,
    pub stats: Arc<ToolStats>,
}

/// One call being watched; counts it as `cancelled` if dropped unfinished.
pub(crate) struct CallWatch {
    stats: Arc<ToolStats>,
    started: Instant,
    audit: Option<(AuditLog, audit::Draft)>,
    /// Where the call is listed when it ends, and its server and tool.
    recent: (Arc<RecentCalls>, String, String),
    finished: bool,
}

impl CallWatch {
    pub fn finish(mut self, result: &Result<CallToolResult, CallError>) {
        self.record(Outcome::of(result), result.as_ref().err().map(CallError::kind));
    }

    fn record(&mut self, outcome: Outcome, error_kind: Option<&'static str>) {
        self.finished = true;
        let took = self.started.elapsed();
        self.stats.record(outcome, took);
        let (recent, server, tool) = &self.recent;
        recent.record(server, tool, outcome, took);
        if let Some((log, draft)) = self.audit.take() {
            log.write(draft.finish(took, outcome, error_kind));
        }
    }
}

impl Drop for CallWatch {
    fn drop(&mut self) {
        if !self.finished {
            self.record(Outcome::Cancelled, None);
        }
    }
}
