//! mcpvisor against real third-party MCP servers over stdio: the npm
//! reference servers `everything`, `filesystem` and `memory`, PyPI's
//! `mcp-server-time`, and `py`, a server of our own on the official Python
//! SDK (`mcp` 2.x, tests/interop/modern_server.py). `.ci/interop-setup DIR`
//! installs them into a scratch folder and writes `DIR/servers.json`, which
//! these tests read (docs/interop.md has the survey behind the expectations).
//!
//! Every test is `#[ignore]`d: `cargo test` reports them as ignored.
//! `.ci/run` runs them with `MCPVISOR_INTEROP=1 cargo test --test interop servers_stdio:: --
//! --ignored`; run that way, a missing variable, manifest or server is a
//! failure with a message, never a skip.
//!
//! | server | era modes | exercised |
//! | --- | --- | --- |
//! | everything | auto, legacy (+ modern refused) | tools and exact results, structured content, image, annotations, resources, templates, prompts, completion, progress, logging + setLevel, resource subscriptions, sampling, elicitation, roots, a task-required tool |
//! | filesystem | auto, legacy | roots become its allowed directories, `roots_changed` replaces them, write/read/edit/list, access denied outside the roots |
//! | memory | auto, legacy | entities and relations, read/search/open, the graph resource and its subscription |
//! | time | auto, legacy, modern, auto with a probe that times out | both eras, exact conversion, inputSchema validation, unknown tool |
//! | py | auto, legacy, modern | progress, logging (per-request level when modern), sampling, elicitation and roots (input_required when modern), resources, template, prompt, completion, modern resource subscriptions |

use crate::common;

use std::time::Duration;

use crate::common::{status_of, text};
use crate::interop_support::everything::everything;
use crate::interop_support::python::py;
use crate::interop_support::*;
use mcpvisor::config::{Era, RuntimeConfig};
use mcpvisor::{CallError, CallTool, Event, Handle, Runtime, ServerState};
use serde_json::{json, Value};

