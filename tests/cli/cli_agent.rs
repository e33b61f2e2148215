//! `mcpvisor agent -p`: the real binary, the demo server as the tool
//! server, and a scripted model server on loopback (or the built-in
//! scripted model).

use std::collections::{BTreeMap, BTreeSet};

use crate::cli_support::{demo_table, stderr, stdout, Sandbox};
use crate::model_server::{error_body, openai_stream, openai_whole, ModelServer, Reply};
use mcpvisor::actors::agent::{AgentEvent, AgentStop};
use mcpvisor::llm::Usage;
use serde_json::{json, Value};

/// `agent ARGS` with no model variables from the outside and stdin closed (no terminal).
fn agent(sandbox: &Sandbox, args: &[&str]) -> std::process::Command {
    let mut command = sandbox.std_cmd(["agent"].iter().chain(args));
    for var in ["MCPVISOR_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"] {
        command.env_remove(var);
    }
    command.stdin(std::process::Stdio::null());
    command
}

async fn output(mut command: std::process::Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || command.output().expect("mcpvisor runs")).await.unwrap()
}

/// The demo server, its read-only tools (`echo`, `add`) allowed by the
/// configuration (an untrusted server's annotations never skip a
/// question); its other tools follow the session's mode.
fn sandbox_with_demo() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&format!("{TRUST_DEMO}{}", demo_table("demo", &[])));
    sandbox
}

const TRUST_DEMO: &str = "[agent.servers.demo]\ntools = { echo = \"never\", add = \"never\" }\n\n";

fn tool_call(id: &str, name: &str, arguments: Value) -> Reply {
    openai_stream(
        vec![
            json!({"tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}]}),
        ],
        "tool_calls",
    )
}

fn says(text: &str) -> Reply {
    openai_stream(vec![json!({"content": text})], "stop")
}

#[tokio::test]
async fn without_a_model_the_built_in_scripted_model_calls_the_tool_the_prompt_names() {
    let sandbox = sandbox_with_demo();
    let out = output(agent(&sandbox, &["-p", "add 2 and 3"])).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "`mcp__demo__add` answered: 5\n");
    let err = stderr(&out);
    assert!(
        err.contains("built-in scripted demo model")
            && err.contains("→ mcp__demo__add {\"a\":2.0,\"b\":3.0}")
            && err.contains("✓ mcp__demo__add"),
        "{err}"
    );
}

#[tokio::test]
async fn json_prints_every_event_as_one_line() {
    let sandbox = sandbox_with_demo();
    let out = output(agent(&sandbox, &["-p", "echo hello", "--json"])).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events: Vec<Value> = stdout(&out).lines().map(|line| serde_json::from_str(line).expect("each line is JSON")).collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert!(kinds.contains(&"tool_call_finished") && kinds.ends_with(&["turn_ended", "result"]), "{kinds:?}");
    let finished = events.iter().find(|e| e["event"] == "tool_call_finished").unwrap();
    assert_eq!((finished["tool"].clone(), finished["output"].clone()), (json!("mcp__demo__echo"), json!("hello")));
}

#[tokio::test]
async fn without_a_terminal_a_call_that_needs_confirmation_is_denied_and_said_so() {
    let sandbox = sandbox_with_demo();
    let out = output(agent(&sandbox, &["-p", "sleep 5"])).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("denied: it needs the user's confirmation") && err.contains("--confirm never"), "{err}");
    assert!(stdout(&out).contains("was not made"), "the model heard of it: {}", stdout(&out));
    let allowed = output(agent(&sandbox, &["-p", "sleep 5", "--confirm", "never"])).await;
    assert_eq!(stdout(&allowed), "`mcp__demo__sleep` answered: slept 5 ms\n", "{}", stderr(&allowed));
}

#[tokio::test]
async fn an_openai_compatible_server_drives_the_tools_with_the_key_sent_as_bearer() {
    let sandbox = sandbox_with_demo();
    let server = ModelServer::start([tool_call("c1", "mcp__demo__add", json!({"a": 20, "b": 22})), says("The answer is 42.")]).await;
    let base = format!("{}/v1", server.url);
    let mut command = agent(&sandbox, &["-p", "what is 20 + 22?", "--model", "m1", "--base-url", &base]);
    command.env("OPENAI_API_KEY", "sk-test-key-123456");
    let out = output(command).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "The answer is 42.\n");
    let requests = server.requests();
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].headers["authorization"], "Bearer sk-test-key-123456");
    assert_eq!(requests[0].body["model"], "m1");
    let result = requests[1].body["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap().clone();
    assert_eq!((result["tool_call_id"].clone(), result["content"].clone()), (json!("c1"), json!("42")));
}

