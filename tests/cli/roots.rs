//! The roots a server gets, in every mode, with the demo server's `roots`
//! tool (it asks `roots/list` and answers the URIs): its configured
//! `roots`, else the client's where there is one to pass through (the
//! agent's workspace, the stdio gateway's client, the HTTP gateway's with
//! `--client-roots`, an ACP session's `cwd`), else none; never the
//! working directory of mcpvisor.

use crate::acp_support;
use crate::cli_support;
use crate::gateway_http_support;
use crate::gateway_support;
use crate::model_server;

use std::time::{Duration, Instant};

use crate::cli_support::{demo_table, stderr, stdout, Sandbox};
use crate::gateway_http_support::{client, json_of, post, request, Sse, SseReader, LEGACY};
use serde_json::{json, Value};

/// The demo server as `demo` (no roots) and as `pinned` (roots = ["/srv/pinned"]).
fn two_demos() -> String {
    format!("{}{}roots = [\"/srv/pinned\"]\n", demo_table("demo", &[]), demo_table("pinned", &[]))
}

/// The URIs a `roots` tool's result lists (its structured content).
fn uris(result: &Value) -> Vec<String> {
    let listed = result["structuredContent"]["roots"].as_array().unwrap_or_else(|| panic!("no roots listed: {result}"));
    listed.iter().map(|root| root["uri"].as_str().unwrap().to_string()).collect()
}

const PINNED: &str = "file:///srv/pinned";

#[test]
fn call_offers_the_configured_roots_else_none() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&two_demos());
    let (result, code) = sandbox.json(["call", "demo", "roots", "--json"]);
    assert_eq!(code, 0, "{result}");
    assert_eq!(uris(&result), Vec::<String>::new(), "not the working directory: {result}");
    let (result, code) = sandbox.json(["call", "pinned", "roots", "--json"]);
    assert_eq!((code, uris(&result)), (0, vec![PINNED.to_string()]), "{result}");
}

#[test]
fn the_agent_offers_its_workspace_to_servers_without_roots() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&two_demos());
    let agent = |prompt: &str| {
        let mut command = sandbox.std_cmd(["agent", "--provider", "scripted", "--confirm", "never", "-p", prompt]);
        command.stdin(std::process::Stdio::null());
        command.output().expect("mcpvisor runs")
    };
    let out = agent("mcp__demo__roots");
    let workspace = format!("file://{}", sandbox.project.display());
    assert!(stdout(&out).contains(&workspace), "{}\n{}", stdout(&out), stderr(&out));
    let out = agent("mcp__pinned__roots");
    assert!(stdout(&out).contains(PINNED) && !stdout(&out).contains(&workspace), "{}\n{}", stdout(&out), stderr(&out));
}

#[tokio::test]
async fn an_acp_sessions_servers_get_the_sessions_cwd() {
    let sandbox = Sandbox::new();
    let call = json!({"tool_calls": [{"index": 0, "id": "r1", "type": "function", "function": {"name": "mcp__demo_s1__roots", "arguments": "{}"}}]});
    let replies =
        [model_server::openai_stream(vec![call], "tool_calls"), model_server::openai_stream(vec![json!({"content": "ok"})], "stop")];
    let model = model_server::ModelServer::start(replies).await;
    let base = format!("{}/v1", model.url);
    let mut command = sandbox.std_cmd(["acp", "--model", "m", "--base-url", &base, "--confirm", "never"]);
    for var in ["MCPVISOR_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"] {
        command.env_remove(var);
    }
    let mut client = acp_support::Client::start(command);
    let id = client.request("initialize", acp_support::initialize(false, false)).await;
    client.response(id, &mut acp_support::no_requests).await;
    // The session works in a directory that is not the agent process's.
    let cwd = sandbox.home.join("elsewhere");
    std::fs::create_dir_all(&cwd).unwrap();
    let demo = json!({"name": "demo", "command": cli_support::BIN, "args": ["demo-server"], "env": []});
    let id = client.request("session/new", json!({"cwd": cwd, "mcpServers": [demo]})).await;
    let opened = client.response(id, &mut acp_support::no_requests).await;
    let session = opened["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{opened}")).to_string();
    let id = client.request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "roots?"}]})).await;
    let answer = client.response(id, &mut |_, _| acp_support::selected("allow_once")).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let reported: Vec<String> = client.updates.iter().filter(|u| u["update"]["toolCallId"] == "r1").map(|u| u.to_string()).collect();
    let expected = format!("file://{}", cwd.display());
    assert!(reported.iter().any(|update| update.contains(&expected)), "{expected} in {reported:?}");
    assert!(!reported.iter().any(|update| update.contains(&sandbox.project.display().to_string())), "{reported:?}");
    assert!(client.close().await.success());
}

/// A config file with [`two_demos`] and a third demo server, `quiet`, in a temporary directory.
fn gateway_config(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let config = dir.path().join("servers.toml");
    std::fs::write(&config, format!("{}{}", two_demos(), demo_table("quiet", &[]))).unwrap();
    config
}

