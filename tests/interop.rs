//! mcpvisor against real third-party MCP servers over stdio: the npm
//! reference servers `everything`, `filesystem` and `memory`, PyPI's
//! `mcp-server-time`, and `py`, a server of our own on the official Python
//! SDK (`mcp` 2.x, tests/interop/modern_server.py). `.ci/interop-setup DIR`
//! installs them into a scratch folder and writes `DIR/servers.json`, which
//! these tests read (docs/interop.md has the survey behind the expectations).
//!
//! Every test is `#[ignore]`d: `cargo test` reports them as ignored.
//! `.ci/run` runs them with `MCPVISOR_INTEROP=1 cargo test --test interop --
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

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use common::{status_of, text};
use mcpvisor::actors::client_requests::{ClientHandlers, ElicitationRequest, Refusal, Root, RootsRequest, SamplingRequest};
use mcpvisor::actors::operation::LogLevel;
use mcpvisor::actors::{Event, ProgressSink};
use mcpvisor::config::{Era, RuntimeConfig, ServerConfig};
use mcpvisor::{CallError, CallTool, CallToolResult, Handle, Runtime, ServerState};
use rmcp::model::{ArgumentInfo, ElicitResult, ElicitationAction, JsonObject, Reference, ResourceContents};
use serde_json::{json, Value};

// ---------------------------------------------------------------- the manifest

/// One server of `DIR/servers.json`.
#[derive(Debug, Clone, serde::Deserialize)]
struct Installed {
    package: String,
    version: String,
    command: String,
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

/// The manifest's entry for `name`; panics, saying what to do, when the
/// variable, the manifest or the server is missing.
fn installed(name: &str) -> Installed {
    assert_eq!(
        std::env::var("MCPVISOR_INTEROP").as_deref(),
        Ok("1"),
        "the interop tests run with MCPVISOR_INTEROP=1 after .ci/interop-setup (.ci/run does both)"
    );
    let dir = std::env::var("MCPVISOR_INTEROP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/mcpvisor-interop"));
    let manifest = dir.join("servers.json");
    let raw = std::fs::read_to_string(&manifest)
        .unwrap_or_else(|e| panic!("{}: {e}: run .ci/interop-setup {} first", manifest.display(), dir.display()));
    let manifest: Value = serde_json::from_str(&raw).unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    let entry = manifest["servers"].get(name).cloned().unwrap_or_else(|| panic!("server {name} is not in {}", dir.display()));
    let server: Installed = serde_json::from_value(entry).unwrap_or_else(|e| panic!("server {name} in the manifest: {e}"));
    for file in std::iter::once(&server.command).chain(server.args.iter().filter(|a| a.starts_with('/'))) {
        assert!(std::path::Path::new(file).exists(), "{name}: {file} is missing: run .ci/interop-setup again");
    }
    eprintln!("{name}: {}@{}", server.package, server.version);
    server
}

/// A `ServerConfig` for the installed server `name`, in `era`.
fn server(name: &str, era: Era, extra_args: &[&str]) -> ServerConfig {
    let installed = installed(name);
    let args = installed.args.iter().cloned().chain(extra_args.iter().map(|a| a.to_string()));
    let mut config = ServerConfig::stdio(name, installed.command, args);
    for (key, value) in installed.env {
        config = config.with_env(key, value);
    }
    config.era = era;
    config
}

/// A server on the Python SDK. Its first answer takes 1.1-1.9 s (imports),
/// several seconds on a loaded machine, which can outlast the default 3 s
/// `auto` probe; after a timed-out probe the SDK, whose first request fixes
/// the era, refuses `initialize` with -32022 and the client switches to the
/// modern era (see `time_auto_when_the_probe_times_out`). The `auto` tests
/// still give the probe 30 s, so that they exercise the answered probe.
fn python_server(name: &str, era: Era) -> ServerConfig {
    let mut config = server(name, era, &[]);
    config.timeouts.discover = Duration::from_secs(30);
    config
}

// ---------------------------------------------------------------- the client side

/// What the test's "user and model" answer, and what they were asked.
#[derive(Default)]
struct Asked {
    roots: Vec<String>,
    sampled: Vec<JsonObject>,
    elicited: Vec<String>,
    roots_asked: usize,
}

/// Answers roots from `Asked::roots`, sampling with `model says: <first text>`
/// and elicitation with a filled form (defaults kept; see `fill`).
struct User(Arc<Mutex<Asked>>);

impl Actor for User {
    type Context = Context<Self>;
}

impl Handler<RootsRequest> for User {
    type Result = Result<Vec<Root>, Refusal>;

