//! A small MCP client for `mcpvisor serve`: JSON lines over the child's
//! pipes, requests matched to responses by id, notifications kept in
//! order, and the gateway's own requests (sampling, elicitation, roots)
//! answered by a function of the test's.

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Mutex;

pub const BIN: &str = env!("CARGO_BIN_EXE_mcpvisor");

/// How long any one awaited answer may take before the test fails (a bound against hangs, not a timing check).
pub const PATIENCE: Duration = Duration::from_secs(60);

/// How often a test asks again for a state it waits for (the status resource).
pub const POLL: Duration = Duration::from_millis(20);

/// Awaits `wait`, failing the test after [`PATIENCE`] with `what` it waited for: no wait without a deadline.
pub async fn within<T>(what: &str, wait: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, wait).await.unwrap_or_else(|_| panic!("waited {PATIENCE:?} for {what}"))
}

/// Answers the gateway's requests: `(method, params)` → result, or `None` to answer an error.
pub type Answerer = Box<dyn FnMut(&str, &Value) -> Option<Value> + Send>;

pub struct Gateway {
    pub child: Child,
    /// Shared so that a task may flood it while the test does not read.
    pub stdin: Arc<Mutex<ChildStdin>>,
    lines: Lines<BufReader<ChildStdout>>,
    pub notifications: VecDeque<Value>,
    /// Responses read while waiting for another, by id (JSON text): a
    /// gateway may answer concurrent requests in any order.
    early: HashMap<String, Value>,
    next_id: i64,
    pub answerer: Answerer,
    /// Requests the gateway sent us, in order.
    pub asked: Vec<Value>,
    stdin_fd: i32,
}

/// A `[servers.NAME]` table running the bundled demo server with `flags`.
pub fn demo_table(name: &str, flags: &[&str]) -> String {
    let args: Vec<String> = std::iter::once("demo-server").chain(flags.iter().copied()).map(|a| format!("{a:?}")).collect();
    format!("[servers.{name}]\ncommand = {BIN:?}\nargs = [{}]\n", args.join(", "))
}

impl Gateway {
    /// `mcpvisor --config CONFIG serve EXTRA...`, not yet initialised; its
    /// state (the default audit log) under CONFIG's directory.
    pub fn spawn(config: &Path, extra: &[&str]) -> Gateway {
        let state = config.parent().unwrap_or(Path::new(".")).join("state");
        Gateway::spawn_with_env(config, extra, &[("XDG_STATE_HOME", state.to_str().unwrap())])
    }

    /// [`Gateway::spawn`] with these environment variables set.
    pub fn spawn_with_env(config: &Path, extra: &[&str], env: &[(&str, &str)]) -> Gateway {
        let mut child = Command::new(BIN)
            .arg("--config")
            .arg(config)
            .arg("serve")
            .args(extra)
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("mcpvisor serve starts");
        let stdin = Arc::new(Mutex::new(child.stdin.take().unwrap()));
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let stdin_fd = std::os::fd::AsRawFd::as_raw_fd(&*stdin.try_lock().unwrap());
        let answerer: Answerer = Box::new(|_, _| None);
        Gateway {
            child,
            stdin,
            lines,
            notifications: VecDeque::new(),
            early: HashMap::new(),
            next_id: 0,
            answerer,
            asked: Vec::new(),
            stdin_fd,
        }
    }

    /// [`Gateway::spawn`], then `initialize` with `capabilities` and `notifications/initialized`.
    pub async fn start(config: &Path, extra: &[&str], capabilities: Value) -> Gateway {
        Gateway::spawn(config, extra).initialized(capabilities).await
    }

    /// [`Gateway::start`] with these environment variables set.
    pub async fn start_with_env(config: &Path, extra: &[&str], capabilities: Value, env: &[(&str, &str)]) -> Gateway {
        Gateway::spawn_with_env(config, extra, env).initialized(capabilities).await
    }

    async fn initialized(mut self, capabilities: Value) -> Gateway {
        let gateway = &mut self;
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": capabilities, "clientInfo": {"name": "test", "version": "1"}});
        let answer = gateway.request("initialize", init).await;
        assert_eq!(answer["result"]["protocolVersion"], "2025-06-18", "{answer}");
        gateway.notify("notifications/initialized", json!({})).await;
        self
    }

    pub async fn send_line(&mut self, line: &[u8]) {
        let mut stdin = self.stdin.lock().await;
        stdin.write_all(line).await.expect("the gateway reads stdin");
        stdin.write_all(b"\n").await.expect("the gateway reads stdin");
        stdin.flush().await.unwrap();
    }

    /// Bytes written to the gateway's stdin that it has not read yet.
    pub fn unread_input(&self) -> usize {
        // The pipe stays open while `self.stdin` lives.
        let fd = self.stdin_fd;
        let mut unread: libc::c_int = 0;
        // SAFETY: FIONREAD writes one c_int to the pointer given.
        unsafe { libc::ioctl(fd, libc::FIONREAD, &mut unread) };
        unread.max(0) as usize
    }

