//! Chaos: many concurrent calls through the Registry while servers are
//! SIGKILLed at random, then a check that nothing leaked.
//!
//! Four demo servers; `MCPVISOR_CHAOS_CALLS` calls (default 2,000, the CI
//! size; the recorded run in docs/reliability.md used 10,000) at 32 at a
//! time, by exposed name through `Handle::call`, while a killer SIGKILLs a
//! random server's process group every 50 ms. Every call must end within
//! its own time-out, either answered correctly (the echo carries the call's
//! number, so a crossed answer is caught) or with a typed `CallError`. After
//! `shutdown().await`: no process of any server group and no child of ours
//! remains (zombie or not), the open descriptors are back to the baseline,
//! and RSS is bounded.

#[path = "../common/mod.rs"]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use futures::StreamExt;
use mcpvisor::restart::RestartLimits;
use mcpvisor::{CallError, CallTool, Handle, ServerState};
use serde_json::json;

const SERVERS: usize = 4;
const CONCURRENCY: usize = 32;
const KILL_EVERY: Duration = Duration::from_millis(50);
/// Each call's own time-out.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// The outer watchdog: a call still pending this long after it started
/// has hung (its own time-out did not fire). Generous, because two cores
/// are shared with the servers restarting under the killer.
const HUNG_AFTER: Duration = Duration::from_secs(8);
/// Growth of RSS over the baseline that counts as a leak. The runtime keeps
/// per-call state only while a call lives, and four connections' buffers
/// (a few 64 KiB reads each) plus the allocator's retained arenas of two
/// worker threads and the actix thread stay well under 64 MiB; a leak of
/// even 10 KiB per call would exceed it at 10,000 calls.
const RSS_GROWTH_LIMIT_KIB: u64 = 64 * 1024;

fn calls_to_make() -> usize {
    std::env::var("MCPVISOR_CHAOS_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000)
}

/// Restart limits for the test: the default intensity limit (more than 5
/// restarts in 60 s → failed) would end every server within a second of
/// killing, and backoff is kept short so calls mostly meet a live server.
fn chaos_limits() -> RestartLimits {
    RestartLimits {
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
        max_restarts_in_window: usize::MAX,
        ..RestartLimits::default()
    }
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}

/// One process as /proc tells it.
#[derive(Debug)]
struct Proc {
    pid: i32,
    state: char,
    ppid: i32,
    pgrp: i32,
}

/// Reads `/proc/PID/stat` (`pid (comm) state ppid pgrp ...`; comm may hold
/// spaces and parentheses, hence the last `)`).
fn proc_info(pid: i32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut rest = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = rest.next()?.chars().next()?;
    Some(Proc { pid, state, ppid: rest.next()?.parse().ok()?, pgrp: rest.next()?.parse().ok()? })
}

/// Every live process on the machine.
fn all_processes() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).filter_map(proc_info).collect()
}

/// The name of a call's outcome, for the tally.
fn outcome_kind(outcome: &Result<(), CallError>) -> String {
    match outcome {
        Ok(()) => "ok".into(),
        Err(error) => format!("{error:?}").split([' ', '{', '(']).next().unwrap_or_default().to_string(),
    }
}

