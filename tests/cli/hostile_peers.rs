//! Issue 19, hostile peers: what a client, an editor or a model can send
//! to make mcpvisor spend time or memory, each against the real binary.

use crate::cli_support;

use std::io::Write;
use std::time::{Duration, Instant};

use crate::acp_support::{initialize, no_requests, selected, Client};
use crate::cli_support::{demo_table, Sandbox};
use crate::model_server::{openai_stream, ModelServer, Reply};
use serde_json::{json, Value};

/// A notification line of about `size` bytes.
fn huge_line(size: usize) -> String {
    format!("{{\"jsonrpc\":\"2.0\",\"method\":\"flood\",\"params\":{{\"p\":\"{}\"}}}}\n", "a".repeat(size))
}

/// `serve` with a file as stdin (read through blocking stdio): a 100 MB line
/// is refused with -32600 and a null id, and the ping after it is answered.
/// Before the fix a 24 MB line took 12 s here and 100 MB did not end in 180 s.
#[test]
fn serve_skips_a_100_mb_line_on_stdin_and_answers_the_next_request() {
    let sandbox = Sandbox::new();
    sandbox.write(".mcpvisor.toml", &demo_table("demo", &[]));
    sandbox.trust();
    let input = sandbox.project.join("input.jsonl");
    let mut file = std::fs::File::create(&input).unwrap();
    file.write_all(huge_line(100_000_000).as_bytes()).unwrap();
    file.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n").unwrap();
    drop(file);
    let started = Instant::now();
    let mut child = sandbox
        .std_cmd(["serve", "--no-audit", "-q"])
        .stdin(std::fs::File::open(&input).unwrap())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines, read) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let deadline = started + Duration::from_secs(60);
    let mut seen: Vec<Value> = Vec::new();
    while !seen.iter().any(|m| m["id"] == 7) {
        let left = deadline.saturating_duration_since(Instant::now());
        match read.recv_timeout(left) {
            Ok(line) => seen.push(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))),
            Err(_) => {
                let _ = child.kill();
                panic!("no answer to the ping within 60 s after a 100 MB line; seen: {seen:?}");
            }
        }
    }
    eprintln!("serve: ping answered {:?} after a 100 MB line on stdin", started.elapsed());
    let refusal = &seen[0];
    assert_eq!(refusal["id"], Value::Null, "{refusal}");
    assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
    assert!(refusal["error"]["message"].as_str().unwrap().starts_with("message too large: 100000"), "{refusal}");
    assert_eq!(seen.last().unwrap()["result"], json!({}));
    let _ = child.kill();
    let _ = child.wait();
}

/// `acp` on a pipe: a 100 MB line, then `initialize`, which is answered.
#[tokio::test]
async fn acp_skips_a_100_mb_line_on_stdin_and_answers_the_next_request() {
    let sandbox = Sandbox::new();
    let mut client = Client::start(sandbox.std_cmd(["acp", "--provider", "scripted", "-q"]));
    let started = Instant::now();
    client.send_raw(&huge_line(100_000_000)).await;
    let id = client.request("initialize", initialize(false, false)).await;
    let refusal = client.next().await;
    assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
    assert_eq!(refusal["id"], Value::Null, "{refusal}");
    let answer = client.response(id, &mut no_requests).await;
    eprintln!("acp: initialize answered {:?} after a 100 MB line on stdin", started.elapsed());
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    assert!(client.close().await.success());
}

fn acp_with(sandbox: &Sandbox, model: &ModelServer) -> Client {
    let base = format!("{}/v1", model.url);
    let mut command = sandbox.std_cmd(["acp", "--model", "m", "--base-url", &base]);
    for var in ["MCPVISOR_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"] {
        command.env_remove(var);
    }
    Client::start(command)
}

