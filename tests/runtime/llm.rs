//! The model providers against a scripted model server on loopback that
//! speaks each API's real wire format.

use std::time::Duration;

use crate::model_server::{anthropic_stream, error_body, openai_stream, openai_whole, ModelServer, Reply};
use futures::StreamExt;
use mcpvisor::llm::{
    self, ChatEvent, ChatMessage, ChatRequest, LlmError, ModelSettings, Part, Provider, StopReason, ToolCall, ToolSpec, Usage,
};
use serde_json::{json, Value};

fn settings(provider: Provider, server: &ModelServer, key: Option<&str>) -> ModelSettings {
    let mut settings = server.settings(provider, None);
    settings.api_key = key.map(String::from);
    settings.idle_timeout = Duration::from_secs(5);
    settings
}

fn add_tool() -> ToolSpec {
    let schema = json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]});
    ToolSpec { name: "mcp__demo__add".into(), description: "Adds two numbers".into(), input_schema: schema.as_object().unwrap().clone() }
}

fn request(text: &str) -> ChatRequest {
    ChatRequest { system: Some("Be brief.".into()), messages: vec![ChatMessage::user(text)], tools: vec![add_tool()], max_tokens: None }
}

async fn collect(settings: &ModelSettings, request: ChatRequest) -> Result<Vec<ChatEvent>, LlmError> {
    let model = llm::connect(settings).unwrap();
    let mut events = Vec::new();
    let mut stream = model.respond(request);
    while let Some(event) = stream.next().await {
        events.push(event?);
    }
    Ok(events)
}

fn text_of(events: &[ChatEvent]) -> String {
    events.iter().filter_map(|e| if let ChatEvent::Text(t) = e { Some(t.as_str()) } else { None }).collect()
}

fn calls_of(events: &[ChatEvent]) -> Vec<ToolCall> {
    events.iter().filter_map(|e| if let ChatEvent::ToolCall(c) = e { Some(c.clone()) } else { None }).collect()
}

#[tokio::test]
async fn openai_streams_text_and_parallel_tool_calls_assembled_from_their_pieces() {
    let deltas = vec![
        json!({"role": "assistant", "content": "Adding "}),
        json!({"content": "twice."}),
        json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "mcp__demo__add", "arguments": ""}}]}),
        json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "mcp__demo__add", "arguments": "{\"a\": 1"}}]}),
        json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\": 2, \"b\""}}]}),
        json!({"tool_calls": [{"index": 1, "function": {"arguments": ", \"b\": 2}"}}]}),
        json!({"tool_calls": [{"index": 0, "function": {"arguments": ": 40}"}}]}),
    ];
    let server = ModelServer::start([openai_stream(deltas, "tool_calls")]).await;
    let events = collect(&settings(Provider::OpenAi, &server, Some("sk-test")), request("add")).await.unwrap();
    assert_eq!(text_of(&events), "Adding twice.");
    let calls = calls_of(&events);
    assert_eq!(calls.len(), 2, "{events:?}");
    assert_eq!((calls[0].id.as_str(), calls[0].arguments.as_str()), ("call_a", "{\"a\": 2, \"b\": 40}"));
    assert_eq!((calls[1].id.as_str(), calls[1].arguments.as_str()), ("call_b", "{\"a\": 1, \"b\": 2}"));
    assert_eq!(events.last(), Some(&ChatEvent::End { stop: StopReason::ToolUse, usage: Usage { input_tokens: 11, output_tokens: 7 } }));

    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.headers["authorization"], "Bearer sk-test");
    assert_eq!(sent.body["model"], "scripted-1");
    assert_eq!(sent.body["stream"], true);
    assert_eq!(sent.body["stream_options"]["include_usage"], true);
    assert_eq!(sent.body["messages"][0], json!({"role": "system", "content": "Be brief."}));
    assert_eq!(sent.body["tools"][0]["function"]["parameters"], Value::Object(add_tool().input_schema));
    assert_eq!(sent.body["tool_choice"], "auto");
}