#[tokio::test]
async fn exit_codes_tell_an_unreachable_model_a_refused_key_and_a_turn_that_did_not_finish() {
    let sandbox = sandbox_with_demo();
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/v1", listener.local_addr().unwrap())
    };
    let out = output(agent(&sandbox, &["-p", "hi", "--model", "m", "--base-url", &closed])).await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("error:"), "{}", stderr(&out));

    let server = ModelServer::start([Reply::Status(401, vec![], error_body("Incorrect API key provided", "invalid_api_key"))]).await;
    let base = format!("{}/v1", server.url);
    let out = output(agent(&sandbox, &["-p", "hi", "--model", "m", "--base-url", &base])).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("Incorrect API key provided"), "{}", stderr(&out));

    let echo = |id: &str| tool_call(id, "mcp__demo__echo", json!({"text": id}));
    let server = ModelServer::start([echo("1"), echo("2")]).await;
    let base = format!("{}/v1", server.url);
    let out = output(agent(&sandbox, &["-p", "loop", "--model", "m", "--base-url", &base, "--max-turns", "2"])).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("the turn ended with max_turn_requests"), "{}", stderr(&out));
}

#[tokio::test]
async fn agent_settings_come_from_the_configuration_and_bad_ones_are_usage_errors() {
    let sandbox = Sandbox::new();
    let server = ModelServer::start([openai_whole(Some("configured"), vec![], "stop")]).await;
    let table = demo_table("demo", &[]);
    sandbox.write_user_file(&format!(
        "[agent]\nprovider = \"openai\"\nmodel = \"from-file\"\nbase_url = \"{}/v1\"\nstream = false\n\n{table}",
        server.url
    ));
    let out = output(agent(&sandbox, &["-p", "hi"])).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "configured\n");
    assert_eq!(server.requests()[0].body["model"], "from-file");
    assert_eq!(server.requests()[0].body["stream"], json!(false));
    sandbox.write_user_file(&format!("[agent]\nconfirm = \"maybe\"\n\n{table}"));
    let out = output(agent(&sandbox, &["-p", "hi"])).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`agent.confirm` is \"maybe\"; write one of always | never | ask"), "{}", stderr(&out));
}

#[tokio::test]
async fn a_conversation_is_saved_without_secrets_and_resumed_by_its_id() {
    let sandbox = sandbox_with_demo();
    let out = output(agent(&sandbox, &["-p", "echo first words", "--json"])).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first: Value = serde_json::from_str(stdout(&out).lines().next().unwrap()).unwrap();
    assert_eq!(first["event"], "session");
    let id = first["session_id"].as_str().expect("a session id").to_string();

    let key = "sk-secret-abcdef123456";
    let server = ModelServer::start([says(&format!("I remember. Your key is {key}."))]).await;
    let base = format!("{}/v1", server.url);
    let mut command = agent(&sandbox, &["-p", "what did I ask?", "--resume", &id, "--model", "m", "--base-url", &base]);
    command.env("OPENAI_API_KEY", key);
    let out = output(command).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("--resume {id}")), "{}", stderr(&out));
    let messages = server.requests()[0].body["messages"].as_array().unwrap().clone();
    let texts: Vec<String> = messages.iter().map(|m| m["content"].to_string()).collect();
    assert!(texts.iter().any(|t| t.contains("echo first words")), "the earlier prompt is sent again: {texts:?}");
    assert!(messages.iter().any(|m| m["role"] == "tool" && m["content"] == "first words"), "and the earlier tool result: {texts:?}");

    let file = sandbox.home.join("data/mcpvisor/sessions").join(format!("{id}.jsonl"));
    let saved = std::fs::read_to_string(&file).expect("the conversation file");
    assert!(saved.contains("I remember. Your key is ***."), "{saved}");
    assert!(!saved.contains(key), "the key is never written");
    assert_eq!(saved.lines().filter(|l| l.contains("\"type\":\"turn_ended\"")).count(), 2);

    let bad = output(agent(&sandbox, &["-p", "x", "--resume", "../../etc/passwd"])).await;
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("is not a conversation id"), "{}", stderr(&bad));
}

