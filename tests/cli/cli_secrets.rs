//! Secrets in transit (issue 34), on real server processes: `leaky`
//! returns a PEM private key and the token configured for another server
//! (`vault`); a scripted model calls it through `mcpvisor agent` and
//! `mcpvisor acp`, a client through `mcpvisor serve`, and neither the key
//! nor the token reaches them, while the audit line counts both by kind.
//! A server set to block
//! secrets in arguments never receives a call that carries one (its own
//! log of calls says so); `allow` lets both ways through.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{json, Value};

use crate::cli_pins::{model_says, model_tool_call, serve_stdio, tool_result, with_model};
use crate::cli_support::{python_fixture_table, stderr, Sandbox};

/// `vault`'s configured token: no well-known shape, so only the configuration makes it a secret.
const TOKEN: &str = "zq7-Vault-9f3b2c1d8e4a";
/// A line of the key `leaky` returns.
const KEY_LINE: &str = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ";
const KEY: &str = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAsecretsecretsecret\n-----END RSA PRIVATE KEY-----";

/// `vault` with its token, and `leaky` with `secrets` (if any), both run
/// by the agent without a question; returns the file of `leaky`'s calls.
fn configure(sandbox: &Sandbox, secrets: Option<&str>) -> PathBuf {
    let calls = sandbox.home.join("leaky-calls.jsonl");
    let vault = python_fixture_table("vault", "tools_only_server.py", &[]);
    let leaky = python_fixture_table("leaky", "leaky_server.py", &[]);
    let setting = secrets.map(|setting| format!("secrets = {setting}\n")).unwrap_or_default();
    let agent = "[agent.servers.leaky]\ntools = { read = \"never\", send = \"never\" }\n\n";
    sandbox.write_user_file(&format!(
        "{agent}{vault}env = {{ VAULT_TOKEN = {TOKEN:?} }}\n\n{leaky}{setting}env = {{ LEAK = {TOKEN:?}, CALL_LOG = {:?} }}\n",
        calls.display().to_string()
    ));
    calls
}

/// Runs `agent -p` with a model that makes `call` and then answers; what the model was sent.
async fn agent_with(sandbox: &Sandbox, call: crate::model_server::Reply) -> Vec<crate::model_server::Recorded> {
    let model = crate::model_server::ModelServer::start([call, model_says("Done.")]).await;
    let mut command = with_model(sandbox, &["agent", "-p", "read my notes"], &model);
    command.stdin(Stdio::null());
    let out = tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "two turns of the model");
    requests
}

fn calls_received(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

#[tokio::test]
async fn neither_a_private_key_nor_another_servers_token_reaches_the_model() {
    let sandbox = Sandbox::new();
    configure(&sandbox, None);
    let requests = agent_with(&sandbox, model_tool_call("c1", "mcp__leaky__read", json!({}))).await;
    let seen = tool_result(&requests[1], "c1");
    assert!(seen.contains("end of notes") && seen.contains("***"), "the result reached the model, masked: {seen}");
    let sent = requests[1].body.to_string();
    assert!(!sent.contains(KEY_LINE) && !sent.contains("PRIVATE KEY"), "the key reached the model: {sent}");
    assert!(!sent.contains(TOKEN), "vault's token reached the model through leaky: {sent}");
}

fn audit_lines(sandbox: &Sandbox) -> Vec<Value> {
    let path = sandbox.home.join(".local/state/mcpvisor/audit.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

#[test]
fn the_gateway_masks_them_too_and_its_audit_line_counts_them_by_kind() {
    let sandbox = Sandbox::new();
    configure(&sandbox, None);
    let called = serve_stdio(&sandbox, &[("tools/call", json!({"name": "leaky__read", "arguments": {}}))]).remove(0);
    let answer = called["result"].to_string();
    assert!(answer.contains("end of notes") && !answer.contains(KEY_LINE) && !answer.contains(TOKEN), "{called}");
    let lines = audit_lines(&sandbox);
    let line = lines.iter().find(|line| line["tool"] == "read").unwrap_or_else(|| panic!("{lines:?}"));
    let found = |kind: &str| line["secrets"].as_array().unwrap().iter().find(|found| found["kind"] == kind).cloned();
    // Each is in the text and in structuredContent.
    assert_eq!(found("private_key"), Some(json!({"direction": "results", "kind": "private_key", "action": "masked", "count": 2})));
    assert_eq!(found("configured"), Some(json!({"direction": "results", "kind": "configured", "action": "masked", "count": 2})));
    let text = std::fs::read_to_string(sandbox.home.join(".local/state/mcpvisor/audit.jsonl")).unwrap();
    assert!(!text.contains(KEY_LINE) && !text.contains(TOKEN), "the audit log holds no secret: {text}");
}

#[tokio::test]
async fn a_server_that_blocks_secrets_in_arguments_never_receives_the_call() {
    let sandbox = Sandbox::new();
    let calls = configure(&sandbox, Some("{ arguments = \"block\" }"));
    let requests = agent_with(&sandbox, model_tool_call("c1", "mcp__leaky__send", json!({"text": format!("my key:\n{KEY}")}))).await;
    let refused = tool_result(&requests[1], "c1");
    assert!(refused.contains("held a private key") && refused.contains("secrets = { arguments = \\\"block\\\" }"), "{refused}");
    assert!(!refused.contains("secretsecret"), "the refusal names the kind, not the secret: {refused}");
    assert_eq!(calls_received(&calls), "", "leaky received the call");
}

#[tokio::test]
async fn allow_lets_secrets_through_both_ways() {
    let sandbox = Sandbox::new();
    let calls = configure(&sandbox, Some("\"allow\""));
    agent_with(&sandbox, model_tool_call("c1", "mcp__leaky__send", json!({"text": format!("my key:\n{KEY}")}))).await;
    assert!(calls_received(&calls).contains("secretsecret"), "the key was sent as it was: {}", calls_received(&calls));
    let requests = agent_with(&sandbox, model_tool_call("c2", "mcp__leaky__read", json!({}))).await;
    let seen = tool_result(&requests[1], "c2");
    assert!(seen.contains(KEY_LINE) && seen.contains(TOKEN), "{seen}");
}

/// The same through `mcpvisor acp`: an editor's session runs the model's
/// call, and the model's next request holds neither the key nor the token.
#[tokio::test]
async fn acp_keeps_them_from_the_model_too() {
    use crate::acp_support::{initialize, no_requests, selected, Client};
    let sandbox = Sandbox::new();
    configure(&sandbox, None);
    let model = crate::model_server::ModelServer::start([model_tool_call("c1", "mcp__leaky__read", json!({})), model_says("Done.")]).await;
    let mut client = Client::start(with_model(&sandbox, &["acp"], &model));
    let id = client.request("initialize", initialize(false, false)).await;
    client.response(id, &mut no_requests).await;
    let id = client.request("session/new", json!({"cwd": sandbox.project, "mcpServers": []})).await;
    let opened = client.response(id, &mut no_requests).await;
    let session = opened["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{opened}")).to_string();
    let prompt = json!({"sessionId": session, "prompt": [{"type": "text", "text": "read my notes"}]});
    let id = client.request("session/prompt", prompt).await;
    let answer = client.response(id, &mut |_, _| selected("allow_once")).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "two turns of the model");
    assert!(tool_result(&requests[1], "c1").contains("end of notes"), "the result reached the model");
    let sent = requests[1].body.to_string();
    assert!(!sent.contains(KEY_LINE) && !sent.contains(TOKEN), "{sent}");
    assert!(client.close().await.success());
}