    /// A line of `/proc/PID/status` of the gateway, in KiB (`VmRSS`, `VmHWM`).
    pub fn memory_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id().unwrap())).unwrap_or_default();
        let value = status.lines().find_map(|line| line.strip_prefix(field)?.strip_prefix(':'));
        value.and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
    }

    pub async fn notify(&mut self, method: &str, params: Value) {
        let line = serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": method, "params": params})).unwrap();
        self.send_line(&line).await;
    }

    /// The id the next request will get.
    pub fn next_id(&self) -> i64 {
        self.next_id + 1
    }

    /// Skips `count` ids (requests written by someone else).
    pub fn skip_ids(&mut self, count: i64) {
        self.next_id += count;
    }

    /// Sends a request and returns its id.
    pub async fn send(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        let line = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).unwrap();
        self.send_line(&line).await;
        id
    }

    /// Sends a request and waits for its whole response (`result` or `error`).
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params).await;
        self.response(json!(id)).await
    }

    /// The `result` of a request that must succeed.
    pub async fn result(&mut self, method: &str, params: Value) -> Value {
        let answer = self.request(method, params).await;
        assert!(answer.get("result").is_some(), "{answer}");
        answer["result"].clone()
    }

    /// Waits for the response with this id; other messages are kept or answered.
    pub async fn response(&mut self, id: Value) -> Value {
        if let Some(early) = self.early.remove(&id.to_string()) {
            return early;
        }
        loop {
            let message = self.next_message().await;
            if message.get("method").is_none() && message["id"] == id {
                return message;
            }
            self.keep(message).await;
        }
    }

    /// Waits for a notification of `method` (earlier ones kept are looked at first).
    pub async fn notification(&mut self, method: &str) -> Value {
        if let Some(at) = self.notifications.iter().position(|n| n["method"] == method) {
            return self.notifications.remove(at).unwrap();
        }
        loop {
            let message = self.next_message().await;
            if message["method"] == method && message.get("id").is_none() {
                return message;
            }
            self.keep(message).await;
        }
    }

    async fn keep(&mut self, message: Value) {
        match (message.get("method"), message.get("id")) {
            (Some(method), Some(id)) => {
                let method = method.as_str().unwrap_or_default().to_string();
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                self.asked.push(message.clone());
                let answer = match (self.answerer)(&method, &params) {
                    Some(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                    None => json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "not here"}}),
                };
                self.send_line(&serde_json::to_vec(&answer).unwrap()).await;
            }
            (Some(_), None) => self.notifications.push_back(message),
            (None, Some(id)) => {
                if let Some(before) = self.early.insert(id.to_string(), message.clone()) {
                    panic!("two responses to one request: {before} and {message}");
                }
            }
            (None, None) => panic!("neither a request, a notification nor a response: {message}"),
        }
    }

    pub async fn next_message(&mut self) -> Value {
        let line = tokio::time::timeout(PATIENCE, self.lines.next_line()).await.expect("the gateway answers in time");
        let line = line.expect("stdout readable").expect("the gateway's stdout is open");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout carries only JSON-RPC ({e}): {line}"))
    }

    /// The next message that is not a notification (the pool's
    /// `list_changed` and logs may come at any time).
    pub async fn next_answer(&mut self) -> Value {
        loop {
            let message = self.next_message().await;
            if message.get("id").is_some() {
                return message;
            }
        }
    }

    /// Calls a tool and returns the whole response.
    pub async fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments})).await
    }

    /// The text of a successful tool call's first content block.
    pub async fn call_text(&mut self, name: &str, arguments: Value) -> String {
        let answer = self.call(name, arguments).await;
        assert!(!answer["result"]["isError"].as_bool().unwrap_or(false), "{answer}");
        answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_string()
    }

    /// Every server's status from the `mcpvisor://status` resource.
    pub async fn statuses(&mut self) -> Vec<Value> {
        let read = self.result("resources/read", json!({"uri": "mcpvisor://status"})).await;
        serde_json::from_str(read["contents"][0]["text"].as_str().unwrap()).unwrap()
    }

    /// The statuses once `done` holds for them, asked every [`POLL`]; fails after
    /// [`PATIENCE`] naming `what` it waited for and showing the last statuses.
    pub async fn statuses_until(&mut self, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let statuses = self.statuses().await;
            if done(&statuses) {
                return statuses;
            }
            assert!(tokio::time::Instant::now() < deadline, "waited {PATIENCE:?} for {what}; last statuses: {statuses:#?}");
            tokio::time::sleep(POLL).await;
        }
    }

    /// The served tools' names.
    pub async fn tool_names(&mut self) -> Vec<String> {
        let listed = self.result("tools/list", json!({})).await;
        listed["tools"].as_array().unwrap().iter().map(|tool| tool["name"].as_str().unwrap().to_string()).collect()
    }

    /// Closes stdin and waits for the gateway to exit; its exit code.
    pub async fn close(mut self) -> Option<i32> {
        drop(self.stdin);
        let status = tokio::time::timeout(PATIENCE, self.child.wait()).await.expect("the gateway exits once stdin closes");
        status.ok().and_then(|status| status.code())
    }
}

/// The pid of `server` from the status resource.
pub fn pid_of(statuses: &[Value], server: &str) -> u32 {
    let status = statuses.iter().find(|s| s["name"] == server).unwrap_or_else(|| panic!("{server} in {statuses:?}"));
    status["pid"].as_u64().unwrap_or_else(|| panic!("{server} has a pid: {status}")) as u32
}
