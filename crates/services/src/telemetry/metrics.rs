//! Call counters and latency histograms, kept in atomics.
//!
//! Invariants:
//! - the hot path (one finished call) touches only atomics of the call's
//!   [`ToolStats`], which its connection looked up once and keeps; the map
//!   of every (server, tool) is locked only when a tool is first called
//!   and when a snapshot is taken;
//! - counters only grow, for the life of the [`Metrics`] (a server removed
//!   and added again counts on);
//! - series exist only for tools that were routed to a connection (the
//!   Registry refuses names no server listed), so a client cannot make
//!   the number of series grow by calling made-up names.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::CallToolResult;
use serde::Serialize;

use crate::config::redact::SecretKind;
use crate::config::{Direction, SecretAction};
use crate::error::CallError;

/// Upper bounds of the latency buckets, in seconds (`+Inf` is implied).
pub const LATENCY_BUCKETS: [f64; 14] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0];

/// How a tool call ended, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A result without `isError`.
    Ok,
    /// A result with `isError: true` (the tool reported a failure).
    ToolError,
    Timeout,
    RateLimited,
    Overloaded,
    /// The caller went away before the answer.
    Cancelled,
    /// Any other [`CallError`].
    Error,
}

impl Outcome {
    pub const ALL: [Outcome; 7] =
        [Outcome::Ok, Outcome::ToolError, Outcome::Timeout, Outcome::RateLimited, Outcome::Overloaded, Outcome::Cancelled, Outcome::Error];

    pub fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::ToolError => "tool_error",
            Outcome::Timeout => "timeout",
            Outcome::RateLimited => "rate_limited",
            Outcome::Overloaded => "overloaded",
            Outcome::Cancelled => "cancelled",
            Outcome::Error => "error",
        }
    }

    pub fn of(result: &Result<CallToolResult, CallError>) -> Outcome {
        match result {
            Ok(result) if result.is_error == Some(true) => Outcome::ToolError,
            Ok(_) => Outcome::Ok,
            Err(CallError::Timeout { .. } | CallError::NoUsableAnswer { .. }) => Outcome::Timeout,
            Err(CallError::RateLimited { .. }) => Outcome::RateLimited,
            Err(CallError::Overloaded { .. }) => Outcome::Overloaded,
            Err(_) => Outcome::Error,
        }
    }
}

/// Secrets counted per direction, kind and action (see [`ToolStats::secrets`]).
const SECRET_SLOTS: usize = Direction::ALL.len() * SecretKind::ALL.len() * SecretAction::ALL.len();

fn secret_slot(direction: Direction, kind: SecretKind, action: SecretAction) -> usize {
    ((direction as usize * SecretKind::ALL.len()) + kind as usize) * SecretAction::ALL.len() + action as usize
}

/// One tool's counters.
#[derive(Debug)]
pub struct ToolStats {
    outcomes: [AtomicU64; Outcome::ALL.len()],
    /// Calls per bucket (not cumulative); the last slot is past the last bound.
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_micros: AtomicU64,
    /// Secrets found in its calls, by [`secret_slot`].
    secrets: [AtomicU64; SECRET_SLOTS],
}

