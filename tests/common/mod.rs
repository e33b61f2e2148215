//! Shared helpers of the integration tests: demo-server configs, result
//! text, and /proc inspection. Every test talks to real processes.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use actix::prelude::*;
use mcpvisor::actors::client_requests::{answered_by, ClientHandlers, ElicitationRequest, Refusal, SamplingRequest};
use rmcp::model::{ElicitResult, ElicitationAction};
use serde_json::{json, Value};

use mcpvisor::config::{RuntimeConfig, ServerConfig};
use mcpvisor::transport::in_process::InProcessServer;
use mcpvisor::transport::stdio::{group_members, proc_info, ProcInfo, ProcessGroup};
use mcpvisor::{CallToolResult, Handle, JsonObject, Runtime, RuntimeBuilder, ServerState, ServerStatus};

/// A demo server named `name`, started with extra `flags`.
pub fn demo(name: &str, flags: &[&str]) -> ServerConfig {
    let args = std::iter::once("demo-server").chain(flags.iter().copied());
    ServerConfig::stdio(name, env!("CARGO_BIN_EXE_mcpvisor"), args)
}

/// The connection threads of the runtimes these tests start: two, as a
/// gateway on two cores spreads them, so supervision, faults,
/// back-pressure and the chaos test run where the gateway runs its
/// connections. The default (none: the runtime's own thread) is what the
/// command line's tests and `Hub::start` in the embedding tests run.
pub const CONNECTION_THREADS: usize = 2;

/// A runtime's configuration of `servers`, on [`CONNECTION_THREADS`].
pub fn runtime_config(servers: Vec<ServerConfig>) -> RuntimeConfig {
    RuntimeConfig { connection_threads: CONNECTION_THREADS, ..RuntimeConfig::new(servers) }
}

/// Starts a runtime and waits until every server has settled.
pub async fn start(servers: Vec<ServerConfig>) -> Handle {
    start_built(Runtime::builder(runtime_config(servers))).await
}

/// Starts a runtime serving `in_process` beside `servers` and waits until every server has settled.
pub async fn start_in_process(in_process: Vec<InProcessServer>, servers: Vec<ServerConfig>) -> Handle {
    let mut config = runtime_config(servers);
    config.servers.extend(in_process.iter().map(|server| server.config.clone()));
    let runtime =
        in_process.into_iter().fold(Runtime::builder(config), |runtime, server| runtime.in_process(server.config.name, server.handler));
    start_built(runtime).await
}

/// Starts a runtime given its live parts and waits until every server has settled.
pub async fn start_built(runtime: RuntimeBuilder) -> Handle {
    let handle = runtime.start().expect("runtime starts");
    assert!(handle.wait_ready(Duration::from_secs(20)).await, "servers did not settle within 20 s");
    handle
}

pub fn args(value: serde_json::Value) -> Option<JsonObject> {
    value.as_object().cloned()
}

/// The first text content of a result.
pub fn text(result: &CallToolResult) -> String {
    result.content.iter().find_map(|c| c.as_text().map(|t| t.text.clone())).unwrap_or_default()
}

pub async fn status_of(handle: &Handle, server: &str) -> ServerStatus {
    handle.server_status(server).await.expect("server exists")
}

/// Polls the server's status until `done` holds (bounded: 20 s).
pub async fn wait_status(handle: &Handle, server: &str, done: impl Fn(&ServerStatus) -> bool) -> ServerStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = status_of(handle, server).await;
        if done(&status) {
            return status;
        }
        assert!(Instant::now() < deadline, "server {server} never reached the expected status; last: {status:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub async fn wait_connected_with_restarts(handle: &Handle, server: &str, restarts: u64) -> ServerStatus {
    wait_status(handle, server, |s| s.state == ServerState::Connected && s.restarts >= restarts).await
}

/// Every process of the group, and whether each is a zombie.
pub fn group(pgid: u32) -> Vec<ProcInfo> {
    group_members(ProcessGroup(pgid as i32))
}

pub fn alive(pid: u32) -> Option<ProcInfo> {
    proc_info(pid as i32)
}

pub fn kill(pid: u32, signal: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(pid as i32, signal);
    }
}

/// The process's resident memory in KiB.
pub fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
}

/// Answers sampling with a fixed text and accepts elicitations with their defaults.
pub struct Assistant;

impl Actor for Assistant {
    type Context = Context<Self>;
}

impl Handler<SamplingRequest> for Assistant {
    type Result = Result<JsonObject, Refusal>;

    fn handle(&mut self, request: SamplingRequest, _: &mut Context<Self>) -> Self::Result {
        let asked = request.params["messages"][0]["content"]["text"].as_str().unwrap_or_default().to_string();
        let answer =
            json!({"role": "assistant", "content": {"type": "text", "text": format!("model says: {asked}")}, "model": "test-model"});
        Ok(answer.as_object().cloned().unwrap_or_default())
    }
}

impl Handler<ElicitationRequest> for Assistant {
    type Result = Result<ElicitResult, Refusal>;

    fn handle(&mut self, request: ElicitationRequest, _: &mut Context<Self>) -> Self::Result {
        let mut result = ElicitResult::new(ElicitationAction::Accept);
        if !request.prefilled.is_empty() {
            result.content = Some(Value::Object(request.prefilled));
        }
        Ok(result)
    }
}

/// Starts `Assistant` on a thread of its own and returns handlers answering with it.
pub fn assistant_handlers() -> ClientHandlers {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let system = actix::System::new();
        system.block_on(async move {
            let _ = tx.send(Assistant.start());
            std::future::pending::<()>().await;
        });
    });
    let assistant = rx.recv().expect("the assistant starts");
    ClientHandlers {
        roots: None,
        sampling: Some(answered_by(assistant.clone().recipient())),
        elicitation: Some(answered_by(assistant.recipient())),
    }
}
