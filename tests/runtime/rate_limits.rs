//! Rate limits under load against the demo server: a limited call waits
//! for its turn within its time-out or is refused with `RateLimited`,
//! never dropped; other tools and servers are not held up.

use std::path::Path;
use std::time::Duration;

use crate::common::{start, wait_status};
use mcpvisor::config::native;
use mcpvisor::{CallError, CallTool};
use serde_json::json;

fn limited(keys: &str) -> mcpvisor::config::ServerConfig {
    let text = format!("[servers.demo]\ncommand = {:?}\nargs = [\"demo-server\"]\n{keys}\n", env!("CARGO_BIN_EXE_mcpvisor"));
    native::parse(Path::new("servers.toml"), &text).unwrap().remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_passes_the_rest_waits_within_its_time_out_or_is_refused_with_when_to_retry() {
    let handle = start(vec![limited("[servers.demo.limits]\nrate = 20\nburst = 5")]).await;
    let started = std::time::Instant::now();
    let calls = (0..40).map(|i| {
        let handle = handle.clone();
        tokio::spawn(async move {
            let call = CallTool::new("mcp__demo__echo", json!({"text": format!("{i}")})).with_timeout(Duration::from_millis(120));
            handle.call(call).await
        })
    });
    let results: Vec<_> = futures::future::join_all(calls).await.into_iter().map(Result::unwrap).collect();
    let elapsed = started.elapsed().as_secs_f64();
    let passed = results.iter().filter(|r| r.is_ok()).count();
    let refused: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(passed + refused.len(), 40, "every call is answered");
    // The burst, then no more than the bucket refilled while the calls ran
    // (a busy machine spreads the calls out, and the bucket refills meanwhile).
    let refilled = (elapsed * 20.0).floor() as usize;
    assert!(passed >= 5 && passed <= 5 + refilled, "{passed} passed in {elapsed} s");
    for error in refused {
        let CallError::RateLimited { server, tool, limit, retry_after } = error else { panic!("only rate limits refuse: {error:?}") };
        assert_eq!((server.as_str(), tool.as_str()), ("demo", "echo"));
        assert!(limit.contains("rate limit of server `demo` (20/s, burst 5)"), "{limit}");
        assert!(retry_after.is_some_and(|after| after > Duration::from_millis(120)), "{retry_after:?}");
        assert!(error.to_string().contains("raise the limit"), "{error}");
    }
    // With time enough, every call waits for its turn and goes through.
    let patient =
        (0..10).map(|_| handle.call(CallTool::new("mcp__demo__echo", json!({"text": "x"})).with_timeout(Duration::from_secs(10))));
    assert!(futures::future::join_all(patient).await.iter().all(Result::is_ok));
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_limited_to_two_at_once_refuses_a_third_after_its_time_out_and_other_tools_pass() {
    let handle = start(vec![limited("limits = { tools = { sleep = { concurrent = 2 } } }")]).await;
    let sleepers: Vec<_> = (0..2)
        .map(|_| {
            let handle = handle.clone();
            tokio::spawn(async move { handle.call(CallTool::new("mcp__demo__sleep", json!({"ms": 60_000}))).await })
        })
        .collect();
    wait_status(&handle, "demo", |s| s.in_flight == 2).await;
    // Without the limit this call would be on the wire and end in `Timeout`.
    let third = handle.call(CallTool::new("mcp__demo__sleep", json!({"ms": 1})).with_timeout(Duration::from_millis(200))).await;
    let Err(CallError::RateLimited { limit, retry_after: None, .. }) = &third else { panic!("{third:?}") };
    assert!(limit.contains("concurrency limit of tool `sleep` of server `demo` (2 at once"), "{limit}");
    assert_eq!(wait_status(&handle, "demo", |_| true).await.in_flight, 2, "the refused call never reached the server");
    let echo = handle.call(CallTool::new("mcp__demo__echo", json!({"text": "free"}))).await;
    assert!(echo.is_ok(), "another tool is not held up: {echo:?}");
    // A caller that goes away frees its slot.
    sleepers.iter().for_each(|sleeper| sleeper.abort());
    let after = handle.call(CallTool::new("mcp__demo__sleep", json!({"ms": 1})).with_timeout(Duration::from_secs(10))).await;
    assert!(after.is_ok(), "{after:?}");
    handle.shutdown().await;
}
