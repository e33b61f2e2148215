//! `mcpvisor acp`: the real binary driven over stdio by an ACP client,
//! with the demo server passed in `mcpServers` and a scripted model server.

use crate::cli_support;
use crate::http_fixture;

use crate::acp_support::{initialize, no_requests, selected, Client};
use crate::cli_support::{Sandbox, BIN};
use crate::model_server::{error_body, openai_stream, ModelServer, Reply};
use serde_json::{json, Value};

fn acp(sandbox: &Sandbox, model: &ModelServer) -> Client {
    let base = format!("{}/v1", model.url);
    let mut command = sandbox.std_cmd(["acp", "--model", "m", "--base-url", &base]);
    for var in ["MCPVISOR_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"] {
        command.env_remove(var);
    }
    Client::start(command)
}

fn demo_server() -> Value {
    json!({"name": "demo", "command": BIN, "args": ["demo-server"], "env": []})
}

fn tool_call(id: &str, name: &str, arguments: Value) -> Reply {
    let call =
        json!({"tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}]});
    openai_stream(vec![call], "tool_calls")
}

fn says(text: &str) -> Reply {
    let words: Vec<Value> = text.split_inclusive(' ').map(|word| json!({"content": word})).collect();
    openai_stream(words, "stop")
}

/// Initializes and opens a session in the sandbox's project; returns its id.
async fn open(client: &mut Client, sandbox: &Sandbox, fs: bool, terminal: bool, servers: Value) -> String {
    let id = client.request("initialize", initialize(fs, terminal)).await;
    let answer = client.response(id, &mut no_requests).await;
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    let id = client.request("session/new", json!({"cwd": sandbox.project, "mcpServers": servers})).await;
    let answer = client.response(id, &mut no_requests).await;
    answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{answer}")).to_string()
}

async fn prompt(client: &mut Client, session: &str, text: &str, answer: &mut dyn FnMut(&str, &Value) -> Value) -> Value {
    let id = client.request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})).await;
    client.response(id, answer).await
}

fn statuses(client: &Client, call: &str) -> Vec<String> {
    client
        .updates
        .iter()
        .map(|params| &params["update"])
        .filter(|update| update["toolCallId"] == call && (update.get("status").is_some() || update["sessionUpdate"] == "tool_call"))
        // A new tool call without a status is pending (the schema's default).
        .map(|update| update["status"].as_str().unwrap_or("pending").to_string())
        .collect()
}

