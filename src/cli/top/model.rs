//! The view model of `top`: rows computed from two snapshots of the pool
//! (the shape of [`pool_snapshot`](crate::gateway::http::admin::pool_snapshot),
//! whichever source made them), sorted and filtered.
//!
//! Rates (calls/s, CPU%) come from the difference between the snapshot
//! and the one before; percentiles from the latency histograms since the
//! pool started, interpolated inside a bucket. A field a snapshot lacks
//! reads as unknown (`None`), never as a panic.

use serde::Serialize;
use serde_json::Value;

use crate::telemetry::RecentCall;

/// One server in one snapshot, as read from its JSON.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerSample {
    pub name: String,
    pub state: String,
    pub pid: Option<u64>,
    pub uptime_ms: Option<u64>,
    pub restarts: u64,
    pub last_error: Option<String>,
    pub in_flight: u64,
    pub queued: u64,
    pub stderr_tail: Vec<String>,
    /// Tools withheld until a change to their definition is accepted.
    pub withheld: Vec<String>,
    pub sandbox: Option<String>,
    /// A server that acts as each caller: `N/MAX: key, key` of its callers' connections.
    pub callers: Option<String>,
    pub cpu_ticks: Option<u64>,
    pub rss_bytes: Option<u64>,
    /// Calls finished, errors among them, and the merged latency
    /// histogram: (upper bound in seconds, cumulative count).
    pub calls: u64,
    pub errors: u64,
    pub latency: Vec<(f64, u64)>,
}

/// One snapshot, parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    pub taken_at_ms: u64,
    pub ticks_per_second: u64,
    pub servers: Vec<ServerSample>,
    pub calls: Vec<RecentCall>,
}

/// Outcomes that count as errors (a cancelled call is the caller's choice).
const ERROR_OUTCOMES: [&str; 5] = ["tool_error", "timeout", "rate_limited", "overloaded", "error"];

impl Sample {
    /// Reads a snapshot's JSON; what is missing or malformed is left out.
    pub fn parse(snapshot: &Value) -> Sample {
        let u64_of = |value: &Value, key: &str| value.get(key).and_then(Value::as_u64);
        let mut servers: Vec<ServerSample> = snapshot
            .get("servers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|server| {
                let text = |key: &str| server.get(key).and_then(Value::as_str).map(str::to_string);
                let process = server.get("process").filter(|p| p.is_object());
                Some(ServerSample {
                    name: text("name")?,
                    state: text("state").unwrap_or_else(|| "?".into()),
                    pid: u64_of(server, "pid"),
                    uptime_ms: u64_of(server, "uptime_ms"),
                    restarts: u64_of(server, "restarts").unwrap_or(0),
                    last_error: text("last_error").or_else(|| text("error")),
                    in_flight: u64_of(server, "in_flight").unwrap_or(0),
                    queued: u64_of(server, "queued").unwrap_or(0),
                    stderr_tail: strings(server.get("stderr_tail")),
                    withheld: strings(server.get("withheld")),
                    sandbox: server.get("sandbox").and_then(|s| s.get("achieved")).and_then(Value::as_str).map(str::to_string),
                    callers: server.get("callers").filter(|c| c.is_object()).map(callers_line),
                    cpu_ticks: process.and_then(|p| u64_of(p, "cpu_ticks")),
                    rss_bytes: process.and_then(|p| u64_of(p, "rss_bytes")),
                    ..ServerSample::default()
                })
            })
            .collect();
        for tool in snapshot.get("tools").and_then(Value::as_array).into_iter().flatten() {
            let Some(server) = tool.get("server").and_then(Value::as_str) else { continue };
            let Some(sample) = servers.iter_mut().find(|s| s.name == server) else { continue };
            let outcomes = tool.get("outcomes");
            let count = |label: &str| outcomes.and_then(|o| o.get(label)).and_then(Value::as_u64).unwrap_or(0);
            sample.errors += ERROR_OUTCOMES.iter().map(|label| count(label)).sum::<u64>();
            let latency = tool.get("latency");
            sample.calls += latency.and_then(|l| u64_of(l, "count")).unwrap_or(0);
            let buckets = latency.and_then(|l| l.get("buckets")).and_then(Value::as_array);
            for (i, bucket) in buckets.into_iter().flatten().enumerate() {
                let (Some(bound), Some(n)) = (bucket.get(0).and_then(Value::as_f64), bucket.get(1).and_then(Value::as_u64)) else {
                    continue;
                };
                match sample.latency.get_mut(i) {
                    Some(slot) if slot.0 == bound => slot.1 += n,
                    Some(_) => {}
                    None => sample.latency.push((bound, n)),
                }
            }
        }
        let calls = snapshot.get("calls").cloned().and_then(|calls| serde_json::from_value(calls).ok()).unwrap_or_default();
        Sample {
            taken_at_ms: u64_of(snapshot, "taken_at_ms").unwrap_or(0),
            ticks_per_second: u64_of(snapshot, "clock_ticks_per_second").unwrap_or(100),
            servers,
            calls,
        }
    }
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
}

