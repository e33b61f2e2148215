//! The gateway's `/admin` endpoint against a real `serve --http` process,
//! and `mcpvisor top --once --json` against both its sources: a gateway
//! (`--url`) and the configured servers started by `top` itself.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::gateway_http_support::{client, initialize, post, request, Gateway, BIN, LEGACY};
use serde_json::{json, Value};

const TOKEN: &str = "top-admin-test-token-0123456789abcdef";
/// How long the pool may take to reach a state (a bound against hangs).
const PATIENCE: Duration = Duration::from_secs(30);

fn with_token() -> Gateway {
    Gateway::start("127.0.0.1:0", &[], &[("MCPVISOR_SERVE_TOKEN", TOKEN)]).expect("the gateway starts")
}

async fn admin(http: &reqwest::Client, gateway: &Gateway, method: reqwest::Method, path: &str) -> (u16, Value) {
    let response = http.request(method, format!("{}{path}", gateway.base)).bearer_auth(TOKEN).send().await.expect("the gateway answers");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The demo server's status once `ready` holds for it, within [`PATIENCE`].
async fn demo_when(http: &reqwest::Client, gateway: &Gateway, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (status, body) = admin(http, gateway, reqwest::Method::GET, "/admin/status").await;
        assert_eq!(status, 200, "{body}");
        let demo = body["servers"].as_array().and_then(|s| s.iter().find(|s| s["name"] == "demo")).cloned().unwrap_or_default();
        if ready(&demo) {
            return demo;
        }
        assert!(Instant::now() < deadline, "the demo server never got there; last status {demo}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_endpoint_shows_the_pool_and_restarts_disables_and_enables_a_server() {
    let gateway = with_token();
    let http = client();
    let refused = http.get(format!("{}/admin/status", gateway.base)).send().await.unwrap();
    assert_eq!(refused.status(), 401, "no token, no admin");
    let refused = http.post(format!("{}/admin/servers/demo/restart", gateway.base)).bearer_auth("wrong-token").send().await.unwrap();
    assert_eq!(refused.status(), 401);

    let demo = demo_when(&http, &gateway, |s| s["state"] == "connected" && s["pid"].is_u64()).await;
    let pid = demo["pid"].as_u64().unwrap();
    assert!(demo["process"]["rss_bytes"].as_u64().unwrap_or(0) > 0, "the process's RSS is read from /proc: {demo}");

    // One call through MCP shows in the last calls, without its arguments.
    let mcp = gateway.mcp();
    let opened = post(&http, &mcp, &initialize(LEGACY)).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(opened.status(), 200);
    let session = opened.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let in_session =
        |body: &Value| post(&http, &mcp, body).bearer_auth(TOKEN).header("mcp-session-id", &session).header("mcp-protocol-version", LEGACY);
    let initialized = in_session(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).send().await.unwrap();
    assert_eq!(initialized.status(), 202);
    let call = request(1, "tools/call", json!({"name": "demo__echo", "arguments": {"text": "a-secret-argument"}}));
    let answer = in_session(&call).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let answer = answer.text().await.unwrap();
    assert!(answer.contains("a-secret-argument"), "the echo answered: {answer}");
    let (status, calls) = admin(&http, &gateway, reqwest::Method::GET, "/admin/calls?server=demo").await;
    assert_eq!(status, 200);
    let listed = calls["calls"].as_array().expect("a list of calls");
    assert!(listed.iter().any(|c| c["tool"] == "echo" && c["outcome"] == "ok" && c["duration_ms"].is_f64()), "{calls}");
    assert!(!calls.to_string().contains("a-secret-argument"), "arguments stay out of /admin: {calls}");
    let (_, none) = admin(&http, &gateway, reqwest::Method::GET, "/admin/calls?server=other").await;
    assert_eq!(none["calls"], json!([]));
    let (_, snapshot) = admin(&http, &gateway, reqwest::Method::GET, "/admin/status").await;
    assert!(snapshot["tools"].as_array().is_some_and(|t| t.iter().any(|t| t["tool"] == "echo")), "{snapshot}");

    let (status, body) = admin(&http, &gateway, reqwest::Method::POST, "/admin/servers/demo/restart").await;
    assert_eq!((status, &body["ok"]), (200, &json!(true)), "{body}");
    demo_when(&http, &gateway, |s| s["state"] == "connected" && s["pid"].as_u64().is_some_and(|p| p != pid)).await;

    let (status, _) = admin(&http, &gateway, reqwest::Method::POST, "/admin/servers/demo/disable").await;
    assert_eq!(status, 200);
    demo_when(&http, &gateway, |s| s["state"] == "disabled").await;
    let (status, _) = admin(&http, &gateway, reqwest::Method::POST, "/admin/servers/demo/enable").await;
    assert_eq!(status, 200);
    demo_when(&http, &gateway, |s| s["state"] == "connected").await;

    let (status, body) = admin(&http, &gateway, reqwest::Method::POST, "/admin/servers/nothere/restart").await;
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].as_str().is_some_and(|e| e.contains("nothere")), "{body}");
    let (status, body) = admin(&http, &gateway, reqwest::Method::POST, "/admin/servers/demo/explode").await;
    assert_eq!(status, 404, "{body}");
}

