//! mcpvisor against real third-party MCP servers: the reference servers
//! `everything`, `filesystem` and `memory` from npm, `mcp-server-time` and
//! a server of our own on the official Python SDK (`mcp` 2.x, modern era)
//! from PyPI. `.ci/interop-setup` installs them into a scratch folder; the
//! tests are ignored unless run with `--ignored` and `MCPVISOR_INTEROP=1`
//! (as `.ci/run` does), and then a missing server is a failure.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;
use mcpvisor::actors::operation::LogLevel;
use mcpvisor::actors::{Event, ProgressSink};
use mcpvisor::config::{Era, RuntimeConfig, ServerConfig};
use mcpvisor::{CallTool, CallToolResult, Handle, Runtime};
use rmcp::model::{ArgumentInfo, Reference, ResourceContents};
use serde_json::{json, Value};

const NEEDS: &str = "needs the servers of .ci/interop-setup and MCPVISOR_INTEROP=1 (.ci/run does both)";

/// Where `.ci/interop-setup` installed the servers.
fn installed() -> PathBuf {
    assert_eq!(std::env::var("MCPVISOR_INTEROP").as_deref(), Ok("1"), "interop tests run with MCPVISOR_INTEROP=1 after .ci/interop-setup");
    let dir = std::env::var("MCPVISOR_INTEROP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/mcpvisor-interop"));
    assert!(dir.is_dir(), "{} is missing: run .ci/interop-setup first", dir.display());
    dir
}

fn existing(path: PathBuf) -> String {
    assert!(path.exists(), "{} is missing: run .ci/interop-setup", path.display());
    path.to_string_lossy().into_owned()
}

/// A server from the npm reference set, run on the machine's Node.
fn npm_server(name: &str, package: &str, args: &[&str], era: Era) -> ServerConfig {
    let script = existing(installed().join("npm/node_modules/@modelcontextprotocol").join(package).join("dist/index.js"));
    let mut config = ServerConfig::stdio(name, "node", std::iter::once(script.as_str()).chain(args.iter().copied()));
    config.era = era;
    config
}

fn python_server(name: &str, program: &[String], era: Era) -> ServerConfig {
    let python = existing(installed().join("venv/bin/python"));
    let mut config = ServerConfig::stdio(name, python, program.iter().cloned());
    config.era = era;
    config
}

fn time_server(name: &str, era: Era) -> ServerConfig {
    let program = existing(installed().join("venv/bin/mcp-server-time"));
    python_server(name, &[program, "--local-timezone".into(), "UTC".into()], era)
}

