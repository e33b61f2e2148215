//! An ACP client for the tests: drives the real `mcpvisor acp` over its
//! stdin/stdout, answers the agent's requests (`fs/*`, `terminal/*`,
//! `session/request_permission`) with the test's own handler, and keeps
//! every `session/update` it saw.

#![allow(dead_code)]

use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

/// Longest wait for one message; a hang fails the test with what was seen.
const PATIENCE: Duration = Duration::from_secs(60);

pub struct Client {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<Value>,
    next_id: i64,
    /// The `session/update` params seen so far.
    pub updates: Vec<Value>,
    /// The agent's requests seen so far (method, params).
    pub asked: Vec<(String, Value)>,
    /// Every message of the agent read so far, in the order it was written.
    pub wire: Vec<Value>,
}

impl Client {
    pub fn start(mut command: std::process::Command) -> Client {
        command.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
        let mut child = tokio::process::Command::from(command).kill_on_drop(true).spawn().expect("mcpvisor acp starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout carries only JSON-RPC ({e}): {line}"));
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        Client { stdin: child.stdin.take(), child, lines, next_id: 0, updates: Vec::new(), asked: Vec::new(), wire: Vec::new() }
    }

    pub async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.as_mut().expect("stdin open").write_all(line.as_bytes()).await.unwrap();
    }

    pub async fn send_raw(&mut self, line: &str) {
        self.stdin.as_mut().expect("stdin open").write_all(line.as_bytes()).await.unwrap();
    }

    /// Sends a request; returns its id.
    pub async fn request(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        id
    }

    pub async fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params})).await;
    }

    /// The next message from the agent.
    pub async fn next(&mut self) -> Value {
        match tokio::time::timeout(PATIENCE, self.lines.recv()).await {
            Ok(Some(value)) => {
                self.wire.push(value.clone());
                value
            }
            Ok(None) => panic!("the agent closed stdout; updates so far: {:#?}", self.updates),
            Err(_) => panic!("no message from the agent in {PATIENCE:?}; updates so far: {:#?}", self.updates),
        }
    }

    /// Reads until the response to `id`, keeping updates and answering the
    /// agent's requests with `answer` (method, params) → result (`null`:
    /// leave the request unanswered).
    pub async fn response(&mut self, id: i64, answer: &mut dyn FnMut(&str, &Value) -> Value) -> Value {
        loop {
            let message = self.next().await;
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return message;
            }
            self.take(message, answer).await;
        }
    }

    /// Reads until `stop` holds for an update or a request of the agent.
    pub async fn until(&mut self, stop: &dyn Fn(&Value) -> bool, answer: &mut dyn FnMut(&str, &Value) -> Value) -> Value {
        loop {
            let message = self.next().await;
            let hit = stop(&message);
            self.take(message.clone(), answer).await;
            if hit {
                return message;
            }
        }
    }

    async fn take(&mut self, message: Value, answer: &mut dyn FnMut(&str, &Value) -> Value) {
        let method = message.get("method").and_then(Value::as_str).unwrap_or_default().to_string();
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        match message.get("id") {
            None if method == "session/update" => self.updates.push(params),
            None => {}
            Some(id) if !method.is_empty() => {
                self.asked.push((method.clone(), params.clone()));
                let result = answer(&method, &params);
                if result.is_null() {
                    return;
                }
                let reply = match result.get("error") {
                    Some(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
                    None => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                };
                self.send(reply).await;
            }
            Some(_) => panic!("a response to no request of ours: {message}"),
        }
    }

    /// Takes stdin away (dropping it closes it), as an editor that goes away does.
    pub fn stdin_take(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// Closes stdin and waits for the process to exit.
    pub async fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        tokio::time::timeout(PATIENCE, self.child.wait()).await.expect("the agent exits after stdin closes").unwrap()
    }

    /// The updates of one kind (`sessionUpdate`).
    pub fn updates_of(&self, kind: &str) -> Vec<&Value> {
        self.updates.iter().map(|params| &params["update"]).filter(|update| update["sessionUpdate"] == kind).collect()
    }
}

/// Answers nothing the test did not expect.
pub fn no_requests(method: &str, params: &Value) -> Value {
    panic!("unexpected request {method} {params}")
}

pub fn initialize(fs: bool, terminal: bool) -> Value {
    json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": fs, "writeTextFile": fs}, "terminal": terminal}})
}

pub fn selected(option: &str) -> Value {
    json!({"outcome": {"outcome": "selected", "optionId": option}})
}