fn top(args: &[&str], env: &[(&str, &str)]) -> (i32, Value, String) {
    let mut command = Command::new(BIN);
    command.args(args).env_remove("MCPVISOR_SERVE_TOKEN").env_remove("NO_COLOR");
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("mcpvisor runs");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (output.status.code().unwrap_or(-1), json, format!("{stdout}{stderr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_once_json_reads_a_gateway_through_its_admin_endpoint() {
    let gateway = with_token();
    let http = client();
    let demo = demo_when(&http, &gateway, |s| s["state"] == "connected" && s["pid"].is_u64()).await;
    let args = ["top", "--once", "--json", "--interval", "0.2", "--url", &gateway.base];
    let (code, snapshot, output) = tokio::task::block_in_place(|| top(&args, &[("MCPVISOR_SERVE_TOKEN", TOKEN)]));
    assert_eq!(code, 0, "{output}");
    assert_eq!(snapshot["source"], json!(gateway.base));
    let row = &snapshot["servers"][0];
    assert_eq!((&row["name"], &row["state"], &row["pid"]), (&json!("demo"), &json!("connected"), &demo["pid"]), "{snapshot}");
    assert!(row["rss_bytes"].as_u64().is_some_and(|rss| rss > 0) && row["cpu_percent"].is_f64(), "{snapshot}");
    assert_eq!(snapshot["totals"]["servers"], 1);

    let (code, _, output) = tokio::task::block_in_place(|| top(&args, &[("MCPVISOR_SERVE_TOKEN", "not-the-token-at-all-0123456789")]));
    assert_eq!(code, 3, "{output}");
    assert!(output.contains("refused the token") && output.contains("MCPVISOR_SERVE_TOKEN"), "{output}");
    assert!(!output.contains("not-the-token-at-all"), "the token is never printed: {output}");
    let (code, _, output) = tokio::task::block_in_place(|| top(&args, &[("OTHER_VAR", TOKEN)]));
    assert_eq!(code, 3, "{output}");
    let mut other = args.to_vec();
    other.extend(["--token-env", "OTHER_VAR"]);
    let (code, snapshot, output) = tokio::task::block_in_place(|| top(&other, &[("OTHER_VAR", TOKEN)]));
    assert_eq!((code, &snapshot["servers"][0]["name"]), (0, &json!("demo")), "{output}");
}

#[test]
fn top_once_json_and_text_start_the_configured_servers() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("servers.toml");
    let toml = format!(
        "[servers.alpha]\ncommand = {BIN:?}\nargs = [\"demo-server\"]\n\n\
         [servers.broken]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"echo the-last-words >&2; exit 1\"]\n"
    );
    std::fs::write(&config, toml).unwrap();
    let config = config.to_str().unwrap();
    let home = dir.path().to_str().unwrap();
    let (code, snapshot, output) = top(&["--config", config, "--json", "top", "--once", "--interval", "0.2"], &[("HOME", home)]);
    assert_eq!(code, 0, "{output}");
    let rows = snapshot["servers"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{snapshot}");
    assert_eq!((&rows[0]["name"], &rows[0]["state"]), (&json!("alpha"), &json!("connected")), "{snapshot}");
    assert!(rows[0]["pid"].is_u64() && rows[0]["rss_bytes"].as_u64().is_some_and(|rss| rss > 0), "{snapshot}");
    assert_eq!(rows[1]["name"], "broken");
    assert_eq!(rows[1]["last_stderr"], "the-last-words", "{snapshot}");
    assert!(rows[1]["last_reason"].as_str().is_some_and(|r| r.contains("broken")), "{snapshot}");

    let (code, _, text) = top(&["--config", config, "top", "--once", "--interval", "0.2"], &[("HOME", home)]);
    assert_eq!(code, 0, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() <= 24 && lines.iter().all(|l| l.chars().count() <= 80), "one 80x24 frame:\n{text}");
    assert!(lines[0].contains("sort: name") && lines[1].contains("2 servers (1 up)"), "{text}");
    assert!(lines.iter().any(|l| l.starts_with("> alpha") && l.contains("connected")), "{text}");
    assert!(text.contains("\n  broken"), "{text}");

    let (code, _, output) = top(&["--config", config, "--json", "top"], &[("HOME", home)]);
    assert_eq!(code, 2, "--json needs --once: {output}");
    let (code, _, output) = top(&["--config", config, "top"], &[("HOME", home)]);
    assert_eq!(code, 2, "no terminal, no live view: {output}");
    assert!(output.contains("--once"), "{output}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_gateway_without_a_token_serves_admin_and_top_reads_it() {
    let gateway = Gateway::loopback();
    let http = client();
    let status = http.get(format!("{}/admin/status", gateway.base)).send().await.unwrap();
    assert_eq!(status.status(), 200, "loopback without a token: the machine's own users");
    let args = ["top", "--once", "--json", "--interval", "0.1", "--url", &gateway.base];
    let (code, snapshot, output) = tokio::task::block_in_place(|| top(&args, &[]));
    assert_eq!((code, &snapshot["servers"][0]["name"]), (0, &json!("demo")), "{output}");
    let (code, _, output) = tokio::task::block_in_place(|| top(&["top", "--once", "--url", "ftp://example"], &[]));
    assert_eq!(code, 2, "{output}");
    assert!(output.contains("http://HOST:PORT"), "{output}");
}

/// With named keys, `/admin` is for the identities granted `mcpvisor:admin`:
/// a team member's key lists and calls tools but restarts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_keys_only_an_admin_scope_opens_admin() {
    const OPS: &str = "ops-key-0123456789abcdefghijkl";
    const DEV: &str = "dev-key-0123456789abcdefghijkl";
    let toml = format!(
        "[servers.demo]\ncommand = {BIN:?}\nargs = [\"demo-server\"]\n\n\
         [serve.keys.ops]\ntoken = \"${{OPS_KEY}}\"\nscopes = [\"mcpvisor:admin\"]\n\
         [serve.keys.dev]\ntoken = \"${{DEV_KEY}}\"\n"
    );
    let gateway = Gateway::start_with_config(&toml, "127.0.0.1:0", &[], &[("OPS_KEY", OPS), ("DEV_KEY", DEV)]).expect("the gateway starts");
    let http = client();
    let as_key = |key: &str, method: reqwest::Method, path: &str| http.request(method, format!("{}{path}", gateway.base)).bearer_auth(key);
    let refused = as_key(DEV, reqwest::Method::POST, "/admin/servers/demo/restart").send().await.unwrap();
    assert_eq!(refused.status(), 403);
    let why = refused.text().await.unwrap();
    assert!(why.contains("mcpvisor:admin") && why.contains("`dev`") && !why.contains(DEV), "{why}");
    assert_eq!(as_key(DEV, reqwest::Method::GET, "/admin/status").send().await.unwrap().status(), 403);
    assert_eq!(as_key(DEV, reqwest::Method::GET, "/admin/calls").send().await.unwrap().status(), 403);
    let status = as_key(OPS, reqwest::Method::GET, "/admin/status").send().await.unwrap();
    assert_eq!(status.status(), 200);
    let body: Value = serde_json::from_str(&status.text().await.unwrap()).unwrap();
    assert!(body["servers"].as_array().is_some_and(|servers| servers.iter().any(|s| s["name"] == "demo")), "{body}");
    // The developer's key still serves MCP.
    let opened = post(&http, &gateway.mcp(), &initialize(LEGACY)).bearer_auth(DEV).send().await.unwrap();
    assert_eq!(opened.status(), 200);
}