#[tokio::test]
async fn bad_input_gets_clear_json_rpc_errors_and_nothing_hangs() {
    let sandbox = Sandbox::new();
    let model = ModelServer::start([]).await;
    let mut client = acp(&sandbox, &model);
    let early = client.request("session/new", json!({"cwd": sandbox.project, "mcpServers": []})).await;
    let answer = client.response(early, &mut no_requests).await;
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("initialize first"), "{answer}");
    client.send_raw("this is not json\n").await;
    let answer = client.next().await;
    assert_eq!((answer["id"].clone(), answer["error"]["code"].clone()), (Value::Null, json!(-32700)), "{answer}");
    let id = client.request("initialize", json!({"protocolVersion": 7, "clientCapabilities": {}})).await;
    let answer = client.response(id, &mut no_requests).await;
    let result = &answer["result"];
    assert_eq!(result["protocolVersion"], 1, "a newer client is answered with the version this agent speaks: {answer}");
    assert_eq!(result["agentCapabilities"]["loadSession"], true);
    assert_eq!(result["agentCapabilities"]["promptCapabilities"]["image"], true);
    assert_eq!(result["agentCapabilities"]["promptCapabilities"]["embeddedContext"], true);
    assert_eq!(result["agentInfo"]["name"], "mcpvisor");
    assert_eq!(result["authMethods"], json!([]), "a local model server needs no key");
    let id = client.request("session/fork", json!({})).await;
    assert_eq!(client.response(id, &mut no_requests).await["error"]["code"], -32601);
    let id = client.request("session/new", json!({"mcpServers": []})).await;
    let answer = client.response(id, &mut no_requests).await;
    assert_eq!(answer["error"]["code"], -32602);
    assert!(answer["error"]["message"].as_str().unwrap().contains("cwd"), "{answer}");
    let id = client.request("session/new", json!({"cwd": "relative/dir", "mcpServers": []})).await;
    assert!(client.response(id, &mut no_requests).await["error"]["message"].as_str().unwrap().contains("absolute"));
    let id =
        client.request("session/load", json!({"sessionId": "20200101-000000-000-abcdef", "cwd": sandbox.project, "mcpServers": []})).await;
    let answer = client.response(id, &mut no_requests).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let id = client.request("session/prompt", json!({"sessionId": "nope", "prompt": []})).await;
    assert!(client.response(id, &mut no_requests).await["error"]["message"].as_str().unwrap().contains("no session nope"));
    let status = client.close().await;
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn a_tool_call_asks_permission_granted_then_rejected_and_a_new_process_loads_the_session() {
    let sandbox = Sandbox::new();
    let model = ModelServer::start([
        tool_call("c1", "mcp__demo_s1__sleep", json!({"ms": 1})),
        says("It slept well."),
        tool_call("c2", "mcp__demo_s1__sleep", json!({"ms": 2})),
        says("I was not allowed."),
    ])
    .await;
    let mut client = acp(&sandbox, &model);
    let session = open(&mut client, &sandbox, false, false, json!([demo_server()])).await;
    let mut allow = |method: &str, params: &Value| {
        assert_eq!(method, "session/request_permission");
        assert_eq!(params["toolCall"]["toolCallId"], "c1");
        let kinds: Vec<&Value> = params["options"].as_array().unwrap().iter().map(|o| &o["kind"]).collect();
        assert_eq!(kinds, [&json!("allow_once"), &json!("allow_always"), &json!("reject_once"), &json!("reject_always")]);
        selected("allow_once")
    };
    let answer = prompt(&mut client, &session, "sleep 1 ms", &mut allow).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(statuses(&client, "c1"), ["pending", "in_progress", "completed"]);
    let call = client.updates_of("tool_call")[0].clone();
    assert_eq!((call["title"].as_str(), call["rawInput"]["ms"].as_i64()), (Some("Sleep (demo_s1)"), Some(1)), "{call}");
    let chunks: String = client.updates_of("agent_message_chunk").iter().map(|u| u["content"]["text"].as_str().unwrap()).collect();
    assert_eq!(chunks, "It slept well.", "streamed in pieces, in order");
    assert!(client.updates_of("agent_message_chunk").len() > 1);
    assert!(!client.updates_of("available_commands_update").is_empty());
    let answer = prompt(&mut client, &session, "sleep again", &mut |_, _| selected("reject_once")).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert_eq!(statuses(&client, "c2"), ["pending", "failed"]);
    assert!(client.close().await.success());

    // A new process replays the saved conversation before answering session/load.
    let mut client = acp(&sandbox, &model);
    let id = client.request("initialize", initialize(false, false)).await;
    client.response(id, &mut no_requests).await;
    let id = client.request("session/load", json!({"sessionId": session, "cwd": sandbox.project, "mcpServers": [demo_server()]})).await;
    let answer = client.response(id, &mut no_requests).await;
    assert!(answer.get("result").is_some(), "{answer}");
    let users: Vec<&str> = client.updates_of("user_message_chunk").iter().map(|u| u["content"]["text"].as_str().unwrap()).collect();
    assert_eq!(users, ["sleep 1 ms", "sleep again"]);
    let calls: Vec<(String, String)> = client
        .updates_of("tool_call")
        .iter()
        .map(|u| (u["toolCallId"].as_str().unwrap().to_string(), u["status"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(calls, [("c1".to_string(), "completed".to_string()), ("c2".to_string(), "failed".to_string())]);
    assert!(client.close().await.success());
}

#[tokio::test]
async fn the_permission_question_follows_the_text_and_the_tool_call_it_is_about_and_names_the_call() {
    let sandbox = Sandbox::new();
    let arguments = json!({"path": "notes.txt", "content": "new\n"});
    let call = json!({"tool_calls": [{"index": 0, "id": "w1", "type": "function",
                      "function": {"name": "mcp__builtin_s1__write_file", "arguments": arguments.to_string()}}]});
    let text = ["I will ", "write ", "the notes."].map(|word| json!({"content": word}));
    let model = ModelServer::start([openai_stream(text.into_iter().chain([call]).collect(), "tool_calls"), says("Written.")]).await;
    let mut client = acp(&sandbox, &model);
    let session = open(&mut client, &sandbox, false, false, json!([])).await;
    let answer = prompt(&mut client, &session, "write the notes", &mut |_, _| selected("allow_once")).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let notes = sandbox.project.join("notes.txt").display().to_string();
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "new\n");
    // On the wire: all of the text, then the tool call, then the question about it.
    let at = |what: &dyn Fn(&Value) -> bool| client.wire.iter().position(what).unwrap_or_else(|| panic!("{:#?}", client.wire));
    let asked = at(&|m| m["method"] == "session/request_permission");
    let announced = at(&|m| m["params"]["update"]["sessionUpdate"] == "tool_call" && m["params"]["update"]["toolCallId"] == "w1");
    let said: String = client.wire[..asked]
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|m| m["params"]["update"]["content"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(said, "I will write the notes.", "the text that leads to the call comes before the question: {:#?}", client.wire);
    assert!(announced < asked, "the tool_call update comes before the question: {:#?}", client.wire);
    let question = &client.wire[asked]["params"]["toolCall"];
    assert_eq!(question["toolCallId"], "w1", "{question}");
    assert_eq!(question["title"], format!("Write {notes}").as_str(), "{question}");
    assert_eq!((question["kind"].as_str(), question["locations"][0]["path"].as_str()), (Some("edit"), Some(notes.as_str())), "{question}");
    assert_eq!(question["rawInput"], arguments, "{question}");
    assert!(client.close().await.success());
}

#[tokio::test]
async fn a_read_outside_the_sessions_cwd_asks_the_editor_and_one_inside_does_not() {
    let sandbox = Sandbox::new();
    let key = sandbox.home.join(".ssh/id_ed25519");
    cli_support::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n");
    sandbox.write("notes.txt", "inside\n");
    let model = ModelServer::start([
        tool_call("k1", "mcp__builtin_s1__read_file", json!({"path": key.display().to_string()})),
        tool_call("n1", "mcp__builtin_s1__read_file", json!({"path": "notes.txt"})),
        says("Done."),
    ])
    .await;
    let mut client = acp(&sandbox, &model);
    let session = open(&mut client, &sandbox, false, false, json!([])).await;
    let mut asked = Vec::new();
    let answer = prompt(&mut client, &session, "read my key, then the notes", &mut |method, params| {
        asked.push((method.to_string(), params.clone()));
        selected("reject_once")
    })
    .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let questions: Vec<&Value> = asked.iter().filter(|(method, _)| method == "session/request_permission").map(|(_, p)| p).collect();
    assert_eq!(questions.len(), 1, "only the read outside the session's cwd asks: {asked:#?}");
    assert_eq!(questions[0]["toolCall"]["toolCallId"], "k1", "{asked:#?}");
    let sent: String = model.requests().iter().map(|request| request.body.to_string()).collect();
    assert!(!sent.contains("b3BlbnNzaC1rZXktdjEAAAAA"), "the refused key never reaches the model");
    assert!(sent.contains("inside"), "the read inside the cwd ran unasked");
    assert!(client.close().await.success());
}

#[tokio::test]
async fn files_go_through_the_editor_and_a_command_runs_in_its_terminal() {
    let sandbox = Sandbox::new();
    let model = ModelServer::start([
        tool_call("r1", "mcp__builtin_s1__read_file", json!({"path": "notes.txt"})),
        tool_call("w1", "mcp__builtin_s1__write_file", json!({"path": "notes.txt", "content": "new text\n"})),
        tool_call("t1", "mcp__builtin_s1__run_command", json!({"command": "echo hi"})),
        says("Done."),
    ])
    .await;
    let mut client = acp(&sandbox, &model);
    let session = open(&mut client, &sandbox, true, true, json!([])).await;
    let notes = sandbox.project.join("notes.txt").display().to_string();
    let mut written = None;
    let mut editor = |method: &str, params: &Value| match method {
        "fs/read_text_file" => {
            assert_eq!(params["path"], notes.as_str());
            json!({"content": "unsaved text\n"})
        }
        "fs/write_text_file" => {
            written = Some(params["content"].clone());
            json!({})
        }
        "session/request_permission" => selected("allow_once"),
        "terminal/create" => {
            assert_eq!((params["command"].as_str(), params["args"][1].as_str()), (Some("sh"), Some("echo hi")), "{params}");
            json!({"terminalId": "term-1"})
        }
        "terminal/wait_for_exit" => json!({"exitCode": 0}),
        "terminal/output" => json!({"output": "hi\n", "truncated": false, "exitStatus": {"exitCode": 0}}),
        "terminal/kill" | "terminal/release" => json!({}),
        other => panic!("unexpected {other}"),
    };
    let answer = prompt(&mut client, &session, "work on notes.txt", &mut editor).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // The model read the editor's unsaved buffer, not the (absent) file on disk.
    let second = &model.requests()[1].body;
    let read = second["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap();
    assert!(read["content"].as_str().unwrap().contains("unsaved text"), "{read}");
    assert_eq!(written, Some(json!("new text\n")));
    assert!(!sandbox.project.join("notes.txt").exists(), "the write went to the editor");
    let updates: Vec<&Value> = client.updates.iter().map(|p| &p["update"]).collect();
    let read_call = updates.iter().find(|u| u["toolCallId"] == "r1" && u["sessionUpdate"] == "tool_call").unwrap();
    assert_eq!((read_call["kind"].as_str(), read_call["locations"][0]["path"].as_str()), (Some("read"), Some(notes.as_str())));
    let diff = updates.iter().find_map(|u| u["content"].as_array()?.iter().find(|c| c["type"] == "diff").cloned()).expect("a diff");
    assert_eq!((diff["oldText"].as_str(), diff["newText"].as_str()), (Some("unsaved text\n"), Some("new text\n")), "{diff}");
    let terminal = updates.iter().filter(|u| u["toolCallId"] == "t1").find_map(|u| u["content"][0]["terminalId"].as_str());
    assert_eq!(terminal, Some("term-1"));
    assert_eq!(statuses(&client, "t1").last().map(String::as_str), Some("completed"));
    let released = client.asked.iter().any(|(method, params)| method == "terminal/release" && params["terminalId"] == "term-1");
    assert!(released, "{:?}", client.asked);
    assert!(client.close().await.success());
}

#[tokio::test]
async fn cancel_ends_the_turn_and_the_call_at_the_server_and_modes_change_what_is_asked_and_offered() {
    let sandbox = Sandbox::new();
    let model = ModelServer::start([
        tool_call("s1", "mcp__demo_s1__sleep", json!({"ms": 600000})),
        tool_call("k1", "mcp__demo_s1__cancellations", json!({})),
        says("Seen."),
        says("Read-only."),
    ])
    .await;
    let mut client = acp(&sandbox, &model);
    let session = open(&mut client, &sandbox, false, false, json!([demo_server()])).await;
    let id = client.request("session/set_mode", json!({"sessionId": session, "modeId": "auto"})).await;
    assert!(client.response(id, &mut no_requests).await.get("result").is_some());
    assert_eq!(client.updates_of("current_mode_update")[0]["currentModeId"], "auto");
    let id = client.request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "sleep long"}]})).await;
    let running = |m: &Value| m["params"]["update"]["toolCallId"] == "s1" && m["params"]["update"]["status"] == "in_progress";
    client.until(&running, &mut no_requests).await;
    client.notify("session/cancel", json!({"sessionId": session})).await;
    let answer = client.response(id, &mut no_requests).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");

    let answer = prompt(&mut client, &session, "what was cancelled?", &mut no_requests).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let report = client.updates.iter().map(|p| &p["update"]).find(|u| u["toolCallId"] == "k1" && u["status"] == "completed").unwrap();
    assert!(report["content"][0]["content"]["text"].as_str().unwrap().contains("sleep"), "the server heard of the cancellation: {report}");

    let id = client.request("session/set_mode", json!({"sessionId": session, "modeId": "read-only"})).await;
    client.response(id, &mut no_requests).await;
    prompt(&mut client, &session, "anything", &mut no_requests).await;
    let offered: Vec<String> = model.requests().last().unwrap().body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        offered.contains(&"mcp__builtin_s1__read_file".to_string()) && offered.contains(&"mcp__demo_s1__add".to_string()),
        "{offered:?}"
    );
    assert!(!offered.iter().any(|name| name.ends_with("write_file") || name.ends_with("sleep")), "{offered:?}");
    let id = client.request("session/set_mode", json!({"sessionId": session, "modeId": "yolo"})).await;
    assert_eq!(client.response(id, &mut no_requests).await["error"]["code"], -32602);
    assert!(client.close().await.success());
}

