//! `mcpvisor serve --http` as a real process on loopback, in front of the
//! demo server: both eras of Streamable HTTP, sessions (404, DELETE,
//! re-initialize), SSE answers and their resumption with `Last-Event-ID`,
//! legacy HTTP+SSE, the Origin/Host/token guard, the body limit, many
//! clients at once, and SIGTERM draining a call in flight.

use crate::gateway_http_support;

use crate::gateway_http_support::{
    assert_all_gone, children_of, client, initialize, json_of, modern_meta, open_session, post, request, Gateway, Sse, SseReader, LEGACY,
    MODERN,
};
use futures::StreamExt;
use serde_json::{json, Value};

#[tokio::test]
async fn an_initialize_era_session_answers_with_json_and_with_sse() {
    let gateway = Gateway::loopback();
    let http = client();
    let session = open_session(&http, &gateway.mcp()).await;
    let call = request(1, "tools/call", json!({"name": "demo__echo", "arguments": {"text": "hi"}}));
    let response = post(&http, &gateway.mcp(), &call).header("mcp-session-id", &session).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
    let answer = json_of(response).await;
    assert_eq!(answer["result"]["content"][0]["text"], "hi", "{answer}");
    let metrics = http.get(format!("{}/metrics", gateway.base)).send().await.unwrap();
    assert_eq!(metrics.status(), 200);
    let metrics = metrics.text().await.unwrap();
    let counted = r#"mcpvisor_tool_calls_total{server="demo",tool="echo",outcome="ok"} 1"#;
    assert!(metrics.lines().any(|line| line == counted), "/metrics counts the call: {metrics}");

    // Progress comes first, so the answer is an SSE stream with event ids.
    let call =
        request(2, "tools/call", json!({"name": "demo__progress", "arguments": {"steps": 3, "ms": 1}, "_meta": {"progressToken": "p"}}));
    let response = post(&http, &gateway.mcp(), &call).header("mcp-session-id", &session).send().await.unwrap();
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let mut events = SseReader::new(response);
    let mut progress = 0;
    let answer = loop {
        let event = events.next().await.expect("the stream carries the answer");
        assert!(event.id.is_some(), "every event has an id: {event:?}");
        match event.data["method"].as_str() {
            Some("notifications/progress") => progress += 1,
            _ => break event.data,
        }
    };
    assert_eq!(progress, 3);
    assert_eq!(answer["id"], 2);
    assert!(answer["result"].is_object(), "{answer}");
    assert!(events.next().await.is_none(), "the stream ends after its answer");
}

#[tokio::test]
async fn an_unknown_or_deleted_session_is_404_and_the_client_initializes_again() {
    let gateway = Gateway::loopback();
    let http = client();
    let list = request(1, "tools/list", json!({}));
    let response = post(&http, &gateway.mcp(), &list).header("mcp-session-id", "no-such-session").send().await.unwrap();
    assert_eq!(response.status(), 404);
    let response = post(&http, &gateway.mcp(), &list).send().await.unwrap();
    assert_eq!(response.status(), 400, "a legacy request without a session");

    let session = open_session(&http, &gateway.mcp()).await;
    let response = post(&http, &gateway.mcp(), &list).header("mcp-session-id", &session).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let deleted = http.delete(gateway.mcp()).header("mcp-session-id", &session).send().await.unwrap();
    assert!(deleted.status().is_success());
    let response = post(&http, &gateway.mcp(), &list).header("mcp-session-id", &session).send().await.unwrap();
    assert_eq!(response.status(), 404);
    let again = open_session(&http, &gateway.mcp()).await;
    assert_ne!(again, session);
    let response = post(&http, &gateway.mcp(), &list).header("mcp-session-id", &again).send().await.unwrap();
    let tools = json_of(response).await;
    assert!(tools["result"]["tools"].as_array().unwrap().iter().any(|tool| tool["name"] == "demo__echo"), "{tools}");

    let response = post(&http, &gateway.mcp(), &list)
        .header("mcp-session-id", &again)
        .header("mcp-protocol-version", "1999-01-01")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400, "an unsupported MCP-Protocol-Version");
}