#[tokio::test]
async fn openai_carries_tool_calls_and_results_with_matching_ids_and_tool_images_as_image_parts() {
    let server = ModelServer::start([openai_stream(vec![json!({"content": "42"})], "stop")]).await;
    let mut conversation = request("add 2 and 40");
    let call = ToolCall { id: "call_7".into(), name: "mcp__demo__add".into(), arguments: "{\"a\":2,\"b\":40}".into() };
    conversation.messages.push(ChatMessage::Assistant { text: String::new(), tool_calls: vec![call] });
    let content = vec![Part::Text { text: "42".into() }, Part::Image { mime_type: "image/png".into(), data: "iVBORw0KGgo=".into() }];
    conversation.messages.push(ChatMessage::Tool { call_id: "call_7".into(), name: "mcp__demo__add".into(), content, is_error: false });
    let events = collect(&settings(Provider::OpenAi, &server, None), conversation).await.unwrap();
    assert_eq!(text_of(&events), "42");
    let sent = &server.requests()[0];
    assert!(!sent.headers.contains_key("authorization"), "no key, no header (local servers)");
    let messages = sent.body["messages"].as_array().unwrap();
    assert_eq!(messages[2]["tool_calls"][0]["id"], "call_7");
    assert_eq!(messages[2]["tool_calls"][0]["function"]["arguments"], "{\"a\":2,\"b\":40}");
    assert_eq!(messages[3], json!({"role": "tool", "tool_call_id": "call_7", "content": "42"}));
    assert_eq!(messages[4]["role"], "user");
    assert_eq!(messages[4]["content"][1]["image_url"]["url"], "data:image/png;base64,iVBORw0KGgo=");
}

#[tokio::test]
async fn openai_whole_answers_when_streaming_is_off() {
    let call = json!({"id": "call_1", "type": "function", "function": {"name": "mcp__demo__add", "arguments": "{\"a\":1,\"b\":2}"}});
    let server = ModelServer::start([openai_whole(None, vec![call], "tool_calls")]).await;
    let mut settings = settings(Provider::OpenAi, &server, None);
    settings.stream = false;
    let events = collect(&settings, request("add")).await.unwrap();
    assert_eq!(calls_of(&events)[0].arguments, "{\"a\":1,\"b\":2}");
    assert!(matches!(
        events.last(),
        Some(ChatEvent::End { stop: StopReason::ToolUse, usage: Usage { input_tokens: 5, output_tokens: 3 } })
    ));
    assert_eq!(server.requests()[0].body["stream"], false);
}

#[tokio::test]
async fn a_server_that_refuses_streaming_is_asked_again_without_it_and_remembered() {
    let refusal = Reply::Status(400, vec![], error_body("Streaming is not supported by this server", "invalid_request_error"));
    let server =
        ModelServer::start([refusal, openai_whole(Some("first"), vec![], "stop"), openai_whole(Some("second"), vec![], "stop")]).await;
    let model = llm::connect(&settings(Provider::OpenAi, &server, None)).unwrap();
    for expected in ["first", "second"] {
        let events: Vec<ChatEvent> = model.respond(request("hi")).map(Result::unwrap).collect().await;
        assert_eq!(text_of(&events), expected);
    }
    let streamed: Vec<Value> = server.requests().iter().map(|r| r.body["stream"].clone()).collect();
    assert_eq!(streamed, vec![json!(true), json!(false), json!(false)]);
}

#[tokio::test]
async fn rate_limits_are_retried_after_the_servers_retry_after_then_reported() {
    let limited = || Reply::Status(429, vec![("retry-after", "0".into())], error_body("slow down", "rate_limit_exceeded"));
    let server = ModelServer::start([limited(), openai_stream(vec![json!({"content": "ok"})], "stop")]).await;
    let events = collect(&settings(Provider::OpenAi, &server, None), request("hi")).await.unwrap();
    assert_eq!(text_of(&events), "ok");
    assert_eq!(server.requests().len(), 2, "one retry");

    let server = ModelServer::start([limited(), limited()]).await;
    let mut settings = settings(Provider::OpenAi, &server, None);
    settings.max_retries = 1;
    match collect(&settings, request("hi")).await {
        Err(LlmError::RateLimited { status: 429, retries: 1, message, .. }) => assert_eq!(message, "slow down"),
        other => panic!("expected RateLimited, got {other:?}"),
    }
}

#[tokio::test]
async fn refusals_are_classified_and_say_what_to_do() {
    let server = ModelServer::start([
        Reply::Status(401, vec![], error_body("Incorrect API key provided", "invalid_api_key")),
        Reply::Status(404, vec![], error_body("The model `scripted-1` does not exist", "model_not_found")),
        Reply::Status(400, vec![], error_body("This model's maximum context length is 8192 tokens", "context_length_exceeded")),
    ])
    .await;
    let settings = settings(Provider::OpenAi, &server, Some("bad"));
    let auth = collect(&settings, request("hi")).await.unwrap_err();
    assert!(matches!(auth, LlmError::Auth { status: 401, .. }) && auth.to_string().contains("OPENAI_API_KEY"), "{auth}");
    let model = collect(&settings, request("hi")).await.unwrap_err();
    assert!(matches!(&model, LlmError::UnknownModel { model, .. } if model == "scripted-1"), "{model}");
    let overflow = collect(&settings, request("hi")).await.unwrap_err();
    assert!(matches!(overflow, LlmError::ContextOverflow { .. }), "{overflow}");

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut unreachable = settings.clone();
    (unreachable.base_url, unreachable.max_retries) = (format!("http://{closed}/v1"), 0);
    let error = collect(&unreachable, request("hi")).await.unwrap_err();
    assert!(error.is_unreachable() && error.to_string().contains("OPENAI_BASE_URL"), "{error}");
}