/// The pids of `pid`'s child processes.
fn children(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    let lists = tasks.filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("children")).ok());
    lists.flat_map(|list| list.split_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<u32>>()).collect()
}

/// Still running (a zombie or a vanished pid is not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
}

#[tokio::test]
async fn an_editor_that_goes_away_mid_call_leaves_no_process_behind() {
    let sandbox = Sandbox::new();
    let model = ModelServer::start([tool_call("s1", "mcp__demo_s1__sleep", json!({"ms": 600000}))]).await;
    let mut client = acp(&sandbox, &model);
    let session = open(&mut client, &sandbox, false, false, json!([demo_server()])).await;
    let id = client.request("session/set_mode", json!({"sessionId": session, "modeId": "auto"})).await;
    client.response(id, &mut no_requests).await;
    client.request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "sleep long"}]})).await;
    let running = |m: &Value| m["params"]["update"]["toolCallId"] == "s1" && m["params"]["update"]["status"] == "in_progress";
    client.until(&running, &mut no_requests).await;
    let servers = children(client.child.id().unwrap());
    assert!(!servers.is_empty(), "the session's demo server runs as a child");
    let status = client.close().await;
    assert!(status.success(), "{status:?}");
    let left: Vec<u32> = servers.into_iter().filter(|pid| alive(*pid)).collect();
    assert!(left.is_empty(), "server processes outlived mcpvisor acp: {left:?}");
}

