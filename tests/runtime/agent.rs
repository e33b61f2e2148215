//! The Agent actor against a scripted model server on loopback (both wire
//! formats) and the demo MCP server as a real child process.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;
use crate::model_server::{anthropic_stream, error_body, openai_stream, openai_whole, ModelServer, Reply};
use mcpvisor::actors::agent::{
    AgentConfig, AgentEvent, AgentLimits, AgentStop, ConfirmPolicy, ConfirmRequest, Decision, ToolBudget, TurnEnded,
};
use mcpvisor::actors::client_requests::Answering;
use mcpvisor::actors::outlet::Outlet;
use mcpvisor::config::agent::ServerConfirm;
use mcpvisor::config::{AgentSettings, ConfirmMode};
use mcpvisor::llm::{self, ChatMessage, Provider};
use mcpvisor::Handle;
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

fn model(provider: Provider, server: &ModelServer, stream: bool) -> Arc<dyn llm::ChatModel> {
    llm::connect(&server.settings(provider, Some(stream))).unwrap()
}

/// A streamed Chat Completions answer asking for `calls` (id, exposed tool name, arguments).
fn calls(calls: &[(&str, &str, Value)]) -> Reply {
    let deltas = calls
        .iter()
        .enumerate()
        .map(|(index, (id, name, arguments))| {
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                "function": {"name": name, "arguments": arguments.to_string()}}]})
        })
        .collect();
    openai_stream(deltas, "tool_calls")
}

fn says(text: &str) -> Reply {
    openai_stream(vec![json!({"role": "assistant", "content": text})], "stop")
}

struct Run {
    ended: Result<TurnEnded, String>,
    events: Vec<AgentEvent>,
}

/// Starts an agent over `handle` with `config` changes, sends `prompt`, collects every event.
async fn run(handle: &Handle, model: Arc<dyn llm::ChatModel>, prompt: &str, change: impl FnOnce(&mut AgentConfig)) -> Run {
    let (agent, mut events) = agent(handle, model, change).await;
    let ended = agent.prompt(prompt).await.map_err(|e| e.to_string());
    drop(agent);
    Run { ended, events: drain(&mut events) }
}

async fn agent(
    handle: &Handle,
    model: Arc<dyn llm::ChatModel>,
    change: impl FnOnce(&mut AgentConfig),
) -> (mcpvisor::AgentHandle, UnboundedReceiver<AgentEvent>) {
    let (outlet, events) = Outlet::channel();
    let mut config = AgentConfig::new(model);
    config.events = Some(outlet);
    config.policy = ConfirmPolicy::new(ConfirmMode::Never, AgentSettings::default());
    change(&mut config);
    (handle.start_agent(config).await.expect("runtime running"), events)
}

fn drain(events: &mut UnboundedReceiver<AgentEvent>) -> Vec<AgentEvent> {
    let mut all = Vec::new();
    while let Ok(event) = events.try_recv() {
        all.push(event);
    }
    all
}

/// The tool results (call id, text) of the `index`-th model request.
fn tool_results(server: &ModelServer, index: usize) -> Vec<(String, String)> {
    let body = &server.requests()[index].body;
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| (m["tool_call_id"].as_str().unwrap().to_string(), content_text(&m["content"])))
        .collect()
}