/// Calls `demo__progress` for `steps` steps of 50 ms: its SSE stream, and its first event (a progress notification).
async fn progress_call(http: &reqwest::Client, gateway: &Gateway, session: &str, id: u64, steps: u64) -> (SseReader, Sse) {
    let arguments = json!({"steps": steps, "ms": 50});
    let call = request(id, "tools/call", json!({"name": "demo__progress", "arguments": arguments, "_meta": {"progressToken": id}}));
    let response = post(http, &gateway.mcp(), &call).header("mcp-session-id", session).send().await.unwrap();
    let mut events = SseReader::new(response);
    let first = events.next().await.expect("a first event");
    assert_eq!(first.data["method"], "notifications/progress");
    (events, first)
}

#[tokio::test]
async fn a_dropped_stream_resumes_from_last_event_id() {
    let gateway = Gateway::loopback();
    let http = client();
    let session = open_session(&http, &gateway.mcp()).await;
    let (events, first) = progress_call(&http, &gateway, &session, 7, 4).await;
    drop(events);

    let resumed = http
        .get(gateway.mcp())
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("last-event-id", first.id.clone().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let mut events = SseReader::new(resumed);
    let mut progress = vec![first.data["params"]["progress"].as_f64()];
    loop {
        let event = events.next().await.expect("the resumed stream carries the answer");
        if event.data["id"] == 7 {
            assert!(event.data["result"].is_object(), "{:?}", event.data);
            break;
        }
        progress.push(event.data["params"]["progress"].as_f64());
    }
    let expected: Vec<Option<f64>> = (1..=4).map(|n| Some(f64::from(n))).collect();
    assert_eq!(progress, expected, "no event lost or repeated across the resumption");
}

#[tokio::test]
async fn the_stateless_era_checks_its_headers() {
    let gateway = Gateway::loopback();
    let http = client();
    let call = request(1, "tools/call", json!({"name": "demo__echo", "arguments": {"text": "modern"}, "_meta": modern_meta()}));
    let headers = |builder: reqwest::RequestBuilder, name: &str| {
        builder.header("mcp-protocol-version", MODERN).header("mcp-method", "tools/call").header("mcp-name", name)
    };
    let response = headers(post(&http, &gateway.mcp(), &call), "demo__echo").send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("mcp-session-id").is_none(), "no session in the stateless era");
    let answer = json_of(response).await;
    assert_eq!(answer["result"]["content"][0]["text"], "modern", "{answer}");

    let response = headers(post(&http, &gateway.mcp(), &call), "demo__other").send().await.unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(json_of(response).await["error"]["code"], -32020);
    let response = post(&http, &gateway.mcp(), &call).header("mcp-protocol-version", MODERN).send().await.unwrap();
    assert_eq!(json_of(response).await["error"]["code"], -32020, "Mcp-Method is required");
    let bare = request(2, "tools/list", json!({}));
    let response =
        post(&http, &gateway.mcp(), &bare).header("mcp-protocol-version", MODERN).header("mcp-method", "tools/list").send().await.unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(json_of(response).await["error"]["code"], -32602, "a request without _meta");
    let get = http.get(gateway.mcp()).header("accept", "text/event-stream").send().await.unwrap();
    assert_eq!(get.status(), 405, "no GET stream without a session");
    for removed in ["ping", "initialize"] {
        let request = request(3, removed, json!({"_meta": modern_meta()}));
        let response = post(&http, &gateway.mcp(), &request)
            .header("mcp-protocol-version", MODERN)
            .header("mcp-method", removed)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404, "{removed} is not part of the 2026-07-28 era");
        assert_eq!(json_of(response).await["error"]["code"], -32601);
    }
}