/// The `q` quantile (0..1) of `count` calls from cumulative `buckets`,
/// in seconds, interpolated linearly inside its bucket; calls past the
/// last bound read as that bound. `None` without calls.
pub fn percentile(buckets: &[(f64, u64)], count: u64, q: f64) -> Option<f64> {
    if count == 0 {
        return None;
    }
    let rank = (q * count as f64).max(1.0);
    let (mut lower, mut below) = (0.0, 0u64);
    for &(bound, cumulative) in buckets {
        if cumulative as f64 >= rank {
            let inside = cumulative.saturating_sub(below).max(1) as f64;
            return Some(lower + (bound - lower) * ((rank - below as f64) / inside));
        }
        (lower, below) = (bound, cumulative);
    }
    buckets.last().map(|(bound, _)| *bound)
}

/// One server's line of `top`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub name: String,
    pub state: String,
    pub pid: Option<u64>,
    pub uptime_s: Option<f64>,
    pub restarts: u64,
    /// Why it last stopped or failed, when known.
    pub last_reason: Option<String>,
    pub in_flight: u64,
    pub queued: u64,
    pub calls: u64,
    pub calls_per_second: f64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub errors: u64,
    pub cpu_percent: Option<f64>,
    pub rss_bytes: Option<u64>,
    pub sandbox: Option<String>,
    /// Its callers' connections, when it acts as each caller.
    pub callers: Option<String>,
    pub last_stderr: Option<String>,
    /// Tools withheld by their pins: pending changes `tools --accept` shows.
    pub withheld: Vec<String>,
}

/// `N/MAX: key, key` of a server's `callers` (see `CallerCounts`).
fn callers_line(callers: &Value) -> String {
    let count = |key: &str| callers.get(key).and_then(Value::as_u64).unwrap_or(0);
    let keys = strings(callers.get("callers"));
    let who = if keys.is_empty() { "none".to_owned() } else { keys.join(", ") };
    let logins = callers.get("logins").and_then(Value::as_u64).map(|n| format!(" ({n} stored logins)")).unwrap_or_default();
    format!("{}/{}: {who}{logins}", count("connections"), count("max"))
}

