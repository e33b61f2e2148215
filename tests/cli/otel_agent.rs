//! OpenTelemetry of the agent: `mcpvisor agent -p` (a real process) with
//! the demo server as its tool server and a scripted model server on
//! loopback, exporting to an OTLP/HTTP receiver on loopback as the
//! `[telemetry]` table says. One turn is one trace: the turn's span, and as
//! its children a span per model request (GenAI semantic conventions:
//! operation, provider, model, tokens) and the tool call's span, whose
//! context the demo server receives in `_meta.traceparent`.

use crate::cli_support::{demo_table, stderr, stdout, Sandbox};
use crate::model_server::{openai_stream, ModelServer, Reply};
use crate::otel_support::{attribute, describe, hex, receiver, spans, text};
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::json;

/// A sandbox whose user file has the demo server (logging requests to
/// `log`) and a `[telemetry]` table sending to `url`.
fn sandbox(log: &std::path::Path, url: &str) -> Sandbox {
    let sandbox = Sandbox::new();
    let demo = demo_table("demo", &["--request-log", log.to_str().unwrap()]);
    sandbox.write_user_file(&format!(
        "[agent.servers.demo]\ntools = {{ add = \"never\" }}\n\n{demo}\n[telemetry]\notlp_endpoint = {url:?}\nservice_name = \"agent-under-test\"\n"
    ));
    sandbox
}

/// `agent ARGS` against the model at `base`, with no model or OTLP variables from outside.
fn agent(sandbox: &Sandbox, base: &str, args: &[&str]) -> std::process::Command {
    let mut command = sandbox.std_cmd(["agent", "--model", "m1", "--base-url", base].iter().chain(args));
    for var in ["MCPVISOR_MODEL", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OTEL_EXPORTER_OTLP_ENDPOINT"] {
        command.env_remove(var);
    }
    command.env("OPENAI_API_KEY", "sk-test-key-123456").stdin(std::process::Stdio::null());
    command
}

fn integer(span: &Span, key: &str) -> Option<i64> {
    match attribute(&span.attributes, key) {
        Some(any_value::Value::IntValue(n)) => Some(*n),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_agent_turn_is_one_trace_of_its_model_requests_and_tool_calls() {
    let (url, received) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let sandbox = sandbox(&log, &url);
    let call = json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
        "function": {"name": "mcp__demo__add", "arguments": "{\"a\": 20, \"b\": 22}"}}]});
    let script: [Reply; 2] = [openai_stream(vec![call], "tool_calls"), openai_stream(vec![json!({"content": "42."})], "stop")];
    let model = ModelServer::start(script).await;
    let base = format!("{}/v1", model.url);
    let mut command = agent(&sandbox, &base, &["-p", "what is 20 + 22?"]);
    // The agent flushes its spans before it exits (within its deadline).
    let out = tokio::task::spawn_blocking(move || command.output().expect("mcpvisor runs")).await.unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "42.\n");
    assert!(stderr(&out).contains("OpenTelemetry on"), "{}", stderr(&out));

    let received = received.lock().unwrap();
    let spans = spans(&received);
    for (span, _) in &spans {
        eprintln!("span: {}", describe(span));
    }
    let (turn, service) = spans.iter().find(|(span, _)| span.name == "invoke_agent mcpvisor").expect("the turn's span");
    assert_eq!(*service, Some("agent-under-test"));
    assert_eq!((turn.kind, turn.parent_span_id.is_empty()), (SpanKind::Internal as i32, true), "{}", describe(turn));
    assert_eq!(text(&turn.attributes, "mcpvisor.outcome"), Some("ok"));

    let chats: Vec<&Span> = spans.iter().map(|(span, _)| *span).filter(|span| span.name == "chat m1").collect();
    assert_eq!(chats.len(), 2, "a span per model request");
    for (round, chat) in chats.iter().enumerate() {
        assert_eq!((&chat.trace_id, &chat.parent_span_id), (&turn.trace_id, &turn.span_id), "{}", describe(chat));
        assert_eq!(chat.kind, SpanKind::Client as i32);
        for (key, value) in [("gen_ai.operation.name", "chat"), ("gen_ai.provider.name", "openai"), ("gen_ai.request.model", "m1")] {
            assert_eq!(text(&chat.attributes, key), Some(value), "{key}: {}", describe(chat));
        }
        assert_eq!(integer(chat, "mcpvisor.agent.round"), Some(round as i64 + 1));
        // The scripted server's usage chunk: 11 in, 7 out.
        assert_eq!((integer(chat, "gen_ai.usage.input_tokens"), integer(chat, "gen_ai.usage.output_tokens")), (Some(11), Some(7)));
    }

    let tool = spans.iter().map(|(span, _)| *span).find(|span| span.name == "tools/call add").expect("the tool call's span");
    assert_eq!((&tool.trace_id, &tool.parent_span_id), (&turn.trace_id, &turn.span_id), "{}", describe(tool));
    for (key, value) in [("mcpvisor.server", "demo"), ("gen_ai.tool.name", "add"), ("mcpvisor.outcome", "ok")] {
        assert_eq!(text(&tool.attributes, key), Some(value), "{key}: {}", describe(tool));
    }
    let requests = std::fs::read_to_string(&log).unwrap();
    let sent = format!("tools/call add traceparent=00-{}-{}-01 tracestate=", hex(&turn.trace_id), hex(&tool.span_id));
    assert!(requests.lines().any(|line| line == sent), "the server gets the call span's context: {requests}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_turn_s_spans_end_as_cancelled_and_are_still_sent() {
    let (url, received) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let sandbox = sandbox(&dir.path().join("requests.log"), &url);
    let call = json!({"tool_calls": [{"index": 0, "id": "s1", "type": "function",
        "function": {"name": "mcp__demo__sleep", "arguments": "{\"ms\": 600000}"}}]});
    let model = ModelServer::start([openai_stream(vec![call], "tool_calls")]).await;
    let base = format!("{}/v1", model.url);
    let mut command = agent(&sandbox, &base, &["-p", "sleep long", "--json", "--confirm", "never"]);
    command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = tokio::process::Command::from(command).kill_on_drop(true).spawn().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(child.stdout.take().unwrap()));
    let patience = std::time::Duration::from_secs(60);
    loop {
        let line = tokio::time::timeout(patience, lines.next_line()).await.expect("the call starts").unwrap().expect("a line");
        if line.contains("\"tool_call_started\"") {
            break;
        }
    }
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGINT) };
    while tokio::time::timeout(patience, lines.next_line()).await.expect("the turn ends").unwrap().is_some() {}
    let status = tokio::time::timeout(patience, child.wait()).await.expect("the command exits").unwrap();
    assert_eq!(status.code(), Some(130));

    let received = received.lock().unwrap();
    let spans = spans(&received);
    let outcome = |name: &str| {
        let span = spans.iter().map(|(span, _)| *span).find(|span| span.name == name).unwrap_or_else(|| panic!("no span {name}"));
        text(&span.attributes, "mcpvisor.outcome").map(str::to_string)
    };
    assert_eq!(outcome("chat m1").as_deref(), Some("ok"));
    assert_eq!(outcome("tools/call sleep").as_deref(), Some("cancelled"));
    assert_eq!(outcome("invoke_agent mcpvisor").as_deref(), Some("cancelled"));
}