impl Default for ToolStats {
    fn default() -> ToolStats {
        ToolStats {
            outcomes: Default::default(),
            buckets: Default::default(),
            sum_micros: AtomicU64::new(0),
            secrets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl ToolStats {
    /// Counts `count` secrets of `kind` found going `direction`, and what was done with them.
    pub fn secrets(&self, direction: Direction, kind: SecretKind, action: SecretAction, count: u32) {
        self.secrets[secret_slot(direction, kind, action)].fetch_add(u64::from(count), Relaxed);
    }

    pub fn record(&self, outcome: Outcome, took: Duration) {
        self.outcomes[outcome as usize].fetch_add(1, Relaxed);
        let seconds = took.as_secs_f64();
        let bucket = LATENCY_BUCKETS.iter().position(|bound| seconds <= *bound).unwrap_or(LATENCY_BUCKETS.len());
        self.buckets[bucket].fetch_add(1, Relaxed);
        self.sum_micros.fetch_add(u64::try_from(took.as_micros()).unwrap_or(u64::MAX), Relaxed);
    }

    fn snapshot(&self, server: &str, tool: &str) -> ToolCalls {
        let outcomes = Outcome::ALL.iter().map(|o| (o.label().to_string(), self.outcomes[*o as usize].load(Relaxed))).collect();
        let mut running = 0;
        let buckets = LATENCY_BUCKETS
            .iter()
            .enumerate()
            .map(|(i, bound)| {
                running += self.buckets[i].load(Relaxed);
                (*bound, running)
            })
            .collect();
        let count = running + self.buckets[LATENCY_BUCKETS.len()].load(Relaxed);
        let latency = Histogram { buckets, count, sum_seconds: self.sum_micros.load(Relaxed) as f64 / 1e6 };
        let mut secrets = Vec::new();
        for direction in Direction::ALL {
            for kind in SecretKind::ALL {
                for action in SecretAction::ALL {
                    let count = self.secrets[secret_slot(direction, kind, action)].load(Relaxed);
                    if count > 0 {
                        secrets.push(SecretsFound { direction: direction.as_str(), kind: kind.as_str(), action: action.as_str(), count });
                    }
                }
            }
        }
        ToolCalls { server: server.into(), tool: tool.into(), outcomes, latency, secrets }
    }
}

/// Every tool's counters, by (server, tool).
#[derive(Debug, Default)]
pub struct Metrics {
    tools: Mutex<BTreeMap<(String, String), Arc<ToolStats>>>,
}

impl Metrics {
    /// The counters of `tool` of `server`, made on first use.
    pub fn tool(&self, server: &str, tool: &str) -> Arc<ToolStats> {
        let mut tools = self.tools.lock().unwrap_or_else(|e| e.into_inner());
        tools.entry((server.to_string(), tool.to_string())).or_default().clone()
    }

    /// Every tool's numbers now, sorted by server and tool.
    pub fn calls(&self) -> Vec<ToolCalls> {
        let tools = self.tools.lock().unwrap_or_else(|e| e.into_inner());
        tools.iter().map(|((server, tool), stats)| stats.snapshot(server, tool)).collect()
    }
}

/// One tool's calls by outcome and their latency.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCalls {
    pub server: String,
    pub tool: String,
    /// Every [`Outcome`] label, zeros included.
    pub outcomes: BTreeMap<String, u64>,
    pub latency: Histogram,
    /// The secrets found in its calls so far (only the non-zero counts).
    pub secrets: Vec<SecretsFound>,
}

/// Secrets found in one tool's calls: how many of one kind, going one way, and what was done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretsFound {
    /// `arguments` or `results`.
    pub direction: &'static str,
    /// A [`SecretKind`] label (`private_key`, `configured`, ...).
    pub kind: &'static str,
    /// `masked`, `blocked` or `allowed`.
    pub action: &'static str,
    pub count: u64,
}

impl ToolCalls {
    pub fn count(&self, outcome: Outcome) -> u64 {
        self.outcomes.get(outcome.label()).copied().unwrap_or(0)
    }

    /// Secrets of `kind` found going `direction`, whatever was done with them.
    pub fn secrets_found(&self, direction: Direction, kind: SecretKind) -> u64 {
        let (direction, kind) = (direction.as_str(), kind.as_str());
        self.secrets.iter().filter(|found| found.direction == direction && found.kind == kind).map(|found| found.count).sum()
    }
}

/// A latency histogram as Prometheus has it: cumulative counts per upper bound.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Histogram {
    /// (upper bound in seconds, calls that took at most that), bounds ascending.
    pub buckets: Vec<(f64, u64)>,
    pub count: u64,
    pub sum_seconds: f64,
}

/// What a server's status says, as numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerGauges {
    pub server: String,
    /// `connected`, `failed`, ... ([`crate::pool::ServerState::label`]).
    pub state: &'static str,
    pub in_flight: usize,
    pub queued: usize,
    pub restarts: u64,
}

/// Every number at one moment: what `Handle::metrics` returns and what
/// `/metrics` renders ([`MetricsSnapshot::to_prometheus`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricsSnapshot {
    pub tools: Vec<ToolCalls>,
    pub servers: Vec<ServerGauges>,
    /// Audit lines lost because the writer could not keep up (0 without an audit log).
    pub audit_dropped: u64,
    /// OTLP exports (batches of spans or metrics) the collector did not take (0 without OpenTelemetry).
    pub otel_export_failures: u64,
}

impl MetricsSnapshot {
    pub fn tool(&self, server: &str, tool: &str) -> Option<&ToolCalls> {
        self.tools.iter().find(|t| t.server == server && t.tool == tool)
    }

    pub fn server(&self, server: &str) -> Option<&ServerGauges> {
        self.servers.iter().find(|s| s.server == server)
    }
}

/// What the gateway's HTTP front holds now and what it refused, by bound
/// (`/metrics` of `serve --http`; [`FrontGauges::to_prometheus`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FrontGauges {
    pub sessions: usize,
    /// Requests open (stateless ones, listen streams and GET streams included).
    pub requests: usize,
    pub listen_streams: usize,
    /// Bytes of events the sessions keep for resumption.
    pub buffered_bytes: usize,
    /// `(bound, refusals so far)` for every bound.
    pub refusals: Vec<(&'static str, u64)>,
}