#[tokio::test]
async fn the_built_in_tools_read_files_freely_and_writes_need_confirmation() {
    let sandbox = sandbox_with_demo();
    sandbox.write("notes.txt", "first line\nsecond line\n");
    let out = output(agent(&sandbox, &["-p", "read_file notes.txt"])).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("first line") && stdout(&out).contains("second line"), "{}", stdout(&out));
    let out = output(agent(&sandbox, &["-p", "write_file out.txt"])).await;
    assert!(stderr(&out).contains("denied: it needs the user's confirmation"), "{}", stderr(&out));
    assert!(!sandbox.project.join("out.txt").exists(), "a denied write writes nothing");
    sandbox.write_user_file(&format!("[agent]\nbuiltin_tools = false\n\n{TRUST_DEMO}{}", demo_table("demo", &[])));
    let out = output(agent(&sandbox, &["-p", "read_file notes.txt"])).await;
    assert!(!stdout(&out).contains("first line"), "no built-in tools when switched off: {}", stdout(&out));
}

/// docs/agent.md's table of `--json` events: event → field → type.
type Schema = BTreeMap<String, BTreeMap<String, String>>;

fn documented_schema() -> Schema {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/agent.md")).expect("docs/agent.md");
    let section = doc.split("\n## `--json` events\n").nth(1).expect("docs/agent.md has the section \"`--json` events\"");
    let mut schema = Schema::new();
    for row in section.lines().filter(|line| line.starts_with("| `")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (event, field, kind) = (cells[1].trim_matches('`'), cells[2].trim_matches('`'), cells[3]);
        schema.entry(event.to_string()).or_default().insert(field.to_string(), kind.to_string());
    }
    schema
}

/// Whether `line` is a documented event with exactly the documented fields, of their types.
fn conforms(schema: &Schema, line: &Value) -> Result<(), String> {
    let event = line["event"].as_str().ok_or("no `event`")?;
    let fields = schema.get(event).ok_or_else(|| format!("event `{event}` is not in docs/agent.md"))?;
    fits_fields(line, fields, "").map_err(|why| format!("`{event}`: {why}"))
}

fn fits_fields(value: &Value, fields: &BTreeMap<String, String>, prefix: &str) -> Result<(), String> {
    let object = value.as_object().ok_or_else(|| format!("{prefix} is not an object"))?;
    let documented: BTreeSet<&str> =
        fields.keys().filter_map(|field| field.strip_prefix(prefix)).filter(|field| !field.contains('.')).collect();
    let present: BTreeSet<&str> = object.keys().map(String::as_str).filter(|key| !prefix.is_empty() || *key != "event").collect();
    if documented != present {
        return Err(format!("fields {present:?}, documented {documented:?}"));
    }
    for field in documented {
        let path = format!("{prefix}{field}");
        let (kind, value) = (&fields[&path], &object[field]);
        if !fits(value, kind) {
            return Err(format!("`{path}` is {value}, documented as {kind}"));
        }
        if value.is_object() && fields.keys().any(|inner| inner.starts_with(&format!("{path}."))) {
            fits_fields(value, fields, &format!("{path}."))?;
        }
    }
    Ok(())
}

fn fits(value: &Value, kind: &str) -> bool {
    let (base, nullable) = kind.strip_suffix(" or null").map_or((kind, false), |base| (base, true));
    match base {
        _ if value.is_null() => nullable || base == "any",
        "string" => value.is_string(),
        "integer" => value.is_u64() || value.is_i64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "any" => true,
        other => panic!("docs/agent.md names an unknown type `{other}`"),
    }
}

