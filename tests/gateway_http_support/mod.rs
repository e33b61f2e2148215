//! `mcpvisor serve --http` as a real process in front of the demo server,
//! and a raw HTTP client for it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

pub const BIN: &str = env!("CARGO_BIN_EXE_mcpvisor");
pub const MODERN: &str = "2026-07-28";
pub const LEGACY: &str = "2025-11-25";

/// A running gateway; SIGKILLed (process group too) when dropped, unless it exited.
pub struct Gateway {
    pub child: Child,
    /// `http://HOST:PORT`, without a path.
    pub base: String,
    pub stderr: Arc<Mutex<String>>,
    _dir: tempfile::TempDir,
}

impl Gateway {
    /// `mcpvisor --config F serve [extra] --http ADDR` with one demo server `demo`.
    pub fn start(addr: &str, extra: &[&str], env: &[(&str, &str)]) -> Result<Gateway, String> {
        Gateway::start_with_config(&format!("[servers.demo]\ncommand = {BIN:?}\nargs = [\"demo-server\"]\n"), addr, extra, env)
    }

    /// `mcpvisor --config F serve [extra] --http ADDR`, F holding `toml`.
    pub fn start_with_config(toml: &str, addr: &str, extra: &[&str], env: &[(&str, &str)]) -> Result<Gateway, String> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = dir.path().join("servers.toml");
        std::fs::write(&config, toml).unwrap();
        let mut command = Command::new(BIN);
        command.arg("--config").arg(&config).arg("serve").args(extra).args(["--http", addr]);
        command.env_remove("MCPVISOR_SERVE_TOKEN").env("HOME", dir.path()).env("XDG_CACHE_HOME", dir.path().join("cache"));
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("mcpvisor starts");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut base = None;
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            stderr.lock().unwrap().push_str(&format!("{line}\n"));
            if let Some(url) = line.split("serving MCP at ").nth(1) {
                base = Some(url.trim().trim_end_matches("/mcp").to_string());
                break;
            }
        }
        let kept = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                kept.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        match base {
            Some(base) => Ok(Gateway { child, base, stderr, _dir: dir }),
            None => {
                let status = child.wait().ok();
                Err(format!("the gateway did not start ({status:?}): {}", stderr.lock().unwrap()))
            }
        }
    }

    pub fn loopback() -> Gateway {
        Gateway::start("127.0.0.1:0", &[], &[]).expect("the gateway starts")
    }

    pub fn mcp(&self) -> String {
        format!("{}/mcp", self.base)
    }

    pub fn terminate(&self) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
    }

    /// The exit code once the gateway has exited (-1 for a signal), `None` while it runs.
    pub fn child_exited(&mut self) -> Option<i32> {
        self.child.try_wait().ok().flatten().map(|status| status.code().unwrap_or(-1))
    }

    /// Waits up to `limit` for the gateway to exit: its exit code (-1 for a signal).
    pub fn wait_exit(&mut self, limit: std::time::Duration) -> Option<i32> {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Some(code) = self.child_exited() {
                return Some(code);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        None
    }

    /// The configuration file the gateway was started with (rewrite it, then SIGHUP).
    pub fn config_file(&self) -> std::path::PathBuf {
        self._dir.path().join("servers.toml")
    }

    /// Everything the gateway wrote on stderr so far.
    pub fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: as above.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
            let _ = self.child.wait();
        }
    }
}

/// The processes `pid` started (from every thread of it).
pub fn children_of(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
    let lists = tasks.map(|task| std::fs::read_to_string(task.path().join("children")).unwrap_or_default());
    lists.flat_map(|list| list.split_whitespace().filter_map(|child| child.parse().ok()).collect::<Vec<u32>>()).collect()
}

/// Fails if any of `pids` still runs (or is an unreaped zombie).
pub fn assert_all_gone(pids: &[u32]) {
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(stat.is_empty(), "server process {pid} was left behind: {stat}");
    }
}

pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().pool_max_idle_per_host(0).build().expect("an HTTP client")
}

/// An HTTP client whose connections come from `127.0.0.N` (the gateway's
/// per-client bounds tell clients apart by address).
pub fn client_from(n: u8) -> reqwest::Client {
    let _ = client();
    let address = std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, n));
    reqwest::Client::builder().pool_max_idle_per_host(0).local_address(address).build().expect("an HTTP client")
}

pub fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

pub fn initialize(version: &str) -> Value {
    request(0, "initialize", json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}))
}

/// A POST with the headers every Streamable HTTP client sends.
pub fn post(http: &reqwest::Client, url: &str, body: &Value) -> reqwest::RequestBuilder {
    http.post(url).header("accept", "application/json, text/event-stream").header("content-type", "application/json").body(body.to_string())
}