/// One call: an echo of its own number, or a short sleep (so kills land
/// on calls in flight as well as idle servers). A wrong answer panics.
async fn one_call(handle: Handle, i: usize) -> Result<(), CallError> {
    let server = fastrand::usize(..SERVERS);
    let call = if i % 4 == 3 {
        let ms = fastrand::u64(1..40);
        let result = handle.call(CallTool::new(format!("mcp__s{server}__sleep"), json!({"ms": ms})).with_timeout(CALL_TIMEOUT)).await?;
        (text(&result), format!("slept {ms} ms"))
    } else {
        let expected = format!("call {i}");
        let result =
            handle.call(CallTool::new(format!("mcp__s{server}__echo"), json!({"text": expected})).with_timeout(CALL_TIMEOUT)).await?;
        (text(&result), expected)
    };
    assert_eq!(call.0, call.1, "call {i} to s{server} got another call's answer");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_under_random_sigkills_all_end_in_time_and_nothing_leaks() {
    let total = calls_to_make();
    let fds_before = open_fds();
    let rss_before = rss_kib();
    let me = std::process::id() as i32;

    let servers = (0..SERVERS)
        .map(|n| {
            let mut config = demo(&format!("s{n}"), &[]);
            config.restart_limits = chaos_limits();
            config
        })
        .collect();
    let handle = start(servers).await;

    // The killer: every 50 ms, SIGKILL the group of a random server whose
    // current process is still our child (never a recycled pid).
    let stop = Arc::new(AtomicBool::new(false));
    let kills = Arc::new(AtomicU64::new(0));
    let groups = Arc::new(Mutex::new(BTreeSet::new()));
    let killer = {
        let (handle, stop, kills, groups) = (handle.clone(), stop.clone(), kills.clone(), groups.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(KILL_EVERY);
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let victim = format!("s{}", fastrand::usize(..SERVERS));
                let Some(pid) = handle.server_status(&victim).await.and_then(|s| s.pid) else { continue };
                if proc_info(pid as i32).is_some_and(|p| p.ppid == me && p.pgrp == pid as i32 && p.state != 'Z') {
                    groups.lock().unwrap().insert(pid as i32);
                    // SAFETY: kill has no memory-safety preconditions; the
                    // group is one of our servers' (checked just above).
                    unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
                    kills.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };

    let started = Instant::now();
    let outcomes: Vec<(String, Duration)> = futures::stream::iter(0..total)
        .map(|i| {
            let handle = handle.clone();
            async move {
                let called = Instant::now();
                let kind = match tokio::time::timeout(HUNG_AFTER, one_call(handle, i)).await {
                    Ok(outcome) => outcome_kind(&outcome),
                    Err(_) => "HUNG".into(),
                };
                (kind, called.elapsed())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let duration = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    killer.await.unwrap();

    let mut tally = BTreeMap::<String, usize>::new();
    for (kind, _) in &outcomes {
        *tally.entry(kind.clone()).or_default() += 1;
    }
    let slowest = outcomes.iter().map(|(_, took)| *took).max().unwrap_or_default();
    let mut restarts = 0;
    let mut failed = Vec::new();
    for status in handle.status().await {
        if matches!(status.state, ServerState::Failed { .. }) {
            failed.push(status.name.clone());
        }
        groups.lock().unwrap().extend(status.pid.map(|p| p as i32));
        restarts += status.restarts;
    }
    let kills = kills.load(Ordering::Relaxed);
    let rss_peak_kib = rss_kib();
    handle.shutdown().await;

    let fds_after = open_fds();
    let rss_after = rss_kib();
    let groups = groups.lock().unwrap().clone();
    let leftovers: Vec<_> = all_processes().into_iter().filter(|p| p.pid != me && (groups.contains(&p.pgrp) || p.ppid == me)).collect();
    eprintln!(
        "chaos: {total} calls in {duration:?} ({kills} kills, {restarts} restarts); outcomes {tally:?}; slowest call {slowest:?}; \
         fds {fds_before} -> {fds_after}; VmRSS {rss_before} KiB -> {rss_peak_kib} KiB before shutdown -> {rss_after} KiB after"
    );

    assert_eq!(outcomes.len(), total);
    assert_eq!(tally.get("HUNG"), None, "calls outlived their own time-out by {:?}: {tally:?}", HUNG_AFTER - CALL_TIMEOUT);
    // How many calls the injected faults can fail: a call fails only when its server dies while the call is
    // on the wire (calls that meet a server down wait in its queue for the restart). Each server is killed
    // on average once per SERVERS × KILL_EVERY = 200 ms; a call is on the wire for its sleep (1–40 ms, one
    // call in four) plus its transit (about 1 ms, 10 ms on a loaded machine), so the chance it is hit is at
    // most (40 + 10) / 200 = 25 % for a sleep and 10 / 200 = 5 % for an echo: about 10 % of all calls, and
    // 4.7 % in the recorded run (docs/reliability.md). Fewer than three in four answered means calls fail
    // for another cause than the kills (answers lost, queued calls not served after a restart).
    let answered = tally.get("ok").copied().unwrap_or(0);
    assert!(answered * 4 >= total * 3, "only {answered} of {total} calls answered; the kills explain at most one in four: {tally:?}");
    assert!(kills > 0 && restarts > 0, "the killer never struck ({kills} kills, {restarts} restarts)");
    assert!(failed.is_empty(), "servers given up despite the unlimited restart intensity: {failed:?}");
    assert!(leftovers.is_empty(), "processes left behind (zombies have state Z): {leftovers:?}");
    assert_eq!(fds_after, fds_before, "open file descriptors are not back to the baseline");
    let growth = rss_after.saturating_sub(rss_before);
    assert!(growth < RSS_GROWTH_LIMIT_KIB, "RSS grew by {growth} KiB over {total} calls (from {rss_before} KiB)");
}
