use serde_json::json;

use super::*;

fn tool(server: &str, ok: u64, errors: u64, buckets: Value) -> Value {
    let count = ok + errors;
    json!({"server": server, "tool": "t", "outcomes": {"ok": ok, "error": errors, "cancelled": 7},
           "latency": {"buckets": buckets, "count": count, "sum_seconds": 0.0}})
}

fn snapshot(at_ms: u64, calls: u64, ticks: u64, pid: u64) -> Value {
    json!({
        "taken_at_ms": at_ms,
        "clock_ticks_per_second": 100,
        "servers": [
            {"name": "alpha", "state": "connected", "pid": pid, "uptime_ms": 1500, "restarts": 2, "in_flight": 1, "queued": 3,
             "stderr_tail": ["one", "last line"], "sandbox": {"achieved": "landlock"}, "process": {"cpu_ticks": ticks, "rss_bytes": 4096}},
            {"name": "beta", "state": "failed", "error": "exited with 1", "pid": null, "process": null},
        ],
        "tools": [tool("alpha", calls, 1, json!([[0.01, calls / 2], [0.1, calls], [1.0, calls + 1]]))],
        "calls": [{"server": "alpha", "tool": "t", "outcome": "ok", "duration_ms": 3.5, "ended_at_ms": at_ms}],
    })
}

#[test]
fn a_snapshot_is_read_into_samples_and_missing_fields_are_unknown() {
    let sample = Sample::parse(&snapshot(1000, 10, 50, 7));
    let alpha = &sample.servers[0];
    assert_eq!((alpha.calls, alpha.errors), (11, 1), "cancelled calls are not errors");
    assert_eq!(alpha.latency, vec![(0.01, 5), (0.1, 10), (1.0, 11)]);
    assert_eq!((alpha.cpu_ticks, alpha.rss_bytes, alpha.sandbox.as_deref()), (Some(50), Some(4096), Some("landlock")));
    let beta = &sample.servers[1];
    assert_eq!((beta.pid, beta.cpu_ticks, beta.last_error.as_deref()), (None, None, Some("exited with 1")));
    assert_eq!(sample.calls.len(), 1);
    assert_eq!(Sample::parse(&json!({"servers": "nonsense", "tools": [1, 2]})), Sample { ticks_per_second: 100, ..Sample::default() });
}

#[test]
fn rates_come_from_the_difference_between_two_samples() {
    let before = Sample::parse(&snapshot(1000, 10, 50, 7));
    let now = Sample::parse(&snapshot(3000, 30, 150, 7));
    let rows = rows(Some(&before), &now);
    let alpha = &rows[0];
    assert_eq!(alpha.calls_per_second, 10.0, "20 calls in 2 s");
    assert_eq!(alpha.cpu_percent, Some(50.0), "100 ticks at 100/s in 2 s");
    assert_eq!(alpha.last_stderr.as_deref(), Some("last line"));
    assert_eq!(rows[1].cpu_percent, None);
    let first = super::rows(None, &now);
    assert_eq!((first[0].calls_per_second, first[0].cpu_percent), (0.0, None), "no rate from one sample");
    let restarted = Sample::parse(&snapshot(3000, 30, 5, 8));
    assert_eq!(super::rows(Some(&before), &restarted)[0].cpu_percent, None, "a new pid has no CPU rate yet");
}

#[test]
fn percentiles_interpolate_inside_the_bucket() {
    let buckets = [(0.01, 50), (0.1, 100)];
    assert_eq!(percentile(&buckets, 100, 0.5), Some(0.01));
    let p99 = percentile(&buckets, 100, 0.99).unwrap();
    assert!((p99 - (0.01 + 0.09 * 49.0 / 50.0)).abs() < 1e-9, "{p99}");
    assert_eq!(percentile(&buckets, 0, 0.5), None);
    assert_eq!(percentile(&[(0.01, 0), (0.1, 0)], 4, 0.5), Some(0.1), "calls past the last bound read as it");
    let p50 = percentile(&[(0.001, 0), (0.0025, 2)], 2, 0.5).unwrap();
    assert!(p50 > 0.001 && p50 < 0.0025, "{p50}");
}

fn row(name: &str, calls_per_second: f64, p99: Option<f64>, errors: u64, rss: Option<u64>) -> Row {
    let mut row = rows(None, &Sample::parse(&json!({"servers": [{"name": name, "state": "connected"}]}))).remove(0);
    (row.calls_per_second, row.p99_ms, row.errors, row.rss_bytes) = (calls_per_second, p99, errors, rss);
    row
}

#[test]
fn sorting_puts_the_busiest_first_and_unknowns_last() {
    let mut rows = vec![row("b", 1.0, None, 5, Some(10)), row("a", 3.0, Some(2.0), 0, None), row("c", 3.0, Some(9.0), 1, Some(30))];
    let names = |rows: &[Row]| rows.iter().map(|r| r.name.clone()).collect::<Vec<_>>().join("");
    sort(&mut rows, SortKey::Name);
    assert_eq!(names(&rows), "abc");
    sort(&mut rows, SortKey::CallsPerSecond);
    assert_eq!(names(&rows), "acb", "ties by name");
    sort(&mut rows, SortKey::P99);
    assert_eq!(names(&rows), "cab");
    sort(&mut rows, SortKey::Errors);
    assert_eq!(names(&rows), "bca");
    sort(&mut rows, SortKey::Rss);
    assert_eq!(names(&rows), "cba");
    let mut key = SortKey::Name;
    for _ in 0..5 {
        key = key.next();
    }
    assert_eq!(key, SortKey::Name, "s cycles through the five keys");
}

#[test]
fn filtering_matches_names_and_states_in_any_case() {
    let mut rows = vec![row("Alpha", 0.0, None, 0, None), row("beta", 0.0, None, 0, None)];
    filter(&mut rows, "ALP");
    assert_eq!(rows.len(), 1);
    let mut rows = vec![row("alpha", 0.0, None, 0, None), row("beta", 0.0, None, 0, None)];
    filter(&mut rows, "  ");
    assert_eq!(rows.len(), 2, "a blank filter keeps everything");
    filter(&mut rows, "connect");
    assert_eq!(rows.len(), 2);
    filter(&mut rows, "zzz");
    assert!(rows.is_empty());
    let totals = totals(&[row("a", 1.5, None, 2, Some(10)), row("b", 2.0, None, 1, None)]);
    assert_eq!((totals.servers, totals.connected, totals.calls_per_second, totals.errors, totals.rss_bytes), (2, 2, 3.5, 3, 10));
}