// ---------------------------------------------------------------- everything

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn everything_auto() {
    everything(server("everything", Era::Auto, &[])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn everything_legacy() {
    everything(server("everything", Era::Legacy, &[])).await;
}

/// `era = modern` on a server without `server/discover`: a clear failure, not a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn everything_modern_is_refused() {
    let mut config = server("everything", Era::Modern, &["stdio"]);
    config.restart = mcpvisor::restart::RestartPolicy::Never;
    let handle = Runtime::start(RuntimeConfig::new([config])).expect("the runtime starts");
    assert!(handle.wait_ready(Duration::from_secs(60)).await);
    let status = status_of(&handle, "everything").await;
    let ServerState::Failed { error, .. } = &status.state else { panic!("failed expected: {status:?}") };
    assert!(error.contains("-32601") && error.contains("era = modern"), "{error}");
    handle.shutdown().await;
}

// ---------------------------------------------------------------- filesystem

async fn filesystem(era: Era) {
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    let first_path = first.path().to_string_lossy().into_owned();
    let (handlers, asked) = user(&[&first_path]);
    // Started on `second`; the roots replace it with `first`.
    let handle = start(server("filesystem", era, &[&second.path().to_string_lossy()]), Some(handlers)).await;
    assert_eq!(era_of(&handle, "filesystem").await, ("legacy".into(), "2025-11-25".into()), "{era:?}");
    assert_eq!(status_of(&handle, "filesystem").await.resources, 0);

    let allowed = async {
        loop {
            let listed = text(&call(&handle, "filesystem", "list_allowed_directories", json!({})).await);
            if !listed.contains(&*second.path().to_string_lossy()) {
                return listed;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let allowed = tokio::time::timeout(Duration::from_secs(10), allowed).await.expect("the roots replace the allowed directories");
    assert_eq!(allowed, format!("Allowed directories:\n{first_path}"));
    assert!(asked.lock().unwrap().roots_asked >= 1);

    let note = first.path().join("note.txt").to_string_lossy().into_owned();
    let wrote = call(&handle, "filesystem", "write_file", json!({"path": note, "content": "hello\nworld\n"})).await;
    assert_eq!(text(&wrote), format!("Successfully wrote to {note}"));
    assert_eq!(wrote.structured_content, Some(json!({"content": format!("Successfully wrote to {note}")})));
    assert_eq!(text(&call(&handle, "filesystem", "read_text_file", json!({"path": note})).await), "hello\nworld\n");
    assert_eq!(text(&call(&handle, "filesystem", "read_text_file", json!({"path": note, "head": 1})).await), "hello");
    let diff =
        text(&call(&handle, "filesystem", "edit_file", json!({"path": note, "edits": [{"oldText": "world", "newText": "there"}]})).await);
    assert!(diff.contains("-world\n+there"), "{diff}");
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "hello\nthere\n");
    assert_eq!(text(&call(&handle, "filesystem", "list_directory", json!({"path": first_path})).await), "[FILE] note.txt");

    // Outside the roots: the tool's own refusal, an isError result.
    let outside = handle.call_on("filesystem", CallTool::new("read_text_file", json!({"path": "/etc/hostname"}))).await.unwrap();
    assert_eq!(outside.is_error, Some(true));
    assert!(text(&outside).starts_with("Access denied - path outside allowed directories"), "{}", text(&outside));
    // Missing required arguments never reach the server.
    let invalid = handle.call_on("filesystem", CallTool::new("write_file", json!({"path": note}))).await;
    assert!(matches!(invalid, Err(CallError::InvalidArguments { .. })), "{invalid:?}");

    // New roots: notifications/roots/list_changed, the server asks again and replaces its directories.
    let second_path = second.path().to_string_lossy().into_owned();
    asked.lock().unwrap().roots = vec![second_path.clone()];
    handle.roots_changed("filesystem").await.unwrap();
    let moved = async {
        loop {
            let listed = text(&call(&handle, "filesystem", "list_allowed_directories", json!({})).await);
            if listed.contains(&second_path) {
                return listed;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let moved = tokio::time::timeout(Duration::from_secs(10), moved).await.expect("roots_changed moves the allowed directories");
    assert_eq!(moved, format!("Allowed directories:\n{second_path}"));
    let denied = handle.call_on("filesystem", CallTool::new("read_text_file", json!({"path": note}))).await.unwrap();
    assert_eq!(denied.is_error, Some(true), "the first directory is no longer allowed: {denied:?}");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn filesystem_auto() {
    filesystem(Era::Auto).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn filesystem_legacy() {
    filesystem(Era::Legacy).await;
}

/// Without an embedder's handler the configured `roots` are what the server gets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn filesystem_gets_the_configured_roots() {
    let root = tempfile::tempdir().unwrap();
    let started_on = tempfile::tempdir().unwrap();
    let mut config = server("filesystem", Era::Auto, &[&started_on.path().to_string_lossy()]);
    config.roots = vec![root.path().to_string_lossy().into_owned()];
    let handle = start(config, None).await;
    let expected = format!("Allowed directories:\n{}", root.path().display());
    let allowed = async {
        loop {
            let listed = text(&call(&handle, "filesystem", "list_allowed_directories", json!({})).await);
            if listed == expected {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), allowed).await.expect("the configured roots became the allowed directories");
    handle.shutdown().await;
}

// ---------------------------------------------------------------- memory

async fn memory(era: Era) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memory.jsonl");
    let config = server("memory", era, &[]).with_env("MEMORY_FILE_PATH", file.to_string_lossy());
    let handle = start(config, None).await;
    assert_eq!(era_of(&handle, "memory").await, ("legacy".into(), "2025-11-25".into()), "{era:?}");
    let status = status_of(&handle, "memory").await;
    assert_eq!((status.tools, status.resources, status.prompts), (9, 1, 0), "{status:?}");

    let graph = "memory://knowledge-graph";
    let resources = handle.list_resources("memory").await.unwrap();
    assert_eq!(resources.iter().map(|r| r.uri.as_str()).collect::<Vec<_>>(), [graph]);
    assert!(handle.list_resource_templates("memory").await.unwrap().is_empty());
    let mut events = handle.subscribe();
    handle.subscribe_resource("memory", graph).await.unwrap();

    let entity = json!({"name": "mcpvisor", "entityType": "project", "observations": ["supervises MCP servers"]});
    let created = call(&handle, "memory", "create_entities", json!({"entities": [entity]})).await;
    assert_eq!(created.structured_content, Some(json!({"entities": [entity]})));
    let updated = next_event(&mut events, Duration::from_secs(10), "the graph's resources/updated", |e| match e {
        Event::ResourceUpdated { server, uri } if server == "memory" => Some(uri),
        _ => None,
    });
    assert_eq!(updated.await, graph);
    let relation = json!({"from": "mcpvisor", "to": "actix", "relationType": "uses"});
    call(&handle, "memory", "create_relations", json!({"relations": [relation]})).await;
    let whole = json!({"entities": [entity], "relations": [relation]});
    assert_eq!(call(&handle, "memory", "read_graph", json!({})).await.structured_content, Some(whole.clone()));
    let found = call(&handle, "memory", "search_nodes", json!({"query": "supervises"})).await;
    assert_eq!(found.structured_content, Some(whole.clone()));
    let opened = call(&handle, "memory", "open_nodes", json!({"names": ["mcpvisor"]})).await;
    let opened: Value = serde_json::from_str(&text(&opened)).unwrap();
    assert_eq!(opened, whole);
    let read = handle.read_resource("memory", graph).await.unwrap();
    assert_eq!(serde_json::from_str::<Value>(&resource_text(&read.contents)).unwrap(), whole);

    // The graph is in the scratch file, one JSON object a line.
    let lines: Vec<Value> = std::fs::read_to_string(&file).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["type"], "entity");
    assert_eq!(lines[1]["type"], "relation");
    handle.unsubscribe_resource("memory", graph).await.unwrap();
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn memory_auto() {
    memory(Era::Auto).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn memory_legacy() {
    memory(Era::Legacy).await;
}

// ---------------------------------------------------------------- time

async fn time_calls(handle: &Handle) {
    let now = call(handle, "time", "get_current_time", json!({"timezone": "UTC"})).await;
    let structured = now.structured_content.clone().expect("structured content");
    assert_eq!(structured["timezone"], "UTC");
    assert_eq!(structured["is_dst"], false);
    assert!(structured["datetime"].as_str().is_some_and(|t| t.ends_with("+00:00")), "{structured}");
    assert_eq!(serde_json::from_str::<Value>(&text(&now)).unwrap(), structured, "the text is the structured content");

    let arguments = json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"});
    let converted = call(handle, "time", "convert_time", arguments).await.structured_content.expect("structured content");
    assert!(converted["source"]["datetime"].as_str().is_some_and(|t| t.ends_with("T12:00:00+00:00")), "{converted}");
    assert!(converted["target"]["datetime"].as_str().is_some_and(|t| t.ends_with("T21:00:00+09:00")), "{converted}");
    assert_eq!(converted["target"]["timezone"], "Asia/Tokyo");
    assert_eq!(converted["time_difference"], "+9.0h");

    let bad = handle.call_on("time", CallTool::new("get_current_time", json!({"timezone": "Mars/Base"}))).await.unwrap();
    assert_eq!(bad.is_error, Some(true));
    assert!(text(&bad).contains("Invalid timezone"), "{}", text(&bad));
    let missing = handle.call_on("time", CallTool::new("get_current_time", json!({}))).await;
    assert!(matches!(missing, Err(CallError::InvalidArguments { .. })), "checked against inputSchema: {missing:?}");
    assert!(handle.list_resources("time").await.unwrap().is_empty());
    assert!(handle.list_prompts("time").await.unwrap().is_empty());
}

async fn time(era: Era, expected: (&str, &str)) {
    let handle = start(python_server("time", era), None).await;
    assert_eq!(era_of(&handle, "time").await, (expected.0.into(), expected.1.into()), "{era:?}");
    let status = status_of(&handle, "time").await;
    assert!(status.server_info.as_deref().is_some_and(|i| i.contains("mcp-time")), "{status:?}");
    assert_eq!(status.tools, 2);
    time_calls(&handle).await;
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn time_auto() {
    time(Era::Auto, ("modern", "2026-07-28")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn time_legacy() {
    time(Era::Legacy, ("legacy", "2025-11-25")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn time_modern() {
    time(Era::Modern, ("modern", "2026-07-28")).await;
}

/// The server takes over a second to start (Python imports); an `auto`
/// probe that gives up before it answers must still end connected. The
/// SDK's dual-era loop is decided by the first request, so the late
/// `server/discover` makes the process modern and refuses `initialize`
/// with -32022 naming 2026-07-28: the client goes modern, no restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn time_auto_when_the_probe_times_out() {
    let mut config = server("time", Era::Auto, &[]);
    config.timeouts.discover = Duration::from_millis(100);
    let handle = Runtime::start(RuntimeConfig::new([config])).expect("the runtime starts");
    assert!(handle.wait_ready(Duration::from_secs(60)).await);
    let status = common::wait_status(&handle, "time", |s| s.state == ServerState::Connected).await;
    eprintln!("time after a timed-out probe: era {:?} {:?}, restarts {}", status.era, status.protocol_version, status.restarts);
    // The late discover made the process modern; `initialize` is refused
    // with -32022 naming 2026-07-28, and the client goes modern on the spot.
    assert_eq!((status.era.as_deref(), status.restarts), (Some("modern"), 0), "{status:?}");
    time_calls(&handle).await;
    handle.shutdown().await;
}

// ---------------------------------------------------------------- py (ours, mcp 2.x)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn py_auto() {
    py(python_server("py", Era::Auto), "modern").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn py_legacy() {
    py(python_server("py", Era::Legacy), "legacy").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn py_modern() {
    py(python_server("py", Era::Modern), "modern").await;
}
