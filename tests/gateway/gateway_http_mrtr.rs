//! Servers' own requests reach a 2026-07-28 client of `mcpvisor serve
//! --http` (a real process in front of the demo server) on
//! `input_required` results (multi round-trip requests), and the calls
//! parked meanwhile are bounded.

use crate::gateway_http_support::{call_modern as call, client, json_of, post, request, Gateway, Sse, SseReader, MODERN};
use serde_json::{json, Value};

/// The `_meta` of a 2026-07-28 request whose client declares `capabilities`.
fn meta(capabilities: Value) -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": capabilities})
}

fn sample(id: u64, extra: Value) -> Value {
    let mut params = json!({"name": "demo__sample", "arguments": {"prompt": "hello"}, "_meta": meta(json!({"sampling": {}}))});
    params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    request(id, "tools/call", params)
}

#[tokio::test]
async fn a_sampling_request_rides_on_input_required_and_the_retry_gets_the_tools_answer() {
    let gateway = Gateway::loopback();
    let (http, url) = (client(), gateway.mcp());
    let pending = call(&http, &url, &sample(1, json!({}))).await;
    let result = &pending["result"];
    assert_eq!(result["resultType"], "input_required", "{pending}");
    assert_eq!(result["inputRequests"]["sampling"]["method"], "sampling/createMessage", "{pending}");
    let state = result["requestState"].as_str().expect("a requestState").to_string();
    assert!(state.len() >= 32, "the state is long enough not to be guessed: {state}");

    let sampled = json!({"role": "assistant", "content": {"type": "text", "text": "the model says hi"}, "model": "m"});
    let retry = sample(2, json!({"inputResponses": {"sampling": sampled}, "requestState": state}));
    let answer = call(&http, &url, &retry).await;
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "the model says hi", "{answer}");

    let again = call(&http, &url, &sample(3, json!({"inputResponses": {"sampling": sampled}, "requestState": state}))).await;
    assert_eq!(again["error"]["code"], -32602, "a requestState is accepted once: {again}");
}

#[tokio::test]
async fn an_unknown_request_state_is_refused() {
    let gateway = Gateway::loopback();
    let (http, url) = (client(), gateway.mcp());
    let forged = sample(1, json!({"inputResponses": {"sampling": {}}, "requestState": "0123456789abcdef0123456789abcdef"}));
    let refused = call(&http, &url, &forged).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("requestState"), "{refused}");
}

#[tokio::test]
async fn without_the_capability_a_sampling_request_gets_the_default_answer() {
    let gateway = Gateway::loopback();
    let (http, url) = (client(), gateway.mcp());
    let plain = request(1, "tools/call", json!({"name": "demo__sample", "arguments": {"prompt": "hello"}, "_meta": meta(json!({}))}));
    let answer = call(&http, &url, &plain).await;
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("does not offer sampling"), "sampling is refused, saying why: {answer}");
}

#[tokio::test]
async fn a_call_whose_client_never_retries_is_dropped_after_the_time_out() {
    // A time-out of 0 ms: the call has expired by the time any retry arrives.
    let gateway = Gateway::start("127.0.0.1:0", &[], &[("MCPVISOR_SERVE_INPUT_TIMEOUT_MS", "0")]).expect("the gateway starts");
    let (http, url) = (client(), gateway.mcp());
    let pending = call(&http, &url, &sample(1, json!({}))).await;
    assert_eq!(pending["result"]["resultType"], "input_required", "{pending}");
    let sampled = json!({"role": "assistant", "content": {"type": "text", "text": "late"}, "model": "m"});
    let retry = sample(2, json!({"inputResponses": {"sampling": sampled}, "requestState": pending["result"]["requestState"]}));
    let refused = call(&http, &url, &retry).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("expired"), "{refused}");
}