#[tokio::test]
async fn a_missing_key_for_the_providers_own_endpoint_is_offered_as_the_auth_method() {
    let sandbox = Sandbox::new();
    let mut command = sandbox.std_cmd(["acp", "--model", "gpt-test"]);
    for var in ["MCPVISOR_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"] {
        command.env_remove(var);
    }
    let mut client = Client::start(command);
    let id = client.request("initialize", initialize(false, false)).await;
    let answer = client.response(id, &mut no_requests).await;
    let methods = answer["result"]["authMethods"].as_array().unwrap_or_else(|| panic!("{answer}")).clone();
    assert_eq!(methods.len(), 1, "{answer}");
    assert_eq!(methods[0]["id"], "OPENAI_API_KEY");
    assert!(methods[0]["description"].as_str().unwrap().contains("restart"), "{answer}");
    let id = client.request("authenticate", json!({"methodId": "OPENAI_API_KEY"})).await;
    let answer = client.response(id, &mut no_requests).await;
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    assert!(client.close().await.success());
}

#[tokio::test]
async fn requests_piped_in_before_stdin_closes_are_all_answered() {
    let sandbox = Sandbox::new();
    let model = ModelServer::start([]).await;
    let mut client = acp(&sandbox, &model);
    let id = client.request("initialize", initialize(false, false)).await;
    let unknown = client.request("nope", json!({})).await;
    drop(client.stdin_take());
    assert_eq!(client.response(id, &mut no_requests).await["result"]["protocolVersion"], 1);
    assert_eq!(client.response(unknown, &mut no_requests).await["error"]["code"], -32601);
    assert!(client.close().await.success());
}