/// One of every agent event; the match makes a new variant fail to
/// compile here until it has a sample (and so a check against the doc).
fn every_agent_event() -> Vec<AgentEvent> {
    let usage = Usage { input_tokens: 3, output_tokens: 4 };
    let id = || "c1".to_string();
    let events = vec![
        AgentEvent::ModelRequest { round: 1, model: "openai/m".into(), tools: 2 },
        AgentEvent::Text { text: "Hi".into() },
        AgentEvent::Reasoning { text: "hm".into() },
        AgentEvent::ToolCallRequested { call_id: id(), tool: "mcp__demo__add".into(), arguments: json!({"a": 1}) },
        AgentEvent::ToolCallApproved { call_id: id(), why: "read-only".into() },
        AgentEvent::ToolCallDenied { call_id: id(), why: "the user denied it".into() },
        AgentEvent::ToolCallStarted { call_id: id() },
        AgentEvent::ToolCallProgress { call_id: id(), progress: 1.0, total: Some(2.0), message: None },
        AgentEvent::ToolCallFinished {
            call_id: id(),
            tool: "mcp__demo__add".into(),
            is_error: false,
            output: "2".into(),
            result: None,
            error: None,
        },
        AgentEvent::Compacted { summarised: 4, kept: 2 },
        AgentEvent::HistoryFailed { error: "disk full".into() },
        AgentEvent::TurnEnded { stop_reason: AgentStop::EndTurn, usage },
        AgentEvent::TurnFailed { error: "unreachable".into(), usage },
    ];
    for event in &events {
        match event {
            AgentEvent::ModelRequest { .. }
            | AgentEvent::Text { .. }
            | AgentEvent::Reasoning { .. }
            | AgentEvent::ToolCallRequested { .. }
            | AgentEvent::ToolCallApproved { .. }
            | AgentEvent::ToolCallDenied { .. }
            | AgentEvent::ToolCallStarted { .. }
            | AgentEvent::ToolCallProgress { .. }
            | AgentEvent::ToolCallFinished { .. }
            | AgentEvent::Compacted { .. }
            | AgentEvent::HistoryFailed { .. }
            | AgentEvent::TurnEnded { .. }
            | AgentEvent::TurnFailed { .. } => {}
        }
    }
    events
}

#[test]
fn every_json_event_is_documented_with_exactly_its_fields() {
    let schema = documented_schema();
    let mut named: BTreeSet<String> = ["session", "result"].map(String::from).into();
    for event in every_agent_event() {
        let line = serde_json::to_value(&event).unwrap();
        conforms(&schema, &line).unwrap_or_else(|why| panic!("{why}: {line}"));
        named.insert(line["event"].as_str().unwrap().to_string());
    }
    let documented: BTreeSet<String> = schema.keys().cloned().collect();
    assert_eq!(documented, named, "docs/agent.md documents exactly the events there are");
}

/// The `--json` lines of a run, each checked against docs/agent.md; the last is `result`.
fn json_lines(out: &std::process::Output) -> Vec<Value> {
    let schema = documented_schema();
    let lines: Vec<Value> = stdout(out).lines().map(|line| serde_json::from_str(line).expect("each line is JSON")).collect();
    for line in &lines {
        conforms(&schema, line).unwrap_or_else(|why| panic!("{why}: {line}\n{}", stdout(out)));
    }
    assert_eq!(lines.first().map(|l| l["event"].clone()), Some(json!("session")), "{}", stdout(out));
    assert_eq!(lines.last().map(|l| l["event"].clone()), Some(json!("result")), "{}", stdout(out));
    assert_eq!(lines.iter().filter(|l| l["event"] == "result").count(), 1);
    lines
}