    fn handle(&mut self, _: RootsRequest, _: &mut Context<Self>) -> Self::Result {
        let mut asked = self.0.lock().unwrap();
        asked.roots_asked += 1;
        Ok(asked.roots.iter().map(|path| Root { uri: format!("file://{path}"), name: Some("work".into()) }).collect())
    }
}

impl Handler<SamplingRequest> for User {
    type Result = Result<JsonObject, Refusal>;

    fn handle(&mut self, request: SamplingRequest, _: &mut Context<Self>) -> Self::Result {
        let asked = request.params["messages"][0]["content"]["text"].as_str().unwrap_or_default().to_string();
        self.0.lock().unwrap().sampled.push(request.params);
        let answer = json!({"role": "assistant", "content": {"type": "text", "text": format!("model says: {asked}")},
                            "model": "interop-model", "stopReason": "endTurn"});
        Ok(answer.as_object().cloned().unwrap_or_default())
    }
}

impl Handler<ElicitationRequest> for User {
    type Result = Result<ElicitResult, Refusal>;

    fn handle(&mut self, request: ElicitationRequest, _: &mut Context<Self>) -> Self::Result {
        let params = serde_json::to_value(&request.request).unwrap_or_default();
        self.0.lock().unwrap().elicited.push(params["message"].as_str().unwrap_or_default().to_string());
        let mut result = ElicitResult::new(ElicitationAction::Accept);
        result.content = Some(Value::Object(fill(&params["requestedSchema"], request.prefilled)));
        Ok(result)
    }
}

/// A form's answer: the schema's defaults, else a plausible value per type.
fn fill(schema: &Value, prefilled: JsonObject) -> JsonObject {
    let mut answer = prefilled;
    for (field, property) in schema["properties"].as_object().into_iter().flatten() {
        if answer.contains_key(field) {
            continue;
        }
        let first_const = |options: &Value| options.as_array().and_then(|o| o.first()).map(|o| o["const"].clone());
        let value = match (property["type"].as_str(), property["format"].as_str()) {
            _ if property["enum"].is_array() => property["enum"][0].clone(),
            _ if property["oneOf"].is_array() => first_const(&property["oneOf"]).unwrap_or_default(),
            (Some("array"), _) => {
                let items = &property["items"];
                json!([if items["enum"].is_array() { items["enum"][0].clone() } else { first_const(&items["anyOf"]).unwrap_or_default() }])
            }
            (Some("string"), Some("email")) => json!("ada@example.com"),
            (Some("string"), Some("uri")) => json!("https://example.com/ada"),
            (Some("string"), Some("date")) => json!("1815-12-10"),
            (Some("string"), _) => json!("Ada Lovelace"),
            (Some("boolean"), _) => json!(true),
            (Some("integer"), _) => json!(42),
            (Some("number"), _) => json!(3.5),
            _ => continue,
        };
        answer.insert(field.clone(), value);
    }
    answer
}

/// Starts `User` on an actix system of its own; returns the handlers and what it is asked.
fn user(roots: &[&str]) -> (ClientHandlers, Arc<Mutex<Asked>>) {
    let asked = Arc::new(Mutex::new(Asked { roots: roots.iter().map(|r| r.to_string()).collect(), ..Asked::default() }));
    let shared = asked.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        actix::System::new().block_on(async move {
            let _ = tx.send(User(shared).start());
            std::future::pending::<()>().await;
        });
    });
    let user = rx.recv().expect("the user actor starts");
    let handlers = ClientHandlers {
        roots: Some(user.clone().recipient().into()),
        sampling: Some(user.clone().recipient().into()),
        elicitation: Some(user.recipient().into()),
    };
    (handlers, asked)
}

// ---------------------------------------------------------------- helpers

async fn start(config: ServerConfig, handlers: Option<ClientHandlers>) -> Handle {
    let name = config.name.clone();
    let mut runtime = RuntimeConfig::new([config]);
    if let Some(handlers) = handlers {
        runtime.handlers = handlers;
    }
    let handle = Runtime::start(runtime).expect("the runtime starts");
    assert!(handle.wait_ready(Duration::from_secs(60)).await, "{name} did not settle within 60 s");
    let status = status_of(&handle, &name).await;
    assert_eq!(status.state, ServerState::Connected, "{name}: {status:?}");
    handle
}

async fn call(handle: &Handle, server: &str, tool: &str, arguments: Value) -> CallToolResult {
    let call = CallTool::new(tool, arguments).with_timeout(Duration::from_secs(60));
    let result = handle.call_on(server, call).await.unwrap_or_else(|e| panic!("{server}/{tool}: {e}"));
    assert_ne!(result.is_error, Some(true), "{server}/{tool} answered isError: {result:?}");
    result
}