fn tool_calls(calls: &[(&str, &str, Value)]) -> Reply {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(index, (id, name, arguments))| {
            json!({"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}})
        })
        .collect();
    openai_stream(vec![json!({ "tool_calls": calls })], "tool_calls")
}

fn says(text: &str) -> Reply {
    openai_stream(vec![json!({ "content": text })], "stop")
}

/// Initializes (files through the editor) and opens a session with `servers`.
async fn open_session(client: &mut Client, sandbox: &Sandbox, servers: Value) -> Value {
    let id = client.request("initialize", initialize(true, false)).await;
    client.response(id, &mut no_requests).await;
    let id = client.request("session/new", json!({"cwd": sandbox.project, "mcpServers": servers})).await;
    client.response(id, &mut no_requests).await
}

/// The editor answers `fs/read_text_file` with 17 MB (over max_frame): the
/// read fails at once with "too large", naming the path and the limit, and
/// the turn goes on. Before the fix the answer was dropped and the turn hung.
#[tokio::test]
async fn an_editor_answer_over_max_frame_fails_the_read_and_the_turn_goes_on() {
    let sandbox = Sandbox::new();
    let model =
        ModelServer::start([tool_calls(&[("r1", "mcp__builtin_s1__read_file", json!({"path": "big.txt"}))]), says("Too big.")]).await;
    let mut client = acp_with(&sandbox, &model);
    let opened = open_session(&mut client, &sandbox, json!([])).await;
    let session = opened["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{opened}")).to_string();
    let huge = "x".repeat(17_000_000);
    let mut editor = |method: &str, _: &Value| match method {
        "fs/read_text_file" => json!({ "content": huge }),
        "session/request_permission" => selected("allow_once"),
        other => panic!("unexpected {other}"),
    };
    let id = client.request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "read big.txt"}]})).await;
    let answer = client.response(id, &mut editor).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let second = &model.requests()[1].body;
    let result = second["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap();
    let text = result["content"].as_str().unwrap();
    let path = sandbox.project.join("big.txt").display().to_string();
    assert!(text.contains("too large") && text.contains(&path) && text.contains("16777216"), "{text}");
    assert!(client.close().await.success());
}

/// A session's MCP server that fails to start (exits at once, or does not
/// exist) does not hold `session/new` for the 30 s a slow server may take:
/// the session opens once its servers are up or failed, and says which failed.
#[tokio::test]
async fn session_new_answers_soon_when_a_sessions_server_fails_to_start() {
    let sandbox = Sandbox::new();
    let model = ModelServer::start([says("Hi.")]).await;
    let mut client = acp_with(&sandbox, &model);
    let servers = json!([
        {"name": "gone", "command": "/nonexistent/mcp-server", "args": [], "env": []},
        {"name": "quits", "command": "sh", "args": ["-c", "echo 'cannot start: no token' >&2; exit 3"], "env": []},
        {"name": "demo", "command": cli_support::BIN, "args": ["demo-server"], "env": []},
        {"name": "mute", "command": "sleep", "args": ["1000"], "env": []},
    ]);
    let started = Instant::now();
    let opened = open_session(&mut client, &sandbox, servers).await;
    let took = started.elapsed();
    eprintln!("session/new answered after {took:?}");
    assert!(opened["result"]["sessionId"].is_string(), "{opened}");
    assert!(took < Duration::from_secs(15), "session/new took {took:?}");
    // The notes follow the answer, the servers in the order given.
    let mute_noted = |m: &Value| m["params"]["update"]["content"]["text"].as_str().is_some_and(|t| t.contains("`mute`"));
    client.until(&mute_noted, &mut no_requests).await;
    let said: String = client.updates_of("agent_message_chunk").iter().filter_map(|u| u["content"]["text"].as_str()).collect();
    assert!(said.contains("`gone`") && said.contains("`quits`") && !said.contains("`demo`"), "{said}");
    assert!(said.contains("no token"), "the failure names the server's last error: {said}");
    assert!(said.contains("`mute` is still starting"), "{said}");
    assert!(client.close().await.success());
}

