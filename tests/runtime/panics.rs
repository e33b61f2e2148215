//! Panic isolation beyond the handlers: a panic injected while a stderr
//! line is handled (a stream item, not a message handler) is caught like
//! one in a handler: the connection restarts and the runtime serves on.

use crate::gateway_http_support;

use crate::common::*;
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

use std::time::Duration;

use mcpvisor::actors::guard::PanicNext;
use mcpvisor::actors::hub::GetRegistry;
use mcpvisor::actors::Event;
use mcpvisor::error::Panicked;
use mcpvisor::{CallError, ManageError};

/// Every wait here ends.
const DEADLINE: Duration = Duration::from_secs(10);

/// The next `ActorPanicked` event, within the deadline.
async fn panicked(events: &mut mcpvisor::Events) -> (String, String) {
    let wait = async {
        loop {
            if let Some(Event::ActorPanicked { actor, during, .. }) = events.recv().await {
                return (actor, during);
            }
        }
    };
    tokio::time::timeout(DEADLINE, wait).await.expect("an ActorPanicked event within the deadline")
}

/// The panic a `PanicNext` injects into `actor`'s handler of `during`, as the caller gets it back.
fn injected(actor: &str, during: &str) -> Panicked {
    Panicked { actor: actor.into(), during: during.into(), message: "injected fault".into() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_a_hub_handler_answers_that_message_with_a_typed_error_and_the_hub_serves_on() {
    let handle = start(vec![demo("kept", &[])]).await;
    let mut events = handle.subscribe();
    mcpvisor::actors::hub_of(&handle).send(PanicNext("AddServer".into())).await.unwrap();

    let error = handle.add_server(demo("added", &[])).await.unwrap_err();
    let ManageError::Internal(panic) = &error else { panic!("expected ManageError::Internal, got {error:?}") };
    assert_eq!(panic, &injected("hub", "AddServer"));
    assert_eq!(
        error.to_string(),
        "internal error in mcpvisor's hub while handling AddServer (panic: injected fault); this is a bug in mcpvisor: please report it, then retry"
    );
    assert_eq!(panicked(&mut events).await, ("hub".to_string(), "AddServer".to_string()));

    // The same message works again, and the state from before the panic is intact.
    handle.add_server(demo("added", &[])).await.unwrap();
    wait_status(&handle, "added", |s| s.state.label() == "connected").await;
    assert_eq!(text(&handle.call_tool("mcp__kept__echo", args(json!({"text": "still"}))).await.unwrap()), "still");
    let names: Vec<String> = handle.status().await.into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["added", "kept"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_a_registry_handler_fails_that_call_with_a_typed_error_and_the_catalog_serves_on() {
    let handle = start(vec![demo("fs", &[])]).await;
    let mut events = handle.subscribe();
    let registry = mcpvisor::actors::hub_of(&handle).send(GetRegistry).await.unwrap();
    registry.send(PanicNext("CallTool".into())).await.unwrap();

    let error = handle.call_tool("mcp__fs__echo", args(json!({"text": "lost"}))).await.unwrap_err();
    let CallError::Internal { tool, panic } = &error else { panic!("expected CallError::Internal, got {error:?}") };
    assert_eq!((tool.as_str(), panic), ("mcp__fs__echo", &injected("registry", "CallTool")));
    assert_eq!(
        error.to_string(),
        "`mcp__fs__echo` failed: internal error in mcpvisor's registry while handling CallTool (panic: injected fault); \
         this is a bug in mcpvisor: please report it, then retry"
    );
    assert_eq!(panicked(&mut events).await, ("registry".to_string(), "CallTool".to_string()));

    assert_eq!(text(&handle.call_tool("mcp__fs__echo", args(json!({"text": "next"}))).await.unwrap()), "next");
    assert!(handle.list_tools().await.iter().any(|entry| entry.name == "mcp__fs__echo"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_a_turn_fails_that_turn_with_a_typed_error_and_the_agent_keeps_its_history() {
    use mcpvisor::actors::agent::{AgentConfig, AgentError, AgentEvent};
    use mcpvisor::actors::outlet::Outlet;

    let handle = start(vec![demo("fs", &[])]).await;
    let (events, mut heard) = Outlet::channel();
    let config = AgentConfig { events: Some(events), ..AgentConfig::new(std::sync::Arc::new(mcpvisor::llm::scripted::Scripted)) };
    let agent = handle.start_agent(config).await.unwrap();
    let ask = |text: &str| agent.prompt(text);
    tokio::time::timeout(DEADLINE, ask("please echo first")).await.unwrap().unwrap();
    let before = agent.history().await.unwrap().messages;
    assert!(!before.is_empty());

    agent.panic_next("turn").await;
    let error = tokio::time::timeout(DEADLINE, ask("please echo second")).await.unwrap().unwrap_err();
    let AgentError::Internal(panic) = &error else { panic!("expected AgentError::Internal, got {error:?}") };
    assert_eq!(panic, &injected("agent", "a turn"));
    let expected = "the turn failed: internal error in mcpvisor's agent while handling a turn (panic: injected fault); this is a bug";
    assert!(error.to_string().starts_with(expected), "{error}");
    let failed = tokio::time::timeout(DEADLINE, async {
        loop {
            if let Some(AgentEvent::TurnFailed { error, .. }) = heard.recv().await {
                return error;
            }
        }
    });
    assert!(failed.await.unwrap().contains("injected fault"));

    // The conversation before the panic is kept, and the next turn runs.
    assert_eq!(agent.history().await.unwrap().messages, before);
    tokio::time::timeout(DEADLINE, ask("please echo third")).await.unwrap().unwrap();
}

/// `POST /mcp` of the test hook `mcpvisor/test/panic` on a session; the answer.
async fn inject(
    http: &reqwest::Client,
    gateway: &gateway_http_support::Gateway,
    session: &str,
    params: serde_json::Value,
) -> serde_json::Value {
    use gateway_http_support::{json_of, post, request, LEGACY};
    let asked = post(http, &gateway.mcp(), &request(7, "mcpvisor/test/panic", params));
    let response = asked.header("mcp-session-id", session).header("mcp-protocol-version", LEGACY).send();
    json_of(tokio::time::timeout(DEADLINE, response).await.unwrap().unwrap()).await
}

async fn healthz(http: &reqwest::Client, gateway: &gateway_http_support::Gateway) -> (u16, serde_json::Value) {
    let response = tokio::time::timeout(DEADLINE, http.get(format!("{}/healthz", gateway.base)).send()).await.unwrap().unwrap();
    (response.status().as_u16(), gateway_http_support::json_of(response).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_a_gateway_session_answers_its_request_with_an_error_and_closes_only_that_session() {
    use gateway_http_support::{client, json_of, open_session, post, request, Gateway, LEGACY};
    let gateway = Gateway::loopback();
    let http = client();
    let (broken, other) = (open_session(&http, &gateway.mcp()).await, open_session(&http, &gateway.mcp()).await);

    let answer = inject(&http, &gateway, &broken, json!({"actor": "session"})).await;
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("gateway session") && message.contains("this session was closed: start a new one"), "{message}");

    let list = |session: &str| {
        let asked = post(&http, &gateway.mcp(), &request(8, "tools/list", json!({})));
        asked.header("mcp-session-id", session.to_string()).header("mcp-protocol-version", LEGACY).send()
    };
    // The closed session's id is forgotten: 404, so its client initializes again
    // (polled: the session's actor stops just after its answer).
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let after = tokio::time::timeout(DEADLINE, list(&broken)).await.unwrap().unwrap();
        if after.status() == 404 {
            break;
        }
        let after = json_of(after).await;
        assert!(after.get("error").is_some(), "the closed session serves no more: {after}");
        assert!(tokio::time::Instant::now() < deadline, "the closed session's id still answers something other than 404: {after}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let untouched = json_of(tokio::time::timeout(DEADLINE, list(&other)).await.unwrap().unwrap()).await;
    assert!(untouched["result"]["tools"].as_array().is_some_and(|tools| !tools.is_empty()), "{untouched}");
    // The core was not hurt: still serving.
    assert_eq!(healthz(&http, &gateway).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_503_once_the_core_cannot_serve_and_200_after_a_caught_panic() {
    use gateway_http_support::{client, open_session, Gateway};
    let gateway = Gateway::loopback();
    let http = client();
    let session = open_session(&http, &gateway.mcp()).await;

    // A panic caught in the Registry: the core serves on.
    inject(&http, &gateway, &session, json!({"actor": "registry", "during": "ListTools"})).await;
    let (status, body) = healthz(&http, &gateway).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("serving")), "{body}");

    // A panic that escapes the guard ends the Registry: /healthz says so.
    inject(&http, &gateway, &session, json!({"actor": "registry", "during": "unguarded"})).await;
    let down = async {
        loop {
            let (status, body) = healthz(&http, &gateway).await;
            if status == 503 {
                return body;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let body = tokio::time::timeout(DEADLINE, down).await.expect("503 within the deadline");
    assert_eq!(body["status"], "core_down", "{body}");
    assert!(body["error"].as_str().unwrap().contains("the registry stopped"), "{body}");
}

/// The `mcpvisor acp` binary (built with `fault-injection` for tests).
fn acp_process() -> (tokio::process::Child, tokio::process::ChildStdin, tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>)
{
    use tokio::io::AsyncBufReadExt;
    let home = tempfile::tempdir().unwrap().keep();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpvisor"))
        .arg("acp")
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("MCPVISOR_MODEL")
        .current_dir(&home)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("mcpvisor acp starts");
    let stdin = child.stdin.take().unwrap();
    let lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    (child, stdin, lines)
}

/// Sends request `id` and returns its response (other messages skipped), within 10 s.
async fn acp_request(
    stdin: &mut tokio::process::ChildStdin,
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    id: u64,
    method: &str,
    params: serde_json::Value,
) -> serde_json::Value {
    use tokio::io::AsyncWriteExt;
    let line = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string() + "\n";
    stdin.write_all(line.as_bytes()).await.unwrap();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let next = tokio::time::timeout_at(deadline, lines.next_line()).await;
        let line = next.unwrap_or_else(|_| panic!("no answer to {method} within 10 s")).unwrap().expect("acp's stdout stays open");
        let message: serde_json::Value = serde_json::from_str(&line).unwrap();
        if message["id"] == id && message.get("method").is_none() {
            return message;
        }
    }
}

#[tokio::test]
async fn a_panic_in_the_acp_connection_answers_that_request_and_the_connection_serves_on() {
    let (mut child, mut stdin, mut lines) = acp_process();
    let initialize = serde_json::json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false}});
    let answer = acp_request(&mut stdin, &mut lines, 1, "initialize", initialize).await;
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    let panicked = acp_request(&mut stdin, &mut lines, 2, "mcpvisor/test/panic", serde_json::json!({})).await;
    assert_eq!(panicked["error"]["code"], -32603, "{panicked}");
    let message = panicked["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("ACP connection") && message.contains("injected fault") && message.contains("connection goes on"),
        "{message}"
    );
    let cwd = std::env::temp_dir();
    let session = acp_request(&mut stdin, &mut lines, 3, "session/new", serde_json::json!({"cwd": cwd, "mcpServers": []})).await;
    assert!(session["result"]["sessionId"].is_string(), "the connection serves on, its state kept (initialize still holds): {session}");
    drop(stdin);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait()).await;
}