#[tokio::test]
async fn slash_commands_are_answered_without_the_model() {
    let sandbox = Sandbox::new();
    let model = ModelServer::start([]).await;
    let mut client = acp(&sandbox, &model);
    let session = open(&mut client, &sandbox, false, false, json!([demo_server()])).await;
    let id = client.request("session/set_mode", json!({"sessionId": session, "modeId": "read-only"})).await;
    client.response(id, &mut no_requests).await;
    let answer = prompt(&mut client, &session, "/tools", &mut no_requests).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let tools = client.updates_of("agent_message_chunk").last().unwrap()["content"]["text"].as_str().unwrap().to_string();
    assert!(tools.contains("mcp__builtin_s1__read_file") && tools.contains("mcp__demo_s1__add"), "{tools}");
    assert!(!tools.contains("write_file") && !tools.contains("mcp__demo_s1__sleep"), "read-only mode lists read-only tools: {tools}");
    prompt(&mut client, &session, "/servers", &mut no_requests).await;
    let servers = client.updates_of("agent_message_chunk").last().unwrap()["content"]["text"].as_str().unwrap().to_string();
    assert!(servers.contains("demo_s1: connected") && servers.contains("builtin_s1: connected"), "{servers}");
    assert!(model.requests().is_empty(), "the model was not asked");
    assert!(client.close().await.success());
}