/// Whether the agent marked each finished call as an error, sorted by call id.
fn errors(events: &[AgentEvent]) -> Vec<(String, bool)> {
    let mut errors: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolCallFinished { call_id, is_error, .. } => Some((call_id.clone(), *is_error)),
            _ => None,
        })
        .collect();
    errors.sort();
    errors
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_round_trip_offers_the_catalog_and_answers_with_the_matching_id() {
    let handle = start(vec![demo("demo", &[])]).await;
    let server = ModelServer::start([calls(&[("call_7", "mcp__demo__add", json!({"a": 2, "b": 3}))]), says("2 + 3 = 5")]).await;
    let run = run(&handle, model(Provider::OpenAi, &server, true), "add 2 and 3", |c| {
        c.conversation.system = Some("Use the tools.".into());
    })
    .await;
    let ended = run.ended.unwrap();
    assert_eq!(ended.stop_reason, AgentStop::EndTurn);
    assert_eq!(ended.usage.input_tokens, 22, "both requests' usage is summed");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let tools = requests[0].body["tools"].as_array().unwrap();
    let add = tools.iter().find(|t| t["function"]["name"] == "mcp__demo__add").expect("the catalog is offered");
    assert_eq!(add["function"]["parameters"]["required"], json!(["a", "b"]));
    assert_eq!(tools.len(), handle.list_tools().await.len());
    assert_eq!(tool_results(&server, 1), vec![("call_7".to_string(), "5".to_string())]);
    let texts: String =
        run.events.iter().filter_map(|e| if let AgentEvent::Text { text } = e { Some(text.as_str()) } else { None }).collect();
    assert_eq!(texts, "2 + 3 = 5");
    let finished = run.events.iter().find_map(|e| match e {
        AgentEvent::ToolCallFinished { call_id, output, is_error, .. } => Some((call_id.clone(), output.clone(), *is_error)),
        _ => None,
    });
    assert_eq!(finished, Some(("call_7".into(), "5".into(), false)));
    assert!(matches!(run.events.last(), Some(AgentEvent::TurnEnded { stop_reason: AgentStop::EndTurn, .. })));
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_tool_calls_run_at_once_and_are_answered_in_order() {
    let handle = start(vec![demo("demo", &[])]).await;
    let server = ModelServer::start([
        // The first call is the slower one: results returned in completion order would put `b` first.
        calls(&[("a", "mcp__demo__sleep", json!({"ms": 3000})), ("b", "mcp__demo__sleep", json!({"ms": 1500}))]),
        says("done"),
    ])
    .await;
    let model = model(Provider::OpenAi, &server, true);
    let (agent, mut events) = agent(&handle, model, |_| {}).await;
    let turn = tokio::spawn(agent.prompt("sleep twice"));
    let status = wait_status(&handle, "demo", |s| s.in_flight == 2).await;
    assert_eq!(status.in_flight, 2, "both calls are on the wire together");
    let ended = turn.await.unwrap().unwrap();
    assert_eq!(ended.stop_reason, AgentStop::EndTurn);
    let results = tool_results(&server, 1);
    let expected = [("a".to_string(), "slept 3000 ms".to_string()), ("b".to_string(), "slept 1500 ms".to_string())];
    assert_eq!(results, expected, "the results come back in the model's order, not in the order the calls finished");
    assert_eq!(drain(&mut events).iter().filter(|e| matches!(e, AgentEvent::ToolCallStarted { .. })).count(), 2);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_whole_answers_carry_tool_use_and_tool_result_blocks() {
    let handle = start(vec![demo("demo", &[])]).await;
    let tool_use = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "scripted", "stop_reason": "tool_use",
        "content": [{"type": "text", "text": "Echoing."}, {"type": "tool_use", "id": "toolu_1", "name": "mcp__demo__echo", "input": {"text": "hello"}}],
        "usage": {"input_tokens": 10, "output_tokens": 5}});
    let done = json!({"id": "msg_2", "type": "message", "role": "assistant", "model": "scripted", "stop_reason": "end_turn",
        "content": [{"type": "text", "text": "It said hello."}], "usage": {"input_tokens": 20, "output_tokens": 5}});
    let server = ModelServer::start([Reply::Json(tool_use), Reply::Json(done)]).await;
    let run = run(&handle, model(Provider::Anthropic, &server, false), "echo hello", |_| {}).await;
    assert_eq!(run.ended.unwrap().stop_reason, AgentStop::EndTurn);
    let second = &server.requests()[1].body;
    assert_eq!(second["stream"], json!(false));
    let messages = second["messages"].as_array().unwrap();
    let result = messages.last().unwrap();
    assert_eq!(result["role"], "user");
    assert_eq!(result["content"][0]["type"], "tool_result");
    assert_eq!(result["content"][0]["tool_use_id"], "toolu_1");
    assert_eq!(content_text(&result["content"][0]["content"]), "hello");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_call_is_told_to_the_model_and_the_turn_goes_on() {
    let handle = start(vec![demo("demo", &[])]).await;
    let server = ModelServer::start([calls(&[("k", "mcp__demo__sleep", json!({"ms": 30000}))]), says("The server died; sorry.")]).await;
    let (agent, mut events) = agent(&handle, model(Provider::OpenAi, &server, true), |_| {}).await;
    let turn = tokio::spawn(agent.prompt("sleep"));
    let status = wait_status(&handle, "demo", |s| s.in_flight == 1).await;
    kill(status.pid.unwrap(), libc::SIGKILL);
    let ended = turn.await.unwrap().unwrap();
    assert_eq!(ended.stop_reason, AgentStop::EndTurn);
    let results = tool_results(&server, 1);
    assert_eq!(results.len(), 1);
    let (id, text) = &results[0];
    assert_eq!(id, "k");
    assert_eq!(errors(&drain(&mut events)), [("k".to_string(), true)]);
    assert!(text.contains("server `demo` exited") && text.contains("`sleep` was in flight"), "{text}");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirmation_asks_for_tools_that_are_not_read_only_and_a_denial_reaches_the_model() {
    let handle = start(vec![demo("demo", &[])]).await;
    let server = ModelServer::start([
        calls(&[("r", "mcp__demo__echo", json!({"text": "x"})), ("w", "mcp__demo__sleep", json!({"ms": 1}))]),
        says("ok"),
    ])
    .await;
    let asked: Arc<Mutex<Vec<ConfirmRequest>>> = Arc::default();
    let seen = asked.clone();
    let run = run(&handle, model(Provider::OpenAi, &server, true), "go", |c| {
        // Annotations count only for a trusted server (confirm = ask keeps it asking for the rest).
        let mut settings = AgentSettings::default();
        settings.servers.insert("demo".into(), ServerConfirm { trust: true, confirm: Some(ConfirmMode::Ask), ..Default::default() });
        c.policy = ConfirmPolicy::new(ConfirmMode::Ask, settings);
        c.asker = Some(Answering::function(move |request: ConfirmRequest| {
            seen.lock().unwrap().push(request);
            async { Decision::RejectOnce }
        }));
    })
    .await;
    assert_eq!(run.ended.unwrap().stop_reason, AgentStop::EndTurn);
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "echo is read-only on a trusted server: only sleep is asked about");
    assert_eq!(
        (asked[0].tool.as_str(), asked[0].server_tool.as_str(), asked[0].arguments.clone()),
        ("mcp__demo__sleep", "sleep", json!({"ms": 1}))
    );
    let results = tool_results(&server, 1);
    assert_eq!(results[0].1, "x");
    assert!(results[1].1.contains("was not made: the user denied it"), "{:?}", results[1]);
    assert_eq!(errors(&run.events), [("r".to_string(), false), ("w".to_string(), true)]);
    assert!(run.events.iter().any(|e| matches!(e, AgentEvent::ToolCallDenied { call_id, .. } if call_id == "w")));
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirm_always_asks_even_for_read_only_tools_and_without_an_asker_the_call_is_denied() {
    let handle = start(vec![demo("demo", &[])]).await;
    let server = ModelServer::start([calls(&[("r", "mcp__demo__echo", json!({"text": "x"}))]), says("ok")]).await;
    let run = run(&handle, model(Provider::OpenAi, &server, true), "go", |c| {
        c.policy = ConfirmPolicy::new(ConfirmMode::Always, AgentSettings::default());
    })
    .await;
    assert_eq!(run.ended.unwrap().stop_reason, AgentStop::EndTurn);
    let (_, text) = tool_results(&server, 1).remove(0);
    assert!(text.contains("nobody can give it"), "{text}");
    assert_eq!(errors(&run.events), [("r".to_string(), true)]);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_always_is_remembered_for_the_rest_of_the_session() {
    let handle = start(vec![demo("demo", &[])]).await;
    let sleep = |id: &str| calls(&[(id, "mcp__demo__sleep", json!({"ms": 1}))]);
    let server = ModelServer::start([sleep("1"), sleep("2"), says("ok")]).await;
    let asked = Arc::new(Mutex::new(0));
    let count = asked.clone();
    let run = run(&handle, model(Provider::OpenAi, &server, true), "go", |c| {
        c.policy = ConfirmPolicy::new(ConfirmMode::Ask, AgentSettings::default());
        c.asker = Some(Answering::function(move |_| {
            *count.lock().unwrap() += 1;
            async { Decision::AllowAlways }
        }));
    })
    .await;
    assert_eq!(run.ended.unwrap().stop_reason, AgentStop::EndTurn);
    assert_eq!(*asked.lock().unwrap(), 1);
    assert_eq!(errors(&run.events), [("1".to_string(), false), ("2".to_string(), false)], "the second call ran without asking");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_during_a_tool_call_cancels_it_at_the_server_and_keeps_the_conversation_valid() {
    let handle = start(vec![demo("demo", &[])]).await;
    let server = ModelServer::start([calls(&[("long", "mcp__demo__sleep", json!({"ms": 60000}))])]).await;
    let (agent, _events) = agent(&handle, model(Provider::OpenAi, &server, true), |_| {}).await;
    let turn = tokio::spawn(agent.prompt("sleep long"));
    wait_status(&handle, "demo", |s| s.in_flight == 1).await;
    agent.cancel();
    let ended = turn.await.unwrap().unwrap();
    assert_eq!(ended.stop_reason, AgentStop::Cancelled);
    // The turn ends at once; the cancellation reaches the server from the
    // connection's own thread, so it is awaited (with a deadline).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let report = loop {
        let cancellations = handle.call_tool("mcp__demo__cancellations", json!({})).await.unwrap();
        let report: Value = serde_json::from_str(&text(&cancellations)).unwrap();
        if report["cancellations"][0].is_object() || tokio::time::Instant::now() > deadline {
            break report;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(report["cancellations"][0]["tool"], "sleep", "{report}");
    let history = agent.history().await.unwrap();
    match history.messages.last() {
        Some(ChatMessage::Tool { call_id, is_error: true, .. }) => assert_eq!(call_id, "long"),
        other => panic!("the open call gets a result: {other:?}"),
    }
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_turns_ends_a_turn_that_keeps_calling_tools() {
    let handle = start(vec![demo("demo", &[])]).await;
    let echo = |id: &str| calls(&[(id, "mcp__demo__echo", json!({"text": id}))]);
    let server = ModelServer::start([echo("1"), echo("2"), echo("3")]).await;
    let run =
        run(&handle, model(Provider::OpenAi, &server, true), "loop", |c| c.limits = AgentLimits { max_turns: 2, ..Default::default() })
            .await;
    assert_eq!(run.ended.unwrap().stop_reason, AgentStop::MaxTurnRequests);
    assert_eq!(server.requests().len(), 2);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tools_bad_arguments_and_long_output_are_answered_to_the_model() {
    let handle = start(vec![demo("demo", &[])]).await;
    let server = ModelServer::start([
        calls(&[
            ("u", "mcp__demo__nope", json!({})),
            ("s", "mcp__demo__add", json!({"a": 1, "b": "two"})),
            ("j", "mcp__demo__echo", json!("not an object")),
            ("big", "mcp__demo__big", json!({"bytes": 5000})),
        ]),
        says("ok"),
    ])
    .await;
    let run = run(&handle, model(Provider::OpenAi, &server, true), "go", |c| {
        c.limits = AgentLimits { max_tool_output: 100, ..Default::default() }
    })
    .await;
    assert_eq!(run.ended.unwrap().stop_reason, AgentStop::EndTurn);
    let results = tool_results(&server, 1);
    assert!(results[0].1.contains("no tool named `mcp__demo__nope`") && results[0].1.contains("mcp__demo__add"), "{:?}", results[0]);
    assert!(results[1].1.contains("invalid arguments") && results[1].1.contains("`b`"), "{:?}", results[1]);
    assert!(results[2].1.contains("must be a JSON object, not a string"), "{:?}", results[2]);
    assert!(results[3].1.contains("[output cut: the tool returned 5000 characters; only the first 100"), "{:?}", results[3]);
    let expected = [("big", false), ("j", true), ("s", true), ("u", true)].map(|(id, error)| (id.to_string(), error));
    assert_eq!(errors(&run.events), expected);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_model_is_retried_and_a_model_error_ends_the_turn_with_it() {
    let handle = start(vec![demo("demo", &[])]).await;
    let server = ModelServer::start([
        Reply::Status(429, vec![("retry-after", "0".into())], error_body("slow down", "rate_limit_error")),
        says("fine"),
        Reply::Status(401, vec![], error_body("bad key", "authentication_error")),
    ])
    .await;
    let model = model(Provider::OpenAi, &server, true);
    let (agent, _events) = agent(&handle, model, |_| {}).await;
    assert_eq!(agent.prompt("hi").await.unwrap().stop_reason, AgentStop::EndTurn);
    let error = agent.prompt("again").await.unwrap_err().to_string();
    assert!(error.contains("bad key") || error.contains("key"), "{error}");
    let history = agent.history().await.unwrap();
    assert_eq!(history.messages.len(), 3, "the failed turn keeps its prompt: {:?}", history.messages);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_prompt_while_a_turn_runs_is_refused() {
    let handle = start(vec![demo("demo", &[])]).await;
    let server = ModelServer::start([calls(&[("s", "mcp__demo__sleep", json!({"ms": 60000}))])]).await;
    let (agent, _events) = agent(&handle, model(Provider::OpenAi, &server, true), |_| {}).await;
    let first = tokio::spawn(agent.prompt("one"));
    wait_status(&handle, "demo", |s| s.in_flight == 1).await;
    let second = agent.prompt("two").await.unwrap_err().to_string();
    assert!(second.contains("already running"), "{second}");
    agent.cancel();
    assert_eq!(first.await.unwrap().unwrap().stop_reason, AgentStop::Cancelled);
    let _ = anthropic_stream;
    let _ = openai_whole;
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn older_turns_are_summarised_by_the_model_when_the_context_budget_nears() {
    let handle = start(vec![]).await;
    let server =
        ModelServer::start([says("first answer"), says("notes: the user asked a long first question"), says("second answer")]).await;
    let model = model(Provider::OpenAi, &server, true);
    let (agent, mut events) = agent(&handle, model, |c| {
        c.limits = AgentLimits { context_tokens: 60, keep_turns: 1, ..Default::default() };
    })
    .await;
    let long = format!("first question {}", "with many words ".repeat(12));
    assert_eq!(agent.prompt(long).await.unwrap().stop_reason, AgentStop::EndTurn);
    assert_eq!(agent.prompt("second").await.unwrap().stop_reason, AgentStop::EndTurn);
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "one summary request between the two turns");
    let summary_request = &requests[1].body;
    assert!(summary_request.get("tools").is_none_or(|t| t.as_array().is_some_and(|t| t.is_empty())), "{summary_request}");
    let asked = content_text(&summary_request["messages"][1]["content"]);
    assert!(asked.contains("User: first question") && asked.contains("Assistant: first answer"), "{asked}");
    let messages = requests[2].body["messages"].as_array().unwrap().clone();
    let texts: Vec<String> = messages.iter().filter(|m| m["role"] != "system").map(|m| content_text(&m["content"])).collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(texts[0].starts_with(mcpvisor::sessions::SUMMARY_HEADING) && texts[0].contains("notes: the user asked"), "{texts:?}");
    assert_eq!(texts[1], "second");
    assert!(drain(&mut events).iter().any(|e| matches!(e, AgentEvent::Compacted { summarised: 2, kept: 1 })));
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_over_budget_is_searched_and_the_found_tools_are_offered_next() {
    let handle = start(vec![demo("demo", &[])]).await;
    let server = ModelServer::start([
        calls(&[("s", "search_tools", json!({"query": "add two numbers"}))]),
        calls(&[("a", "mcp__demo__add", json!({"a": 1, "b": 2}))]),
        says("3"),
    ])
    .await;
    let budget = ToolBudget { max_tools: 4, max_schema_bytes: 100_000 };
    let run = run(&handle, model(Provider::OpenAi, &server, true), "add 1 and 2", |c| {
        c.limits = AgentLimits { tool_budget: budget, ..Default::default() }
    })
    .await;
    assert_eq!(run.ended.unwrap().stop_reason, AgentStop::EndTurn);
    let offered = |index: usize| -> Vec<String> {
        let tools = server.requests()[index].body["tools"].as_array().cloned().unwrap_or_default();
        tools.iter().map(|t| t["function"]["name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(offered(0), ["search_tools"], "only the search is offered at first");
    assert!(tool_results(&server, 1)[0].1.contains("- mcp__demo__add: Adds `a` and `b`"), "{:?}", tool_results(&server, 1));
    let second = offered(1);
    assert!(second.len() <= 4 && second[0] == "search_tools" && second.contains(&"mcp__demo__add".to_string()), "{second:?}");
    assert_eq!(tool_results(&server, 2).last().unwrap().1, "3");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_added_during_a_turn_is_offered_at_the_next_model_request() {
    let handle = start(vec![demo("demo", &[])]).await;
    let server = ModelServer::start([
        calls(&[("t", "mcp__demo__add_tool", json!({"name": "fresh"}))]),
        calls(&[("f", "mcp__demo__fresh", json!({"text": "new"}))]),
        says("done"),
    ])
    .await;
    let run = run(&handle, model(Provider::OpenAi, &server, true), "add a tool, then use it", |_| {}).await;
    assert_eq!(run.ended.unwrap().stop_reason, AgentStop::EndTurn);
    let offered = |index: usize| server.requests()[index].body["tools"].to_string().contains("\"mcp__demo__fresh\"");
    assert!(!offered(0));
    assert!(offered(1), "tools/list_changed reached the registry before the next request");
    assert_eq!(tool_results(&server, 2).last().unwrap().1, "new");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_handle_outliving_its_runtime_answers_runtime_stopped() {
    let handle = start(vec![demo("demo", &[])]).await;
    let server = ModelServer::start([says("hello")]).await;
    let (agent, _events) = agent(&handle, model(Provider::OpenAi, &server, true), |_| {}).await;
    assert_eq!(agent.prompt("hi").await.unwrap().stop_reason, AgentStop::EndTurn);
    handle.shutdown().await;

    let deadline = Duration::from_secs(10);
    let prompted = tokio::time::timeout(deadline, agent.prompt("anyone there?")).await.expect("an answer within the deadline");
    assert!(matches!(prompted, Err(mcpvisor::AgentError::RuntimeStopped)), "{prompted:?}");
    let history = tokio::time::timeout(deadline, agent.history()).await.expect("an answer within the deadline");
    assert!(matches!(history, Err(mcpvisor::AgentError::RuntimeStopped)), "{history:?}");
}