#[tokio::test]
async fn legacy_sse_clients_get_an_endpoint_and_their_answers_on_the_stream() {
    let gateway = Gateway::loopback();
    let http = client();
    let stream = http.get(format!("{}/sse", gateway.base)).header("accept", "text/event-stream").send().await.unwrap();
    assert_eq!(stream.status(), 200);
    let mut events = SseReader::new(stream);
    let endpoint = events.next().await.expect("the endpoint event");
    assert_eq!(endpoint.event.as_deref(), Some("endpoint"));
    let path = endpoint.data.as_str().expect("a URL").to_string();
    assert!(path.starts_with("/message?sessionId="), "{path}");
    let url = format!("{}{path}", gateway.base);
    let response = post(&http, &url, &initialize("2024-11-05")).send().await.unwrap();
    assert_eq!(response.status(), 202);
    let answer = events.next().await.expect("the answer on the stream");
    assert_eq!(answer.event.as_deref(), Some("message"));
    assert_eq!(answer.data["result"]["protocolVersion"], "2024-11-05", "{:?}", answer.data);
    let call = request(1, "tools/call", json!({"name": "demo__echo", "arguments": {"text": "old"}}));
    assert_eq!(post(&http, &url, &call).send().await.unwrap().status(), 202);
    let answer = events.next().await.expect("the call's answer");
    assert_eq!(answer.data["result"]["content"][0]["text"], "old");
}

#[tokio::test]
async fn foreign_origins_and_hosts_are_refused() {
    let gateway = Gateway::loopback();
    let http = client();
    let body = initialize(LEGACY);
    let response = post(&http, &gateway.mcp(), &body).header("origin", "http://evil.example.com").send().await.unwrap();
    assert_eq!(response.status(), 403);
    let response = post(&http, &gateway.mcp(), &body).header("host", "evil.example.com").send().await.unwrap();
    assert_eq!(response.status(), 403, "a rebound DNS name");
    let port = gateway.base.rsplit(':').next().unwrap();
    let response = post(&http, &gateway.mcp(), &body).header("origin", format!("http://localhost:{port}")).send().await.unwrap();
    assert_eq!(response.status(), 200, "a loopback origin");
}

#[tokio::test]
async fn a_non_loopback_bind_needs_a_token_and_checks_it() {
    let refused = Gateway::start("0.0.0.0:0", &[], &[]).err().expect("no token, no start");
    assert!(refused.contains("MCPVISOR_SERVE_TOKEN"), "{refused}");

    let gateway = Gateway::start("0.0.0.0:0", &[], &[("MCPVISOR_SERVE_TOKEN", "s3cret-token-0123")]).expect("starts with a token");
    let port = gateway.base.rsplit(':').next().unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let http = client();
    let body = initialize(LEGACY);
    let response = post(&http, &url, &body).send().await.unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    let response = post(&http, &url, &body).bearer_auth("wrong-token!").send().await.unwrap();
    assert_eq!(response.status(), 401);
    let response = post(&http, &url, &body).bearer_auth("s3cret-token-0123").send().await.unwrap();
    assert_eq!(response.status(), 200);
    let health = http.get(format!("http://127.0.0.1:{port}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200, "probes need no token");
    assert_eq!(json_of(health).await["status"], "serving");
}

#[tokio::test]
async fn an_oversized_body_is_refused() {
    let gateway = Gateway::loopback();
    let http = client();
    let text = "x".repeat(17 * 1024 * 1024);
    let call = request(1, "tools/call", json!({"name": "demo__echo", "arguments": {"text": text}}));
    let response = post(&http, &gateway.mcp(), &call).send().await.unwrap();
    assert_eq!(response.status(), 413);
}

#[tokio::test]
async fn a_post_that_is_not_json_is_refused_with_415() {
    let gateway = Gateway::loopback();
    let http = client();
    let body = initialize(LEGACY).to_string();
    for content_type in [None, Some("text/plain"), Some("application/x-www-form-urlencoded")] {
        let mut request = http.post(gateway.mcp()).header("accept", "application/json, text/event-stream").body(body.clone());
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 415, "{content_type:?}");
        let answer = json_of(response).await;
        assert!(answer["error"]["message"].as_str().unwrap().contains("Content-Type: application/json"), "{answer}");
    }
    let with_charset = http
        .post(gateway.mcp())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "Application/JSON; charset=utf-8")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(with_charset.status(), 200, "parameters and case do not matter");
}

