//! The audit log of `mcpvisor serve` (a real process in front of the demo
//! server): on by default in the user's state directory, turned off with
//! `--no-audit`, never on stdout over stdio, private (0600 in 0700), and
//! each line's `caller` says which of the gateway's clients made the call
//! without giving away its session id.

use std::path::Path;
use std::time::Duration;

use crate::gateway_http_support as http;
use crate::gateway_support::{demo_table, Gateway, BIN};
use serde_json::{json, Value};

fn config(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("servers.toml");
    std::fs::write(&path, demo_table("demo", &[])).unwrap();
    path
}

/// The audit log's lines, parsed.
fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))).collect()
}

/// Two echo calls over stdio with `extra` flags, the state directory in `dir`; the exit code.
async fn two_calls(dir: &Path, extra: &[&str]) -> Option<i32> {
    let state = dir.join("state");
    let mut gateway = Gateway::spawn_with_env(&config(dir), extra, &[("XDG_STATE_HOME", state.to_str().unwrap())]);
    let init = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}});
    assert!(gateway.request("initialize", init).await.get("result").is_some());
    gateway.notify("notifications/initialized", json!({})).await;
    assert_eq!(gateway.call_text("demo__echo", json!({"text": "one"})).await, "one");
    assert_eq!(gateway.call_text("demo__echo", json!({"text": "two", "token": "x"})).await, "two");
    gateway.close().await
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn serve_writes_one_audit_line_per_call_in_the_state_directory_by_default() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(two_calls(dir.path(), &[]).await, Some(0));
    let state = dir.path().join("state/mcpvisor");
    assert_eq!((mode(&state), mode(&state.join("audit.jsonl"))), (0o700, 0o600), "who called what is the user's alone");
    let lines = lines(&state.join("audit.jsonl"));
    assert_eq!(lines.len(), 2, "{lines:?}");
    for line in &lines {
        assert_eq!(
            (&line["server"], &line["tool"], &line["caller"], &line["outcome"]),
            (&json!("demo"), &json!("echo"), &json!("stdio"), &json!("ok"))
        );
        assert!(line["arguments"]["sha256"].as_str().is_some_and(|digest| digest.len() == 64), "{line}");
    }
}

#[tokio::test]
async fn a_state_directory_and_log_left_open_by_an_older_version_are_made_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state/mcpvisor");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("audit.jsonl"), "").unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(state.join("audit.jsonl"), std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(two_calls(dir.path(), &[]).await, Some(0));
    assert_eq!((mode(&state), mode(&state.join("audit.jsonl"))), (0o700, 0o600));
}

#[tokio::test]
async fn no_audit_writes_no_log() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(two_calls(dir.path(), &["--no-audit"]).await, Some(0));
    assert!(!dir.path().join("state/mcpvisor/audit.jsonl").exists());
}

#[tokio::test]
async fn the_audit_table_and_the_flag_choose_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("servers.toml");
    let table = "[audit]\npath = \"calls.jsonl\"\narguments = \"redacted\"\n";
    std::fs::write(&path, format!("{}{table}", demo_table("demo", &[]))).unwrap();
    let mut gateway = Gateway::start(&path, &[], json!({})).await;
    assert_eq!(gateway.call_text("demo__echo", json!({"text": "one", "token": "hunter2"})).await, "one");
    assert_eq!(gateway.close().await, Some(0));
    let logged = lines(&dir.path().join("calls.jsonl"));
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0]["arguments"]["text"], "one", "the table's settings apply: {logged:?}");
    assert!(!logged[0].to_string().contains("hunter2"), "{logged:?}");

    let chosen = dir.path().join("elsewhere/audit.log");
    let mut gateway = Gateway::start(&path, &["--audit", chosen.to_str().unwrap()], json!({})).await;
    assert_eq!(gateway.call_text("demo__echo", json!({"text": "two"})).await, "two");
    assert_eq!(gateway.close().await, Some(0));
    assert_eq!(lines(&chosen).len(), 1);
    assert_eq!(lines(&dir.path().join("calls.jsonl")).len(), 1, "the flag wins over the table");
}

#[test]
fn audit_on_stdout_is_refused_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let stdout_table = dir.path().join("stdout.toml");
    std::fs::write(&stdout_table, format!("{}[audit]\npath = \"-\"\n", demo_table("demo", &[]))).unwrap();
    for (config, extra) in [(config(dir.path()), vec!["--audit", "-"]), (stdout_table, vec![])] {
        let output = std::process::Command::new(BIN)
            .arg("--config")
            .arg(&config)
            .arg("serve")
            .args(&extra)
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("stdout carries the MCP protocol"), "{stderr}");
        assert!(output.stdout.is_empty(), "nothing but protocol on stdout: {:?}", String::from_utf8_lossy(&output.stdout));
    }
}

/// One echo call in an HTTP session.
async fn echo_in(client: &reqwest::Client, gateway: &http::Gateway, session: &str, text: &str) {
    let call = http::request(1, "tools/call", json!({"name": "demo__echo", "arguments": {"text": text}}));
    let response = http::post(client, &gateway.mcp(), &call).header("mcp-session-id", session).send().await.unwrap();
    let answer = http::json_of(response).await;
    assert_eq!(answer["result"]["content"][0]["text"], text, "{answer}");
}

#[tokio::test]
async fn each_http_session_is_the_caller_of_its_calls() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let gateway = http::Gateway::start("127.0.0.1:0", &["--audit", log.to_str().unwrap()], &[]).expect("the gateway starts");
    assert!(gateway.stderr_text().contains(&format!("audit log at {}", log.display())), "{}", gateway.stderr_text());
    let client = http::client();
    let first = http::open_session(&client, &gateway.mcp()).await;
    let second = http::open_session(&client, &gateway.mcp()).await;
    echo_in(&client, &gateway, &first, "from the first").await;
    echo_in(&client, &gateway, &second, "from the second").await;
    echo_in(&client, &gateway, &first, "first again").await;
    let modern =
        http::request(7, "tools/call", json!({"name": "demo__echo", "arguments": {"text": "stateless"}, "_meta": http::modern_meta()}));
    let response = http::post(&client, &gateway.mcp(), &modern)
        .header("mcp-protocol-version", http::MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "demo__echo")
        .send()
        .await
        .unwrap();
    assert_eq!(http::json_of(response).await["result"]["content"][0]["text"], "stateless");
    let mut gateway = gateway;
    gateway.terminate();
    assert_eq!(gateway.wait_exit(Duration::from_secs(60)), Some(0), "{}", gateway.stderr_text());
    let callers: Vec<Value> = lines(&log).iter().map(|line| line["caller"].clone()).collect();
    assert_eq!(callers, [json!("http:session-1"), json!("http:session-2"), json!("http:session-1"), json!("http:stateless")]);
    assert_ne!(first, second);
    // A session id lets whoever holds it resume the session's streams: it is never written down.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains(&first) && !text.contains(&second), "{text}");
    assert_eq!(mode(&log), 0o600);
}
