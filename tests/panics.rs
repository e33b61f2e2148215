//! Panic isolation beyond the handlers: a panic injected while a stderr
//! line is handled (a stream item, not a message handler) is caught like
//! one in a handler: the connection restarts and the runtime serves on.

mod common;
mod gateway_http_support;

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

use std::time::Duration;

use mcpvisor::actors::guard::PanicNext;
use mcpvisor::actors::hub::GetRegistry;
use mcpvisor::actors::Event;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_a_hub_handler_answers_that_message_with_a_typed_error_and_the_hub_serves_on() {
    let handle = start(vec![demo("kept", &[])]).await;
    let mut events = handle.subscribe();
    handle.hub().send(PanicNext("AddServer".into())).await.unwrap();

    let error = handle.add_server(demo("added", &[])).await.unwrap_err();
    let ManageError::Internal(panic) = &error else { panic!("expected ManageError::Internal, got {error:?}") };
    assert_eq!((panic.actor.as_str(), panic.during.as_str()), ("hub", "AddServer"));
    assert!(error.to_string().contains("please report it, then retry"), "{error}");
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
    let registry = handle.hub().send(GetRegistry).await.unwrap();
    registry.send(PanicNext("CallTool".into())).await.unwrap();

    let error = handle.call_tool("mcp__fs__echo", args(json!({"text": "lost"}))).await.unwrap_err();
    let CallError::Internal { tool, panic } = &error else { panic!("expected CallError::Internal, got {error:?}") };
    assert_eq!((tool.as_str(), panic.actor.as_str(), panic.during.as_str()), ("mcp__fs__echo", "registry", "CallTool"));
    assert_eq!(panicked(&mut events).await, ("registry".to_string(), "CallTool".to_string()));

    assert_eq!(text(&handle.call_tool("mcp__fs__echo", args(json!({"text": "next"}))).await.unwrap()), "next");
    assert!(handle.list_tools().await.iter().any(|entry| entry.name == "mcp__fs__echo"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_a_turn_fails_that_turn_with_a_typed_error_and_the_agent_keeps_its_history() {
    use mcpvisor::actors::agent::{AgentConfig, AgentError, AgentEvent, History, Prompt};
    use mcpvisor::actors::outlet::Outlet;

    let handle = start(vec![demo("fs", &[])]).await;
    let (events, mut heard) = Outlet::channel();
    let config = AgentConfig { events: Some(events), ..AgentConfig::new(std::sync::Arc::new(mcpvisor::llm::scripted::Scripted)) };
    let agent = handle.start_agent(config).await.unwrap();
    let ask = |text: &str| agent.send(Prompt::text(text));
    tokio::time::timeout(DEADLINE, ask("please echo first")).await.unwrap().unwrap().unwrap();
    let before = agent.send(History).await.unwrap().messages;
    assert!(!before.is_empty());

    agent.send(PanicNext("turn".into())).await.unwrap();
    let error = tokio::time::timeout(DEADLINE, ask("please echo second")).await.unwrap().unwrap().unwrap_err();
    let AgentError::Internal(panic) = &error else { panic!("expected AgentError::Internal, got {error:?}") };
    assert_eq!((panic.actor.as_str(), panic.during.as_str()), ("agent", "a turn"));
    let failed = tokio::time::timeout(DEADLINE, async {
        loop {
            if let Some(AgentEvent::TurnFailed { error, .. }) = heard.recv().await {
                return error;
            }
        }
    });
    assert!(failed.await.unwrap().contains("injected fault"));

    // The conversation before the panic is kept, and the next turn runs.
    assert_eq!(agent.send(History).await.unwrap().messages, before);
    tokio::time::timeout(DEADLINE, ask("please echo third")).await.unwrap().unwrap().unwrap();
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
    let after = json_of(tokio::time::timeout(DEADLINE, list(&broken)).await.unwrap().unwrap()).await;
    assert!(after.get("error").is_some(), "the closed session serves no more: {after}");
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
