//! Fault injection against real demo-server processes: kill -9, crash
//! loops, orphans, garbage, oversized frames, hangs and handler panics.

use std::time::Duration;

use crate::common::*;
use mcpvisor::actors::hub::InjectPanic;
use mcpvisor::config::ServerConfig;
use mcpvisor::restart::RestartPolicy;
use mcpvisor::{CallError, CallTool, Event, ServerState};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_call_fails_the_call_restarts_and_serves_again() {
    let handle = start(vec![demo("victim", &[])]).await;
    handle.call_tool("mcp__victim__stderr", args(json!({"text": "last words before the kill"}))).await.unwrap();
    let pid = status_of(&handle, "victim").await.pid.unwrap();

    let h = handle.clone();
    let in_flight = tokio::spawn(async move { h.call_tool("mcp__victim__sleep", args(json!({"ms": 30_000}))).await });
    wait_status(&handle, "victim", |s| s.in_flight == 1).await;
    kill(pid, libc::SIGKILL);

    match in_flight.await.unwrap() {
        Err(CallError::ServerExited { server, tool, exit, stderr_tail }) => {
            assert_eq!((server.as_str(), tool.as_str()), ("victim", "sleep"));
            assert_eq!(exit.signal, Some(libc::SIGKILL));
            assert!(stderr_tail.iter().any(|l| l.contains("last words before the kill")), "{stderr_tail:?}");
        }
        other => panic!("expected ServerExited, got {other:?}"),
    }
    let status = wait_connected_with_restarts(&handle, "victim", 1).await;
    assert_ne!(status.pid, Some(pid), "a new process serves");
    assert!(handle.list_tools().await.iter().any(|t| t.name == "mcp__victim__echo"), "tools are back in the registry");
    let result = handle.call_tool("mcp__victim__echo", args(json!({"text": "again"}))).await.unwrap();
    assert_eq!(text(&result), "again");
}

/// A demo server restarted only after a backoff of about `backoff`, so that
/// a test can act while it is down.
fn slow_to_restart(name: &str, backoff: Duration) -> ServerConfig {
    let mut config = demo(name, &[]);
    config.restart_limits.initial_backoff = backoff;
    config.restart_limits.max_backoff = backoff;
    config
}

