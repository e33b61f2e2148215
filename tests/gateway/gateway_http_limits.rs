//! The request-level bounds of `mcpvisor serve --http` (issue 19), against
//! the real binary on loopback: sessions per client and in total, open
//! requests (stateless ones and `subscriptions/listen` streams included)
//! per client and in total, and the bytes a session keeps for resumption.
//! Two clients are told apart by their source address (127.0.0.1 and
//! 127.0.0.2, both loopback).

use std::time::{Duration, Instant};

use crate::gateway_http_support::{
    client, client_from, initialize, json_of, modern_meta, open_session, post, request, Gateway, SseReader, LEGACY, MODERN,
};
use serde_json::{json, Value};

/// One sample of `/metrics`, e.g. `mcpvisor_gateway_sessions` or
/// `mcpvisor_gateway_refusals_total{bound="requests"}`.
async fn metric(http: &reqwest::Client, gateway: &Gateway, series: &str) -> f64 {
    let text = http.get(format!("{}/metrics", gateway.base)).send().await.unwrap().text().await.unwrap();
    let line = text.lines().find(|line| line.split_once(' ').is_some_and(|(name, _)| name == series));
    line.and_then(|line| line.rsplit(' ').next()?.parse().ok()).unwrap_or_else(|| panic!("no {series} in {text}"))
}

/// A 503 that says which bound, with `Retry-After`.
async fn assert_refused(response: reqwest::Response, bound: &str) {
    assert_eq!(response.status(), 503);
    let retry: u64 = response.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(retry > 0);
    let body = json_of(response).await;
    assert_eq!(body["error"]["data"]["bound"], bound, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains(bound), "{body}");
}

/// A GET stream held open: it keeps its session in use.
async fn hold_get(http: &reqwest::Client, gateway: &Gateway, session: &str) -> reqwest::Response {
    let get = http.get(gateway.mcp()).header("accept", "text/event-stream").header("mcp-session-id", session).send().await.unwrap();
    assert_eq!(get.status(), 200);
    get
}

