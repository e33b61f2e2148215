//! The real filesystem server (`@modelcontextprotocol/server-filesystem
//! DIR`, npm) keeps `DIR` behind mcpvisor: it replaces its command-line
//! directories with the client's roots, and given an empty list it keeps
//! them (it logs `No valid root directories provided by client`). So a
//! file in `DIR` must be readable through `call` run from another
//! directory, through `serve` over stdio with a client that declares no
//! roots, and through `serve --http`, whose client's own roots are not
//! passed on.
//!
//! `#[ignore]`d like tests/interop/servers_stdio.rs: `.ci/run` runs them with
//! `MCPVISOR_INTEROP=1 cargo test --test interop roots:: -- --ignored`
//! after `.ci/interop-setup` installed the server.

use crate::gateway_http_support;
use crate::interop_support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::gateway_http_support::{client, json_of, post, request, Sse, SseReader, BIN, LEGACY};
use serde_json::{json, Value};

/// What the filesystem server logs when a client's roots list is empty.
const KEPT: &str = "No valid root directories provided by client";
/// What it logs when a client's roots replace its directories.
const REPLACED: &str = "Updated allowed directories from MCP roots";
const CONTENT: &str = "kept in DIR";

/// `DIR` holding `x.txt`, another directory to run from, and a config
/// naming the filesystem server on `DIR` as `fs`.
struct Setup {
    dir: tempfile::TempDir,
    elsewhere: tempfile::TempDir,
    config: std::path::PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let installed = interop_support::installed("filesystem");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x.txt"), CONTENT).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let mut args: Vec<String> = installed.args.clone();
        args.push(dir.path().to_string_lossy().into_owned());
        let table = format!("[servers.fs]\ncommand = {:?}\nargs = {}\n", installed.command, serde_json::to_string(&args).unwrap());
        let config = elsewhere.path().join("servers.toml");
        std::fs::write(&config, table).unwrap();
        Setup { dir, elsewhere, config }
    }

    fn file(&self) -> String {
        self.dir.path().join("x.txt").to_string_lossy().into_owned()
    }

    /// `mcpvisor -v --config CONFIG ARGS` run from the other directory.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command.arg("-v").arg("--config").arg(&self.config).args(args).current_dir(self.elsewhere.path());
        command.env_remove("RUST_LOG").env("HOME", self.elsewhere.path()).env("XDG_STATE_HOME", self.elsewhere.path().join("state"));
        command
    }
}

/// Waits (at most 30 s) until `log` shows the server kept its directories; fails if they were replaced.
fn until_kept(log: &dyn Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = log();
        assert!(!text.contains(REPLACED), "the server's directories were replaced by roots:\n{text}");
        if text.contains(KEPT) {
            return;
        }
        assert!(Instant::now() < deadline, "the server never got its (empty) roots:\n{text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
fn call_from_another_directory_reads_a_file_in_dir() {
    let setup = Setup::new();
    let path = format!("path={}", setup.file());
    let output = setup.command(&["call", "fs", "read_text_file", "--arg", &path]).output().expect("mcpvisor runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success() && stdout.contains(CONTENT), "{stdout}\n{stderr}");
    assert!(stderr.contains(KEPT) && !stderr.contains(REPLACED), "the server got an empty roots list: {stderr}");
}

/// Collects a child's stderr in the background.
fn collect(stderr: impl std::io::Read + Send + 'static) -> Arc<Mutex<String>> {
    let log = Arc::new(Mutex::new(String::new()));
    let kept = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            kept.lock().unwrap().push_str(&format!("{line}\n"));
        }
    });
    log
}

#[test]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
fn serve_over_stdio_with_a_client_without_roots_reads_a_file_in_dir() {
    let setup = Setup::new();
    let mut child =
        setup.command(&["serve"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("serve starts");
    let log = collect(child.stderr.take().unwrap());
    let mut stdin = child.stdin.take().unwrap();
    let mut send = |message: Value| writeln!(stdin, "{message}").and_then(|()| stdin.flush()).expect("serve reads stdin");
    let init = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "no-roots", "version": "1"}});
    send(request(1, "initialize", init));
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    until_kept(&|| log.lock().unwrap().clone());
    send(request(2, "tools/call", json!({"name": "fs__read_text_file", "arguments": {"path": setup.file()}})));
    // Read on a thread of its own, so that the wait for the answer has a deadline.
    let (read, lines) = std::sync::mpsc::channel();
    let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    std::thread::spawn(move || stdout.map_while(Result::ok).try_for_each(|line| read.send(line)));
    let answer = loop {
        let line = lines.recv_timeout(Duration::from_secs(60)).expect("serve answers within 60 s");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 2 {
            break message;
        }
    };
    assert_eq!(answer["result"]["content"][0]["text"], CONTENT, "{answer}");
    drop(stdin);
    assert!(child.wait().expect("serve exits").success());
}

#[tokio::test]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn serve_over_http_reads_a_file_in_dir_whatever_its_clients_roots() {
    let setup = Setup::new();
    let toml = std::fs::read_to_string(&setup.config).unwrap();
    let gateway = gateway_http_support::Gateway::start_with_config(&toml, "127.0.0.1:0", &["-v"], &[]).expect("the gateway starts");
    let log = || gateway.stderr_text();
    until_kept(&log);
    let (http, url) = (client(), gateway.mcp());
    // The client has roots of its own (of its machine): over HTTP they are not passed on.
    let init =
        json!({"protocolVersion": LEGACY, "capabilities": {"roots": {"listChanged": true}}, "clientInfo": {"name": "t", "version": "1"}});
    let response = post(&http, &url, &request(0, "initialize", init)).send().await.unwrap();
    let session = response.headers()["mcp-session-id"].to_str().unwrap().to_string();
    assert!(json_of(response).await.get("result").is_some());
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(&http, &url, &initialized).header("mcp-session-id", &session).send().await.unwrap().status(), 202);
    let call = request(1, "tools/call", json!({"name": "fs__read_text_file", "arguments": {"path": setup.file()}}));
    let response = post(&http, &url, &call).header("mcp-session-id", &session).send().await.unwrap();
    let answer = match response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream") {
        false => json_of(response).await,
        true => {
            let mut events = SseReader::new(response);
            let Some(Sse { data, .. }) = events.next().await else { panic!("no answer") };
            data
        }
    };
    assert_eq!(answer["result"]["content"][0]["text"], CONTENT, "{answer}");
    assert!(!gateway.stderr_text().contains(REPLACED), "{}", gateway.stderr_text());
}