#[tokio::test]
async fn a_stream_cut_short_or_gone_silent_is_an_error_not_an_answer() {
    let cut = Reply::Sse(vec![(None, json!({"choices": [{"index": 0, "delta": {"content": "par"}, "finish_reason": null}]}).to_string())]);
    let stalled = Reply::SseThenStall(vec![(None, json!({"choices": [{"index": 0, "delta": {"content": "wait"}}]}).to_string())]);
    let server = ModelServer::start([cut, stalled]).await;
    let mut settings = settings(Provider::OpenAi, &server, None);
    settings.idle_timeout = Duration::from_millis(300);
    assert!(matches!(collect(&settings, request("hi")).await, Err(LlmError::Protocol { .. })));
    assert!(matches!(collect(&settings, request("hi")).await, Err(LlmError::Timeout { .. })));
}

#[tokio::test]
async fn anthropic_streams_text_thinking_and_tool_use_with_its_headers_and_blocks() {
    let blocks = vec![
        (json!({"type": "thinking", "thinking": ""}), vec![json!({"type": "thinking_delta", "thinking": "2+40"})]),
        (
            json!({"type": "text", "text": ""}),
            vec![json!({"type": "text_delta", "text": "Let me "}), json!({"type": "text_delta", "text": "add."})],
        ),
        (
            json!({"type": "tool_use", "id": "toolu_1", "name": "mcp__demo__add", "input": {}}),
            vec![
                json!({"type": "input_json_delta", "partial_json": "{\"a\": 2,"}),
                json!({"type": "input_json_delta", "partial_json": " \"b\": 40}"}),
            ],
        ),
    ];
    let server = ModelServer::start([anthropic_stream(blocks, "tool_use")]).await;
    let mut conversation = request("add");
    let call = ToolCall { id: "toolu_0".into(), name: "mcp__demo__add".into(), arguments: "{\"a\":1,\"b\":1}".into() };
    conversation.messages.push(ChatMessage::Assistant {
        text: "Two at once.".into(),
        tool_calls: vec![call.clone(), ToolCall { id: "toolu_9".into(), ..call }],
    });
    for id in ["toolu_0", "toolu_9"] {
        conversation.messages.push(ChatMessage::Tool {
            call_id: id.into(),
            name: "mcp__demo__add".into(),
            content: vec![Part::Text { text: "2".into() }],
            is_error: false,
        });
    }
    let events = collect(&settings(Provider::Anthropic, &server, Some("sk-ant-test")), conversation).await.unwrap();
    assert_eq!(events[0], ChatEvent::Reasoning("2+40".into()));
    assert_eq!(text_of(&events), "Let me add.");
    assert_eq!(
        calls_of(&events),
        vec![ToolCall { id: "toolu_1".into(), name: "mcp__demo__add".into(), arguments: "{\"a\": 2, \"b\": 40}".into() }]
    );
    assert_eq!(events.last(), Some(&ChatEvent::End { stop: StopReason::ToolUse, usage: Usage { input_tokens: 13, output_tokens: 9 } }));

    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.headers["x-api-key"], "sk-ant-test");
    assert_eq!(sent.headers["anthropic-version"], "2023-06-01");
    assert_eq!(sent.body["system"], "Be brief.");
    assert_eq!(sent.body["max_tokens"], 8192);
    assert_eq!(sent.body["tools"][0]["input_schema"], Value::Object(add_tool().input_schema));
    let messages = sent.body["messages"].as_array().unwrap();
    assert_eq!(
        messages[1]["content"][1],
        json!({"type": "tool_use", "id": "toolu_0", "name": "mcp__demo__add", "input": {"a": 1, "b": 1}})
    );
    assert_eq!(messages.len(), 3, "both tool results in one user message: {messages:?}");
    assert_eq!(messages[2]["content"][1]["tool_use_id"], "toolu_9");
}

#[tokio::test]
async fn anthropic_overload_inside_a_stream_is_reported_as_such() {
    let events = vec![
        (Some("message_start".to_string()), json!({"type": "message_start", "message": {"usage": {"input_tokens": 1}}}).to_string()),
        (Some("error".to_string()), json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}).to_string()),
    ];
    let server = ModelServer::start([Reply::Sse(events)]).await;
    let error = collect(&settings(Provider::Anthropic, &server, Some("k")), request("hi")).await.unwrap_err();
    assert!(matches!(error, LlmError::RateLimited { .. }), "{error}");
}