fn modern_server(name: &str, era: Era) -> ServerConfig {
    let script = existing(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/modern_server.py"));
    python_server(name, &[script], era)
}

async fn start_with(servers: Vec<ServerConfig>, with_handlers: bool) -> Handle {
    let mut config = RuntimeConfig::new(servers);
    if with_handlers {
        config.handlers = assistant_handlers();
    }
    let handle = Runtime::start(config).expect("runtime starts");
    assert!(handle.wait_ready(Duration::from_secs(60)).await, "servers did not settle within 60 s");
    for status in handle.status().await {
        assert_eq!(status.state, mcpvisor::ServerState::Connected, "{status:?}");
    }
    handle
}

async fn call(handle: &Handle, server: &str, tool: &str, arguments: Value) -> CallToolResult {
    let result = handle.call_on(server, CallTool::new(tool, arguments).with_timeout(Duration::from_secs(60))).await;
    let result = result.unwrap_or_else(|e| panic!("{server}/{tool}: {e}"));
    assert_ne!(result.is_error, Some(true), "{server}/{tool} answered isError: {result:?}");
    result
}

fn all_text(result: &CallToolResult) -> String {
    serde_json::to_string(&result.content).unwrap_or_default()
}

async fn first_event<T>(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<Event>,
    within: Duration,
    pick: impl Fn(Event) -> Option<T>,
) -> T {
    let wait = async {
        while let Some(event) = events.recv().await {
            if let Some(found) = pick(event) {
                return found;
            }
        }
        panic!("the event stream ended");
    };
    tokio::time::timeout(within, wait).await.expect("the expected event came in time")
}

async fn era_of(handle: &Handle, server: &str) -> (String, String) {
    let status = status_of(handle, server).await;
    (status.era.unwrap_or_default(), status.protocol_version.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the servers of .ci/interop-setup and MCPVISOR_INTEROP=1 (.ci/run does both)"]
async fn everything_server_in_auto_and_legacy() {
    let _ = NEEDS;
    for era in [Era::Auto, Era::Legacy] {
        let handle = start_with(vec![npm_server("everything", "server-everything", &["stdio"], era)], true).await;
        assert_eq!(era_of(&handle, "everything").await, ("legacy".into(), "2025-11-25".into()), "{era:?}: a legacy-only server");

        // Tools: list, call, structured content checked against its outputSchema.
        let tools: Vec<String> = handle.list_tools().await.into_iter().map(|t| t.tool.name.to_string()).collect();
        for tool in ["echo", "get-sum", "trigger-long-running-operation", "simulate-research-query"] {
            assert!(tools.contains(&tool.to_string()), "{tool} in {tools:?}");
        }
        assert_eq!(text(&call(&handle, "everything", "echo", json!({"message": "hi"})).await), "Echo: hi");
        assert!(text(&call(&handle, "everything", "get-sum", json!({"a": 2, "b": 3})).await).contains('5'));
        let weather = call(&handle, "everything", "get-structured-content", json!({"location": "Chicago"})).await;
        assert!(weather.structured_content.is_some(), "{weather:?}");
        let image = call(&handle, "everything", "get-tiny-image", json!({})).await;
        assert!(all_text(&image).contains("\"image\""), "the image content is kept: {}", all_text(&image));

        // Resources, templates, prompts, completion.
        assert_eq!(handle.list_resources("everything").await.unwrap().len(), 7);
        assert_eq!(handle.list_resource_templates("everything").await.unwrap().len(), 2);
        let dynamic = handle.read_resource("everything", "demo://resource/dynamic/text/1").await.unwrap();
        assert!(matches!(&dynamic.contents[..], [ResourceContents::TextResourceContents { text, .. }] if text.starts_with("Resource 1")));
        let prompts = handle.list_prompts("everything").await.unwrap();
        assert_eq!(prompts.len(), 4);
        let city = handle.get_prompt("everything", "args-prompt", json!({"city": "Paris"}).as_object().cloned()).await.unwrap();
        assert!(serde_json::to_string(&city.messages).unwrap().contains("Paris"));
        let departments =
            handle.complete("everything", Reference::for_prompt("completable-prompt"), ArgumentInfo::new("department", "E")).await.unwrap();
        assert!(!departments.values.is_empty() && departments.values.iter().all(|v| v.starts_with('E')), "{departments:?}");

        // Progress.
        let (sink, mut updates) = ProgressSink::channel();
        let long = CallTool::new("trigger-long-running-operation", json!({"duration": 1, "steps": 3})).with_progress(sink);
        handle.call_on("everything", long).await.unwrap();
        let mut seen = 0;
        while updates.try_recv().is_ok() {
            seen += 1;
        }
        assert_eq!(seen, 3, "one progress notification per step");

        // Sampling, elicitation and roots go to the handlers (or the configured roots).
        let sampled = call(&handle, "everything", "trigger-sampling-request", json!({"prompt": "hello"})).await;
        assert!(all_text(&sampled).contains("model says"), "{}", all_text(&sampled));
        let elicited = call(&handle, "everything", "trigger-elicitation-request", json!({})).await;
        assert!(all_text(&elicited).to_lowercase().contains("accept"), "{}", all_text(&elicited));
        let roots = call(&handle, "everything", "get-roots-list", json!({})).await;
        assert!(all_text(&roots).contains("file://"), "{}", all_text(&roots));

        // A task-mode tool (2025-11-25 tasks).
        let research = call(&handle, "everything", "simulate-research-query", json!({"topic": "actors"})).await;
        assert!(all_text(&research).to_lowercase().contains("actors"), "{}", all_text(&research));

        // Logging and resource subscriptions.
        let mut events = handle.subscribe();
        handle.set_log_level("everything", LogLevel::Debug).await.unwrap();
        call(&handle, "everything", "toggle-simulated-logging", json!({})).await;
        first_event(&mut events, Duration::from_secs(30), |e| matches!(e, Event::Log { .. }).then_some(())).await;
        handle.subscribe_resource("everything", "demo://resource/static/document/architecture.md").await.unwrap();
        call(&handle, "everything", "toggle-subscriber-updates", json!({})).await;
        first_event(&mut events, Duration::from_secs(30), |e| matches!(e, Event::ResourceUpdated { .. }).then_some(())).await;
        handle.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the servers of .ci/interop-setup and MCPVISOR_INTEROP=1 (.ci/run does both)"]
async fn filesystem_server_uses_the_configured_roots() {
    for era in [Era::Auto, Era::Legacy] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_string_lossy().into_owned();
        let mut config = npm_server("fs", "server-filesystem", &[&root], era);
        config.roots = vec![root.clone()];
        let handle = start_with(vec![config], false).await;
        assert_eq!(era_of(&handle, "fs").await.0, "legacy");
        let file = dir.path().join("note.txt").to_string_lossy().into_owned();
        call(&handle, "fs", "write_file", json!({"path": file, "content": "written through mcpvisor"})).await;
        assert_eq!(text(&call(&handle, "fs", "read_text_file", json!({"path": file})).await), "written through mcpvisor");
        let listing = text(&call(&handle, "fs", "list_directory", json!({"path": root})).await);
        assert!(listing.contains("[FILE] note.txt"), "{listing}");
        let allowed = text(&call(&handle, "fs", "list_allowed_directories", json!({})).await);
        assert!(allowed.contains(dir.path().file_name().unwrap().to_str().unwrap()), "the roots became the allowed directories: {allowed}");
        handle.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the servers of .ci/interop-setup and MCPVISOR_INTEROP=1 (.ci/run does both)"]
async fn memory_server_keeps_a_graph_and_exposes_it_as_a_resource() {
    for era in [Era::Auto, Era::Legacy] {
        let dir = tempfile::tempdir().unwrap();
        let config =
            npm_server("memory", "server-memory", &[], era).with_env("MEMORY_FILE_PATH", dir.path().join("memory.jsonl").to_string_lossy());
        let handle = start_with(vec![config], false).await;
        assert_eq!(era_of(&handle, "memory").await.0, "legacy");
        let entity = json!({"entities": [{"name": "mcpvisor", "entityType": "project", "observations": ["supervises MCP servers"]}]});
        call(&handle, "memory", "create_entities", entity).await;
        let graph = all_text(&call(&handle, "memory", "read_graph", json!({})).await);
        assert!(graph.contains("supervises MCP servers"), "{graph}");
        let found = all_text(&call(&handle, "memory", "search_nodes", json!({"query": "supervises"})).await);
        assert!(found.contains("mcpvisor"), "{found}");
        let resources = handle.list_resources("memory").await.unwrap();
        assert_eq!(resources.iter().map(|r| r.uri.as_str()).collect::<Vec<_>>(), ["memory://knowledge-graph"]);
        let read = handle.read_resource("memory", "memory://knowledge-graph").await.unwrap();
        assert!(serde_json::to_string(&read).unwrap().contains("mcpvisor"));
        handle.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the servers of .ci/interop-setup and MCPVISOR_INTEROP=1 (.ci/run does both)"]
async fn time_server_speaks_both_eras() {
    for (era, expected) in
        [(Era::Auto, ("modern", "2026-07-28")), (Era::Legacy, ("legacy", "2025-11-25")), (Era::Modern, ("modern", "2026-07-28"))]
    {
        let handle = start_with(vec![time_server("time", era)], false).await;
        assert_eq!(era_of(&handle, "time").await, (expected.0.into(), expected.1.into()), "{era:?}");
        let now = call(&handle, "time", "get_current_time", json!({"timezone": "UTC"})).await;
        let now: Value = serde_json::from_str(&text(&now)).unwrap_or_else(|e| panic!("{e}: {now:?}"));
        assert_eq!(now["timezone"], "UTC");
        let converted =
            call(&handle, "time", "convert_time", json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}))
                .await;
        let converted: Value = serde_json::from_str(&text(&converted)).unwrap();
        assert_eq!(converted["target"]["datetime"].as_str().map(|t| t.contains("T21:00")), Some(true), "{converted}");
        let wrong = handle.call_on("time", CallTool::new("get_current_time", json!({}))).await;
        assert!(matches!(wrong, Err(mcpvisor::CallError::InvalidArguments { .. })), "checked against inputSchema: {wrong:?}");
        handle.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the servers of .ci/interop-setup and MCPVISOR_INTEROP=1 (.ci/run does both)"]
async fn python_sdk_server_in_the_modern_era() {
    for (era, expected) in [(Era::Auto, "modern"), (Era::Modern, "modern"), (Era::Legacy, "legacy")] {
        let handle = start_with(vec![modern_server("py", era)], true).await;
        assert_eq!(era_of(&handle, "py").await.0, expected, "{era:?}");
        assert_eq!(text(&call(&handle, "py", "add", json!({"a": 2, "b": 40})).await), "42");
        let mut events = handle.subscribe();
        // Modern: the level rides on each request. Legacy: this SDK does not announce `logging`.
        match (era, handle.set_log_level("py", LogLevel::Info).await) {
            (Era::Legacy, Err(mcpvisor::CallError::Unsupported { capability, .. })) => assert_eq!(capability, "logging"),
            (Era::Legacy, other) => panic!("logging/setLevel without the capability: {other:?}"),
            (_, set) => set.unwrap(),
        }
        let (sink, mut updates) = ProgressSink::channel();
        let counted = handle.call_on("py", CallTool::new("count", json!({"n": 3})).with_progress(sink)).await.unwrap();
        assert_eq!(text(&counted), "counted to 3");
        let mut progress = Vec::new();
        while let Ok(update) = updates.try_recv() {
            progress.push(update.progress);
        }
        assert_eq!(progress, [1.0, 2.0, 3.0], "{era:?}");
        first_event(&mut events, Duration::from_secs(10), |e| matches!(e, Event::Log { .. }).then_some(())).await;
        let asked = call(&handle, "py", "ask_name", json!({})).await;
        assert_eq!(text(&asked), "accept:Ada", "the elicitation was answered with the schema's default");
        let note = handle.read_resource("py", "note://hello").await.unwrap();
        assert!(matches!(&note.contents[..], [ResourceContents::TextResourceContents { text, .. }] if text == "hello from python"));
        let review = handle.get_prompt("py", "review", json!({"code": "fn main() {}"}).as_object().cloned()).await.unwrap();
        assert!(serde_json::to_string(&review.messages).unwrap().contains("fn main"));
        handle.shutdown().await;
    }
}
