//! mcpvisor's client for the shared peer benchmark (`shared/bench/peers`).
//!
//! usage: bench_client SERVER seq N | conc N K | connect R
//!
//! SERVER is the server's program (stdio), or an `http://` / `https://`
//! URL of a Streamable HTTP server (the HTTP benchmark, benches/http-peers):
//! then `connect` opens a new session on that server each time.
//!
//! It runs inside one actix System on the current thread, the way an
//! embedder that is itself an actix program uses mcpvisor, and every call
//! takes the full path: `CallTool` to the Registry, routed by exposed name
//! to the Connection, framed onto the child's stdin and matched back by id.
//! Workload as in the peers' README: initialize + tools/list + 500 warm-up
//! `echo` calls, then the measured mode; one JSON line on stdout.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use actix::Addr;
use mcpvisor::actors::hub::{AddServer, GetRegistry, Hub, RemoveServer, Shutdown, WaitReady};
use mcpvisor::actors::{CallTool, Registry};
use mcpvisor::config::{RuntimeConfig, ServerConfig, Transport};

const WARMUP: usize = 500;
const TOOL: &str = "mcp__bench__echo";

fn echo() -> CallTool {
    CallTool::new(TOOL, serde_json::json!({"text": "hello world"}))
}

async fn call(registry: &Addr<Registry>) {
    match registry.send(echo()).await {
        Ok(Ok(_)) => {}
        other => panic!("bench call failed: {other:?}"),
    }
}

/// The server `name`: a remote one when `server` is a URL, else a program.
fn server_config(name: impl Into<String>, server: &str) -> ServerConfig {
    if server.starts_with("http://") || server.starts_with("https://") {
        ServerConfig::remote(name, Transport::Http, server)
    } else {
        ServerConfig::stdio(name, server, Vec::<String>::new())
    }
}

async fn start(server: &str) -> (Addr<Hub>, Addr<Registry>) {
    let config = RuntimeConfig { subreaper: false, ..RuntimeConfig::new([server_config("bench", server)]) };
    let hub = Hub::start(config);
    hub.send(WaitReady).await.expect("hub runs");
    let registry = hub.send(GetRegistry).await.expect("hub runs");
    for _ in 0..WARMUP {
        call(&registry).await;
    }
    (hub, registry)
}

async fn seq(server: &str, n: usize) -> (Duration, Vec<u64>) {
    let (hub, registry) = start(server).await;
    let mut lat = Vec::with_capacity(n);
    let begin = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        call(&registry).await;
        lat.push(t.elapsed().as_nanos() as u64);
    }
    let secs = begin.elapsed();
    hub.send(Shutdown).await.expect("hub runs");
    (secs, lat)
}

async fn conc(server: &str, n: usize, k: usize) -> (Duration, Vec<u64>) {
    let (hub, registry) = start(server).await;
    let lat = Rc::new(RefCell::new(Vec::with_capacity(n)));
    let started = Rc::new(RefCell::new(0usize));
    let begin = Instant::now();
    let workers: Vec<_> = (0..k)
        .map(|_| {
            let (registry, lat, started) = (registry.clone(), lat.clone(), started.clone());
            actix_rt::spawn(async move {
                loop {
                    {
                        let mut s = started.borrow_mut();
                        if *s >= n {
                            break;
                        }
                        *s += 1;
                    }
                    let t = Instant::now();
                    call(&registry).await;
                    lat.borrow_mut().push(t.elapsed().as_nanos() as u64);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("worker");
    }
    let secs = begin.elapsed();
    hub.send(Shutdown).await.expect("hub runs");
    let lat = lat.borrow().clone();
    (secs, lat)
}

async fn connect(server: &str, runs: usize) -> (Duration, Vec<u64>) {
    let hub = Hub::start(RuntimeConfig { subreaper: false, ..RuntimeConfig::default() });
    let mut lat = Vec::with_capacity(runs);
    let begin = Instant::now();
    for i in 0..runs {
        let name = format!("bench{i}");
        let t = Instant::now();
        hub.send(AddServer(server_config(name.clone(), server))).await.expect("hub").expect("added");
        hub.send(WaitReady).await.expect("hub");
        lat.push(t.elapsed().as_nanos() as u64);
        hub.send(RemoveServer(name)).await.expect("hub").expect("removed");
    }
    (begin.elapsed(), lat)
}

fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
}

fn report(mode: &str, secs: Duration, mut lat: Vec<u64>, extra: &str) {
    lat.sort_unstable();
    let q = |p: f64| lat[((p * lat.len() as f64) as usize).min(lat.len() - 1)] as f64 / 1000.0;
    let s = secs.as_secs_f64();
    println!(
        r#"{{"client":"mcpvisor","mode":"{mode}","calls":{},"secs":{s:.4},"calls_per_s":{:.1},"p50_us":{:.1},"p99_us":{:.1},"peak_rss_kb":{}{extra}}}"#,
        lat.len(),
        lat.len() as f64 / s,
        q(0.50),
        q(0.99),
        peak_rss_kb()
    );
}

fn usage() -> ! {
    eprintln!("usage: bench_client SERVER seq N | conc N K | connect R");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize| args.get(i).and_then(|a| a.parse::<usize>().ok()).unwrap_or_else(|| usage());
    let (Some(server), Some(mode)) = (args.first().cloned(), args.get(1).cloned()) else { usage() };
    let system = actix::System::new();
    let (mode, (secs, lat), extra) = match mode.as_str() {
        "seq" => ("seq", system.block_on(seq(&server, num(2))), String::new()),
        "conc" => ("conc", system.block_on(conc(&server, num(2), num(3))), format!(r#","k":{}"#, num(3))),
        "connect" => ("connect", system.block_on(connect(&server, num(2))), String::new()),
        _ => usage(),
    };
    report(mode, secs, lat, &extra);
}
