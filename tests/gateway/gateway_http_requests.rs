//! Servers' own requests through `mcpvisor serve --http` (a real process
//! in front of the demo server) reach the client whose call caused them,
//! and no other.

use crate::gateway_http_support;

use crate::gateway_http_support::{client, json_of, post, request, Gateway, Sse, SseReader, LEGACY};
use serde_json::{json, Value};

/// Opens a session whose client declares sampling; its id.
async fn sampling_session(http: &reqwest::Client, url: &str) -> String {
    let init = request(
        0,
        "initialize",
        json!({"protocolVersion": LEGACY, "capabilities": {"sampling": {}}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    let response = post(http, url, &init).send().await.unwrap();
    let id = response.headers()["mcp-session-id"].to_str().unwrap().to_string();
    assert!(json_of(response).await.get("result").is_some());
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(http, url, &initialized).header("mcp-session-id", &id).send().await.unwrap().status(), 202);
    id
}

/// Answers a sampling request of the gateway's as the model `model`.
async fn answer_sampling(http: &reqwest::Client, url: &str, session: &str, asked: &Value, model: &str) {
    assert_eq!(asked["method"], "sampling/createMessage", "{asked}");
    let result = json!({"role": "assistant", "content": {"type": "text", "text": format!("{model} says hi")}, "model": model});
    let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": result});
    assert_eq!(post(http, url, &answer).header("mcp-session-id", session).send().await.unwrap().status(), 202);
}

#[tokio::test]
async fn a_sampling_request_goes_to_the_session_whose_call_caused_it() {
    let gateway = Gateway::loopback();
    let (http, url) = (client(), gateway.mcp());
    let first = sampling_session(&http, &url).await;
    let second = sampling_session(&http, &url).await;

    // The first session reads its GET stream and answers whatever it is asked, so a misrouted request ends the call (wrongly) instead of hanging it.
    let get = http.get(&url).header("accept", "text/event-stream").header("mcp-session-id", &first).send().await.unwrap();
    assert_eq!(get.status(), 200);
    let (answerer_http, answerer_url, answerer_session) = (http.clone(), url.clone(), first.clone());
    let first_reader = tokio::spawn(async move {
        let mut events = SseReader::new(get);
        while let Some(Sse { data, .. }) = events.next().await {
            if data.get("method").is_some() && data.get("id").is_some() {
                answer_sampling(&answerer_http, &answerer_url, &answerer_session, &data, "first-model").await;
            }
        }
    });

    for round in 0..2 {
        let call = request(10 + round, "tools/call", json!({"name": "demo__sample", "arguments": {"prompt": "hello"}}));
        let response = post(&http, &url, &call).header("mcp-session-id", &second).send().await.unwrap();
        assert_eq!(response.headers()["content-type"], "text/event-stream", "the request comes before the answer");
        let mut events = SseReader::new(response);
        let asked = events.next().await.expect("the sampling request, on the call's own stream").data;
        answer_sampling(&http, &url, &second, &asked, "second-model").await;
        let answer = events.next().await.expect("the call's answer").data;
        assert_eq!(answer["id"], 10 + round, "{answer}");
        assert_eq!(answer["result"]["content"][0]["text"], "second-model says hi", "{answer}");
        assert!(events.next().await.is_none(), "the POST's stream ends with its answer");
    }
    first_reader.abort();
}

#[tokio::test]
async fn a_sampling_request_goes_to_no_other_session_when_its_caller_cannot_answer() {
    // The plain session declares no sampling; the capable one, with no call open, is not asked (it could be another
    // identity's): the call gets the answer of a client without sampling, and the capable session's GET stream
    // carries nothing of it.
    let gateway = Gateway::loopback();
    let (http, url) = (client(), gateway.mcp());
    let capable = sampling_session(&http, &url).await;
    let plain = gateway_http_support::open_session(&http, &url).await;
    let get = http.get(&url).header("accept", "text/event-stream").header("mcp-session-id", &capable).send().await.unwrap();
    let mut stream = SseReader::new(get);
    let call = request(3, "tools/call", json!({"name": "demo__sample", "arguments": {"prompt": "hello"}}));
    let answer = json_of(post(&http, &url, &call).header("mcp-session-id", &plain).send().await.unwrap()).await;
    assert!(answer.to_string().contains("does not offer sampling"), "{answer}");
    // A line of the capable session's own, after the call: its stream carried nothing before it but notifications.
    let log = request(4, "tools/call", json!({"name": "demo__log", "arguments": {"level": "error", "message": "marker"}}));
    assert_eq!(post(&http, &url, &log).header("mcp-session-id", &capable).send().await.unwrap().status(), 200);
    loop {
        let event = stream.next().await.expect("the marker, on the capable session's GET stream").data;
        assert!(event.get("id").is_none(), "the capable session was asked: {event}");
        if event["params"]["data"] == "marker" {
            break;
        }
    }
}
