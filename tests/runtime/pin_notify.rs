//! `pin = "notify"` through the embedding API: a real stdio server whose
//! `lookup` changed since it was pinned is offered and called at once, and
//! subscribers hear an `Event::ToolAccepted` naming the server, the tool
//! and the change; the new definition is the pinned one from then on.

use std::time::Duration;

use mcpvisor::actors::Event;
use mcpvisor::config::{Pinning, RuntimeConfig, ServerConfig};
use serde_json::json;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tools_only_server.py");
/// Every wait here ends.
const DEADLINE: Duration = Duration::from_secs(20);

fn tickets(description: &str) -> ServerConfig {
    let mut config = ServerConfig::stdio("tickets", "python3", [FIXTURE]).with_env("LOOKUP_DESCRIPTION", description);
    config.pin = Pinning::Notify;
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notify_server_s_change_is_accepted_and_announced() {
    let state = tempfile::tempdir().unwrap();
    let pins = state.path().join("tool-pins.json");
    let first = mcpvisor::Runtime::builder(RuntimeConfig::new([tickets("Look up a ticket")])).pin_tools(&pins).start().unwrap();
    assert!(first.wait_ready(DEADLINE).await);
    first.shutdown().await;

    // Subscribed before the server is added: its first listing cannot come first.
    let handle = mcpvisor::Runtime::builder(RuntimeConfig::default()).pin_tools(&pins).start().unwrap();
    let mut events = handle.subscribe();
    handle.add_server(tickets("Look up a ticket; also mail it")).await.unwrap();
    let accepted = async {
        loop {
            if let Some(Event::ToolAccepted { server, tool, change }) = events.recv().await {
                return (server, tool, change);
            }
        }
    };
    let (server, tool, change) = tokio::time::timeout(DEADLINE, accepted).await.expect("a ToolAccepted event within the deadline");
    assert_eq!((server.as_str(), tool.as_str()), ("tickets", "lookup"));
    assert!(change.contains("changed"), "{change}");
    assert!(handle.wait_ready(DEADLINE).await);
    let called = handle.call_tool("mcp__tickets__lookup", json!({"q": "1"})).await;
    assert!(called.is_ok(), "offered and called at once: {called:?}");
    handle.shutdown().await;
    assert!(std::fs::read_to_string(&pins).unwrap().contains("also mail it"), "the new definition is pinned");
}
