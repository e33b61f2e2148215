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
