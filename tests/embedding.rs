//! The runtime embedded: from tokio through `Handle`, and inside an
//! existing actix System through the Hub's address.

mod common;

use std::time::Duration;

use common::*;
use mcpvisor::actors::hub::{GetRegistry, Hub, Shutdown, WaitReady};
use mcpvisor::actors::{CallTool, ListTools};
use mcpvisor::config::RuntimeConfig;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_handle_stops_every_child() {
    let handle = start(vec![demo("one", &[]), demo("two", &[])]).await;
    let pids: Vec<u32> = handle.status().await.iter().filter_map(|s| s.pid).collect();
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|pid| alive(*pid).is_some()));
    let clone = handle.clone();
    let other_thread = std::thread::spawn(move || drop(clone));
    other_thread.join().unwrap();
    assert!(pids.iter().all(|pid| alive(*pid).is_some()), "a clone's drop stops nothing");
    // The last drop shuts down and joins the runtime: the children are reaped when it returns.
    tokio::task::spawn_blocking(move || drop(handle)).await.unwrap();
    for pid in pids {
        assert!(alive(pid).is_none(), "child {pid} survived the last handle: {:?}", alive(pid));
    }
}

#[test]
fn a_hub_runs_inside_an_existing_actix_system() {
    actix::System::new().block_on(async {
        let hub = Hub::start(RuntimeConfig::new([demo("inside", &[])]));
        tokio::time::timeout(Duration::from_secs(20), hub.send(WaitReady)).await.unwrap().unwrap();
        let registry = hub.send(GetRegistry).await.unwrap();
        let tools = registry.send(ListTools).await.unwrap();
        assert!(tools.iter().any(|t| t.name == "mcp__inside__add" && t.server == "inside"));
        let result = registry.send(CallTool::new("mcp__inside__echo", json!({"text": "in actix"}))).await.unwrap().unwrap();
        assert_eq!(text(&result), "in actix");
        hub.send(Shutdown).await.unwrap();
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_server_stops_it_fails_its_calls_as_stopped_and_drops_its_tools() {
    let handle = start(vec![demo("keep", &[]), demo("gone", &[])]).await;
    let pid = status_of(&handle, "gone").await.pid.unwrap();
    let h = handle.clone();
    let in_flight = tokio::spawn(async move { h.call_tool("mcp__gone__sleep", args(json!({"ms": 30_000}))).await });
    wait_status(&handle, "gone", |s| s.in_flight == 1).await;

    handle.remove_server("gone").await.unwrap();

    let stopped = in_flight.await.unwrap();
    assert!(matches!(&stopped, Err(mcpvisor::CallError::Stopped { server, tool }) if server == "gone" && tool == "sleep"), "{stopped:?}");
    assert!(alive(pid).is_none(), "the removed server's process is reaped");
    assert!(handle.server_status("gone").await.is_none());
    let tools = handle.list_tools().await;
    assert!(tools.iter().all(|t| t.server == "keep") && !tools.is_empty());
    let unknown = handle.call_tool("mcp__gone__echo", None).await;
    assert!(matches!(unknown, Err(mcpvisor::CallError::UnknownTool { .. })), "{unknown:?}");
    assert_eq!(handle.remove_server("gone").await, Err(mcpvisor::ManageError::UnknownServer("gone".into())));
}