/// Polls `demo__received` until it counts one `notifications/roots/list_changed` (bounded: 10 s).
async fn until_told(gateway: &mut gateway_support::Gateway, server: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let received = gateway.call(&format!("{server}__received"), json!({})).await["result"]["structuredContent"].clone();
        if received["rootsListChanged"] == 1 || Instant::now() > deadline {
            return received;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn serve_over_stdio_passes_its_clients_roots_to_servers_without_roots_and_none_when_it_declares_none() {
    let dir = tempfile::tempdir().unwrap();
    let config = gateway_config(&dir);

    let mut gateway = gateway_support::Gateway::start(&config, &[], json!({})).await;
    let answer = gateway.call("demo__roots", json!({})).await;
    assert_eq!(uris(&answer["result"]), Vec::<String>::new(), "not the gateway's working directory: {answer}");
    assert!(gateway.asked.is_empty(), "a client without roots is not asked: {:?}", gateway.asked);
    assert_eq!(uris(&gateway.call("pinned__roots", json!({})).await["result"]), [PINNED]);
    assert_eq!(gateway.close().await, Some(0));

    let capabilities = json!({"roots": {"listChanged": true}});
    let mut gateway = gateway_support::Gateway::start(&config, &[], capabilities).await;
    gateway.answerer = Box::new(|method, _| (method == "roots/list").then(|| json!({"roots": [{"uri": "file:///client/root"}]})));
    assert_eq!(uris(&gateway.call("demo__roots", json!({})).await["result"]), ["file:///client/root"]);
    let pinned = gateway.call("pinned__roots", json!({})).await;
    assert_eq!(uris(&pinned["result"]), [PINNED], "configured roots win over the client's: {pinned}");
    assert_eq!(gateway.asked.len(), 1, "only the server without roots asked the client: {:?}", gateway.asked);

    // The client's roots changed: the server that asked for them hears of it; the others do not.
    gateway.notify("notifications/roots/list_changed", json!({})).await;
    assert_eq!(until_told(&mut gateway, "demo").await["rootsListChanged"], 1);
    for server in ["pinned", "quiet"] {
        let received = gateway.call(&format!("{server}__received"), json!({})).await;
        assert_eq!(received["result"]["structuredContent"]["rootsListChanged"], 0, "{server}: {received}");
    }
    assert_eq!(gateway.close().await, Some(0));
}

/// Opens a 2025-11-25 session over HTTP with these client capabilities: its id.
async fn http_session(http: &reqwest::Client, url: &str, capabilities: Value) -> String {
    let init = json!({"protocolVersion": LEGACY, "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}});
    let response = post(http, url, &request(0, "initialize", init)).send().await.unwrap();
    let id = response.headers()["mcp-session-id"].to_str().unwrap().to_string();
    assert!(json_of(response).await.get("result").is_some());
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(http, url, &initialized).header("mcp-session-id", &id).send().await.unwrap().status(), 202);
    id
}

/// Calls `tool` in `session`, answering any `roots/list` on the call's
/// stream with `roots`: the call's answer and the methods it was asked.
async fn http_call(http: &reqwest::Client, url: &str, session: &str, tool: &str, roots: &Value) -> (Value, Vec<String>) {
    let call = request(7, "tools/call", json!({"name": tool, "arguments": {}}));
    let response = post(http, url, &call).header("mcp-session-id", session).send().await.unwrap();
    if !response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream") {
        return (json_of(response).await, Vec::new());
    }
    let (mut events, mut asked) = (SseReader::new(response), Vec::new());
    while let Some(Sse { data, .. }) = events.next().await {
        match data.get("method").and_then(Value::as_str) {
            Some(method) => {
                asked.push(method.to_string());
                let answer = json!({"jsonrpc": "2.0", "id": data["id"], "result": {"roots": roots}});
                assert_eq!(post(http, url, &answer).header("mcp-session-id", session).send().await.unwrap().status(), 202);
            }
            None => return (data, asked),
        }
    }
    panic!("the call's stream ended without its answer")
}

#[tokio::test]
async fn serve_over_http_offers_no_roots_unless_told_to_pass_its_clients_through() {
    let (http, theirs) = (client(), json!([{"uri": "file:///client/root"}]));
    let declares = json!({"roots": {"listChanged": true}});

    let gateway = gateway_http_support::Gateway::start_with_config(&two_demos(), "127.0.0.1:0", &[], &[]).unwrap();
    let session = http_session(&http, &gateway.mcp(), declares.clone()).await;
    let (answer, asked) = http_call(&http, &gateway.mcp(), &session, "demo__roots", &theirs).await;
    assert_eq!((uris(&answer["result"]), asked), (Vec::<String>::new(), Vec::<String>::new()), "{answer}");
    drop(gateway);

    let gateway = gateway_http_support::Gateway::start_with_config(&two_demos(), "127.0.0.1:0", &["--client-roots"], &[]).unwrap();
    let url = gateway.mcp();
    // A client without roots: none, and the server is told when a client brings some.
    let plain = http_session(&http, &url, json!({})).await;
    let (answer, asked) = http_call(&http, &url, &plain, "demo__roots", &theirs).await;
    assert_eq!((uris(&answer["result"]), asked.len()), (Vec::<String>::new(), 0), "{answer}");
    let session = http_session(&http, &url, declares).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (received, _) = http_call(&http, &url, &plain, "demo__received", &theirs).await;
        if received["result"]["structuredContent"]["rootsListChanged"] == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the server that asked was not told of the new client's roots: {received}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (answer, asked) = http_call(&http, &url, &session, "demo__roots", &theirs).await;
    assert_eq!((uris(&answer["result"]), asked), (vec!["file:///client/root".to_string()], vec!["roots/list".to_string()]));
    let (answer, asked) = http_call(&http, &url, &session, "pinned__roots", &theirs).await;
    assert_eq!((uris(&answer["result"]), asked.len()), (vec![PINNED.to_string()], 0), "configured roots win: {answer}");
}