/// Opens an `initialize`-era session: its id.
pub async fn open_session(http: &reqwest::Client, url: &str) -> String {
    let response = post(http, url, &initialize(LEGACY)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let id = response.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let answer = json_of(response).await;
    assert_eq!(answer["result"]["protocolVersion"], LEGACY, "{answer}");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = post(http, url, &initialized).header("mcp-session-id", &id).header("mcp-protocol-version", LEGACY).send().await.unwrap();
    assert_eq!(response.status(), 202);
    id
}

/// One server-sent event: its id and its data, parsed.
#[derive(Debug, Clone)]
pub struct Sse {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: Value,
}

/// Reads server-sent events from a response body, one at a time.
pub struct SseReader {
    response: reqwest::Response,
    buffer: String,
}

/// How long an event stream may stay silent before the test fails (a bound against hangs, not a timing check).
const CHUNK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

impl SseReader {
    pub fn new(response: reqwest::Response) -> SseReader {
        SseReader { response, buffer: String::new() }
    }

    /// Reads on to the response to request `id` (what comes before it,
    /// progress and notifications, is passed over); panics if the stream ends first.
    pub async fn answer_to(&mut self, id: u64) -> Value {
        loop {
            let event = self.next().await.unwrap_or_else(|| panic!("the stream ended before the answer to request {id}"));
            if event.data["id"] == id {
                return event.data;
            }
        }
    }

    /// The next event with data, `None` at the end of the stream.
    pub async fn next(&mut self) -> Option<Sse> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut id, mut event, mut data) = (None, None, String::new());
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("id:") {
                        id = Some(value.trim().to_string());
                    } else if let Some(value) = line.strip_prefix("event:") {
                        event = Some(value.trim().to_string());
                    } else if let Some(value) = line.strip_prefix("data:") {
                        data.push_str(value.strip_prefix(' ').unwrap_or(value));
                    }
                }
                if data.is_empty() {
                    continue;
                }
                let data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                return Some(Sse { id, event, data });
            }
            let chunk = tokio::time::timeout(CHUNK_PATIENCE, self.response.chunk())
                .await
                .unwrap_or_else(|_| panic!("the event stream sent nothing for {CHUNK_PATIENCE:?}; read so far: {:?}", self.buffer))
                .ok()??;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n"));
        }
    }
}

/// The `_meta` of a 2026-07-28 request.
pub fn modern_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}})
}

/// A response's body as JSON.
pub async fn json_of(response: reqwest::Response) -> Value {
    let bytes = response.bytes().await.expect("a body");
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)))
}

/// POSTs a 2026-07-28 request; its response (from a JSON or an SSE body).
pub async fn call_modern(http: &reqwest::Client, url: &str, body: &Value) -> Value {
    call_modern_as(http, url, body, None).await
}

/// [`call_modern`] with `bearer` (a key or an access token), if any.
pub async fn call_modern_as(http: &reqwest::Client, url: &str, body: &Value, bearer: Option<&str>) -> Value {
    let (method, name) = (body["method"].as_str().unwrap(), body["params"]["name"].as_str().unwrap_or_default());
    let mut request = post(http, url, body).header("mcp-protocol-version", MODERN).header("mcp-method", method).header("mcp-name", name);
    if let Some(bearer) = bearer {
        request = request.bearer_auth(bearer);
    }
    let response = request.send().await.unwrap();
    let sse = response.headers().get("content-type").is_some_and(|kind| kind.as_bytes().starts_with(b"text/event-stream"));
    if !sse {
        return json_of(response).await;
    }
    let mut events = SseReader::new(response);
    while let Some(Sse { data, .. }) = events.next().await {
        if data.get("id").is_some() && data.get("method").is_none() {
            return data;
        }
    }
    panic!("the SSE stream ended without the response")
}

/// Three named keys: alice and bob, and carol with the admin scope; their
/// secrets below, given to the gateway as `ALICE_KEY`, `BOB_KEY`, `CAROL_KEY`.
pub const ALICE: &str = "alice-0f3a9c2e7b1d4a6f8e0c";
pub const BOB: &str = "bob-9e8d7c6b5a4f3e2d1c0b";
pub const CAROL: &str = "carol-5d4c3b2a1f0e9d8c7b6a";

/// The `[serve.keys]` of [`ALICE`], [`BOB`] and [`CAROL`].
pub const THREE_KEYS: &str = r#"
[serve.keys.alice]
token = "${ALICE_KEY}"
[serve.keys.bob]
token = "${BOB_KEY}"
[serve.keys.carol]
token = "${CAROL_KEY}"
scopes = ["mcpvisor:admin"]
"#;

/// The environment that gives the three keys their secrets.
pub const THREE_KEYS_ENV: [(&str, &str); 3] = [("ALICE_KEY", ALICE), ("BOB_KEY", BOB), ("CAROL_KEY", CAROL)];

/// A handshake-era session of `key`'s, its client declaring `capabilities`.
pub struct KeySession {
    pub http: reqwest::Client,
    pub url: String,
    pub key: &'static str,
    pub id: String,
}

impl KeySession {
    pub async fn open(gateway: &Gateway, key: &'static str, capabilities: Value) -> KeySession {
        let http = client();
        let init = request(
            0,
            "initialize",
            json!({"protocolVersion": LEGACY, "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}}),
        );
        let response = post(&http, &gateway.mcp(), &init).bearer_auth(key).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let id = response.headers()["mcp-session-id"].to_str().unwrap().to_string();
        let session = KeySession { http, url: gateway.mcp(), key, id };
        assert_eq!(session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await.status(), 202);
        session
    }

    pub async fn send(&self, body: &Value) -> reqwest::Response {
        let builder = post(&self.http, &self.url, body).bearer_auth(self.key);
        builder.header("mcp-session-id", &self.id).header("mcp-protocol-version", LEGACY).send().await.unwrap()
    }

    /// The answer to a call of `tool` (read from a JSON or an SSE body).
    pub async fn call(&self, id: u64, tool: &str, arguments: Value) -> Value {
        let response = self.send(&request(id, "tools/call", json!({"name": tool, "arguments": arguments}))).await;
        if response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream") {
            return SseReader::new(response).answer_to(id).await;
        }
        json_of(response).await
    }

    /// The session's GET stream.
    pub async fn listen(&self) -> SseReader {
        let get = self.http.get(&self.url).bearer_auth(self.key).header("accept", "text/event-stream").header("mcp-session-id", &self.id);
        let response = get.send().await.unwrap();
        assert_eq!(response.status(), 200);
        SseReader::new(response)
    }
}