#[tokio::test]
async fn one_client_cannot_fill_the_session_table() {
    let flags = ["--max-sessions", "4", "--max-sessions-per-client", "2"];
    let gateway = Gateway::start("127.0.0.1:0", &flags, &[]).expect("the gateway starts");
    let (a, b, c) = (client_from(1), client_from(2), client_from(3));
    let list = request(1, "tools/list", json!({}));

    // At its bound, a client's own oldest idle session ends to make room.
    let first = open_session(&a, &gateway.mcp()).await;
    let second = open_session(&a, &gateway.mcp()).await;
    let third = open_session(&a, &gateway.mcp()).await;
    let ended = post(&a, &gateway.mcp(), &list).header("mcp-session-id", &first).send().await.unwrap();
    assert_eq!(ended.status(), 404, "the client's oldest idle session made room");
    // With both of its sessions in use, the client is refused; others are not.
    let _held = (hold_get(&a, &gateway, &second).await, hold_get(&a, &gateway, &third).await);
    assert_refused(post(&a, &gateway.mcp(), &initialize(LEGACY)).send().await.unwrap(), "sessions_per_client").await;
    let others = [open_session(&b, &gateway.mcp()).await, open_session(&b, &gateway.mcp()).await];
    for session in [&second, &third, &others[0], &others[1]] {
        let response = post(&a, &gateway.mcp(), &list).header("mcp-session-id", session).send().await.unwrap();
        assert_eq!(response.status(), 200, "no session of another client was ended");
    }
    // The table is full: a third client waits for room; nobody's session is taken.
    assert_refused(post(&c, &gateway.mcp(), &initialize(LEGACY)).send().await.unwrap(), "sessions").await;
    assert_eq!(metric(&c, &gateway, "mcpvisor_gateway_sessions").await, 4.0);
    assert_eq!(metric(&c, &gateway, r#"mcpvisor_gateway_refusals_total{bound="sessions_per_client"}"#).await, 1.0);
    assert_eq!(metric(&c, &gateway, r#"mcpvisor_gateway_refusals_total{bound="sessions"}"#).await, 1.0);
}

/// A 2026-07-28 POST of `method`.
fn modern(http: &reqwest::Client, gateway: &Gateway, id: u64, method: &str, mut params: Value) -> reqwest::RequestBuilder {
    params["_meta"] = modern_meta();
    post(http, &gateway.mcp(), &request(id, method, params)).header("mcp-protocol-version", MODERN).header("mcp-method", method)
}

/// A `subscriptions/listen` stream, open once acknowledged.
async fn listen(http: &reqwest::Client, gateway: &Gateway, id: u64) -> SseReader {
    let response =
        modern(http, gateway, id, "subscriptions/listen", json!({"notifications": {"toolsListChanged": true}})).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut events = SseReader::new(response);
    let ack = events.next().await.expect("the acknowledgement");
    assert_eq!(ack.data["method"], "notifications/subscriptions/acknowledged", "{:?}", ack.data);
    events
}

#[tokio::test]
async fn open_requests_and_listen_streams_are_bounded_per_client_and_in_total() {
    let flags = ["--max-requests", "5", "--max-requests-per-client", "3"];
    let gateway = Gateway::start("127.0.0.1:0", &flags, &[]).expect("the gateway starts");
    let (a, b) = (client_from(1), client_from(2));
    let mut held = Vec::new();
    for id in 0..3 {
        held.push(listen(&a, &gateway, id).await);
    }
    assert_refused(modern(&a, &gateway, 9, "tools/list", json!({})).send().await.unwrap(), "requests_per_client").await;
    for id in 3..5 {
        held.push(listen(&b, &gateway, id).await);
    }
    assert_refused(modern(&b, &gateway, 9, "tools/list", json!({})).send().await.unwrap(), "requests").await;
    assert_eq!(metric(&a, &gateway, "mcpvisor_gateway_requests_open").await, 5.0);
    assert_eq!(metric(&a, &gateway, "mcpvisor_gateway_listen_streams").await, 5.0);
    assert_eq!(metric(&a, &gateway, r#"mcpvisor_gateway_refusals_total{bound="requests_per_client"}"#).await, 1.0);

    // A stream the client closes gives its slot back.
    drop(held.remove(0));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let response = modern(&a, &gateway, 10, "tools/list", json!({})).send().await.unwrap();
        if response.status() == 200 {
            assert!(json_of(response).await["result"]["tools"].is_array());
            break;
        }
        assert_eq!(response.status(), 503);
        assert!(Instant::now() < deadline, "a closed listen stream never gave its slot back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(metric(&a, &gateway, "mcpvisor_gateway_listen_streams").await, 4.0);
}

/// Opens a session whose client declares sampling; its id.
async fn sampling_session(http: &reqwest::Client, gateway: &Gateway) -> String {
    let init = request(
        0,
        "initialize",
        json!({"protocolVersion": LEGACY, "capabilities": {"sampling": {}}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    let response = post(http, &gateway.mcp(), &init).send().await.unwrap();
    let id = response.headers()["mcp-session-id"].to_str().unwrap().to_string();
    assert!(json_of(response).await.get("result").is_some());
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(http, &gateway.mcp(), &initialized).header("mcp-session-id", &id).send().await.unwrap().status(), 202);
    id
}

/// A GET resuming after `last_event_id`.
async fn resume(http: &reqwest::Client, gateway: &Gateway, session: &str, last_event_id: &str) -> reqwest::Response {
    let get = http.get(gateway.mcp()).header("accept", "text/event-stream").header("mcp-session-id", session);
    get.header("last-event-id", last_event_id).send().await.unwrap()
}

const ANSWER: usize = 400 * 1024;

#[tokio::test]
async fn a_sessions_resumption_buffers_are_bounded_and_read_events_dropped() {
    let gateway = Gateway::start("127.0.0.1:0", &["--buffer-per-session", "1"], &[]).expect("the gateway starts");
    let http = client();
    let session = sampling_session(&http, &gateway).await;
    // Four calls whose 400 KiB answers nobody reads: each call's stream
    // carries the server's sampling request, then the client goes away
    // and answers it elsewhere.
    let mut first_ids = Vec::new();
    for round in 0..4u64 {
        let call = request(10 + round, "tools/call", json!({"name": "demo__sample", "arguments": {"prompt": "hello"}}));
        let response = post(&http, &gateway.mcp(), &call).header("mcp-session-id", &session).send().await.unwrap();
        let mut events = SseReader::new(response);
        let asked = events.next().await.expect("the sampling request");
        first_ids.push(asked.id.clone().expect("an event id"));
        drop(events);
        // The gateway notices the closed stream (as it does for stateless cancellation) before the answer exists.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let text = format!("{round}{}", "y".repeat(ANSWER));
        let result = json!({"role": "assistant", "content": {"type": "text", "text": text}, "model": "m"});
        let answer = json!({"jsonrpc": "2.0", "id": asked.data["id"], "result": result});
        assert_eq!(post(&http, &gateway.mcp(), &answer).header("mcp-session-id", &session).send().await.unwrap().status(), 202);
        let deadline = Instant::now() + Duration::from_secs(20);
        while json_of(http.get(format!("{}/healthz", gateway.base)).send().await.unwrap()).await["in_flight"] != 0 {
            assert!(Instant::now() < deadline, "call {round} never ended");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let kept = metric(&http, &gateway, "mcpvisor_gateway_buffered_bytes").await;
    assert!(kept <= 1024.0 * 1024.0, "the session keeps {kept} bytes, over its 1 MiB bound");
    assert!(kept >= 2.0 * ANSWER as f64, "the newest unread answers are kept: {kept} bytes");

    // The oldest answer was dropped to make room: its resumption says so.
    let refused = resume(&http, &gateway, &session, &first_ids[0]).await;
    assert_eq!(refused.status(), 404);
    let message = refused.text().await.unwrap();
    assert!(message.contains("dropped to keep the resumption buffers within their bounds"), "{message}");

    // The newest is resumable until read; once read, it is kept no more.
    let resumed = resume(&http, &gateway, &session, &first_ids[3]).await;
    assert_eq!(resumed.status(), 200);
    let mut events = SseReader::new(resumed);
    let answer = events.next().await.expect("the unread answer").data;
    assert_eq!(answer["id"], 13, "{answer}");
    assert!(answer["result"]["content"][0]["text"].as_str().unwrap().starts_with('3'), "the fourth call's answer");
    assert!(events.next().await.is_none(), "the stream ends with its answer");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let after = metric(&http, &gateway, "mcpvisor_gateway_buffered_bytes").await;
        if after <= kept - ANSWER as f64 {
            break;
        }
        assert!(Instant::now() < deadline, "the answer read is still kept: {after} bytes (before reading: {kept})");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let gone = resume(&http, &gateway, &session, &first_ids[3]).await;
    assert_eq!(gone.status(), 404, "a stream read to its end is not kept");
}