/// POSTs a 2026-07-28 call of the demo's `log` tool (at `level`) whose
/// `_meta` carries `extra`; the frames of its response, the response last.
async fn log_call(http: &reqwest::Client, url: &str, level: &str, extra: Value) -> Vec<Value> {
    let mut meta = meta(json!({}));
    meta.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let body = request(1, "tools/call", json!({"name": "demo__log", "arguments": {"level": level, "message": "hear me"}, "_meta": meta}));
    let response =
        post(http, url, &body).header("mcp-protocol-version", MODERN).header("mcp-method", "tools/call").header("mcp-name", "demo__log");
    let response = response.send().await.unwrap();
    let sse = response.headers().get("content-type").is_some_and(|kind| kind.as_bytes().starts_with(b"text/event-stream"));
    if !sse {
        return vec![json_of(response).await];
    }
    let mut events = SseReader::new(response);
    let mut frames = Vec::new();
    while let Some(Sse { data, .. }) = events.next().await {
        frames.push(data);
    }
    frames
}

#[tokio::test]
async fn a_request_that_declares_a_log_level_hears_its_servers_messages_on_its_own_stream() {
    let gateway = Gateway::loopback();
    let (http, url) = (client(), gateway.mcp());
    let level = |level: &str| json!({"io.modelcontextprotocol/logLevel": level});

    let frames = log_call(&http, &url, "warning", level("info")).await;
    let logged: Vec<_> = frames.iter().filter(|frame| frame["method"] == "notifications/message").collect();
    assert_eq!(logged.len(), 1, "{frames:?}");
    assert_eq!(logged[0]["params"]["logger"], "demo", "{frames:?}");
    assert_eq!(logged[0]["params"]["level"], "warning", "{frames:?}");
    assert_eq!(logged[0]["params"]["data"], "hear me", "{frames:?}");
    assert!(frames.last().unwrap()["result"].is_object(), "the response comes last: {frames:?}");

    let below = log_call(&http, &url, "info", level("error")).await;
    assert!(below.iter().all(|frame| frame.get("method").is_none()), "below the level: {below:?}");
    let unasked = log_call(&http, &url, "warning", json!({})).await;
    assert!(unasked.iter().all(|frame| frame.get("method").is_none()), "no level, no logs: {unasked:?}");
    assert!(unasked.last().unwrap()["result"].is_object(), "{unasked:?}");
}

#[tokio::test]
async fn elicitation_and_roots_ride_on_input_required_too_each_only_when_declared() {
    // Roots reach the servers over HTTP only when the gateway passes its client's through.
    let gateway = Gateway::start("127.0.0.1:0", &["--client-roots"], &[]).expect("the gateway starts");
    let (http, url) = (client(), gateway.mcp());
    let both = meta(json!({"elicitation": {}, "roots": {}}));
    let elicit = |id, extra: Value| {
        let mut params = json!({"name": "demo__elicit", "arguments": {"message": "Who?"}, "_meta": both});
        params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        request(id, "tools/call", params)
    };
    let pending = call(&http, &url, &elicit(1, json!({}))).await;
    assert_eq!(pending["result"]["inputRequests"]["elicitation"]["method"], "elicitation/create", "{pending}");
    let form = json!({"action": "accept", "content": {"name": "Bo"}});
    let retry = elicit(2, json!({"inputResponses": {"elicitation": form}, "requestState": pending["result"]["requestState"]}));
    let answer = call(&http, &url, &retry).await;
    assert_eq!(answer["result"]["structuredContent"]["content"]["name"], "Bo", "{answer}");

    let roots = request(3, "tools/call", json!({"name": "demo__roots", "arguments": {}, "_meta": both}));
    let pending = call(&http, &url, &roots).await;
    assert_eq!(pending["result"]["inputRequests"]["roots"]["method"], "roots/list", "{pending}");
    let listed = json!({"roots": [{"uri": "file:///r"}]});
    let mut retry = roots.clone();
    retry["id"] = json!(4);
    retry["params"]["inputResponses"] = json!({"roots": listed});
    retry["params"]["requestState"] = pending["result"]["requestState"].clone();
    let answer = call(&http, &url, &retry).await;
    assert_eq!(answer["result"]["content"][0]["text"], "file:///r", "{answer}");

    // Sampling was not declared: that call gets the default (refused), not input_required.
    let sample = request(5, "tools/call", json!({"name": "demo__sample", "arguments": {"prompt": "hi"}, "_meta": both}));
    let answer = call(&http, &url, &sample).await;
    assert!(answer["error"]["message"].as_str().unwrap_or_default().contains("does not offer sampling"), "{answer}");
}
