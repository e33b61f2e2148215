//! Metrics after real calls to the demo server, read from `Handle::metrics`
//! and from the Prometheus text, which a strict parser of the exposition
//! format reads back.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::demo;
use mcpvisor::config::RuntimeConfig;
use mcpvisor::telemetry::{MetricsSnapshot, Outcome};
use mcpvisor::{CallError, CallTool, Runtime};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_counted_by_outcome_timed_and_rendered_for_prometheus() {
    let handle = Runtime::start(RuntimeConfig::new([demo("demo", &[]), demo("idle \"quoted\"", &[])])).unwrap();
    assert!(handle.wait_ready(Duration::from_secs(20)).await);
    for i in 0..3 {
        handle.call_tool("mcp__demo__echo", json!({"text": format!("{i}")})).await.unwrap();
    }
    let failed = handle.call_tool("mcp__demo__fail", json!({"message": "no"})).await.unwrap();
    assert_eq!(failed.is_error, Some(true));
    let slow = handle.call(CallTool::new("mcp__demo__sleep", json!({"ms": 5_000})).with_timeout(Duration::from_millis(50))).await;
    assert!(matches!(slow, Err(CallError::Timeout { .. })), "{slow:?}");
    let invalid = handle.call_tool("mcp__demo__add", json!({"a": 1})).await;
    assert!(matches!(invalid, Err(CallError::InvalidArguments { .. })), "{invalid:?}");

    let metrics = handle.metrics().await;
    let echo = metrics.tool("demo", "echo").expect("echo was counted");
    assert_eq!((echo.count(Outcome::Ok), echo.count(Outcome::Error), echo.latency.count), (3, 0, 3));
    assert!(echo.latency.sum_seconds > 0.0);
    assert_eq!(echo.latency.buckets.last().map(|b| b.1), Some(3), "every call within the last bound");
    assert_eq!(metrics.tool("demo", "fail").unwrap().count(Outcome::ToolError), 1);
    let sleep = metrics.tool("demo", "sleep").unwrap();
    assert_eq!(sleep.count(Outcome::Timeout), 1);
    assert!(sleep.latency.sum_seconds >= 0.05, "a timed-out call took at least its time-out");
    assert_eq!(metrics.tool("demo", "add").unwrap().count(Outcome::Error), 1);
    let demo = metrics.server("demo").unwrap();
    assert_eq!((demo.state, demo.restarts), ("connected", 0));

    let text = metrics.to_prometheus();
    let families = parse_exposition(&text).unwrap_or_else(|error| panic!("{error}\n{text}"));
    let calls = &families["mcpvisor_tool_calls_total"];
    assert_eq!(calls.kind, "counter");
    let sample = |family: &Family, labels: &[(&str, &str)]| {
        let wanted: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        family.samples.iter().find(|s| s.labels == wanted).map(|s| s.value)
    };
    assert_eq!(sample(calls, &[("server", "demo"), ("tool", "echo"), ("outcome", "ok")]), Some(3.0));
    assert_eq!(sample(calls, &[("server", "demo"), ("tool", "sleep"), ("outcome", "timeout")]), Some(1.0));
    let latency = &families["mcpvisor_tool_call_duration_seconds"];
    assert_eq!(latency.kind, "histogram");
    assert_eq!(sample(latency, &[("server", "demo"), ("tool", "echo"), ("le", "+Inf")]), Some(3.0));
    let state = &families["mcpvisor_server_state"];
    assert_eq!(sample(state, &[("server", "demo"), ("state", "connected")]), Some(1.0));
    assert_eq!(sample(state, &[("server", "idle \"quoted\""), ("state", "connected")]), Some(1.0), "escaped label read back");
    assert_eq!(sample(&families["mcpvisor_server_restarts_total"], &[("server", "demo")]), Some(0.0));
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_who_goes_away_is_counted_as_cancelled() {
    let handle = Runtime::start(RuntimeConfig::new([demo("demo", &[])])).unwrap();
    assert!(handle.wait_ready(Duration::from_secs(20)).await);
    let call = handle.call(CallTool::new("mcp__demo__sleep", json!({"ms": 60_000})));
    let _ = tokio::time::timeout(Duration::from_millis(100), call).await;
    let cancelled = wait_for(&handle, |m| m.tool("demo", "sleep").is_some_and(|t| t.count(Outcome::Cancelled) == 1)).await;
    assert_eq!(cancelled.tool("demo", "sleep").unwrap().latency.count, 1);
    handle.shutdown().await;
}

async fn wait_for(handle: &mcpvisor::Handle, done: impl Fn(&MetricsSnapshot) -> bool) -> MetricsSnapshot {
    for _ in 0..2000 {
        let metrics = handle.metrics().await;
        if done(&metrics) {
            return metrics;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the metrics never showed it: {:?}", handle.metrics().await);
}

struct Family {
    kind: String,
    samples: Vec<Sample>,
}

struct Sample {
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A strict reader of the text exposition format 0.0.4: every family has
/// one HELP and one TYPE line before its samples, sample names belong to
/// the family (`_bucket`/`_sum`/`_count` for histograms, counters end in
/// `_total`), label values are quoted with only `\\`, `\"` and `\n`
/// escapes, histogram buckets are cumulative, end at `+Inf` and equal
/// `_count`, and no series appears twice.
fn parse_exposition(text: &str) -> Result<BTreeMap<String, Family>, String> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    let mut helped: Option<String> = None;
    let mut current: Option<String> = None;
    let mut seen = std::collections::HashSet::new();
    let metric_name = |s: &str| {
        !s.is_empty()
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
            && !s.starts_with(|c: char| c.is_ascii_digit())
    };
    for (n, line) in text.lines().enumerate() {
        let n = n + 1;
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').ok_or(format!("line {n}: HELP without text"))?;
            if !metric_name(name) || help.is_empty() || families.contains_key(name) {
                return Err(format!("line {n}: bad or repeated HELP"));
            }
            helped = Some(name.to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').ok_or(format!("line {n}: TYPE without a type"))?;
            if helped.as_deref() != Some(name) || !["counter", "gauge", "histogram"].contains(&kind) {
                return Err(format!("line {n}: TYPE must follow its HELP and name a known type"));
            }
            if kind == "counter" && !name.ends_with("_total") {
                return Err(format!("line {n}: counter {name} must end in _total"));
            }
            families.insert(name.to_string(), Family { kind: kind.to_string(), samples: Vec::new() });
            current = Some(name.to_string());
        } else if line.starts_with('#') || line.is_empty() {
            return Err(format!("line {n}: unexpected comment or blank line"));
        } else {
            let family_name = current.clone().ok_or(format!("line {n}: sample before any TYPE"))?;
            let (series, value) = line.rsplit_once(' ').ok_or(format!("line {n}: no value"))?;
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v.parse().map_err(|_| format!("line {n}: bad value {v}"))?,
            };
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}').ok_or(format!("line {n}: unclosed labels"))?, n)?),
                None => (series, BTreeMap::new()),
            };
            let family = families.get_mut(&family_name).unwrap();
            let allowed = match family.kind.as_str() {
                "histogram" => ["_bucket", "_sum", "_count"].iter().any(|s| name == format!("{family_name}{s}")),
                _ => name == family_name,
            };
            if !allowed {
                return Err(format!("line {n}: sample {name} does not belong to {family_name}"));
            }
            if name.ends_with("_bucket") && !labels.contains_key("le") {
                return Err(format!("line {n}: bucket without le"));
            }
            if !seen.insert(format!("{name}{labels:?}")) {
                return Err(format!("line {n}: series repeated"));
            }
            let key = if name == family_name {
                labels.clone()
            } else {
                labels.clone().into_iter().chain([("__name__".to_string(), name.to_string())]).collect()
            };
            family.samples.push(Sample { labels: if name.ends_with("_bucket") || name == family_name { labels } else { key }, value });
        }
    }
    for (name, family) in &families {
        if family.kind != "histogram" {
            continue;
        }
        let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for s in family.samples.iter().filter(|s| s.labels.contains_key("le")) {
            let mut rest = s.labels.clone();
            let le = rest.remove("le").unwrap();
            let bound = if le == "+Inf" { f64::INFINITY } else { le.parse().map_err(|_| format!("{name}: bad le {le}"))? };
            series.entry(format!("{rest:?}")).or_default().push((bound, s.value));
        }
        for (labels, buckets) in series {
            if !buckets.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1) || buckets.last().map(|b| b.0) != Some(f64::INFINITY) {
                return Err(format!("{name}{labels}: buckets not ascending and cumulative up to +Inf"));
            }
            let count = family.samples.iter().find(|s| {
                s.labels.get("__name__").is_some_and(|n| n.ends_with("_count")) && {
                    let mut l = s.labels.clone();
                    l.remove("__name__");
                    format!("{l:?}") == labels
                }
            });
            if count.map(|c| c.value) != buckets.last().map(|b| b.1) {
                return Err(format!("{name}{labels}: _count differs from the +Inf bucket"));
            }
        }
    }
    Ok(families)
}

