//! Misbehaving servers (tests/fixtures/misbehaving_server.py): endless
//! pagination, unusable answers, broken tool lists and handshakes. Each one
//! must end in a clear error at once, never in a wait for a time-out.

use std::time::Duration;

use crate::common::*;
use mcpvisor::config::ServerConfig;
use mcpvisor::restart::RestartPolicy;
use mcpvisor::{CallError, CallTool, ServerState};
use serde_json::json;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/misbehaving_server.py");

fn misbehaving(name: &str, mode: &[&str]) -> ServerConfig {
    let mut config = ServerConfig::stdio(name, "python3", std::iter::once(FIXTURE).chain(mode.iter().copied()));
    config.restart = RestartPolicy::Never;
    config
}

/// The error of a server that failed to start (and was not restarted).
async fn failure_of(config: ServerConfig) -> String {
    let name = config.name.clone();
    let handle = start(vec![config]).await;
    let status = status_of(&handle, &name).await;
    assert_eq!(status.restarts, 0, "{status:?}");
    match status.state {
        ServerState::Failed { error, .. } => error,
        other => panic!("expected {name} to fail, it is {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_cursors_fail_at_once_after_max_list_pages() {
    let mut config = misbehaving("pager", &["endless-cursor"]);
    config.limits.max_list_pages = 50;
    let error = failure_of(config).await;
    assert!(error.contains("tools/list pagination did not end after 50 pages"), "{error}");
    assert!(!error.contains("initialize"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_list_has_the_same_page_limit_at_start_up_and_on_demand() {
    let mut config = misbehaving("pages", &["endless-resources"]);
    config.limits.max_list_pages = 20;
    let handle = start(vec![config]).await;
    // Resources are secondary at start-up: their endless listing ends, and the server serves its tools.
    assert_eq!(status_of(&handle, "pages").await.state, ServerState::Connected);
    match handle.list_resources("pages").await {
        Err(CallError::Protocol { message, .. }) => {
            assert!(message.starts_with("resources/list pagination did not end after 20 pages"), "{message}")
        }
        other => panic!("expected the page limit, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_up_time_out_names_the_step_that_was_running() {
    let mut config = misbehaving("lister", &["silent-list"]);
    // Long enough for the handshake on a loaded machine; the listing never ends.
    config.era = mcpvisor::config::Era::Legacy;
    config.timeouts.startup = Duration::from_secs(3);
    let error = failure_of(config).await;
    assert!(
        error.contains("completed the handshake but did not finish start-up within 3s: tools/list page 1 was still unanswered"),
        "{error}"
    );
    assert!(!error.contains("did not answer initialize"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_and_empty_initialize_results_say_what_was_wrong_and_fail_at_once() {
    let mut restarted = misbehaving("null", &["init-null"]);
    // A restart cannot cure a server that answers the handshake this way.
    restarted.restart = RestartPolicy::Always;
    let null = failure_of(restarted).await;
    assert!(null.contains("initialize") && null.contains("the answer is null, not an object"), "{null}");
    let empty = failure_of(misbehaving("empty", &["init-empty"])).await;
    assert!(empty.contains("the answer has no protocolVersion"), "{empty}");
    for error in [null, empty] {
        assert!(!error.contains("Upgrade") && !error.contains("\"\""), "{error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_tools_list_is_reported_in_a_sentence() {
    let error = failure_of(misbehaving("malformed", &["tools-malformed"])).await;
    assert!(error.contains("tools/list page 1: the `tools` list cannot be read"), "{error}");
    assert!(!error.contains("Internal("), "{error}");
}

/// Calls `echo` on a server answering in `mode`; the call's time-out is
/// long, so only an error raised at once can be a `Protocol` error.
async fn unusable_answer(mode: &str) -> String {
    let handle = start(vec![misbehaving("bad", &[mode])]).await;
    let call = CallTool::new("mcp__bad__echo", json!({"text": "hi"})).with_timeout(Duration::from_secs(120));
    match handle.call(call).await {
        Err(CallError::Protocol { server, tool, message }) => {
            assert_eq!((server.as_str(), tool.as_str()), ("bad", "echo"));
            message
        }
        other => panic!("{mode}: expected a protocol error at once, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_with_invalid_utf8_fails_its_call_at_once() {
    let message = unusable_answer("utf8").await;
    assert!(message.contains("not valid UTF-8"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_whose_id_is_a_string_fails_its_call_at_once() {
    let message = unusable_answer("string-id").await;
    assert!(message.contains("(a string)") && message.contains("(a number)"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_with_result_and_error_fails_its_call_at_once() {
    let message = unusable_answer("both").await;
    assert!(message.contains("both result and error"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_null_id_error_report_fails_the_only_call_in_flight() {
    let message = unusable_answer("null-id").await;
    assert!(message.contains("could not read a request") && message.contains("-32700"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_answer_with_its_id_last_fails_its_call_at_once() {
    let mut config = misbehaving("big", &["id-last", "200000"]);
    config.limits.max_frame = 64 * 1024;
    let handle = start(vec![config]).await;
    // Another request in flight: only the id at the end can tie the answer to its call.
    let h = handle.clone();
    let held = tokio::spawn(async move { h.call(CallTool::new("mcp__big__hold", json!({})).with_timeout(Duration::from_secs(120))).await });
    wait_status(&handle, "big", |s| s.in_flight == 1).await;
    let call = CallTool::new("mcp__big__echo", json!({"text": "hi"})).with_timeout(Duration::from_secs(120));
    match handle.call(call).await {
        Err(CallError::Protocol { message, .. }) => assert!(message.contains("Raise max_frame"), "{message}"),
        other => panic!("expected a max_frame error at once, got {other:?}"),
    }
    held.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_out_says_which_unusable_lines_came_meanwhile() {
    let handle = start(vec![misbehaving("vague", &["null-id"])]).await;
    let h = handle.clone();
    let held =
        tokio::spawn(async move { h.call(CallTool::new("mcp__vague__hold", json!({})).with_timeout(Duration::from_secs(120))).await });
    wait_status(&handle, "vague", |s| s.in_flight == 1).await;
    // Two calls in flight: the report cannot be tied to either.
    let call = CallTool::new("mcp__vague__echo", json!({"text": "hi"})).with_timeout(Duration::from_secs(3));
    match handle.call(call).await {
        Err(error @ CallError::NoUsableAnswer { .. }) => {
            let text = error.to_string();
            assert!(text.contains("could not read a request (error -32700: Parse error)"), "{text}");
            assert!(text.contains("does not follow JSON-RPC") && !text.contains("Raise the call's"), "{text}");
        }
        other => panic!("expected NoUsableAnswer, got {other:?}"),
    }
    held.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_with_bad_schemas_are_kept_and_every_loss_is_warned() {
    let handle = start(vec![misbehaving("odd", &["bad-tools"])]).await;
    let names: Vec<String> = handle.list_tools().await.into_iter().map(|t| t.name).collect();
    for kept in ["mcp__odd__good", "mcp__odd__no_schema", "mcp__odd__null_schema", "mcp__odd__string_schema"] {
        assert!(names.iter().any(|n| n == kept), "{kept} missing from {names:?}");
    }
    let result = handle.call_tool("mcp__odd__no_schema", args(json!({"text": "usable"}))).await.unwrap();
    assert_eq!(text(&result), "usable");
    let status = status_of(&handle, "odd").await;
    let warnings = status.warnings.join("\n");
    for expected in [
        "tool `no_schema`: it has no inputSchema; it is kept",
        "tool `null_schema`: its inputSchema is null",
        "tool `string_schema`: its inputSchema is a string",
        "tool `good` is listed more than once",
        "tool #6 has an empty name",
        "tool #7 was left out",
    ] {
        assert!(warnings.contains(expected), "missing {expected:?} in:\n{warnings}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_refusal_that_lists_the_version_tried_is_retried_once() {
    let handle = start(vec![misbehaving("picky", &["refuse-first-discover"])]).await;
    let status = status_of(&handle, "picky").await;
    assert_eq!(status.state, ServerState::Connected, "{status:?}");
    assert_eq!((status.era.as_deref(), status.protocol_version.as_deref()), (Some("modern"), Some("2026-07-28")), "{status:?}");
    handle.shutdown().await;
}