#[tokio::test]
async fn without_the_systems_random_generator_no_session_opens() {
    // The `fault-injection` build makes the generator fail; a session id is
    // a capability, so the gateway refuses rather than make a weak one.
    let gateway = Gateway::start("127.0.0.1:0", &[], &[("MCPVISOR_FAULT_NO_RANDOM", "1")]).expect("the gateway starts");
    let response = post(&client(), &gateway.mcp(), &initialize(LEGACY)).send().await.unwrap();
    assert_eq!(response.status(), 503);
    assert!(response.headers().get("mcp-session-id").is_none());
    let answer = json_of(response).await;
    assert!(answer["error"]["message"].as_str().unwrap().contains("random generator failed"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_clients_at_once() {
    let gateway = Gateway::loopback();
    let url = gateway.mcp();
    let clients = (0..100).map(|n| {
        let url = url.clone();
        tokio::spawn(async move {
            // From four addresses: one address holds at most 64 sessions (issue 19).
            let http = gateway_http_support::client_from(1 + n % 4);
            let session = open_session(&http, &url).await;
            let call = request(1, "tools/call", json!({"name": "demo__echo", "arguments": {"text": format!("client {n}")}}));
            let response = post(&http, &url, &call).header("mcp-session-id", &session).send().await.unwrap();
            json_of(response).await["result"]["content"][0]["text"].as_str().map(str::to_owned)
        })
    });
    let answers = futures::future::join_all(clients).await;
    for (n, answer) in answers.into_iter().enumerate() {
        assert_eq!(answer.unwrap().as_deref(), Some(format!("client {n}").as_str()), "no answer reached the wrong client");
    }
}

#[tokio::test]
async fn sigterm_drains_the_call_in_flight() {
    let gateway = Gateway::loopback();
    let http = client();
    let session = open_session(&http, &gateway.mcp()).await;
    let (mut events, _) = progress_call(&http, &gateway, &session, 1, 20).await;
    let servers = children_of(gateway.child.id());
    assert!(!servers.is_empty(), "the demo server runs as a child of the gateway");
    gateway.terminate();
    // The call finishes although the gateway is stopping.
    let answer = events.answer_to(1).await;
    assert!(answer["result"].is_object(), "{answer}");
    let mut gateway = gateway;
    let (status, gateway) = tokio::task::spawn_blocking(move || (gateway.child.wait().unwrap(), gateway)).await.unwrap();
    assert_eq!(status.code(), Some(0), "the gateway exits cleanly after draining: {}", gateway.stderr.lock().unwrap());
    assert_all_gone(&servers);
}

#[tokio::test]
async fn a_client_that_stops_reading_leaves_a_bounded_stream() {
    let gateway = Gateway::loopback();
    let http = client();
    let session = open_session(&http, &gateway.mcp()).await;
    let steps = 3000;
    let call =
        request(9, "tools/call", json!({"name": "demo__progress", "arguments": {"steps": steps, "ms": 0}, "_meta": {"progressToken": 9}}));
    // The stream's first event is read, then no more.
    let stalled = post(&http, &gateway.mcp(), &call).header("mcp-session-id", &session).send().await.unwrap();
    assert!(stalled.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let mut stalled = SseReader::new(stalled);
    let first = stalled.next().await.expect("a first event").id.expect("an id");
    let stream: u64 = first.split(':').next().unwrap().parse().unwrap();

    // Other requests are served meanwhile.
    let echo = request(10, "tools/call", json!({"name": "demo__echo", "arguments": {"text": "still here"}}));
    let response = post(&http, &gateway.mcp(), &echo).header("mcp-session-id", &session).send().await.unwrap();
    assert_eq!(json_of(response).await["result"]["content"][0]["text"], "still here");

    // The call ends although its client reads nothing: the gateway holds no request in flight.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let health = json_of(http.get(format!("{}/healthz", gateway.base)).send().await.unwrap()).await;
        if health["in_flight"] == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the call never ended: {health}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // Resuming from the stream's start gives what the bounded buffer kept: the newest events, the answer last.
    let resumed = http
        .get(gateway.mcp())
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("last-event-id", format!("{stream}:0"))
        .send()
        .await
        .unwrap();
    if resumed.status() == 404 {
        // The whole stream, answer included, fit in the sockets' buffers, so the
        // gateway kept none of it (issue 19: what was delivered is not kept): the
        // stalled client still has it all to read.
        let mut read = 1;
        while let Some(event) = stalled.next().await {
            read += 1;
            if event.data["id"] == 9 {
                assert!(read <= steps + 1, "{read} events");
                return;
            }
        }
        panic!("the stalled stream ended without its answer after {read} events");
    }
    let mut events = SseReader::new(resumed);
    let mut kept = 0;
    let first_seq = loop {
        let event = events.next().await.expect("the answer comes");
        kept += 1;
        if kept == 1 {
            break event.id.unwrap().split(':').nth(1).unwrap().parse::<u64>().unwrap();
        }
    };
    loop {
        let event = events.next().await.expect("the answer comes");
        kept += 1;
        if event.data["id"] == 9 {
            break;
        }
    }
    assert!(kept <= 256, "the stream kept {kept} events");
    assert!(first_seq > 1, "the oldest events were dropped, not kept for a reader that does not read (first kept: {first_seq})");
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcpvisors_own_client_connects_in_every_era_and_transport() {
    use mcpvisor::config::{Era, RuntimeConfig, ServerConfig, Transport};
    let gateway = Gateway::loopback();
    let remote = |name: &str, transport: Transport, url: String, era: Era| {
        let mut config = ServerConfig::remote(name, transport, url);
        config.era = era;
        config
    };
    let handle = mcpvisor::Runtime::start(RuntimeConfig::new([
        remote("legacy", Transport::Http, gateway.mcp(), Era::Legacy),
        remote("modern", Transport::Http, gateway.mcp(), Era::Modern),
        remote("sse", Transport::Sse, format!("{}/sse", gateway.base), Era::Auto),
    ]))
    .expect("a runtime");
    for server in ["legacy", "modern", "sse"] {
        let result = handle.call_tool(&format!("mcp__{server}__demo__echo"), json!({"text": server})).await;
        let result = result.unwrap_or_else(|e| panic!("{server}: {e}"));
        assert_eq!(result.content[0].as_text().map(|text| text.text.as_str()), Some(server));
    }
    handle.shutdown().await;
}

#[tokio::test]
async fn sessions_are_limited_and_idle_ones_expire() {
    let gateway = Gateway::start("127.0.0.1:0", &["--max-sessions", "2", "--session-idle", "0.3"], &[]).expect("the gateway starts");
    let http = client();
    let first = open_session(&http, &gateway.mcp()).await;
    let _second = open_session(&http, &gateway.mcp()).await;
    let refused = post(&http, &gateway.mcp(), &initialize(LEGACY)).send().await.unwrap();
    assert_eq!(refused.status(), 503, "a third session is refused while two are in use");

    // Once the two are idle past the limit they end, and a new session fits.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let response = post(&http, &gateway.mcp(), &initialize(LEGACY)).send().await.unwrap();
        if response.status() == 200 {
            break;
        }
        assert_eq!(response.status(), 503);
        assert!(std::time::Instant::now() < deadline, "idle sessions never expired");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let list = request(1, "tools/list", json!({}));
    let expired = post(&http, &gateway.mcp(), &list).header("mcp-session-id", &first).send().await.unwrap();
    assert_eq!(expired.status(), 404, "an expired session's id is unknown");
}

#[tokio::test]
async fn the_get_stream_carries_list_changes_and_is_one_per_session() {
    let gateway = Gateway::loopback();
    let http = client();
    let session = open_session(&http, &gateway.mcp()).await;
    let get = || http.get(gateway.mcp()).header("accept", "text/event-stream").header("mcp-session-id", &session).send();
    let stream = get().await.unwrap();
    assert_eq!(stream.status(), 200);
    assert_eq!(get().await.unwrap().status(), 409, "a second GET stream of the same session");
    let mut events = SseReader::new(stream);
    let call = request(1, "tools/call", json!({"name": "demo__add_tool", "arguments": {"name": "fresh"}}));
    let response = post(&http, &gateway.mcp(), &call).header("mcp-session-id", &session).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let changed = events.next().await.expect("a notification on the GET stream");
    assert_eq!(changed.data["method"], "notifications/tools/list_changed", "{:?}", changed.data);
    assert!(changed.id.is_some_and(|id| id.starts_with("0:")), "the GET stream is stream 0");
}

#[tokio::test]
async fn closing_a_stateless_stream_cancels_the_call_upstream() {
    let gateway = Gateway::loopback();
    let http = client();
    let modern_call = |id: u64, tool: &str, arguments: serde_json::Value| {
        let mut meta = modern_meta();
        meta["progressToken"] = json!(id);
        let body = request(id, "tools/call", json!({"name": tool, "arguments": arguments, "_meta": meta}));
        post(&http, &gateway.mcp(), &body)
            .header("mcp-protocol-version", MODERN)
            .header("mcp-method", "tools/call")
            .header("mcp-name", tool)
            .send()
    };
    let response = modern_call(1, "demo__progress", json!({"steps": 1000, "ms": 50})).await.unwrap();
    let mut events = SseReader::new(response);
    assert_eq!(events.next().await.expect("progress").data["method"], "notifications/progress");
    drop(events);

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let report = json_of(modern_call(2, "demo__cancellations", json!({})).await.unwrap()).await;
        let cancellations = &report["result"]["structuredContent"]["cancellations"];
        if cancellations.as_array().is_some_and(|list| !list.is_empty()) || cancellations.as_u64().is_some_and(|n| n > 0) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the upstream call was never cancelled: {report}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The gateway's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
}

/// Each stateless request is served by a session of its own: one that
/// never listens must not subscribe to the pool's events, and what a
/// subscription leaves when its reader goes away must go too. (Each
/// forgotten subscription kept a 1,024-event buffer: 2,000 requests grew
/// the gateway by hundreds of MB.)
#[tokio::test]
async fn stateless_requests_leave_nothing_behind() {
    const REQUESTS: u64 = 2_000;
    let gateway = Gateway::loopback();
    let http = client();
    let call = |id: u64| {
        let body = request(id, "tools/call", json!({"name": "demo__echo", "arguments": {"text": format!("{id}")}, "_meta": modern_meta()}));
        post(&http, &gateway.mcp(), &body)
            .header("mcp-protocol-version", MODERN)
            .header("mcp-method", "tools/call")
            .header("mcp-name", "demo__echo")
    };
    // Warm-up: the pool's tables, the HTTP connections, the allocator.
    for id in 0..50 {
        assert_eq!(json_of(call(id).send().await.unwrap()).await["result"]["content"][0]["text"], format!("{id}"));
    }
    let before = rss_kib(gateway.child.id());
    let answers: Vec<Value> = futures::stream::iter(100..100 + REQUESTS)
        .map(|id| {
            let request = call(id);
            async move { json_of(request.send().await.unwrap()).await }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    assert!(answers.iter().all(|answer| answer["result"]["content"][0]["text"].is_string()), "every request is answered");
    let growth = rss_kib(gateway.child.id()).saturating_sub(before);
    assert!(growth < 32 * 1024, "{REQUESTS} stateless requests grew the gateway by {growth} KiB");
}

/// After SIGTERM the front drains: `/healthz` answers 503 `draining` (a
/// load balancer's probe must get an answer, not a refused connection), a
/// new session is refused with 503 and `Retry-After`, and the call in flight
/// still ends with its answer.
#[tokio::test]
async fn healthz_answers_503_while_draining() {
    let gateway = Gateway::loopback();
    let http = client();
    let session = open_session(&http, &gateway.mcp()).await;
    let (mut events, _) = progress_call(&http, &gateway, &session, 1, 200).await;
    gateway.terminate();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(8);
    let health = loop {
        let response = http.get(format!("{}/healthz", gateway.base)).send().await;
        let response = response.unwrap_or_else(|error| panic!("/healthz must answer while draining, not refuse: {error:?}"));
        if response.status() == 503 {
            break json_of(response).await;
        }
        assert!(std::time::Instant::now() < deadline, "/healthz still answers {} after SIGTERM", response.status());
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    assert_eq!(health["status"], "draining", "{health}");
    let refused = post(&http, &gateway.mcp(), &initialize(LEGACY)).send().await.unwrap();
    assert_eq!(refused.status(), 503, "no new session while draining");
    assert!(refused.headers().contains_key("retry-after"));
    let answer = events.answer_to(1).await;
    assert!(answer["result"].is_object(), "the call in flight ends with its answer: {answer}");
    let mut gateway = gateway;
    let (status, gateway) = tokio::task::spawn_blocking(move || (gateway.child.wait().unwrap(), gateway)).await.unwrap();
    assert_eq!(status.code(), Some(0), "the gateway exits cleanly after draining: {}", gateway.stderr.lock().unwrap());
}
