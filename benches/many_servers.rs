//! Starting many servers: mcpvisor against a floor, N = 10, 100, 1,000.
//!
//! Each measurement runs in a child process of its own (so its peak RSS is
//! its own, read with `wait4`), against N copies of `mcpvisor demo-server`:
//! - `floor`: raw tokio, nothing else: spawn N servers, complete
//!   `initialize` + `notifications/initialized` + every page of
//!   `tools/list` with each, close their stdin, wait for them all;
//! - `runtime`: `Runtime::start` with the N servers, wait until every one
//!   is connected, `shutdown().await` (the library path);
//! - `cli`: `mcpvisor --config FILE --max-servers N status` (the command a
//!   person runs; above 200 servers it must be told that many are meant).
//!
//! `cargo bench --bench many_servers [-- N...]` prints one table; times are
//! wall-clock medians of ROUNDS runs (env `ROUNDS`, default 3), ratios are to
//! the floor of the same round, "KB/conn" is (peak RSS − the same mode's
//! peak with one server) / (N − 1). Timings are reported, never asserted.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const SERVER: &str = env!("CARGO_BIN_EXE_mcpvisor");
const MODES: [&str; 3] = ["floor", "runtime", "cli"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    if args.first().map(String::as_str) == Some("--child") {
        return child(&args[1], args[2].parse().expect("N"));
    }
    let sizes: Vec<usize> = if args.is_empty() { vec![10, 100, 1000] } else { args.iter().filter_map(|a| a.parse().ok()).collect() };
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(3);
    // One server is the baseline (a named configuration must define one).
    let one: Vec<u64> = MODES.iter().map(|mode| measure(mode, 1).1).collect();
    println!("| N | floor s | runtime s (x floor) | cli status s (x floor) | floor KB/conn | runtime KB/conn | cli KB/conn |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for n in sizes {
        let mut runs: Vec<Vec<(f64, u64)>> = vec![Vec::new(); MODES.len()];
        for _ in 0..rounds {
            for (i, mode) in MODES.iter().enumerate() {
                runs[i].push(measure(mode, n));
            }
        }
        let median = |i: usize| {
            let mut seconds: Vec<f64> = runs[i].iter().map(|r| r.0).collect();
            seconds.sort_by(f64::total_cmp);
            seconds[seconds.len() / 2]
        };
        let peak = |i: usize| runs[i].iter().map(|r| r.1).max().unwrap_or(0);
        let per_conn = |i: usize| peak(i).saturating_sub(one[i]) as f64 / n.saturating_sub(1).max(1) as f64;
        let (floor, runtime, cli) = (median(0), median(1), median(2));
        println!(
            "| {n} | {floor:.3} | {runtime:.3} ({:.2}x) | {cli:.3} ({:.2}x) | {:.0} | {:.0} | {:.0} |",
            runtime / floor,
            cli / floor,
            per_conn(0),
            per_conn(1),
            per_conn(2)
        );
        std::io::stdout().flush().ok();
    }
}

/// Runs one mode in a child process: (wall seconds, peak RSS in KB).
fn measure(mode: &str, n: usize) -> (f64, u64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut command = match mode {
        "cli" => {
            let config = dir.path().join("servers.toml");
            let table: String = (0..n).map(|i| format!("[servers.s{i}]\ncommand = {SERVER:?}\nargs = [\"demo-server\"]\n\n")).collect();
            std::fs::write(&config, table).expect("config");
            let mut command = Command::new(SERVER);
            command
                .arg("--config")
                .arg(&config)
                .arg("--max-servers")
                .arg(n.max(1).to_string())
                .arg("status")
                .env("XDG_CONFIG_HOME", dir.path())
                .current_dir(dir.path());
            command
        }
        _ => {
            let mut command = Command::new(std::env::current_exe().expect("own path"));
            command.args(["--child", mode, &n.to_string()]);
            command
        }
    };
    let started = Instant::now();
    // Reaped by `wait4` below, which also gives its peak RSS.
    #[allow(clippy::zombie_processes)]
    let child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("spawn");
    let (status, rusage) = wait4(child.id() as i32);
    let seconds = started.elapsed().as_secs_f64();
    assert!(status == 0, "{mode} with N = {n} exited with status {status}");
    (seconds, rusage.ru_maxrss as u64)
}

fn wait4(pid: i32) -> (i32, libc::rusage) {
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; we wait for our own child.
    let mut rusage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for; both pointers are valid.
    unsafe { libc::wait4(pid, &mut status, 0, &mut rusage) };
    (status, rusage)
}

fn child(mode: &str, n: usize) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio");
    match mode {
        "floor" => runtime.block_on(floor(n)),
        "runtime" => runtime.block_on(through_runtime(n)),
        other => panic!("unknown mode {other}"),
    }
}

async fn through_runtime(n: usize) {
    use mcpvisor::config::{RuntimeConfig, ServerConfig};
    let servers = (0..n).map(|i| ServerConfig::stdio(format!("s{i}"), SERVER, ["demo-server"]));
    let handle = mcpvisor::Runtime::start(RuntimeConfig::new(servers)).expect("runtime");
    assert!(handle.wait_ready(Duration::from_secs(120)).await, "every server connects");
    let connected = handle.status().await.iter().filter(|s| s.state == mcpvisor::ServerState::Connected).count();
    assert_eq!(connected, n);
    handle.shutdown().await;
}

async fn floor(n: usize) {
    let servers: Vec<_> = (0..n).map(|_| tokio::spawn(handshake())).collect();
    let mut children = Vec::new();
    for server in servers {
        children.push(server.await.expect("handshake task"));
    }
    let waits: Vec<_> = children.into_iter().map(|mut child| tokio::spawn(async move { child.wait().await })).collect();
    for wait in waits {
        wait.await.expect("wait task").expect("exit");
    }
}

/// One server: spawn, initialize, list every page of tools; returns it with stdin closed.
async fn handshake() -> tokio::process::Child {
    let mut child = tokio::process::Command::new(SERVER)
        .arg("demo-server")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("spawn demo-server");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let ask = |id: u64, method: &str, params: Value| {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string() + "\n";
        line.into_bytes()
    };
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "floor", "version": "0"}});
    stdin.write_all(&ask(1, "initialize", init)).await.expect("write");
    answer(&mut lines, 1).await;
    stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n").await.expect("write");
    let (mut id, mut cursor) = (2, None::<Value>);
    loop {
        let params = cursor.take().map(|c| json!({"cursor": c})).unwrap_or_else(|| json!({}));
        stdin.write_all(&ask(id, "tools/list", params)).await.expect("write");
        let page = answer(&mut lines, id).await;
        match page["result"].get("nextCursor") {
            Some(next) if !next.is_null() => cursor = Some(next.clone()),
            _ => break,
        }
        id += 1;
    }
    drop(stdin);
    child
}

async fn answer(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>, id: u64) -> Value {
    while let Some(line) = lines.next_line().await.expect("read") {
        let message: Value = serde_json::from_str(&line).expect("JSON");
        if message["id"] == id {
            return message;
        }
    }
    panic!("server closed stdout before answering {id}")
}
