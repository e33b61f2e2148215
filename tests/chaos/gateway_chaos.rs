//! Chaos through the gateway: `mcpvisor serve --http` in front of four demo
//! servers, 32 clients calling at once while an upstream server's process
//! group is SIGKILLed every 50 ms, then a check that nothing was lost,
//! crossed or left behind.
//!
//! The clients are 32 sessions of the crate's own HTTP client (one runtime,
//! 32 remote servers that are all the gateway), so every call crosses two
//! supervised hops: client connection → gateway session → upstream
//! connection. `MCPVISOR_CHAOS_CALLS` calls (default 2,000, the CI size).
//! Every call must end within its own time-out, answered correctly (the
//! echo carries the call's number, so an answer delivered to the wrong
//! caller is caught) or with an error that says what happened (an `isError`
//! result from the gateway naming the server, or a typed `CallError`).
//! Afterwards: the gateway is still up and every upstream server answers
//! through it; on SIGTERM it exits 0 and no process of any upstream group,
//! zombie or not, remains; its descriptors and memory did not grow with the
//! number of kills.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[path = "../gateway_http_support/mod.rs"]
mod gateway_http_support;

use futures::StreamExt;
use gateway_http_support::{Gateway, BIN};
use mcpvisor::config::{RuntimeConfig, ServerConfig, Transport};
use mcpvisor::transport::stdio::proc_info;
use mcpvisor::{CallError, CallTool, Handle, Runtime};
use serde_json::json;

const UPSTREAMS: usize = 4;
const CLIENTS: usize = 32;
const KILL_EVERY: Duration = Duration::from_millis(50);
/// Each call's own time-out (the client's; the gateway's upstream call has
/// the server's default, which is longer, so the client's fires first).
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// A call still pending this long after it started has hung.
const HUNG_AFTER: Duration = Duration::from_secs(10);
/// Growth of the gateway's descriptors other than sockets (pipes to its
/// servers, epoll and timer descriptors) that counts as a leak: a leak per
/// kill (the killer strikes hundreds of times) would pass it many times.
const FD_SLACK: usize = 8;
/// Growth of its sockets that counts as a leak: each client's HTTP pool
/// may keep another connection or two open after the chaos (calls and
/// re-listings overlapped), a leak per kill or per call would pass this.
const SOCKET_SLACK: usize = 2 * CLIENTS;
/// Growth of the gateway's RSS that counts as a leak (as in tests/chaos/chaos.rs).
const RSS_GROWTH_LIMIT_KIB: u64 = 64 * 1024;

fn calls_to_make() -> usize {
    std::env::var("MCPVISOR_CHAOS_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000)
}

/// Four demo servers `s0`..`s3` with the limits lifted: no restart
/// intensity to end them, short backoff, room for every caller at once.
fn config() -> String {
    (0..UPSTREAMS)
        .map(|n| {
            format!(
                "[servers.s{n}]\ncommand = {BIN:?}\nargs = [\"demo-server\"]\nintensity = 1000000\nperiod = \"1s\"\n\
                 backoff = {{ initial = \"10ms\", max = \"50ms\" }}\nmax_in_flight = 64\nmax_queued = 256\n"
            )
        })
        .collect()
}

/// The gateway's open descriptors, counted by kind (`socket`, `pipe`,
/// `anon_inode:[eventpoll]`, or a path).
fn fds(pid: u32) -> BTreeMap<String, usize> {
    let mut kinds = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return kinds };
    for entry in entries.flatten() {
        let target = std::fs::read_link(entry.path()).map(|t| t.to_string_lossy().into_owned()).unwrap_or_default();
        *kinds.entry(target.split(":[").next().unwrap_or_default().to_string()).or_default() += 1;
    }
    kinds
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
}

/// The gateway's live children that lead their own process group: its
/// upstream servers.
fn upstream_groups(gateway: u32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(proc_info)
        .filter(|p| p.ppid == gateway as i32 && p.pgrp == p.pid && p.state != 'Z')
        .map(|p| p.pid)
        .collect()
}

/// Processes of any of `groups`, or children of `parent`, still on the machine.
fn leftovers(groups: &BTreeSet<i32>, parent: u32) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(proc_info)
        .filter(|p| groups.contains(&p.pgrp) || p.ppid == parent as i32)
        .map(|p| format!("{p:?}"))
        .collect()
}

/// One call by client `client`: an echo of its own number through upstream
/// `server`. `Ok(true)`: answered correctly; `Ok(false)`: an `isError`
/// result (the gateway's word that the upstream call failed). A wrong
/// answer panics.
async fn one_call(handle: Handle, client: usize, server: usize, i: usize) -> Result<bool, CallError> {
    let expected = format!("call {i}");
    let name = format!("mcp__c{client:02}__s{server}__echo");
    let result = handle.call(CallTool::new(name, json!({"text": expected})).with_timeout(CALL_TIMEOUT)).await?;
    if result.is_error == Some(true) {
        let message = result.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).unwrap_or_default();
        assert!(message.contains(&format!("s{server}")), "an error result must name its server: {message}");
        return Ok(false);
    }
    let got = result.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).unwrap_or_default();
    assert_eq!(got, expected, "call {i} through client {client} to s{server} got another call's answer");
    Ok(true)
}