#[tokio::test]
async fn json_ends_each_turn_with_one_result_holding_the_whole_answer_however_it_ended() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&format!("{}\n[agent.servers.demo]\ntools = {{ progress = \"never\" }}\n", demo_table("demo", &[])));
    let call = |index: usize, id: &str, name: &str, arguments: Value| json!({"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}});
    let first = vec![
        json!({"reasoning_content": "Three tools."}),
        json!({"content": "Let me "}),
        json!({"content": "work."}),
        json!({"tool_calls": [call(0, "a1", "mcp__demo__add", json!({"a": 2, "b": 3}))]}),
        json!({"tool_calls": [call(1, "p1", "mcp__demo__progress", json!({"steps": 2, "ms": 1}))]}),
        json!({"tool_calls": [call(2, "s1", "mcp__demo__sleep", json!({"ms": 1}))]}),
    ];
    let server = ModelServer::start([
        openai_stream(first, "tool_calls"),
        openai_stream(vec![json!({"content": "All "}), json!({"content": "done."})], "stop"),
    ])
    .await;
    let base = format!("{}/v1", server.url);
    let out = output(agent(&sandbox, &["-p", "work", "--json", "--model", "m", "--base-url", &base])).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = json_lines(&out);
    let seen: BTreeSet<&str> = lines.iter().filter_map(|l| l["event"].as_str()).collect();
    for kind in ["reasoning", "text", "tool_call_approved", "tool_call_denied", "tool_call_progress", "tool_call_finished", "turn_ended"] {
        assert!(seen.contains(kind), "{kind} in {seen:?}");
    }
    let result = lines.last().unwrap();
    assert_eq!(result["session_id"], lines[0]["session_id"]);
    assert!(result["session_id"].is_string());
    let summary = (&result["stop_reason"], &result["text"], &result["tool_calls"], &result["error"]);
    assert_eq!(summary, (&json!("end_turn"), &json!("All done."), &json!(3), &Value::Null), "{result}");
    assert_eq!(result["usage"], json!({"input_tokens": 22, "output_tokens": 14}), "both requests' tokens: {result}");

    // A model that fails mid-turn: the result says so, with what was used before.
    let refused = Reply::Status(400, vec![], error_body("the request is malformed", "invalid_request_error"));
    let server = ModelServer::start([tool_call("e1", "mcp__demo__echo", json!({"text": "x"})), refused]).await;
    let base = format!("{}/v1", server.url);
    let out = output(agent(&sandbox, &["-p", "echo", "--json", "--model", "m", "--base-url", &base])).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let lines = json_lines(&out);
    assert!(lines.iter().any(|l| l["event"] == "turn_failed"), "{}", stdout(&out));
    let result = lines.last().unwrap();
    assert_eq!((&result["stop_reason"], &result["tool_calls"]), (&json!("error"), &json!(1)), "{result}");
    assert!(result["error"].as_str().unwrap().contains("the request is malformed"), "{result}");
    assert_eq!(result["usage"], json!({"input_tokens": 11, "output_tokens": 7}), "{result}");

    // Out of model requests: the answer is empty, the reason says why.
    let echo = |id: &str| tool_call(id, "mcp__demo__echo", json!({"text": id}));
    let server = ModelServer::start([echo("1"), echo("2")]).await;
    let base = format!("{}/v1", server.url);
    let out = output(agent(&sandbox, &["-p", "loop", "--json", "--model", "m", "--base-url", &base, "--max-turns", "2"])).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let result = json_lines(&out).pop().unwrap();
    assert_eq!((&result["stop_reason"], &result["text"], &result["tool_calls"]), (&json!("max_turn_requests"), &json!(""), &json!(2)));
}

#[tokio::test]
async fn ctrl_c_cancels_the_turn_and_json_still_ends_with_its_result() {
    let sandbox = sandbox_with_demo();
    let server = ModelServer::start([tool_call("s1", "mcp__demo__sleep", json!({"ms": 600000}))]).await;
    let base = format!("{}/v1", server.url);
    let mut command = agent(&sandbox, &["-p", "sleep long", "--json", "--confirm", "never", "--model", "m", "--base-url", &base]);
    command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = tokio::process::Command::from(command).kill_on_drop(true).spawn().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(child.stdout.take().unwrap()));
    let mut seen = Vec::new();
    let patience = std::time::Duration::from_secs(60);
    while !seen.iter().any(|line: &Value| line["event"] == "tool_call_started") {
        let line = tokio::time::timeout(patience, lines.next_line()).await.expect("the call starts").unwrap().expect("a line");
        seen.push(serde_json::from_str(&line).unwrap());
    }
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGINT) };
    while let Some(line) = tokio::time::timeout(patience, lines.next_line()).await.expect("the turn ends").unwrap() {
        seen.push(serde_json::from_str(&line).unwrap());
    }
    let status = tokio::time::timeout(patience, child.wait()).await.expect("the command exits").unwrap();
    assert_eq!(status.code(), Some(130));
    let schema = documented_schema();
    for line in &seen {
        conforms(&schema, line).unwrap_or_else(|why| panic!("{why}: {line}"));
    }
    let result = seen.last().unwrap();
    assert_eq!(
        (&result["event"], &result["stop_reason"], &result["tool_calls"]),
        (&json!("result"), &json!("cancelled"), &json!(1)),
        "{seen:?}"
    );
}
