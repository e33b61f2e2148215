//! In-process servers: tools written in Rust, reached through the same
//! connection as a child process (names, status, time-outs, cancellation,
//! back-pressure, restarts), with no pid.

use std::path::Path;
use std::time::Duration;

use crate::common::*;
use futures::future::BoxFuture;
use mcpvisor::config::{native, Keyword, ServerConfig};
use mcpvisor::protocol::ErrorObject;
use mcpvisor::transport::in_process::InProcessServer;
use mcpvisor::{CallError, CallTool, CallToolResult, ContentBlock, JsonObject, ManageError, ServerState, Tool, ToolHandler};
use serde_json::json;
use tokio::sync::mpsc;

/// Tools that echo, panic, or wait until cancelled (telling `dropped` when
/// their future is dropped).
struct Tools {
    dropped: mpsc::UnboundedSender<String>,
}

/// Sends its label when dropped: proof that a call's future was dropped.
struct DropGuard(mpsc::UnboundedSender<String>, String);

impl Drop for DropGuard {
    fn drop(&mut self) {
        let _ = self.0.send(self.1.clone());
    }
}

fn tool(name: &'static str) -> Tool {
    let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}});
    Tool::new(name, format!("test tool {name}"), schema.as_object().cloned().unwrap_or_default())
}

impl ToolHandler for Tools {
    fn tools(&self) -> Vec<Tool> {
        vec![tool("echo"), tool("panic"), tool("wait")]
    }

    fn call<'a>(&'a self, name: &'a str, arguments: JsonObject) -> BoxFuture<'a, Result<CallToolResult, ErrorObject>> {
        Box::pin(async move {
            let text = arguments.get("text").and_then(|t| t.as_str()).unwrap_or_default().to_string();
            match name {
                "echo" => Ok(CallToolResult::success(vec![ContentBlock::text(text)])),
                "panic" => panic!("the handler broke on {text}"),
                _ => {
                    let _guard = DropGuard(self.dropped.clone(), text);
                    std::future::pending().await
                }
            }
        })
    }
}