/// All text blocks of a result, joined by newlines.
fn texts(result: &CallToolResult) -> String {
    let content = serde_json::to_value(&result.content).unwrap_or_default();
    let blocks = content.as_array().cloned().unwrap_or_default();
    blocks.iter().filter_map(|b| b["text"].as_str().map(str::to_string)).collect::<Vec<_>>().join("\n")
}

fn resource_text(contents: &[ResourceContents]) -> String {
    match contents {
        [ResourceContents::TextResourceContents { text, .. }] => text.clone(),
        other => panic!("one text content expected: {other:?}"),
    }
}

async fn era_of(handle: &Handle, server: &str) -> (String, String) {
    let status = status_of(handle, server).await;
    (status.era.unwrap_or_default(), status.protocol_version.unwrap_or_default())
}

async fn next_event<T>(events: &mut mcpvisor::Events, within: Duration, what: &str, pick: impl Fn(Event) -> Option<T>) -> T {
    let wait = async {
        while let Some(event) = events.recv().await {
            if let Some(found) = pick(event) {
                return found;
            }
        }
        panic!("the event stream ended while waiting for {what}");
    };
    tokio::time::timeout(within, wait).await.unwrap_or_else(|_| panic!("no {what} within {within:?}"))
}

fn drain<T>(rx: &mut tokio::sync::mpsc::UnboundedReceiver<T>) -> Vec<T> {
    std::iter::from_fn(|| rx.try_recv().ok()).collect()
}

fn object(value: Value) -> Option<JsonObject> {
    value.as_object().cloned()
}

// ---------------------------------------------------------------- everything

