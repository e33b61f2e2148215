//! What operators watch: call metrics ([`metrics`], rendered for
//! Prometheus by [`prometheus`]), the audit log ([`audit`]), and
//! OpenTelemetry traces and metrics over OTLP ([`otel`], off unless
//! configured).
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
//! With [`Telemetry::with_otel`], each watched call is also a client span
//! (child of the span its caller carried) and is counted over OTLP.

pub mod audit;
pub mod metrics;
pub mod otel;
mod otel_export;
pub mod prometheus;
pub mod recent;

use std::sync::Arc;
use std::time::Instant;

use opentelemetry::{Context, KeyValue};
use rmcp::model::{CallToolResult, JsonObject};

use crate::config::redact::{Found, Redactor};
use crate::config::{Direction, SecretsMode};
use crate::error::CallError;
pub use audit::{AuditArguments, AuditConfig, AuditLog, AuditTarget};
pub use metrics::{Histogram, Metrics, MetricsSnapshot, Outcome, SecretsFound, ServerGauges, ToolCalls, ToolStats};
pub use otel::{Otel, OtelError};
pub use recent::{RecentCall, RecentCalls};

/// The metrics and the audit log of one runtime; cheap to clone.
#[derive(Clone, Default, Debug)]
pub struct Telemetry {
    metrics: Arc<Metrics>,
    audit: Option<AuditLog>,
    recent: Arc<RecentCalls>,
    /// OpenTelemetry, when configured; `None` costs the call path one check.
    otel: Option<Arc<Otel>>,
}

impl Telemetry {
    /// Adds an audit log (starts its writer thread; opens the file).
    pub fn with_audit(mut self, config: AuditConfig) -> std::io::Result<Telemetry> {
        self.audit = Some(AuditLog::start(config)?);
        Ok(self)
    }

    /// Adds OpenTelemetry: spans of calls and their counts go to `otel`'s collector.
    pub fn with_otel(mut self, otel: Otel) -> Telemetry {
        self.otel = Some(Arc::new(otel));
        self
    }

    pub fn otel(&self) -> Option<&Otel> {
        self.otel.as_deref()
    }

    /// The same, shared (an agent keeps it for its turns' spans).
    #[doc(hidden)]
    pub fn otel_shared(&self) -> Option<Arc<Otel>> {
        self.otel.clone()
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
    #[doc(hidden)]
    pub fn watch(&self, call: CallStart<'_>) -> CallWatch {
        let audit = self.audit.as_ref().map(|log| (log.clone(), log.draft(&call)));
        let otel = self.otel.as_ref().map(|otel| Box::new(OtelWatch::start(otel, &call)));
        let names = (call.server.to_string(), call.tool.to_string());
        CallWatch { stats: call.stats, started: Instant::now(), audit, recent: self.recent.clone(), names, otel, finished: false }
    }
}

/// What is known of a call when it arrives.
#[doc(hidden)]
pub struct CallStart<'a> {
    pub server: &'a str,
    pub tool: &'a str,
    pub caller: Option<&'a str>,
    /// Who the caller proved to be, if a gateway checked.
    pub identity: Option<&'a crate::identity::Identity>,
    /// Who the call reaches its server as, when the server acts as each caller.
    pub upstream: Option<&'a crate::identity::Upstream>,
    pub arguments: Option<&'a JsonObject>,
    /// Masks the server's configured secrets in redacted arguments.
    pub redactor: &'a Redactor,
    pub stats: Arc<ToolStats>,
    /// The protocol era the server speaks (`legacy`, `modern`).
    pub era: &'static str,
    /// The span of the request this call serves (a gateway's), if any.
    pub parent: Option<&'a Context>,
}

/// One call being watched; counts it as `cancelled` if dropped unfinished.
#[doc(hidden)]
pub struct CallWatch {
    stats: Arc<ToolStats>,
    started: Instant,
    audit: Option<(AuditLog, audit::Draft)>,
    /// Where the call is listed when it ends.
    recent: Arc<RecentCalls>,
    /// The call's server and tool, labelling its metrics and then moved into `recent`.
    names: (String, String),
    /// Boxed: a call pays one pointer for it when OpenTelemetry is off.
    otel: Option<Box<OtelWatch>>,
    finished: bool,
}

/// A watched call's span.
struct OtelWatch {
    otel: Arc<Otel>,
    span: Context,
}

impl OtelWatch {
    fn start(otel: &Arc<Otel>, call: &CallStart<'_>) -> OtelWatch {
        let mut attributes = vec![
            KeyValue::new("mcp.method.name", crate::protocol::methods::TOOLS_CALL),
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("gen_ai.tool.name", call.tool.to_string()),
            KeyValue::new("mcpvisor.server", call.server.to_string()),
            KeyValue::new("mcpvisor.era", call.era),
        ];
        if let Some(caller) = call.caller {
            attributes.push(KeyValue::new("mcpvisor.caller", caller.to_string()));
        }
        if let Some(identity) = call.identity {
            attributes.push(KeyValue::new("enduser.id", identity.subject.clone()));
        }
        if let Some(upstream) = call.upstream {
            attributes.push(KeyValue::new("mcpvisor.upstream.subject", upstream.subject.clone()));
            attributes.push(KeyValue::new("mcpvisor.upstream.audience", upstream.audience.clone()));
        }
        let span = otel.client_span(format!("tools/call {}", call.tool), call.parent, attributes);
        OtelWatch { otel: otel.clone(), span }
    }
}
impl CallWatch {
    /// The call's own span, to send on to its server (`_meta.traceparent`).
    pub fn span(&self) -> Option<&Context> {
        self.otel.as_ref().map(|otel| &otel.span)
    }

    /// The call's server and tool.
    pub fn names(&self) -> (&str, &str) {
        (&self.names.0, &self.names.1)
    }

    /// Counts the secrets `found` going `direction` (and what `mode` did
    /// with them) in the tool's metrics and the call's audit line; never
    /// the secrets themselves.
    pub fn secrets(&mut self, direction: Direction, found: &Found, mode: SecretsMode) {
        for (kind, count) in found.kinds() {
            let action = mode.action(kind);
            self.stats.secrets(direction, kind, action, count);
            if let Some((_, draft)) = self.audit.as_mut() {
                draft.secrets(direction, kind, action, count);
            }
        }
    }

    pub fn finish(mut self, result: &Result<CallToolResult, CallError>) {
        self.record(Outcome::of(result), result.as_ref().err().map(CallError::kind));
    }

    fn record(&mut self, outcome: Outcome, error_kind: Option<&'static str>) {
        self.finished = true;
        let took = self.started.elapsed();
        self.stats.record(outcome, took);
        if let Some((log, draft)) = self.audit.take() {
            log.write(draft, took, outcome, error_kind);
        }
        let (server, tool) = std::mem::take(&mut self.names);
        if let Some(watch) = self.otel.take() {
            watch.otel.record_call(&server, &tool, outcome, took);
            otel::end_span(&watch.span, outcome, error_kind);
        }
        self.recent.record(server, tool, outcome, took);
    }
}

impl Drop for CallWatch {
    fn drop(&mut self) {
        if !self.finished {
            self.record(Outcome::Cancelled, None);
        }
    }
}