/// Kills the server and waits until it is restarting (down, backoff running).
async fn kill_and_wait_restarting(handle: &mcpvisor::Handle, server: &str) -> u32 {
    let mut events = handle.subscribe();
    let pid = status_of(handle, server).await.pid.unwrap();
    kill(pid, libc::SIGKILL);
    let restarting = async {
        loop {
            match events.recv().await {
                Some(Event::ServerState { server: s, state: ServerState::Restarting { .. } }) if s == server => return pid,
                Some(_) => {}
                None => panic!("event stream ended"),
            }
        }
    };
    let patience = Duration::from_secs(20);
    tokio::time::timeout(patience, restarting)
        .await
        .unwrap_or_else(|_| panic!("server {server} was not restarting {patience:?} after SIGKILL"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_made_while_the_server_restarts_is_queued_and_served_after_the_restart() {
    let handle = start(vec![slow_to_restart("s", Duration::from_secs(2))]).await;
    let old = kill_and_wait_restarting(&handle, "s").await;
    let h = handle.clone();
    let call = tokio::spawn(async move {
        h.call(CallTool::new("mcp__s__echo", json!({"text": "waited"})).with_timeout(Duration::from_secs(20))).await
    });
    let queued = wait_status(&handle, "s", |s| s.queued == 1).await;
    assert!(matches!(queued.state, ServerState::Restarting { .. }), "the call waits in the queue of a server that is down: {queued:?}");
    assert_eq!(text(&call.await.unwrap().unwrap()), "waited");
    let after = status_of(&handle, "s").await;
    assert_eq!((after.restarts, after.queued), (1, 0));
    assert_ne!(after.pid, Some(old), "the answer came from the restarted process");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_times_out_while_the_server_restarts_fails_with_restarting() {
    let handle = start(vec![slow_to_restart("s", Duration::from_secs(10))]).await;
    kill_and_wait_restarting(&handle, "s").await;
    let limit = Duration::from_millis(300);
    let result = handle.call(CallTool::new("mcp__s__echo", json!({"text": "too early"})).with_timeout(limit)).await;
    assert_eq!(result, Err(CallError::Restarting { server: "s".into(), tool: "echo".into(), attempt: 1, after: limit }));
    assert_eq!(status_of(&handle, "s").await.queued, 0, "the call left the queue");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_calls_that_time_out_or_are_dropped_never_reach_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let mut config = demo("narrow", &["--request-log", log.to_str().unwrap()]);
    config.limits.max_in_flight = 1;
    let handle = start(vec![config]).await;
    let h = handle.clone();
    let first = tokio::spawn(async move { h.call_tool("mcp__narrow__sleep", args(json!({"ms": 1_500}))).await });
    wait_status(&handle, "narrow", |s| s.in_flight == 1).await;

    let limit = Duration::from_millis(200);
    let timed_out = handle.call(CallTool::new("mcp__narrow__echo", json!({"text": "timed out in the queue"})).with_timeout(limit)).await;
    assert_eq!(timed_out, Err(CallError::Timeout { server: "narrow".into(), tool: "echo".into(), after: limit }));
    let h = handle.clone();
    let dropped = tokio::spawn(async move { h.call_tool("mcp__narrow__add", args(json!({"a": 1, "b": 2}))).await });
    wait_status(&handle, "narrow", |s| s.queued == 1).await;
    dropped.abort();
    wait_status(&handle, "narrow", |s| s.queued == 0).await;

    assert_eq!(text(&first.await.unwrap().unwrap()), "slept 1500 ms");
    // Calls are sent in order: once this one is answered, a queued call left behind would have been sent.
    assert_eq!(text(&handle.call_tool("mcp__narrow__echo", args(json!({"text": "after"}))).await.unwrap()), "after");
    let seen = std::fs::read_to_string(&log).unwrap();
    let calls: Vec<&str> = seen.lines().filter(|l| l.starts_with("tools/call")).collect();
    assert_eq!(calls, ["tools/call sleep", "tools/call echo"], "the server saw only the sleep and the last echo");
    let cancellations = handle.call_tool("mcp__narrow__cancellations", None).await.unwrap();
    assert_eq!(cancellations.structured_content.unwrap()["cancellations"], json!([]), "nothing to cancel for calls never sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_closes_stdout_but_keeps_running_is_killed_and_restarted() {
    let handle = start(vec![demo("half", &[])]).await;
    let pid = status_of(&handle, "half").await.pid.unwrap();
    let call = CallTool::new("mcp__half__close_stdout", json!({})).with_timeout(Duration::from_secs(20));
    match handle.call(call).await {
        Err(CallError::ServerExited { server, exit, .. }) => {
            assert_eq!(server, "half");
            assert_eq!(exit.signal, Some(libc::SIGKILL), "killed, since it would not exit by itself: {exit:?}");
        }
        other => panic!("expected the server to be killed while the call was in flight, got {other:?}"),
    }
    let status = wait_connected_with_restarts(&handle, "half", 1).await;
    assert_ne!(status.pid, Some(pid));
    assert!(alive(pid).is_none(), "the old process is gone and reaped: {:?}", alive(pid));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_loop_ends_failed_after_the_intensity_limit_with_backoff() {
    let handle = mcpvisor::Runtime::start(mcpvisor::config::RuntimeConfig::default()).unwrap();
    let mut events = handle.subscribe();
    handle.add_server(demo("looper", &["--exit-immediately", "3"])).await.unwrap();
    let mut delays = Vec::new();
    let error = loop {
        match tokio::time::timeout(Duration::from_secs(20), events.recv()).await.expect("events keep coming") {
            Some(Event::ServerState { state: ServerState::Restarting { attempt, next_in }, .. }) => {
                assert_eq!(attempt as usize, delays.len() + 1);
                delays.push(next_in);
            }
            Some(Event::ServerState { state: ServerState::Failed { error, stderr_tail, .. }, .. }) => {
                assert!(stderr_tail.iter().any(|l| l.contains("exiting at start-up with code 3")), "{stderr_tail:?}");
                break error;
            }
            Some(_) => {}
            None => panic!("event stream ended"),
        }
    };
    assert_eq!(delays.len(), 5, "five restarts in the window, then failed: {delays:?}");
    for (i, delay) in delays.iter().enumerate() {
        let base = 100.0 * 2f64.powi(i as i32);
        let ms = delay.as_secs_f64() * 1000.0;
        assert!(ms >= base * 0.8 && ms <= base * 1.2, "restart {i} was scheduled after {ms} ms, expected {base} ms ± 20 %");
    }
    assert!(error.contains("exit code 3") && error.contains("intensity"), "{error}");
    let status = status_of(&handle, "looper").await;
    assert_eq!(status.restarts, 5);
    let refused = handle.call_tool("mcp__looper__echo", None).await;
    // It never listed its tools: a call by name says why instead of "unknown tool".
    assert!(matches!(&refused, Err(CallError::Failed { server, .. }) if server == "looper"), "{refused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_hub_leaves_no_process_of_the_group_and_no_zombie() {
    let handle = start(vec![demo("parent", &[])]).await;
    let leader = status_of(&handle, "parent").await.pid.unwrap();
    let result = handle.call_tool("mcp__parent__spawn_grandchild", None).await.unwrap();
    let grandchild = result.structured_content.as_ref().and_then(|v| v["pid"].as_u64()).expect("pid of the grandchild") as u32;
    let before = group(leader);
    assert!(before.iter().any(|p| p.pid == grandchild as i32 && p.state != 'Z'), "grandchild runs in the server's group: {before:?}");

    handle.shutdown().await;

    let left = group(leader);
    assert!(left.is_empty(), "processes of the server's group survived the shutdown: {left:?}");
    assert!(alive(grandchild).is_none(), "the grandchild is gone, zombie or not: {:?}", alive(grandchild));
    assert!(alive(leader).is_none(), "the server is reaped: {:?}", alive(leader));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_servers_orphans_are_killed_and_reaped() {
    let handle = start(vec![demo("crasher", &[])]).await;
    let leader = status_of(&handle, "crasher").await.pid.unwrap();
    let result = handle.call_tool("mcp__crasher__spawn_grandchild", None).await.unwrap();
    let grandchild = result.structured_content.as_ref().and_then(|v| v["pid"].as_u64()).unwrap() as u32;
    let crashed = handle.call_tool("mcp__crasher__crash", args(json!({"code": 7}))).await;
    assert!(matches!(&crashed, Err(CallError::ServerExited { exit, .. }) if exit.code == Some(7)), "{crashed:?}");
    wait_connected_with_restarts(&handle, "crasher", 1).await;
    assert!(group(leader).is_empty(), "left of the crashed server's group: {:?}", group(leader));
    assert!(alive(grandchild).is_none(), "grandchild: {:?}", alive(grandchild));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_oversized_lines_do_not_break_the_connection() {
    let mut config = demo("noisy", &[]);
    config.limits.max_frame = 64 * 1024;
    let handle = start(vec![config]).await;

    let result = handle.call_tool("mcp__noisy__garbage", None).await.unwrap();
    assert_eq!(text(&result), "ok");

    let big = handle.call(CallTool::new("mcp__noisy__big", json!({"bytes": 200_000})).with_timeout(Duration::from_secs(30))).await;
    match big {
        Err(CallError::Protocol { server, tool, message }) => {
            assert_eq!((server.as_str(), tool.as_str()), ("noisy", "big"));
            assert!(message.contains("max_frame"), "{message}");
        }
        other => panic!("expected a max_frame error, got {other:?}"),
    }
    let fits = handle.call_tool("mcp__noisy__big", args(json!({"bytes": 1000}))).await.unwrap();
    assert_eq!(text(&fits).len(), 1000);
    let result = handle.call_tool("mcp__noisy__echo", args(json!({"text": "still here"}))).await.unwrap();
    assert_eq!(text(&result), "still here");
    assert_eq!(status_of(&handle, "noisy").await.restarts, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_initialize_fails_with_a_clear_error() {
    let mut config = demo("mute", &["--no-initialize"]);
    config.timeouts.startup = Duration::from_millis(300);
    config.restart = RestartPolicy::Never;
    let handle = start(vec![config]).await;
    let status = status_of(&handle, "mute").await;
    match status.state {
        ServerState::Failed { error, .. } => assert!(error.contains("did not answer initialize within 300ms"), "{error}"),
        other => panic!("expected failed, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_command_fails_at_once_naming_the_path() {
    let handle = start(vec![ServerConfig::stdio("ghost", "/nonexistent/mcp-server", Vec::<String>::new()), demo("fine", &[])]).await;
    match status_of(&handle, "ghost").await.state {
        ServerState::Failed { error, .. } => assert!(error.contains("command not found") && error.contains("PATH="), "{error}"),
        other => panic!("expected failed, got {other:?}"),
    }
    assert_eq!(status_of(&handle, "ghost").await.restarts, 0, "a missing command is not retried");
    // One broken server does not stop the others.
    assert_eq!(text(&handle.call_tool("mcp__fine__echo", args(json!({"text": "ok"}))).await.unwrap()), "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_panic_becomes_an_error_reply_and_a_restart() {
    let handle = start(vec![demo("fragile", &[])]).await;
    let h = handle.clone();
    let in_flight = tokio::spawn(async move { h.call_tool("mcp__fragile__sleep", args(json!({"ms": 30_000}))).await });
    wait_status(&handle, "fragile", |s| s.in_flight == 1).await;
    assert!(mcpvisor::actors::hub_of(&handle).send(InjectPanic { server: "fragile".into(), during: "echo".into() }).await.unwrap());

    let panicked = handle.call_tool("mcp__fragile__echo", args(json!({"text": "boom"}))).await;
    assert!(matches!(&panicked, Err(CallError::Transport { message, .. }) if message.contains("panic")), "{panicked:?}");
    let earlier = in_flight.await.unwrap();
    assert!(matches!(&earlier, Err(CallError::Transport { message, .. }) if message.contains("injected fault")), "{earlier:?}");

    wait_connected_with_restarts(&handle, "fragile", 1).await;
    assert_eq!(text(&handle.call_tool("mcp__fragile__echo", args(json!({"text": "alive"}))).await.unwrap()), "alive");
}

/// The cap on control frames (notifications and answers to the server)
/// waiting for a server that does not read: `MAX_CONTROL_FRAMES`.
const CONTROL_FRAME_CAP: u64 = 256;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_messages_for_a_server_that_stops_reading_are_capped() {
    let mut config = demo("behind", &[]);
    config.era = mcpvisor::config::Era::Legacy;
    let handle = start(vec![config]).await;
    handle.call_tool("mcp__behind__pause_reading", args(json!({"ms": 5_000}))).await.unwrap();
    // A frame far larger than a pipe's buffer: the write blocks until the server reads again.
    let h = handle.clone();
    let big = "x".repeat(1 << 20);
    let blocked = tokio::spawn(async move {
        h.call(CallTool::new("mcp__behind__echo", json!({"text": big})).with_timeout(Duration::from_secs(60))).await
    });
    wait_status(&handle, "behind", |s| s.in_flight == 1).await;
    for _ in 0..1000 {
        handle.roots_changed("behind").await.unwrap();
    }
    assert!(!blocked.is_finished(), "the server was still not reading while the notifications piled up");

    assert_eq!(text(&blocked.await.unwrap().unwrap()).len(), 1 << 20);
    let received = handle.call_tool("mcp__behind__received", None).await.unwrap().structured_content.unwrap();
    assert_eq!(received["rootsListChanged"], CONTROL_FRAME_CAP, "only the cap's worth of notifications waited; the rest were dropped");
    assert_eq!(text(&handle.call_tool("mcp__behind__echo", args(json!({"text": "caught up"}))).await.unwrap()), "caught up");
}