/// The rows of `now`, with rates against `before` (the previous sample).
pub fn rows(before: Option<&Sample>, now: &Sample) -> Vec<Row> {
    let seconds = before.map(|b| now.taken_at_ms.saturating_sub(b.taken_at_ms) as f64 / 1000.0).filter(|s| *s > 0.0);
    now.servers
        .iter()
        .map(|server| {
            let previous = before.and_then(|b| b.servers.iter().find(|s| s.name == server.name));
            let calls_per_second = match (previous, seconds) {
                (Some(previous), Some(seconds)) => server.calls.saturating_sub(previous.calls) as f64 / seconds,
                _ => 0.0,
            };
            // CPU% only across one process: a new pid restarts the count.
            let cpu_percent = match (previous.filter(|p| p.pid == server.pid), seconds, server.cpu_ticks) {
                (Some(previous), Some(seconds), Some(ticks)) => {
                    previous.cpu_ticks.map(|was| ticks.saturating_sub(was) as f64 / now.ticks_per_second.max(1) as f64 / seconds * 100.0)
                }
                _ => None,
            };
            let ms = |q| percentile(&server.latency, server.calls, q).map(|s| s * 1000.0);
            Row {
                name: server.name.clone(),
                state: server.state.clone(),
                pid: server.pid,
                uptime_s: server.uptime_ms.map(|ms| ms as f64 / 1000.0),
                restarts: server.restarts,
                last_reason: server.last_error.clone(),
                in_flight: server.in_flight,
                queued: server.queued,
                calls: server.calls,
                calls_per_second,
                p50_ms: ms(0.5),
                p99_ms: ms(0.99),
                errors: server.errors,
                cpu_percent,
                rss_bytes: server.rss_bytes,
                sandbox: server.sandbox.clone(),
                callers: server.callers.clone(),
                last_stderr: server.stderr_tail.last().cloned(),
                withheld: server.withheld.clone(),
            }
        })
        .collect()
}

/// What `top` sorts by (`s` steps through them in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SortKey {
    #[default]
    Name,
    CallsPerSecond,
    P99,
    Errors,
    Rss,
}

impl SortKey {
    pub fn next(self) -> SortKey {
        match self {
            SortKey::Name => SortKey::CallsPerSecond,
            SortKey::CallsPerSecond => SortKey::P99,
            SortKey::P99 => SortKey::Errors,
            SortKey::Errors => SortKey::Rss,
            SortKey::Rss => SortKey::Name,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            SortKey::Name => "name",
            SortKey::CallsPerSecond => "calls/s",
            SortKey::P99 => "p99",
            SortKey::Errors => "errors",
            SortKey::Rss => "rss",
        }
    }
}

/// Sorts by `key`: names ascending, numbers descending (the busiest
/// first), unknown numbers last; ties by name.
pub fn sort(rows: &mut [Row], key: SortKey) {
    let number = |row: &Row| -> Option<f64> {
        match key {
            SortKey::Name => None,
            SortKey::CallsPerSecond => Some(row.calls_per_second),
            SortKey::P99 => row.p99_ms,
            SortKey::Errors => Some(row.errors as f64),
            SortKey::Rss => row.rss_bytes.map(|b| b as f64),
        }
    };
    rows.sort_by(|a, b| {
        let by_number = match (number(a), number(b)) {
            (Some(x), Some(y)) => y.total_cmp(&x),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        };
        by_number.then_with(|| a.name.cmp(&b.name))
    });
}

/// Keeps the rows whose name or state contains `text` (any case).
pub fn filter(rows: &mut Vec<Row>, text: &str) {
    let text = text.trim().to_lowercase();
    if !text.is_empty() {
        rows.retain(|row| row.name.to_lowercase().contains(&text) || row.state.to_lowercase().contains(&text));
    }
}

/// The pool's sums, for the header.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Totals {
    pub servers: usize,
    pub connected: usize,
    pub in_flight: u64,
    pub queued: u64,
    pub calls_per_second: f64,
    pub errors: u64,
    pub restarts: u64,
    pub rss_bytes: u64,
}

pub fn totals(rows: &[Row]) -> Totals {
    Totals {
        servers: rows.len(),
        connected: rows.iter().filter(|r| r.state == "connected").count(),
        in_flight: rows.iter().map(|r| r.in_flight).sum(),
        queued: rows.iter().map(|r| r.queued).sum(),
        calls_per_second: rows.iter().map(|r| r.calls_per_second).sum(),
        errors: rows.iter().map(|r| r.errors).sum(),
        restarts: rows.iter().map(|r| r.restarts).sum(),
        rss_bytes: rows.iter().filter_map(|r| r.rss_bytes).sum(),
    }
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