#[tokio::test]
async fn cancel_withdraws_an_unanswered_permission_question_and_the_session_goes_on() {
    let sandbox = Sandbox::new();
    let model = ModelServer::start([tool_call("c1", "mcp__demo_s1__sleep", json!({"ms": 1})), says("Still here.")]).await;
    let mut client = acp(&sandbox, &model);
    let session = open(&mut client, &sandbox, false, false, json!([demo_server()])).await;
    let id = client.request("session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "sleep"}]})).await;
    let asked = |m: &Value| m["method"] == "session/request_permission";
    let question = client.until(&asked, &mut |_, _| Value::Null).await;
    client.notify("session/cancel", json!({"sessionId": session})).await;
    let answer = client.response(id, &mut no_requests).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    // The editor answers late, as the protocol asks: nothing breaks, the call never runs.
    client.send(json!({"jsonrpc": "2.0", "id": question["id"], "result": {"outcome": {"outcome": "cancelled"}}})).await;
    let answer = prompt(&mut client, &session, "hello", &mut no_requests).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(!statuses(&client, "c1").contains(&"completed".to_string()));
    assert!(client.close().await.success());
}

#[tokio::test]
async fn the_turn_answers_the_stop_reason_the_model_gave() {
    let sandbox = Sandbox::new();
    let refused = Reply::Status(400, vec![], error_body("the request is malformed", "invalid_request_error"));
    let model = ModelServer::start([openai_stream(vec![json!({"content": "cut sh"})], "length"), refused]).await;
    let mut client = acp(&sandbox, &model);
    let session = open(&mut client, &sandbox, false, false, json!([])).await;
    let answer = prompt(&mut client, &session, "write a long story", &mut no_requests).await;
    assert_eq!(answer["result"]["stopReason"], "max_tokens", "{answer}");
    let answer = prompt(&mut client, &session, "again", &mut no_requests).await;
    let message = answer["error"]["message"].as_str().unwrap_or_else(|| panic!("a model failure is an error: {answer}"));
    assert!(message.contains("the request is malformed"), "the error says what the model said: {answer}");
    assert!(client.close().await.success());
}

#[tokio::test]
async fn slash_model_switches_the_model_from_the_next_request_on() {
    let sandbox = Sandbox::new();
    let model = ModelServer::start([says("Hi from m2.")]).await;
    let mut client = acp(&sandbox, &model);
    let session = open(&mut client, &sandbox, false, false, json!([])).await;
    prompt(&mut client, &session, "/model m2", &mut no_requests).await;
    let said = client.updates_of("agent_message_chunk").last().unwrap()["content"]["text"].as_str().unwrap().to_string();
    assert!(said.contains("openai/m2"), "{said}");
    let answer = prompt(&mut client, &session, "hello", &mut no_requests).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(model.requests()[0].body["model"], "m2");
    assert!(client.close().await.success());
}

#[tokio::test]
async fn a_session_brings_its_own_http_and_sse_servers() {
    let sandbox = Sandbox::new();
    let model = ModelServer::start([]).await;
    let (http, sse) =
        (http_fixture::Fixture::start(http_fixture::Flavour::Json), http_fixture::Fixture::start(http_fixture::Flavour::LegacySse));
    let mut client = acp(&sandbox, &model);
    let id = client.request("initialize", initialize(false, false)).await;
    let answer = client.response(id, &mut no_requests).await;
    assert_eq!(answer["result"]["agentCapabilities"]["mcpCapabilities"], json!({"http": true, "sse": true}), "{answer}");
    let servers = json!([
        {"type": "http", "name": "web", "url": http.url(), "headers": []},
        {"type": "sse", "name": "old", "url": sse.url(), "headers": []},
    ]);
    let id = client.request("session/new", json!({"cwd": sandbox.project, "mcpServers": servers})).await;
    let answer = client.response(id, &mut no_requests).await;
    let session = answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{answer}")).to_string();
    prompt(&mut client, &session, "/servers", &mut no_requests).await;
    let listed = client.updates_of("agent_message_chunk").last().unwrap()["content"]["text"].as_str().unwrap().to_string();
    assert!(listed.contains("web_s1: connected") && listed.contains("old_s1: connected"), "{listed}");
    assert!(client.close().await.success());
}
