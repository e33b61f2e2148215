//! The Prometheus text exposition format (version 0.0.4) of a
//! [`MetricsSnapshot`], for `/metrics`.
//!
//! Written by hand (see docs/decisions.md, "Operations"): one `# HELP` and
//! one `# TYPE` line per family, before its samples; counters end in
//! `_total`; a histogram has `_bucket{le=..}` samples with cumulative
//! counts ending at `le="+Inf"` (equal to `_count`), then `_sum` and
//! `_count`; label values escape `\`, `"` and newlines.

use std::fmt::Write;

use super::metrics::{FrontGauges, MetricsSnapshot, Outcome, ServerGauges};

/// Every state a server can report, so that `mcpvisor_server_state` has a
/// series per state (1 for the current one, 0 for the others).
const STATES: [&str; 6] = ["pending", "connected", "restarting", "failed", "needs_auth", "disabled"];

/// The content type to answer `/metrics` with.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

impl MetricsSnapshot {
    pub fn to_prometheus(&self) -> String {
        let mut out = String::new();
        family(&mut out, "mcpvisor_tool_calls_total", "counter", "Tool calls by server, tool and outcome.");
        for tool in &self.tools {
            for outcome in Outcome::ALL {
                let labels = labels(&[("server", &tool.server), ("tool", &tool.tool), ("outcome", outcome.label())]);
                sample(&mut out, "mcpvisor_tool_calls_total", &labels, tool.count(outcome) as f64);
            }
        }
        let name = "mcpvisor_tool_call_duration_seconds";
        family(&mut out, name, "histogram", "Time from a tool call's arrival at its connection to its answer, in seconds.");
        for tool in &self.tools {
            let base = [("server", tool.server.as_str()), ("tool", tool.tool.as_str())];
            for (bound, count) in &tool.latency.buckets {
                let le = bound.to_string();
                sample(&mut out, &format!("{name}_bucket"), &labels(&[base[0], base[1], ("le", &le)]), *count as f64);
            }
            sample(&mut out, &format!("{name}_bucket"), &labels(&[base[0], base[1], ("le", "+Inf")]), tool.latency.count as f64);
            sample(&mut out, &format!("{name}_sum"), &labels(&base), tool.latency.sum_seconds);
            sample(&mut out, &format!("{name}_count"), &labels(&base), tool.latency.count as f64);
        }
        let name = "mcpvisor_secrets_found_total";
        family(&mut out, name, "counter", "Secrets found in tool calls, by server, tool, direction, kind and what was done.");
        for tool in &self.tools {
            for found in &tool.secrets {
                let labels = labels(&[
                    ("server", &tool.server),
                    ("tool", &tool.tool),
                    ("direction", found.direction),
                    ("kind", found.kind),
                    ("action", found.action),
                ]);
                sample(&mut out, name, &labels, found.count as f64);
            }
        }
        let gauges: [(&str, &str, &str, Gauge); 3] = [
            ("mcpvisor_server_in_flight", "gauge", "Requests on the wire to the server now.", |s| s.in_flight as f64),
            ("mcpvisor_server_queued", "gauge", "Calls waiting for a slot of the server now.", |s| s.queued as f64),
            ("mcpvisor_server_restarts_total", "counter", "Restarts of the server since it was added.", |s| s.restarts as f64),
        ];
        for (name, kind, help, value) in gauges {
            family(&mut out, name, kind, help);
            for server in &self.servers {
                sample(&mut out, name, &labels(&[("server", &server.server)]), value(server));
            }
        }
        family(&mut out, "mcpvisor_server_state", "gauge", "1 for the state each server is in, 0 for the others.");
        for server in &self.servers {
            for state in STATES {
                let value = if server.state == state { 1.0 } else { 0.0 };
                sample(&mut out, "mcpvisor_server_state", &labels(&[("server", &server.server), ("state", state)]), value);
            }
        }
        family(&mut out, "mcpvisor_audit_dropped_total", "counter", "Audit lines dropped because the writer could not keep up.");
        sample(&mut out, "mcpvisor_audit_dropped_total", "", self.audit_dropped as f64);
        let name = "mcpvisor_otel_export_failures_total";
        family(&mut out, name, "counter", "OpenTelemetry exports (batches of spans or metrics) that could not be sent.");
        sample(&mut out, name, "", self.otel_export_failures as f64);
        out
    }
}

impl FrontGauges {
    pub fn to_prometheus(&self) -> String {
        let mut out = String::new();
        let gauges = [
            ("mcpvisor_gateway_sessions", "Initialize-era sessions of the HTTP front now.", self.sessions),
            ("mcpvisor_gateway_requests_open", "Requests open at the HTTP front now (listen and GET streams included).", self.requests),
            ("mcpvisor_gateway_listen_streams", "subscriptions/listen streams open now.", self.listen_streams),
            ("mcpvisor_gateway_buffered_bytes", "Bytes of events the sessions keep for resumption.", self.buffered_bytes),
        ];
        for (name, help, value) in gauges {
            family(&mut out, name, "gauge", help);
            sample(&mut out, name, "", value as f64);
        }
        let name = "mcpvisor_gateway_refusals_total";
        family(&mut out, name, "counter", "Requests the HTTP front refused with 503, by the bound they met.");
        for (bound, count) in &self.refusals {
            sample(&mut out, name, &labels(&[("bound", bound)]), *count as f64);
        }
        out
    }
}

/// How one number is read from a server's gauges.
type Gauge = fn(&ServerGauges) -> f64;

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &str, value: f64) {
    let _ = writeln!(out, "{name}{labels} {value}");
}

fn labels(pairs: &[(&str, &str)]) -> String {
    let inner: Vec<String> = pairs.iter().map(|(key, value)| format!("{key}=\"{}\"", escape(value))).collect();
    format!("{{{}}}", inner.join(","))
}

/// A label value as the format spells it: `\` → `\\`, `"` → `\"`, newline → `\n`.
fn escape(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(labels(&[("tool", "a\"b\\c\nd")]), r#"{tool="a\"b\\c\nd"}"#);
    }
}
