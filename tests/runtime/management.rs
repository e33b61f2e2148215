//! The management API at run time: enable/disable, reconnect and
//! `SetServers`, against real demo-server processes.

use crate::common::*;
use mcpvisor::{CallError, ServerState};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_server_keeps_its_process_while_its_tools_leave_the_catalog() {
    let handle = start(vec![demo("toggled", &[]), demo("other", &[])]).await;
    let pid = status_of(&handle, "toggled").await.pid;

    handle.set_enabled("toggled", false).await.unwrap();
    let status = wait_status(&handle, "toggled", |s| s.state == ServerState::Disabled).await;
    assert_eq!(status.pid, pid, "the process is kept");
    assert!(handle.list_tools().await.iter().all(|t| t.server == "other"));
    let refused = handle.call_tool("mcp__toggled__echo", args(json!({"text": "x"}))).await;
    assert_eq!(refused, Err(CallError::Disabled { server: "toggled".into(), tool: "echo".into() }));

    handle.set_enabled("toggled", true).await.unwrap();
    let status = wait_status(&handle, "toggled", |s| s.state == ServerState::Connected).await;
    assert_eq!(status.pid, pid);
    assert!(handle.list_tools().await.iter().any(|t| t.name == "mcp__toggled__echo"));
    assert_eq!(text(&handle.call_tool("mcp__toggled__echo", args(json!({"text": "back"}))).await.unwrap()), "back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_configured_disabled_starts_only_when_enabled() {
    let mut config = demo("later", &[]);
    config.enabled = false;
    let handle = start(vec![config]).await;
    let status = status_of(&handle, "later").await;
    assert_eq!((status.state, status.pid), (ServerState::Disabled, None));
    handle.set_enabled("later", true).await.unwrap();
    wait_status(&handle, "later", |s| s.state == ServerState::Connected).await;
    assert_eq!(text(&handle.call_tool("mcp__later__echo", args(json!({"text": "up"}))).await.unwrap()), "up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_starts_a_fresh_process_without_counting_a_crash() {
    let handle = start(vec![demo("again", &[])]).await;
    let old = status_of(&handle, "again").await.pid.unwrap();
    handle.reconnect("again").await.unwrap();
    let status = wait_status(&handle, "again", |s| s.state == ServerState::Connected && s.pid.is_some_and(|p| p != old)).await;
    assert_eq!(status.restarts, 0, "a deliberate reconnect is not a crash restart");
    assert!(alive(old).is_none(), "the old process is reaped");
    assert_eq!(text(&handle.call_tool("mcp__again__echo", args(json!({"text": "fresh"}))).await.unwrap()), "fresh");
    assert_eq!(handle.reconnect("nobody").await, Err(mcpvisor::ManageError::UnknownServer("nobody".into())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_servers_adds_removes_and_restarts_changed_ones_leaving_the_rest_running() {
    let handle = start(vec![demo("stays", &[]), demo("goes", &[]), demo("changes", &[])]).await;
    let pid = |name: &'static str| {
        let handle = handle.clone();
        async move { status_of(&handle, name).await.pid.unwrap() }
    };
    let (stays, goes, changes) = (pid("stays").await, pid("goes").await, pid("changes").await);

    let mut bad = demo("broken", &[]);
    bad.command.clear();
    let result = handle
        .set_servers(vec![demo("stays", &[]), demo("changes", &[]).with_env("MODE", "new"), demo("arrives", &[]), bad])
        .await
        .unwrap();
    assert_eq!(result.added, ["arrives"]);
    assert_eq!(result.removed, ["goes"]);
    assert_eq!(result.changed, ["changes"]);
    assert_eq!(result.errors.len(), 1);
    assert!(result.errors[0].0 == "broken" && result.errors[0].1.contains("command"), "{:?}", result.errors);

    assert!(handle.wait_ready(std::time::Duration::from_secs(20)).await);
    assert_eq!(status_of(&handle, "stays").await.pid, Some(stays), "an unchanged server keeps running");
    assert_ne!(status_of(&handle, "changes").await.pid, Some(changes), "a changed server runs its new configuration");
    assert!(alive(goes).is_none() && alive(changes).is_none(), "replaced processes are reaped");
    assert!(handle.server_status("goes").await.is_none());
    let names: Vec<String> = handle.status().await.into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["arrives", "changes", "stays"]);
    for server in ["arrives", "changes", "stays"] {
        let result = handle.call_tool(&format!("mcp__{server}__echo"), args(json!({"text": server}))).await.unwrap();
        assert_eq!(text(&result), server);
    }
}
