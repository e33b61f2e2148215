//! Memory a session holds for resumption (issue 19): 40 calls of an 8 MB
//! answer in one session, then in two more, through `serve --http`. Alone
//! in its test binary so that no other test's gateway shares the machine's
//! memory while it measures. The numbers (RSS, time, CPU of the gateway)
//! are printed; the pass/fail bound is generous (a ratio, not a timing).

use std::time::{Duration, Instant};

use crate::gateway_http_support::{client, json_of, open_session, post, request, Gateway};
use serde_json::json;

const CALLS: u64 = 40;
const ANSWER: u64 = 8 * 1024 * 1024;

/// The gateway's resident memory, in MiB.
fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    kib / 1024
}

/// The gateway's CPU time (user + system) so far.
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let ticks: u64 = [11, 12].iter().filter_map(|&i| fields.get(i)?.parse::<u64>().ok()).sum();
    // SAFETY: sysconf has no memory-safety preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis(ticks * 1000 / per_second)
}

async fn big_calls(http: &reqwest::Client, gateway: &Gateway, session: &str) {
    for id in 1..=CALLS {
        let call = request(id, "tools/call", json!({"name": "demo__big", "arguments": {"bytes": ANSWER}}));
        let response = post(http, &gateway.mcp(), &call).header("mcp-session-id", session).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let answer = json_of(response).await;
        let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_default();
        assert_eq!(text.len() as u64, ANSWER, "call {id} is answered whole");
    }
}

/// Before the fix each session kept its last 32 answers (8 MB each) for
/// resumption, for as long as it idled: one session grew the gateway by
/// ~280 MB, three by ~790 MB (debug build). Answers a client has read are
/// kept no more: 1 MiB of growth in both cases since.
#[tokio::test]
async fn answers_read_are_not_kept_for_resumption() {
    let gateway = Gateway::loopback();
    let pid = gateway.child.id();
    let http = client();
    let session = open_session(&http, &gateway.mcp()).await;
    let list = request(0, "tools/list", json!({}));
    post(&http, &gateway.mcp(), &list).header("mcp-session-id", &session).send().await.unwrap();
    let (before, started, cpu_before) = (rss_mib(pid), Instant::now(), cpu(pid));
    big_calls(&http, &gateway, &session).await;
    let one = rss_mib(pid);
    eprintln!("one session, {CALLS} × 8 MB: RSS {before} → {one} MiB, {:?}, CPU {:?}", started.elapsed(), cpu(pid) - cpu_before);
    let (started, cpu_before) = (Instant::now(), cpu(pid));
    for _ in 0..2 {
        let session = open_session(&http, &gateway.mcp()).await;
        big_calls(&http, &gateway, &session).await;
    }
    let three = rss_mib(pid);
    eprintln!("three sessions: RSS {before} → {three} MiB; the two more took {:?}, CPU {:?}", started.elapsed(), cpu(pid) - cpu_before);
    // Each answer passes through a few copies (the server's line, the
    // frame, the response body) and the allocator keeps some of what was
    // freed; what must not happen is memory that follows the answers kept.
    assert!(one.saturating_sub(before) < 64, "one session grew the gateway from {before} to {one} MiB");
    assert!(three.saturating_sub(before) < 64, "three sessions grew the gateway from {before} to {three} MiB");
}
