//! Panic isolation beyond the handlers: a panic injected while a stderr
//! line is handled (a stream item, not a message handler) is caught like
//! one in a handler: the connection restarts and the runtime serves on.

mod common;

use common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_while_handling_a_stderr_line_restarts_only_that_connection() {
    let handle = start(vec![demo("fragile", &[]), demo("bystander", &[])]).await;
    let before = status_of(&handle, "fragile").await.pid;
    // The demo server writes the text to its stderr; with the `fault-injection`
    // feature the connection panics on reading this marker.
    let _ = handle.call_tool("mcp__fragile__stderr", args(json!({"text": "mcpvisor-inject-panic"}))).await;

    let status = wait_connected_with_restarts(&handle, "fragile", 1).await;
    assert_ne!(status.pid, before, "a new process serves");
    assert_eq!(text(&handle.call_tool("mcp__fragile__echo", args(json!({"text": "alive"}))).await.unwrap()), "alive");
    assert_eq!(text(&handle.call_tool("mcp__bystander__echo", args(json!({"text": "untouched"}))).await.unwrap()), "untouched");
    assert_eq!(status_of(&handle, "bystander").await.restarts, 0);
}
