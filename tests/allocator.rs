//! The binary's allocator keeps its memory lazily committed: the same
//! gateway, under the same calls, holds several MB less RSS than with
//! mimalloc's eager arena commit (`MIMALLOC_ARENA_EAGER_COMMIT=2`, its
//! default on Linux), which `src/main.rs` turns off before mimalloc starts.

mod gateway_http_support;

use gateway_http_support::{client, json_of, open_session, post, request, Gateway};
use serde_json::json;

/// Peak RSS of a gateway after 100 calls through it, in KiB.
async fn peak_rss_after_calls(env: &[(&str, &str)]) -> u64 {
    let gateway = Gateway::start("127.0.0.1:0", &["--workers", "1"], env).expect("the gateway starts");
    let (http, url) = (client(), gateway.mcp());
    let session = open_session(&http, &url).await;
    for id in 1..=100 {
        let call = request(id, "tools/call", json!({"name": "demo__echo", "arguments": {"text": "x".repeat(1000)}}));
        let answer = json_of(post(&http, &url, &call).header("mcp-session-id", &session).send().await.unwrap()).await;
        assert!(answer["result"].is_object(), "{answer}");
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", gateway.child.id())).unwrap();
    let line = status.lines().find(|line| line.starts_with("VmHWM:")).expect("VmHWM in /proc/PID/status");
    line.split_whitespace().nth(1).and_then(|kib| kib.parse().ok()).expect("VmHWM in kB")
}

#[tokio::test]
async fn the_gateway_commits_its_allocator_arena_lazily() {
    let lazy = peak_rss_after_calls(&[]).await;
    let eager = peak_rss_after_calls(&[("MIMALLOC_ARENA_EAGER_COMMIT", "2")]).await;
    // Measured: about 7 MB apart in a debug build, 12 MB in release; half of the smaller is asked.
    assert!(
        lazy + 3 * 1024 < eager,
        "peak RSS {lazy} KiB lazily committed against {eager} KiB eagerly: the option set before main did not take"
    );
}