/// Issue 19: `down__echo` when server `down` failed said "not served"; it
/// says the server failed, and why (its last error and stderr line).
#[test]
fn a_tool_of_a_failed_server_is_refused_naming_the_server_and_its_error() {
    let sandbox = Sandbox::new();
    let down = "[servers.down]\ncommand = \"sh\"\nargs = [\"-c\", \"echo 'missing API token' >&2; exit 4\"]\nrestart = \"never\"\n";
    sandbox.write(".mcpvisor.toml", &format!("{}{down}", demo_table("demo", &[])));
    sandbox.trust();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "down__echo", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "nobody__echo", "arguments": {}}}),
    ];
    let input: String = requests.iter().map(|r| format!("{r}\n")).collect();
    let output = sandbox.cmd(["serve", "--no-audit", "-q"]).write_stdin(input).timeout(Duration::from_secs(60)).output().unwrap();
    let answers: Vec<Value> = cli_support::stdout(&output).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let error = |id: i64| answers.iter().find(|a| a["id"] == id).map(|a| a["error"]["message"].as_str().unwrap_or_default().to_string());
    let down = error(2).unwrap_or_else(|| panic!("{answers:?}"));
    assert!(down.contains("server `down`") && down.contains("missing API token") && !down.contains("not served"), "{down}");
    assert!(error(3).unwrap().contains("not served"), "{answers:?}");
}

/// Issue 19: a one-character serve token was accepted. It is refused before
/// anything listens, with how to make a good one, and never shown.
#[test]
fn serve_refuses_a_short_token_and_says_how_to_make_one() {
    let sandbox = Sandbox::new();
    sandbox.write(".mcpvisor.toml", &demo_table("demo", &[]));
    sandbox.trust();
    let output = sandbox
        .cmd(["serve", "--http", "127.0.0.1:0", "--no-audit"])
        .env("MCPVISOR_SERVE_TOKEN", "Q")
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    let stderr = cli_support::stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("MCPVISOR_SERVE_TOKEN is 1 characters long") && stderr.contains("openssl rand -hex 32"), "{stderr}");
}

/// Issue 19: one model answer asked for 20,000 tool calls and all ran; and
/// megabytes of arguments were echoed whole to stderr. At most 64 calls of
/// an answer run (the rest get an error result asking for fewer at once),
/// and the terminal sees a few hundred bytes of each call's arguments.
#[tokio::test]
async fn one_answer_runs_at_most_64_calls_and_long_arguments_are_cut_on_stderr() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&demo_table("demo", &[]));
    let mut calls = vec![("c0".to_string(), "mcp__demo__echo", json!({"text": "a".repeat(1_000_000)}))];
    calls.extend((1..100).map(|i| (format!("c{i}"), "mcp__demo__echo", json!({"text": format!("call {i}")}))));
    let calls: Vec<(&str, &str, Value)> = calls.iter().map(|(id, name, args)| (id.as_str(), *name, args.clone())).collect();
    let model = ModelServer::start([tool_calls(&calls), says("Done.")]).await;
    let base = format!("{}/v1", model.url);
    let mut command = sandbox.std_cmd(["agent", "-p", "echo a lot", "--model", "m", "--base-url", &base, "--confirm", "never"]);
    for var in ["MCPVISOR_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"] {
        command.env_remove(var);
    }
    command.stdin(std::process::Stdio::null());
    let out = tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap();
    let stderr = cli_support::stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{}", &stderr[..stderr.len().min(2000)]);
    let results: Vec<Value> =
        model.requests()[1].body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").cloned().collect();
    assert_eq!(results.len(), 100, "one result per call");
    let refused: Vec<&Value> = results.iter().filter(|m| m["content"].as_str().unwrap_or_default().contains("at most 64")).collect();
    assert_eq!(refused.len(), 36, "{:?}", results.last());
    assert_eq!(refused[0]["tool_call_id"], "c64");
    assert!(results[63]["content"].as_str().unwrap().contains("call 63"), "{}", results[63]);
    assert!(stderr.len() < 64 * 1024, "stderr holds {} bytes", stderr.len());
    assert!(stderr.contains("more bytes]"), "{}", &stderr[..stderr.len().min(2000)]);
}