fn kind(outcome: &Result<bool, CallError>) -> String {
    match outcome {
        Ok(true) => "ok".into(),
        Ok(false) => "error_result".into(),
        Err(error) => format!("{error:?}").split([' ', '{', '(']).next().unwrap_or_default().to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_survives_upstream_sigkills_under_32_clients() {
    let total = calls_to_make();
    let mut gateway = Gateway::start_with_config(&config(), "127.0.0.1:0", &[], &[]).expect("the gateway starts");
    let gateway_pid = gateway.child.id();

    let clients = (0..CLIENTS).map(|n| ServerConfig::remote(format!("c{n:02}"), Transport::Http, gateway.mcp())).collect::<Vec<_>>();
    let handle = Runtime::start(RuntimeConfig { subreaper: false, ..RuntimeConfig::new(clients) }).expect("the client runtime starts");
    assert!(handle.wait_ready(Duration::from_secs(60)).await, "the clients did not connect");
    // Warm-up: every client through every upstream once, so the baseline
    // counts every session's sockets and every upstream's pipes.
    for client in 0..CLIENTS {
        for server in 0..UPSTREAMS {
            assert_eq!(one_call(handle.clone(), client, server, usize::MAX).await.map_err(|e| e.to_string()), Ok(true));
        }
    }
    let fds_before = fds(gateway_pid);
    let rss_before = rss_kib(gateway_pid);

    // The killer: every 50 ms, SIGKILL the process group of one of the
    // gateway's current upstream servers, chosen at random.
    let stop = Arc::new(AtomicBool::new(false));
    let kills = Arc::new(AtomicU64::new(0));
    let groups = Arc::new(Mutex::new(BTreeSet::new()));
    let killer = {
        let (stop, kills, groups) = (stop.clone(), kills.clone(), groups.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(KILL_EVERY);
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let live = upstream_groups(gateway_pid);
                if live.is_empty() {
                    continue;
                }
                let victim = live[fastrand::usize(..live.len())];
                groups.lock().unwrap().insert(victim);
                // SAFETY: kill has no memory-safety preconditions; the group
                // is led by a live child of the gateway (checked just above).
                unsafe { libc::kill(-victim, libc::SIGKILL) };
                kills.fetch_add(1, Ordering::Relaxed);
            }
        })
    };

    let started = Instant::now();
    let outcomes: Vec<String> = futures::stream::iter(0..total)
        .map(|i| {
            let handle = handle.clone();
            let client = i % CLIENTS;
            async move {
                match tokio::time::timeout(HUNG_AFTER, one_call(handle, client, fastrand::usize(..UPSTREAMS), i)).await {
                    Ok(outcome) => kind(&outcome),
                    Err(_) => "HUNG".into(),
                }
            }
        })
        .buffer_unordered(CLIENTS)
        .collect()
        .await;
    let duration = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    killer.await.unwrap();
    let kills = kills.load(Ordering::Relaxed);

    let mut tally = BTreeMap::<String, usize>::new();
    for outcome in &outcomes {
        *tally.entry(outcome.clone()).or_default() += 1;
    }

    // Still up, and every upstream answers again through it (a call made
    // while a server restarts waits for it, within its time-out).
    assert_eq!(gateway.child_exited(), None, "the gateway died under the chaos; its stderr:\n{}", gateway.stderr_text());
    for server in 0..UPSTREAMS {
        let answered = one_call(handle.clone(), server, server, total + server).await;
        assert_eq!(answered.map_err(|e| e.to_string()), Ok(true), "s{server} does not answer through the gateway after the chaos");
    }
    groups.lock().unwrap().extend(upstream_groups(gateway_pid));
    let fds_after = fds(gateway_pid);
    let rss_after = rss_kib(gateway_pid);
    handle.shutdown().await;

    gateway.terminate();
    let exit = gateway.wait_exit(Duration::from_secs(30));
    let groups = groups.lock().unwrap().clone();
    let left = leftovers(&groups, gateway_pid);
    eprintln!(
        "gateway chaos: {total} calls in {duration:?} ({kills} kills of {} upstream processes); outcomes {tally:?}; \
         gateway fds {fds_before:?} -> {fds_after:?}; gateway VmRSS {rss_before} KiB -> {rss_after} KiB; exit {exit:?}",
        groups.len()
    );

    assert_eq!(outcomes.len(), total);
    assert_eq!(tally.get("HUNG"), None, "calls outlived their own time-out: {tally:?}");
    assert!(kills > 0, "the killer never struck");
    // A restarting server's tools stay served (with its last listing), so
    // no client ever finds a name missing, however often it lists again.
    assert_eq!(tally.get("UnknownTool"), None, "served names went missing from the clients' lists: {tally:?}");
    let ok = tally.get("ok").copied().unwrap_or(0);
    assert!(ok * 2 > total, "most calls must succeed, {ok} of {total} did: {tally:?}");
    assert_eq!(exit, Some(0), "the gateway must exit 0 on SIGTERM; its stderr:\n{}", gateway.stderr_text());
    assert!(left.is_empty(), "processes left behind (zombies included): {left:?}");
    let count = |fds: &BTreeMap<String, usize>, sockets: bool| {
        fds.iter().filter(|(kind, _)| (*kind == "socket") == sockets).map(|(_, n)| n).sum::<usize>()
    };
    let grew = |sockets: bool, slack: usize| count(&fds_after, sockets) > count(&fds_before, sockets) + slack;
    assert!(
        !grew(false, FD_SLACK) && !grew(true, SOCKET_SLACK),
        "the gateway's descriptors grew from {fds_before:?} to {fds_after:?} over {kills} kills"
    );
    let growth = rss_after.saturating_sub(rss_before);
    assert!(growth < RSS_GROWTH_LIMIT_KIB, "the gateway's RSS grew by {growth} KiB over {total} calls");
}