fn server(name: &str) -> (InProcessServer, mpsc::UnboundedReceiver<String>) {
    let (dropped, drops) = mpsc::unbounded_channel();
    (InProcessServer { config: ServerConfig::in_process(name), handler: Tools { dropped }.into() }, drops)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_round_trips_and_status_shows_the_server_without_a_pid() {
    let (rust, _drops) = server("rust");
    let handle = start_in_process(vec![rust], vec![demo("demo", &[])]).await;
    let result = handle.call_tool("mcp__rust__echo", json!({"text": "hello"})).await.unwrap();
    assert_eq!(text(&result), "hello");
    assert_eq!(result.is_error, Some(false));
    let names: Vec<String> = handle.list_tools().await.into_iter().filter(|t| t.server == "rust").map(|t| t.name).collect();
    assert_eq!(names, ["mcp__rust__echo", "mcp__rust__panic", "mcp__rust__wait"]);
    let status = status_of(&handle, "rust").await;
    assert_eq!((status.state, status.pid, status.tools, status.era.as_deref()), (ServerState::Connected, None, 3, Some("legacy")));
    assert!(status_of(&handle, "demo").await.pid.is_some(), "a stdio server beside it keeps its pid");
    let refused = handle.call_tool("mcp__rust__echo", json!({"text": 5})).await;
    assert!(matches!(&refused, Err(CallError::InvalidArguments { server, .. }) if server == "rust"), "{refused:?}");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_fails_its_call_as_an_exit_and_the_server_comes_back() {
    let (rust, _drops) = server("rust");
    let handle = start_in_process(vec![rust], vec![]).await;
    let crashed = handle.call_tool("mcp__rust__panic", json!({"text": "purpose"})).await;
    let Err(CallError::ServerExited { server, tool, exit, stderr_tail }) = crashed else {
        panic!("expected ServerExited, got {crashed:?}")
    };
    assert_eq!((server.as_str(), tool.as_str(), exit.code), ("rust", "panic", Some(101)));
    assert!(stderr_tail.iter().any(|line| line.contains("panicked: the handler broke on purpose")), "{stderr_tail:?}");
    let status = wait_connected_with_restarts(&handle, "rust", 1).await;
    assert_eq!(status.restarts, 1);
    let result = handle.call_tool("mcp__rust__echo", json!({"text": "back"})).await.unwrap();
    assert_eq!(text(&result), "back");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_out_cancels_the_call_and_drops_the_handlers_future() {
    let (rust, mut drops) = server("rust");
    let handle = start_in_process(vec![rust], vec![]).await;
    let call = CallTool::new("mcp__rust__wait", json!({"text": "slow one"})).with_timeout(Duration::from_secs(1));
    let timed_out = handle.call(call).await;
    assert!(matches!(&timed_out, Err(CallError::Timeout { server, tool, .. }) if server == "rust" && tool == "wait"), "{timed_out:?}");
    let dropped = tokio::time::timeout(Duration::from_secs(20), drops.recv()).await.expect("the future is dropped after the time-out");
    assert_eq!(dropped.as_deref(), Some("slow one"));
    let status = status_of(&handle, "rust").await;
    assert_eq!((status.restarts, status.in_flight), (0, 0), "a cancelled call does not restart the server");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_past_max_in_flight_and_max_queued_are_refused_as_overloaded() {
    let (mut rust, mut drops) = server("rust");
    rust.config.limits.max_in_flight = 1;
    rust.config.limits.max_queued = 1;
    let handle = start_in_process(vec![rust], vec![]).await;
    let call = |label: &'static str| {
        let handle = handle.clone();
        tokio::spawn(async move { handle.call_tool("mcp__rust__wait", json!({"text": label})).await })
    };
    // One after the other, so that "first" is the one on the wire.
    let first = call("first");
    wait_status(&handle, "rust", |s| s.in_flight == 1).await;
    let second = call("second");
    wait_status(&handle, "rust", |s| s.in_flight == 1 && s.queued == 1).await;
    let waiting = [first, second];
    let refused = handle.call_tool("mcp__rust__echo", json!({"text": "third"})).await;
    assert!(matches!(&refused, Err(CallError::Overloaded { server, in_flight: 1, queued: 1, .. }) if server == "rust"), "{refused:?}");
    handle.shutdown().await;
    for call in waiting {
        let ended = call.await.unwrap();
        assert!(matches!(ended, Err(CallError::Stopped { .. })), "{ended:?}");
    }
    let dropped = tokio::time::timeout(Duration::from_secs(20), drops.recv()).await.expect("shutdown drops the call in flight");
    assert_eq!(dropped.as_deref(), Some("first"), "only the call on the wire reached the handler");
}

#[test]
fn files_neither_define_nor_keep_an_in_process_server() {
    let read = native::parse(Path::new("servers.toml"), "[servers.x]\ntransport = \"in-process\"\n").unwrap_err().to_string();
    assert!(read.contains("registered in code by the program that embeds mcpvisor"), "{read}");
    let dir = tempfile::tempdir().unwrap();
    let written = native::upsert(&dir.path().join("servers.toml"), &ServerConfig::in_process("rust")).unwrap_err().to_string();
    assert!(written.contains("cannot be written to a file"), "{written}");
    assert!(!dir.path().join("servers.toml").exists());
}

#[test]
fn an_in_process_config_is_plain_data_that_names_its_server() {
    let config = ServerConfig::in_process("rust");
    assert_eq!(config, ServerConfig::in_process("rust"), "equal by value: the handler is not part of it");
    assert_ne!(config, ServerConfig::in_process("other"));
    assert_eq!(config.transport.as_str(), "in-process", "how status and listings name it");
    let mut mixed = config.clone();
    mixed.command = "node".into();
    assert!(mixed.validate().unwrap_err().to_string().contains("an in-process server has no `command`"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_process_server_without_a_handler_fails_naming_the_server_and_how_to_give_one() {
    let handle = start(vec![ServerConfig::in_process("orphan"), demo("demo", &[])]).await;
    let ServerState::Failed { error, retry_in, .. } = status_of(&handle, "orphan").await.state else {
        panic!("expected failed: {:?}", status_of(&handle, "orphan").await)
    };
    assert!(
        error.contains("server `orphan`") && error.contains("no handler") && error.contains(".in_process(\"orphan\", handler)"),
        "{error}"
    );
    assert_eq!(retry_in, None, "a restart cannot bring a handler: it is not retried");
    assert_eq!(status_of(&handle, "demo").await.state, ServerState::Connected, "the other servers start");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_added_with_its_handler_serves_and_keeps_it_for_a_re_add_under_its_name() {
    let handle = start(vec![]).await;
    let (rust, mut drops) = server("rust");
    handle.add_in_process(rust.config, rust.handler).await.unwrap();
    let result = handle.call_tool("mcp__rust__echo", json!({"text": "added"})).await.unwrap();
    assert_eq!(text(&result), "added");
    let (again, mut again_drops) = server("rust");
    let refused = handle.add_in_process(again.config, again.handler).await;
    assert!(matches!(&refused, Err(ManageError::DuplicateServer(name)) if name == "rust"), "{refused:?}");

    // Removed and added again by its configuration alone: the first handler
    // (whose futures report to `drops`) serves it, not the refused one.
    handle.remove_server("rust").await.unwrap();
    handle.add_server(ServerConfig::in_process("rust")).await.unwrap();
    let call = CallTool::new("mcp__rust__wait", json!({"text": "which"})).with_timeout(Duration::from_secs(1));
    assert!(matches!(handle.call(call).await, Err(CallError::Timeout { .. })));
    let dropped = tokio::time::timeout(Duration::from_secs(20), drops.recv()).await.expect("the first handler ran the call");
    assert_eq!(dropped.as_deref(), Some("which"));
    assert!(again_drops.try_recv().is_err(), "the refused handler never ran");
    handle.shutdown().await;
}

/// One tool, named `name`, that answers its own name.
struct Only(&'static str);

impl ToolHandler for Only {
    fn tools(&self) -> Vec<Tool> {
        vec![tool(self.0)]
    }

    fn call<'a>(&'a self, name: &'a str, _arguments: JsonObject) -> BoxFuture<'a, Result<CallToolResult, ErrorObject>> {
        Box::pin(async move { Ok(CallToolResult::success(vec![ContentBlock::text(name.to_string())])) })
    }
}

/// In-process servers are the embedding program's own code: tool pins leave
/// them alone. (They have no command line, so pinned under it they shared one
/// identity: each listing of one marked the other's tools gone, and its next
/// listing withheld them as "returned".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_pins_leave_in_process_servers_alone() {
    let state = tempfile::tempdir().unwrap();
    let pins = state.path().join("tool-pins.json");
    // Each run lists both servers, as each command of the CLI does.
    for run in 0..3 {
        let builder = mcpvisor::Runtime::builder(mcpvisor::config::RuntimeConfig::default()).pin_tools(&pins);
        let handle = builder.in_process("alpha", Only("a")).in_process("beta", Only("b")).start().unwrap();
        assert!(handle.wait_ready(Duration::from_secs(20)).await);
        for (exposed, answer) in [("mcp__alpha__a", "a"), ("mcp__beta__b", "b")] {
            let called = handle.call_tool(exposed, json!({})).await.unwrap_or_else(|e| panic!("run {run}: {exposed}: {e}"));
            assert_eq!(called.content[0].as_text().map(|t| t.text.as_str()), Some(answer));
        }
        handle.shutdown().await;
    }
    assert!(!std::fs::read_to_string(&pins).unwrap_or_default().contains("stdio:"), "nothing of theirs is pinned");
}
