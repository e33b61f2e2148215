//! Typed calls, time-outs with cancellation, back-pressure and fan-out,
//! against real demo-server processes.

use std::time::Duration;

use crate::common::*;
use mcpvisor::{CallError, CallTool};
use serde_json::json;

/// The cancellations the demo server has received, as (requestId, reason, tool, arguments).
async fn cancellations(handle: &mcpvisor::Handle, server: &str) -> Vec<serde_json::Value> {
    let result = handle.call_tool(&format!("mcp__{server}__cancellations"), None).await.unwrap();
    result.structured_content.as_ref().and_then(|v| v["cancellations"].as_array().cloned()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_call_is_cancelled_on_the_server_with_its_request_id() {
    let handle = start(vec![demo("slow", &[])]).await;
    let timed_out = handle.call(CallTool::new("mcp__slow__sleep", json!({"ms": 30_000})).with_timeout(Duration::from_millis(200))).await;
    assert!(
        matches!(&timed_out, Err(CallError::Timeout { tool, after, .. }) if tool == "sleep" && *after == Duration::from_millis(200)),
        "{timed_out:?}"
    );

    let seen = cancellations(&handle, "slow").await;
    let cancel = seen.iter().find(|c| c["arguments"]["ms"] == 30_000).unwrap_or_else(|| panic!("no cancellation for the sleep: {seen:?}"));
    assert_eq!(cancel["tool"], "sleep", "the cancelled request id is the sleep call's: {cancel}");
    assert!(cancel["requestId"].is_number());
    assert_eq!(cancel["reason"], "timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_callers_future_cancels_the_call() {
    let handle = start(vec![demo("slow", &[])]).await;
    let h = handle.clone();
    let caller = tokio::spawn(async move { h.call_tool("mcp__slow__sleep", args(json!({"ms": 30_001}))).await });
    wait_status(&handle, "slow", |s| s.in_flight == 1).await;
    caller.abort();
    let status = wait_status(&handle, "slow", |s| s.in_flight == 0).await;
    assert_eq!(status.queued, 0);
    let seen = cancellations(&handle, "slow").await;
    let cancel = seen.iter().find(|c| c["arguments"]["ms"] == 30_001).unwrap_or_else(|| panic!("{seen:?}"));
    assert_eq!((cancel["tool"].as_str(), cancel["reason"].as_str()), (Some("sleep"), Some("the caller went away")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_refuses_the_next_call_at_once() {
    let mut config = demo("narrow", &[]);
    config.limits.max_in_flight = 1;
    config.limits.max_queued = 1;
    let handle = start(vec![config]).await;
    let (h1, h2) = (handle.clone(), handle.clone());
    let first = tokio::spawn(async move { h1.call_tool("mcp__narrow__sleep", args(json!({"ms": 5_000}))).await });
    wait_status(&handle, "narrow", |s| s.in_flight == 1).await;
    let second = tokio::spawn(async move { h2.call_tool("mcp__narrow__sleep", args(json!({"ms": 5_000}))).await });
    wait_status(&handle, "narrow", |s| s.queued == 1).await;

    let refused = handle.call_tool("mcp__narrow__echo", args(json!({"text": "no room"}))).await;
    assert_eq!(refused, Err(CallError::Overloaded { server: "narrow".into(), tool: "echo".into(), in_flight: 1, queued: 1 }),);
    assert!(!first.is_finished() && !second.is_finished(), "the refusal came while both earlier calls were still running");
    first.abort();
    second.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_calls_through_the_registry_all_resolve_correctly() {
    let handle = start(vec![demo("a", &[]), demo("b", &[])]).await;
    let calls: Vec<_> = (0..1000)
        .map(|i| {
            let handle = handle.clone();
            tokio::spawn(async move {
                let server = if i % 2 == 0 { "a" } else { "b" };
                let result = handle.call_tool(&format!("mcp__{server}__echo"), args(json!({"text": format!("call {i}")}))).await;
                (i, result)
            })
        })
        .collect();
    for call in calls {
        let (i, result) = call.await.unwrap();
        assert_eq!(text(&result.unwrap()), format!("call {i}"));
    }
    for server in ["a", "b"] {
        let s = status_of(&handle, server).await;
        assert_eq!((s.in_flight, s.queued, s.restarts), (0, 0, 0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_keep_is_error_structured_content_and_errors_are_typed() {
    let handle = start(vec![demo("t", &[])]).await;
    let failed = handle.call_tool("mcp__t__fail", args(json!({"message": "nope"}))).await.unwrap();
    assert_eq!(failed.is_error, Some(true), "isError is a result, not an Err");
    let sum = handle.call_tool("mcp__t__add", args(json!({"a": 2, "b": 40}))).await.unwrap();
    assert_eq!(sum.structured_content.as_ref().and_then(|v| v["sum"].as_f64()), Some(42.0));
    let bad = handle.call_tool("mcp__t__add", args(json!({"a": "two"}))).await;
    assert!(matches!(&bad, Err(CallError::InvalidArguments { tool, .. }) if tool == "add"), "{bad:?}");
    let unknown = handle.call_tool("mcp__t__nothing", None).await;
    assert_eq!(unknown, Err(CallError::UnknownTool { name: "mcp__t__nothing".into() }));
}