async fn everything(era: Era) {
    let (handlers, asked) = user(&["/tmp/interop-everything-root"]);
    let handle = start(server("everything", era, &["stdio"]), Some(handlers)).await;
    assert_eq!(era_of(&handle, "everything").await, ("legacy".into(), "2025-11-25".into()), "{era:?}: a legacy-only server");

    // Tools, including the four registered after `initialized` by client capability.
    let mut events = handle.subscribe();
    let tools: Vec<String> = handle.list_tools().await.into_iter().map(|t| t.tool.name.to_string()).collect();
    for tool in ["echo", "get-sum", "get-tiny-image", "trigger-long-running-operation", "toggle-simulated-logging"] {
        assert!(tools.contains(&tool.to_string()), "{tool} in {tools:?}");
    }
    assert_eq!(text(&call(&handle, "everything", "echo", json!({"message": "hi"})).await), "Echo: hi");
    assert_eq!(text(&call(&handle, "everything", "get-sum", json!({"a": 2, "b": 3})).await), "The sum of 2 and 3 is 5.");
    let weather = call(&handle, "everything", "get-structured-content", json!({"location": "Chicago"})).await;
    assert_eq!(weather.structured_content, Some(json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82})));
    let image = serde_json::to_value(&call(&handle, "everything", "get-tiny-image", json!({})).await.content).unwrap();
    let image = image.as_array().unwrap().iter().find(|b| b["type"] == "image").cloned().expect("an image block");
    assert_eq!(image["mimeType"], "image/png");
    assert!(image["data"].as_str().is_some_and(|d| d.starts_with("iVBOR")), "base64 PNG: {image}");
    let annotated = call(&handle, "everything", "get-annotated-message", json!({"messageType": "error"})).await;
    let annotated = serde_json::to_value(&annotated.content).unwrap();
    assert_eq!(annotated[0]["text"], "Error: Operation failed");
    assert_eq!(annotated[0]["annotations"]["priority"], 1.0);

    // Resources, templates, prompts, completion.
    let resources = handle.list_resources("everything").await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris.len(), 7, "{uris:?}");
    assert!(uris.contains(&"demo://resource/static/document/architecture.md"), "{uris:?}");
    let templates = handle.list_resource_templates("everything").await.unwrap();
    let templates: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert_eq!(templates, ["demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/blob/{resourceId}"]);
    let dynamic = handle.read_resource("everything", "demo://resource/dynamic/text/1").await.unwrap();
    let dynamic = resource_text(&dynamic.contents);
    assert!(dynamic.starts_with("Resource 1: This is a plaintext resource created at"), "{dynamic}");
    let prompts: Vec<String> = handle.list_prompts("everything").await.unwrap().into_iter().map(|p| p.name.to_string()).collect();
    assert_eq!(prompts, ["simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"]);
    let paris = handle.get_prompt("everything", "args-prompt", object(json!({"city": "Paris"}))).await.unwrap();
    assert_eq!(serde_json::to_value(&paris.messages).unwrap()[0]["content"]["text"], "What's weather in Paris?");
    let department = ArgumentInfo::new("department", "E");
    let completed = handle.complete("everything", Reference::for_prompt("completable-prompt"), department).await.unwrap();
    assert_eq!(completed.values, ["Engineering"]);

    // Progress: one notification per step, in order, with the total.
    let (sink, mut updates) = ProgressSink::channel();
    let long = CallTool::new("trigger-long-running-operation", json!({"duration": 1, "steps": 3})).with_progress(sink);
    let done = handle.call_on("everything", long).await.unwrap();
    assert_eq!(text(&done), "Long running operation completed. Duration: 1 seconds, Steps: 3.");
    let steps: Vec<(f64, Option<f64>)> = drain(&mut updates).into_iter().map(|p| (p.progress, p.total)).collect();
    assert_eq!(steps, [(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))]);

    // Sampling, elicitation and roots reach the embedder's handlers.
    let sampled = texts(&call(&handle, "everything", "trigger-sampling-request", json!({"prompt": "hello"})).await);
    assert!(sampled.starts_with("LLM sampling result:"), "{sampled}");
    assert!(sampled.contains("model says: Resource trigger-sampling-request context: hello"), "{sampled}");
    assert_eq!(asked.lock().unwrap().sampled[0]["maxTokens"], 100);
    let elicited = texts(&call(&handle, "everything", "trigger-elicitation-request", json!({})).await);
    assert!(elicited.contains("User provided the requested information!"), "{elicited}");
    assert!(elicited.contains("- Name: Ada Lovelace") && elicited.contains("- Favorite Integer: 42"), "{elicited}");
    assert_eq!(asked.lock().unwrap().elicited, ["Please provide inputs for the following fields:"]);
    let roots = texts(&call(&handle, "everything", "get-roots-list", json!({})).await);
    assert!(roots.contains("Current MCP Roots (1 total)") && roots.contains("file:///tmp/interop-everything-root"), "{roots}");

    // The server logged the roots it got right after `initialized`.
    let logged = next_event(&mut events, Duration::from_secs(10), "the roots log", |e| match e {
        Event::Log { server, data, logger, .. } if server == "everything" && data.to_string().contains("Roots updated") => Some(logger),
        _ => None,
    });
    assert_eq!(logged.await.as_deref(), Some("everything-server"));

    // A task-required tool: the call is augmented and its result awaited.
    let research = texts(&call(&handle, "everything", "simulate-research-query", json!({"topic": "actors"})).await);
    assert!(research.to_lowercase().contains("actors"), "{research}");

    // Logging with a level, then resource subscriptions.
    handle.set_log_level("everything", LogLevel::Debug).await.unwrap();
    let started = texts(&call(&handle, "everything", "toggle-simulated-logging", json!({})).await);
    assert!(started.starts_with("Started simulated, random-leveled logging"), "{started}");
    let level = next_event(&mut events, Duration::from_secs(15), "a simulated log", |e| match e {
        Event::Log { server, level, data, .. } if server == "everything" && data.to_string().contains("-level message") => Some(level),
        Event::Log { server, level, data, .. } if server == "everything" && data.to_string().contains("level-message") => Some(level),
        _ => None,
    });
    assert!(["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"].contains(&level.await.as_str()));
    let uri = "demo://resource/static/document/architecture.md";
    handle.subscribe_resource("everything", uri).await.unwrap();
    call(&handle, "everything", "toggle-subscriber-updates", json!({})).await;
    let updated = next_event(&mut events, Duration::from_secs(15), "resources/updated", |e| match e {
        Event::ResourceUpdated { server, uri } if server == "everything" => Some(uri),
        _ => None,
    });
    assert_eq!(updated.await, uri);
    handle.unsubscribe_resource("everything", uri).await.unwrap();
    assert!(handle.ping("everything").await.unwrap() < Duration::from_secs(5));
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn everything_auto() {
    everything(Era::Auto).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn everything_legacy() {
    everything(Era::Legacy).await;
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

async fn py(era: Era, expected: &str) {
    let (handlers, asked) = user(&["/tmp/interop-py-root"]);
    let handle = start(python_server("py", era), Some(handlers)).await;
    let modern = expected == "modern";
    let version = if modern { "2026-07-28" } else { "2025-11-25" };
    assert_eq!(era_of(&handle, "py").await, (expected.into(), version.into()), "{era:?}");
    let status = status_of(&handle, "py").await;
    assert_eq!((status.tools, status.resources, status.prompts), (6, 1, 1), "{status:?}");

    let added = call(&handle, "py", "add", json!({"a": 2, "b": 40})).await;
    assert_eq!(text(&added), "42");
    assert_eq!(added.structured_content, Some(json!({"result": 42})));

    // Logging: modern, the level rides on each request; legacy, this SDK
    // does not announce `logging` (and logs regardless).
    let mut events = handle.subscribe();
    match handle.set_log_level("py", LogLevel::Info).await {
        Ok(()) => assert!(modern, "legacy py does not announce logging"),
        Err(CallError::Unsupported { capability, .. }) => {
            assert!(!modern, "modern takes a level per request");
            assert_eq!(capability, "logging");
        }
        Err(other) => panic!("set_log_level: {other}"),
    }
    let (sink, mut updates) = ProgressSink::channel();
    let counted = handle.call_on("py", CallTool::new("count", json!({"n": 3})).with_progress(sink)).await.unwrap();
    assert_eq!(text(&counted), "counted to 3");
    let progress: Vec<(f64, Option<f64>, Option<String>)> =
        drain(&mut updates).into_iter().map(|p| (p.progress, p.total, p.message)).collect();
    let expected_progress: Vec<(f64, Option<f64>, Option<String>)> =
        (1..=3).map(|i| (i as f64, Some(3.0), Some(format!("step {i}")))).collect();
    assert_eq!(progress, expected_progress, "{era:?}");
    for i in 1..=3 {
        let message = format!("counted {i}");
        let level = next_event(&mut events, Duration::from_secs(10), &message, |e| match e {
            Event::Log { server, level, data, .. } if server == "py" && data == json!(message) => Some(level),
            _ => None,
        });
        assert_eq!(level.await, "info");
    }

    // Elicitation, sampling and roots: input_required rounds (modern) or
    // server-to-client requests (legacy), answered by the same handlers.
    assert_eq!(text(&call(&handle, "py", "ask_name", json!({})).await), "accept:Ada", "the schema's default is kept");
    let summary = text(&call(&handle, "py", "summarize", json!({"text": "actors and supervisors"})).await);
    assert_eq!(summary, "summary by interop-model: model says: Summarize: actors and supervisors");
    assert_eq!(text(&call(&handle, "py", "list_roots", json!({})).await), "file:///tmp/interop-py-root");
    {
        let asked = asked.lock().unwrap();
        assert_eq!(asked.elicited, ["What is your name?"]);
        assert_eq!(asked.sampled.len(), 1);
        assert_eq!(asked.sampled[0]["systemPrompt"], "You summarize in one line.");
    }

    // Resources, template, prompt, completion.
    let note = handle.read_resource("py", "note://hello").await.unwrap();
    assert_eq!(resource_text(&note.contents), "hello from python");
    let templates = handle.list_resource_templates("py").await.unwrap();
    assert_eq!(templates.iter().map(|t| t.uri_template.as_str()).collect::<Vec<_>>(), ["note://echo/{word}"]);
    let echoed = handle.read_resource("py", "note://echo/actix").await.unwrap();
    assert_eq!(resource_text(&echoed.contents), "echo: actix");
    let review = handle.get_prompt("py", "review", object(json!({"code": "fn main() {}"}))).await.unwrap();
    assert_eq!(serde_json::to_value(&review.messages).unwrap()[0]["content"]["text"], "Please review this code:\nfn main() {}");
    let code = ArgumentInfo::new("code", "r");
    assert_eq!(handle.complete("py", Reference::for_prompt("review"), code).await.unwrap().values, ["rust", "ruby"]);

    // Subscriptions: modern, through `subscriptions/listen`; legacy py has no `resources/subscribe`.
    match handle.subscribe_resource("py", "note://hello").await {
        Ok(()) => {
            assert!(modern, "legacy py does not announce resources.subscribe");
            assert_eq!(text(&call(&handle, "py", "touch", json!({"uri": "note://hello"})).await), "touched note://hello");
            let updated = next_event(&mut events, Duration::from_secs(10), "resources/updated", |e| match e {
                Event::ResourceUpdated { server, uri } if server == "py" => Some(uri),
                _ => None,
            });
            assert_eq!(updated.await, "note://hello");
        }
        Err(CallError::Unsupported { capability, .. }) => {
            assert!(!modern, "modern py serves subscriptions/listen");
            assert_eq!(capability, "resource subscriptions");
        }
        Err(other) => panic!("subscribe_resource: {other}"),
    }
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn py_auto() {
    py(Era::Auto, "modern").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn py_legacy() {
    py(Era::Legacy, "legacy").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn py_modern() {
    py(Era::Modern, "modern").await;
}
