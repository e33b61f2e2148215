//! What tool pins cost a call: the same runtime, the same server, with
//! pins (`RuntimeBuilder::pin_tools`) and without, in one run.
//!
//! The server is `mcpvisor demo-server` (a real child process over stdio).
//! Each round starts a runtime in each mode, waits until the server is
//! connected (its first listing: every tool's definition digested and the
//! pins file written, with pins), then times CALLS calls of its `echo`,
//! CONCURRENCY at a time. Modes alternate within a round, so a machine
//! that slows down slows both. `cargo bench --bench pins` prints the
//! medians of ROUNDS rounds (env `ROUNDS`, default 5; `CALLS`, default
//! 4,000) and the ratio with pins to without: reported, never asserted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpvisor::config::{RuntimeConfig, ServerConfig};
use mcpvisor::{Handle, Runtime};
use serde_json::json;

const SERVER: &str = env!("CARGO_BIN_EXE_mcpvisor");
const CONCURRENCY: usize = 16;

fn main() {
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    let calls: usize = std::env::var("CALLS").ok().and_then(|c| c.parse().ok()).unwrap_or(4_000);
    let tokio = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio");
    let mut runs: [Vec<(f64, f64)>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..rounds {
        for (i, pinned) in [false, true].into_iter().enumerate() {
            runs[i].push(tokio.block_on(measure(pinned, calls)));
        }
    }
    let median = |values: Vec<f64>| {
        let mut values = values;
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let ready = |i: usize| median(runs[i].iter().map(|run| run.0).collect());
    let rate = |i: usize| median(runs[i].iter().map(|run| run.1).collect());
    println!("| mode | first listing, ms | calls/s ({calls} calls, {CONCURRENCY} at a time) | µs per call |");
    println!("|---|---:|---:|---:|");
    for (i, mode) in ["without pins", "with pins"].iter().enumerate() {
        println!("| {mode} | {:.1} | {:.0} | {:.1} |", ready(i) * 1e3, rate(i), 1e6 / rate(i));
    }
    println!(
        "\nwith pins / without: first listing {:.2}x, calls per second {:.3}x ({rounds} rounds, medians)",
        ready(1) / ready(0),
        rate(1) / rate(0)
    );
}

/// One runtime: (seconds until the server was connected, calls per second).
async fn measure(pinned: bool, calls: usize) -> (f64, f64) {
    let state = tempfile::tempdir().expect("temp dir");
    let config = RuntimeConfig::new([ServerConfig::stdio("demo", SERVER, ["demo-server"])]);
    let mut builder = Runtime::builder(config);
    if pinned {
        builder = builder.pin_tools(state.path().join("tool-pins.json"));
    }
    let started = Instant::now();
    let handle = builder.start().expect("the runtime starts");
    assert!(handle.wait_ready(Duration::from_secs(30)).await, "the demo server did not connect");
    let ready = started.elapsed().as_secs_f64();
    // The listing is done once a call is answered; warm up past it.
    run_calls(&handle, 200).await;
    let started = Instant::now();
    run_calls(&handle, calls).await;
    let rate = calls as f64 / started.elapsed().as_secs_f64();
    if pinned {
        let pins = std::fs::read_to_string(state.path().join("tool-pins.json")).unwrap_or_default();
        assert!(pins.contains("\"echo\""), "pins were on, yet the demo server's tools were not pinned");
    }
    handle.shutdown().await;
    (ready, rate)
}

/// `calls` calls of `echo`, `CONCURRENCY` at a time; every one must succeed.
async fn run_calls(handle: &Handle, calls: usize) {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let workers: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let (handle, next) = (handle.clone(), next.clone());
            tokio::spawn(async move {
                while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < calls {
                    let answer = handle.call_tool("mcp__demo__echo", json!({"text": "x"})).await;
                    assert!(answer.is_ok_and(|result| result.is_error != Some(true)), "a call failed");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("a worker");
    }
}
