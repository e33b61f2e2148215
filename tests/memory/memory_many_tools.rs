//! A server listing 50,000 tools in one `tools/list` answer: the runtime's
//! peak memory stays a small multiple of the answer's size (measured
//! numbers in docs/benchmarks.md). It holds `crate::alone()`, so that
//! the process's memory is this test's.

use std::time::Duration;

use mcpvisor::config::{RuntimeConfig, ServerConfig};
use mcpvisor::Runtime;

const TOOLS: usize = 50_000;
const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/misbehaving_server.py");

/// The process's peak resident memory in KiB.
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
}

/// The size of the server's `tools/list` answer, in KiB.
fn answer_kib() -> u64 {
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("echo '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}}' | python3 {FIXTURE} many-tools {TOOLS} | wc -c"))
        .output()
        .expect("the fixture runs");
    String::from_utf8_lossy(&output.stdout).trim().parse::<u64>().expect("a byte count") / 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_tool_list_costs_a_small_multiple_of_its_size() {
    let _alone = crate::alone().await;
    let answer = answer_kib();
    let before = peak_kib();
    let server = ServerConfig::stdio("many", "python3", [FIXTURE.to_string(), "many-tools".into(), TOOLS.to_string()]);
    let handle = Runtime::start(RuntimeConfig::new([server])).unwrap();
    assert!(handle.wait_ready(Duration::from_secs(60)).await, "the server did not settle");
    let tools = handle.list_tools().await;
    assert_eq!(tools.len(), TOOLS);
    let grown = peak_kib().saturating_sub(before);
    eprintln!("peak grew by {grown} KiB for a {answer} KiB answer");
    // Before the listing was read without copies, `mcpvisor call` peaked at 26 times (docs/benchmarks.md).
    assert!(grown <= 10 * answer, "peak memory grew by {grown} KiB for a {answer} KiB answer");
    drop(tools);
    handle.shutdown().await;
}
