//! What the interop tests share: the manifest `.ci/interop-setup` writes,
//! the embedder's side (a "user and model" answering sampling, elicitation
//! and roots), result helpers, the HTTP servers' processes ([`http`]), and
//! the checks run against one server over several transports
//! ([`everything`], [`python`]).
#![allow(dead_code)]

pub mod everything;
pub mod http;
pub mod python;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::status_of;
use actix::prelude::*;
use mcpvisor::actors::client_requests::{answered_by, ClientHandlers, ElicitationRequest, Refusal, Root, RootsRequest, SamplingRequest};
use mcpvisor::actors::Event;
use mcpvisor::config::{Era, RuntimeConfig, ServerConfig};
use mcpvisor::{CallTool, CallToolResult, Handle, Runtime, ServerState};
use rmcp::model::{ElicitResult, ElicitationAction, JsonObject, ResourceContents};
use serde_json::{json, Value};

// ---------------------------------------------------------------- the manifest

/// One server of `DIR/servers.json`.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Installed {
    pub package: String,
    pub version: String,
    pub command: String,
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// HTTP servers: the endpoint, with `{port}` for the port the test picks.
    #[serde(default)]
    pub url: Option<String>,
    /// HTTP servers: what a line of stderr says once it accepts connections.
    #[serde(default)]
    pub ready: Option<String>,
}

/// The manifest's entry for `name`; panics, saying what to do, when the
/// variable, the manifest or the server is missing.
pub fn installed(name: &str) -> Installed {
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
pub fn server(name: &str, era: Era, extra_args: &[&str]) -> ServerConfig {
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
pub fn python_server(name: &str, era: Era) -> ServerConfig {
    let mut config = server(name, era, &[]);
    config.timeouts.discover = Duration::from_secs(30);
    config
}

// ---------------------------------------------------------------- the client side

/// What the test's "user and model" answer, and what they were asked.
#[derive(Default)]
pub struct Asked {
    pub roots: Vec<String>,
    pub sampled: Vec<JsonObject>,
    pub elicited: Vec<String>,
    pub roots_asked: usize,
}

/// Answers roots from `Asked::roots`, sampling with `model says: <first text>`
/// and elicitation with a filled form (defaults kept; see `fill`).
pub struct User(Arc<Mutex<Asked>>);

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
pub fn fill(schema: &Value, prefilled: JsonObject) -> JsonObject {
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
pub fn user(roots: &[&str]) -> (ClientHandlers, Arc<Mutex<Asked>>) {
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
        roots: Some(answered_by(user.clone().recipient())),
        sampling: Some(answered_by(user.clone().recipient())),
        elicitation: Some(answered_by(user.recipient())),
    };
    (handlers, asked)
}

// ---------------------------------------------------------------- helpers

pub async fn start(config: ServerConfig, handlers: Option<ClientHandlers>) -> Handle {
    let name = config.name.clone();
    let handle =
        Runtime::builder(RuntimeConfig::new([config])).client_handlers(handlers.unwrap_or_default()).start().expect("the runtime starts");
    assert!(handle.wait_ready(Duration::from_secs(60)).await, "{name} did not settle within 60 s");
    let status = status_of(&handle, &name).await;
    assert_eq!(status.state, ServerState::Connected, "{name}: {status:?}");
    handle
}

pub async fn call(handle: &Handle, server: &str, tool: &str, arguments: Value) -> CallToolResult {
    let call = CallTool::new(tool, arguments).with_timeout(Duration::from_secs(60));
    let result = handle.call_on(server, call).await.unwrap_or_else(|e| panic!("{server}/{tool}: {e}"));
    assert_ne!(result.is_error, Some(true), "{server}/{tool} answered isError: {result:?}");
    result
}

/// All text blocks of a result, joined by newlines.
pub fn texts(result: &CallToolResult) -> String {
    let content = serde_json::to_value(&result.content).unwrap_or_default();
    let blocks = content.as_array().cloned().unwrap_or_default();
    blocks.iter().filter_map(|b| b["text"].as_str().map(str::to_string)).collect::<Vec<_>>().join("\n")
}

pub fn resource_text(contents: &[ResourceContents]) -> String {
    match contents {
        [ResourceContents::TextResourceContents { text, .. }] => text.clone(),
        other => panic!("one text content expected: {other:?}"),
    }
}

pub async fn era_of(handle: &Handle, server: &str) -> (String, String) {
    let status = status_of(handle, server).await;
    (status.era.unwrap_or_default(), status.protocol_version.unwrap_or_default())
}

pub async fn next_event<T>(events: &mut mcpvisor::Events, within: Duration, what: &str, pick: impl Fn(Event) -> Option<T>) -> T {
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

pub fn drain<T>(rx: &mut tokio::sync::mpsc::UnboundedReceiver<T>) -> Vec<T> {
    std::iter::from_fn(|| rx.try_recv().ok()).collect()
}

pub fn object(value: Value) -> Option<JsonObject> {
    value.as_object().cloned()
}
