//! What screening tool calls for secrets costs (issue 34, secrets in
//! transit), in one run:
//!
//! - end to end: the same runtime and `mcpvisor demo-server` child over
//!   stdio, `echo` called with a text of about 1 KiB that comes back as its
//!   result (so each call screens the text twice: arguments and result).
//!   Modes: `clean` (prose the pre-check clears: one pass, nothing else),
//!   `trigger` (prose with words the pre-check stops at, `key`, `token`:
//!   the full screen runs and finds nothing), `secret` (a PEM key and a
//!   configured token: found, masked, counted), `secret, allow` (found,
//!   counted, let through). Each round starts a runtime per mode, warms up
//!   with 200 calls, then times CALLS calls (default 4,000), CONCURRENCY
//!   at a time; modes alternate within a round;
//! - the screen alone (`SecretScreen::result` on the same 1 KiB result,
//!   no runtime): the check's own cost per call, to set beside the time a
//!   call takes, which is the ratio to the same path without the check.
//!
//! `cargo bench --bench secrets` prints the medians of ROUNDS rounds
//! (default 5): reported, never asserted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpvisor::config::redact::Redactor;
use mcpvisor::config::{RuntimeConfig, SecretsMode, SecretsPolicy, ServerConfig};
use mcpvisor::{CallToolResult, ContentBlock, Handle, Runtime};
use mcpvisor_services::integrity::secrets::{SecretBook, SecretScreen};
use mcpvisor_services::telemetry::{CallStart, Telemetry};
use serde_json::json;

const SERVER: &str = env!("CARGO_BIN_EXE_mcpvisor");
const CONCURRENCY: usize = 16;
/// A configured secret of the bench's second server, `vault`.
const TOKEN: &str = "zq7-Vault-9f3b2c1d8e4a";
const KEY: &str = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAsecretsecretsecretsecret\n-----END RSA PRIVATE KEY-----";

/// About 1 KiB of prose: without trigger words, or with them.
fn text(mode: Mode) -> String {
    let clean = "The quick brown fox jumps over the lazy dog while the river runs past the old mill. ";
    let trigger = "The monkey found the key to the room and counted each token of the old arcade. ";
    match mode {
        Mode::Clean => clean.repeat(12),
        Mode::Trigger => trigger.repeat(13),
        Mode::Secret | Mode::SecretAllow => format!("{}{KEY}\nvault: {TOKEN}\n{}", clean.repeat(5), clean.repeat(5)),
    }
}

#[derive(Clone, Copy)]
enum Mode {
    Clean,
    Trigger,
    Secret,
    SecretAllow,
}

const MODES: [(Mode, &str); 4] =
    [(Mode::Clean, "clean"), (Mode::Trigger, "trigger"), (Mode::Secret, "secret (masked)"), (Mode::SecretAllow, "secret, allow")];

fn main() {
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    let calls: usize = std::env::var("CALLS").ok().and_then(|c| c.parse().ok()).unwrap_or(4_000);
    let tokio = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio");
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    for _ in 0..rounds {
        for (i, (mode, _)) in MODES.iter().enumerate() {
            rates[i].push(tokio.block_on(measure(*mode, calls)));
        }
    }
    let median = |values: &[f64]| {
        let mut values = values.to_vec();
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    println!("| mode | calls/s ({calls} calls of echo with ~1 KiB, {CONCURRENCY} at a time) | µs per call | / clean |");
    println!("|---|---:|---:|---:|");
    let clean = median(&rates[0]);
    for (i, (_, name)) in MODES.iter().enumerate() {
        let rate = median(&rates[i]);
        println!("| {name} | {rate:.0} | {:.1} | {:.3} |", 1e6 / rate, rate / clean);
    }
    println!("\nThe screen alone, per result of ~1 KiB (SecretScreen::result, no runtime):\n");
    println!("| mode | ns per result | share of a clean call's µs |");
    println!("|---|---:|---:|");
    for (mode, name) in MODES {
        let nanos = screen_alone(mode);
        println!("| {name} | {nanos:.0} | {:.2} % |", nanos / 1e3 / (1e6 / clean) * 100.0);
    }
    println!("\n({rounds} rounds, medians)");
}

/// The two servers: `demo` (set to `mode`'s setting) and `vault`, which only holds the token.
fn servers(mode: Mode) -> Vec<ServerConfig> {
    let mut demo = ServerConfig::stdio("demo", SERVER, ["demo-server"]);
    if let Mode::SecretAllow = mode {
        demo.secrets = SecretsPolicy::both(SecretsMode::Allow);
    }
    let mut vault = ServerConfig::stdio("vault", SERVER, ["demo-server"]).with_env("VAULT_TOKEN", TOKEN);
    vault.enabled = false;
    vec![demo, vault]
}

/// One runtime: calls per second.
async fn measure(mode: Mode, calls: usize) -> f64 {
    let handle = Runtime::builder(RuntimeConfig::new(servers(mode))).start().expect("the runtime starts");
    assert!(handle.wait_ready(Duration::from_secs(30)).await, "the demo server did not connect");
    let text = Arc::new(text(mode));
    run_calls(&handle, 200, &text, mode).await;
    let started = Instant::now();
    run_calls(&handle, calls, &text, mode).await;
    let rate = calls as f64 / started.elapsed().as_secs_f64();
    let metrics = handle.metrics().await;
    let found = metrics.tool("demo", "echo").map_or(0, |tool| tool.secrets.iter().map(|found| found.count).sum::<u64>());
    match mode {
        Mode::Clean | Mode::Trigger => assert_eq!(found, 0, "nothing to find, yet something was found"),
        Mode::Secret | Mode::SecretAllow => assert!(found > 0, "the secrets were not found"),
    }
    handle.shutdown().await;
    rate
}

/// `calls` calls of `echo` with `text`, `CONCURRENCY` at a time; every one
/// must succeed, and a masked secret must not come back.
async fn run_calls(handle: &Handle, calls: usize, text: &Arc<String>, mode: Mode) {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let workers: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let (handle, next, text) = (handle.clone(), next.clone(), text.clone());
            tokio::spawn(async move {
                while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < calls {
                    let answer = handle.call_tool("mcp__demo__echo", json!({"text": text.as_str()})).await;
                    let result = answer.expect("a call failed");
                    if let Mode::Secret = mode {
                        assert!(!format!("{:?}", result.content).contains(TOKEN), "the token came back");
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("a worker");
    }
}

/// Nanoseconds per `SecretScreen::result` of a ~1 KiB result.
fn screen_alone(mode: Mode) -> f64 {
    let book = SecretBook::default();
    let configs = servers(mode);
    book.learn(&configs);
    let screen = SecretScreen::new(&configs[0], book);
    let telemetry = Telemetry::default();
    let stats = telemetry.metrics().tool("demo", "echo");
    let result = CallToolResult::success(vec![ContentBlock::text(text(mode))]);
    let rounds = 20_000;
    let mut spent = Duration::ZERO;
    for _ in 0..rounds {
        let input = result.clone();
        let mut watch = telemetry.watch(CallStart {
            server: "demo",
            tool: "echo",
            caller: None,
            identity: None,
            upstream: None,
            arguments: None,
            redactor: &Redactor::default(),
            stats: stats.clone(),
            era: "legacy",
            parent: None,
        });
        let started = Instant::now();
        let screened = screen.result(Ok(input), &mut watch);
        spent += started.elapsed();
        watch.finish(&screened);
    }
    spent.as_nanos() as f64 / rounds as f64
}