fn parse_labels(text: &str, n: usize) -> Result<BTreeMap<String, String>, String> {
    let mut labels = BTreeMap::new();
    let mut chars = text.chars().peekable();
    while chars.peek().is_some() {
        let name: String = std::iter::from_fn(|| chars.next_if(|c| *c != '=')).collect();
        if name.is_empty()
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            || chars.next() != Some('=')
            || chars.next() != Some('"')
        {
            return Err(format!("line {n}: bad label name {name:?}"));
        }
        let mut value = String::new();
        loop {
            match chars.next() {
                Some('\\') => match chars.next() {
                    Some('\\') => value.push('\\'),
                    Some('"') => value.push('"'),
                    Some('n') => value.push('\n'),
                    other => return Err(format!("line {n}: bad escape {other:?}")),
                },
                Some('"') => break,
                Some('\n') | None => return Err(format!("line {n}: unterminated label value")),
                Some(c) => value.push(c),
            }
        }
        if labels.insert(name, value).is_some() {
            return Err(format!("line {n}: label repeated"));
        }
        match chars.next() {
            Some(',') | None => {}
            other => return Err(format!("line {n}: expected , after a label, got {other:?}")),
        }
    }
    Ok(labels)
}

/// Secrets found in a call are counted by kind, direction and action, and
/// `/metrics` renders them (issue 34): a private key sent to `echo` is
/// masked before it is written, so only the arguments count it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_found_are_counted_and_rendered_for_prometheus() {
    let handle = Runtime::start(RuntimeConfig::new([demo("demo", &[])])).unwrap();
    assert!(handle.wait_ready(Duration::from_secs(20)).await);
    let key = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIsecretsecret\n-----END EC PRIVATE KEY-----";
    let echoed = handle.call_tool("mcp__demo__echo", json!({"text": format!("mine: {key}")})).await.unwrap();
    assert_eq!(echoed.content[0].as_text().map(|text| text.text.as_str()), Some("mine: ***"), "masked before the server saw it");
    let metrics = handle.metrics().await;
    let echo = metrics.tool("demo", "echo").unwrap();
    let found: Vec<_> = echo.secrets.iter().map(|found| (found.direction, found.kind, found.action, found.count)).collect();
    assert_eq!(found, [("arguments", "private_key", "masked", 1)]);
    let text = metrics.to_prometheus();
    let families = parse_exposition(&text).unwrap_or_else(|error| panic!("{error}\n{text}"));
    let secrets = &families["mcpvisor_secrets_found_total"];
    assert_eq!(secrets.kind, "counter");
    let labels: BTreeMap<String, String> =
        [("server", "demo"), ("tool", "echo"), ("direction", "arguments"), ("kind", "private_key"), ("action", "masked")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    assert_eq!(secrets.samples.iter().find(|sample| sample.labels == labels).map(|sample| sample.value), Some(1.0), "{text}");
    handle.shutdown().await;
}
