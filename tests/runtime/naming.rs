//! Exposed names that collide after sanitising: every server keeps its
//! tools under names that do not depend on start-up order, and each
//! collision is reported in the server's status.

use std::collections::BTreeMap;

use crate::common::*;
use mcpvisor::config::{Era, ServerConfig};

/// Exposed name → server, for every tool of the catalog.
async fn catalog(servers: &[&str]) -> (BTreeMap<String, String>, BTreeMap<String, Vec<String>>) {
    let handle = start(servers.iter().map(|name| demo(name, &[])).collect()).await;
    let names = handle.list_tools().await.into_iter().map(|entry| (entry.name, entry.server)).collect();
    let warnings = handle.status().await.into_iter().map(|status| (status.name, status.warnings)).collect();
    handle.shutdown().await;
    (names, warnings)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_whose_names_read_alike_all_keep_their_tools_under_stable_names() {
    let (first, warnings) = catalog(&["a.b", "a_b", "a b"]).await;
    let (second, _) = catalog(&["a b", "a.b", "a_b"]).await;
    assert_eq!(first, second, "the names do not depend on the order servers start or list in");

    let per_server = |server: &str| first.values().filter(|s| s.as_str() == server).count();
    assert!(per_server("a_b") > 5, "{first:?}");
    assert_eq!(per_server("a.b"), per_server("a_b"));
    assert_eq!(per_server("a b"), per_server("a_b"));
    assert_eq!(first.get("mcp__a_b__echo").map(String::as_str), Some("a_b"), "the exact name keeps the readable form");
    assert_eq!(first.get("mcp__a_b_0466522c__echo").map(String::as_str), Some("a.b"));

    assert!(warnings["a_b"].is_empty(), "{warnings:?}");
    for server in ["a.b", "a b"] {
        let said = warnings[server].join("\n");
        assert!(said.contains("`a b`, `a.b`, `a_b`") && said.contains("exposed as"), "{server}: {said}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_disambiguated_name_reaches_its_own_server() {
    let handle = start(vec![demo("x.y", &[]), demo("x_y", &[])]).await;
    let spawners: Vec<_> = handle.list_tools().await.into_iter().filter(|entry| entry.tool.name == "spawn_grandchild").collect();
    assert_eq!(spawners.len(), 2);
    for entry in spawners {
        let server_pid = status_of(&handle, &entry.server).await.pid.unwrap();
        let result = handle.call_tool(&entry.name, None).await.unwrap();
        let grandchild = result.structured_content.as_ref().and_then(|v| v["pid"].as_u64()).unwrap() as u32;
        let group = alive(grandchild).map(|p| p.pgrp);
        assert_eq!(group, Some(server_pid as i32), "{} ran on another server than {}", entry.name, entry.server);
    }
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_of_one_server_that_read_alike_repeat_or_have_no_name_are_kept_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/processes/stubborn_server.py");
    let mut odd = ServerConfig::stdio("odd", "python3", [fixture, dir.path().to_str().unwrap(), "--odd-tools"]);
    odd.era = Era::Legacy;
    let handle = start(vec![odd]).await;
    let tools: BTreeMap<String, String> = handle.list_tools().await.into_iter().map(|t| (t.tool.name.to_string(), t.name)).collect();
    assert_eq!(tools.get("x_y").map(String::as_str), Some("mcp__odd__x_y"), "the exact name keeps the readable form");
    let dotted = tools.get("x.y").expect("x.y is kept");
    assert!(dotted.starts_with("mcp__odd__x_y_") && dotted.len() == "mcp__odd__x_y_".len() + 8, "{dotted}");
    let warnings = status_of(&handle, "odd").await.warnings.join("\n");
    for said in ["`x.y` is exposed as", "`x_y` is listed more than once", "empty name"] {
        assert!(warnings.contains(said), "no warning saying {said:?}: {warnings}");
    }
    handle.shutdown().await;
}
