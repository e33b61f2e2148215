//! Remote servers over HTTP, against a server on loopback that the tests
//! control: both eras of Streamable HTTP, HTTP+SSE directly and by
//! fallback, static credentials, and the faults of a network server (killed
//! mid-call, sessions expiring, answer streams breaking, answers too large).

use std::time::{Duration, Instant};

use crate::common::*;
use crate::http_fixture::{Fixture, Flavour};
use mcpvisor::config::{Auth, ServerConfig, Transport};
use mcpvisor::{CallError, CallTool, Handle, ServerState};
use serde_json::json;

fn remote(name: &str, fixture: &Fixture) -> ServerConfig {
    ServerConfig::remote(name, Transport::Http, fixture.url())
}

/// Polls `done` until it holds (bounded: 20 s); `what` names it in the failure.
async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "{what} did not happen within 20 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the fixture has seen `count` POSTs of `method`.
async fn wait_posted(fixture: &Fixture, method: &str, count: usize) {
    let posted = || fixture.knobs().methods.iter().filter(|m| *m == method).count() >= count;
    wait_until(&format!("{count} POSTs of {method}"), posted).await;
}

/// Calls the fixture's tool that never answers, with a short time-out.
async fn call_timing_out(handle: &Handle) {
    let timed_out = handle.call(CallTool::new("mcp__web__wait", json!({})).with_timeout(Duration::from_millis(300))).await;
    assert!(matches!(timed_out, Err(CallError::Timeout { .. })), "{timed_out:?}");
}

async fn echo(handle: &Handle, server: &str, text: &str) -> Result<String, CallError> {
    handle.call_tool(&format!("mcp__{server}__echo"), json!({"text": text})).await.map(|result| text_of(&result))
}

fn text_of(result: &mcpvisor::CallToolResult) -> String {
    text(result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_round_trips_with_its_session_and_deletes_it_at_the_end() {
    let fixture = Fixture::start(Flavour::Json);
    let handle = start(vec![remote("web", &fixture)]).await;
    assert_eq!(echo(&handle, "web", "hello").await.unwrap(), "hello");
    let status = status_of(&handle, "web").await;
    assert_eq!((status.state.clone(), status.era.as_deref(), status.pid), (ServerState::Connected, Some("legacy"), None));
    assert_eq!(status.protocol_version.as_deref(), Some("2025-06-18"));
    {
        let knobs = fixture.knobs();
        let after_initialize = knobs.methods.iter().position(|m| m == "initialize").expect("initialize was POSTed") + 1;
        for headers in &knobs.posts[after_initialize..] {
            assert_eq!(headers.get("mcp-session-id").and_then(|v| v.to_str().ok()), Some("session-1"), "{headers:?}");
            assert_eq!(headers.get("mcp-protocol-version").and_then(|v| v.to_str().ok()), Some("2025-06-18"), "{headers:?}");
        }
        let accept = knobs.posts[0].get("accept").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        assert!(accept.contains("application/json") && accept.contains("text/event-stream"), "{accept}");
    }
    handle.shutdown().await;
    assert_eq!(fixture.knobs().deletes, 1, "the session is deleted on shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_as_event_streams_are_read_and_a_broken_stream_is_resumed() {
    let fixture = Fixture::start(Flavour::Events);
    let handle = start(vec![remote("web", &fixture)]).await;
    assert_eq!(echo(&handle, "web", "streamed").await.unwrap(), "streamed");
    let resumed = handle.call_tool("mcp__web__flaky", json!({"text": "after the break"})).await.unwrap();
    assert_eq!(text(&resumed), "after the break", "the answer came on the resumed stream");
    let tail = status_of(&handle, "web").await.stderr_tail.join("\n");
    assert!(tail.contains("resuming after event ev-1"), "{tail}");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_with_carriage_return_line_ends_are_read() {
    let fixture = Fixture::start(Flavour::Events);
    fixture.knobs().line_end = "\r";
    let handle = start(vec![remote("web", &fixture)]).await;
    let call = CallTool::new("mcp__web__echo", json!({"text": "cr only"})).with_timeout(Duration::from_secs(20));
    assert_eq!(text(&handle.call(call).await.unwrap()), "cr only", "an SSE spec line end delivers the answer");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_event_in_small_pieces_is_read_in_one_pass() {
    // 12 MiB in 1 KiB pieces: a decoder that re-scans what it holds at each
    // piece visits about 75 G bytes and misses the 30 s time-out by far; one
    // that reads each byte once answers in well under a second of parsing.
    let fixture = Fixture::start(Flavour::Events);
    fixture.knobs().chunk = Some(1024);
    let handle = start(vec![remote("web", &fixture)]).await;
    let call = CallTool::new("mcp__web__big", json!({"size": 12 << 20})).with_timeout(Duration::from_secs(30));
    assert_eq!(text(&handle.call(call).await.unwrap()).len(), 12 << 20);
    assert_eq!(echo(&handle, "web", "next").await.unwrap(), "next");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_session_is_replaced_without_failing_the_next_call() {
    let fixture = Fixture::start(Flavour::Json);
    let handle = start(vec![remote("web", &fixture)]).await;
    assert_eq!(echo(&handle, "web", "one").await.unwrap(), "one");
    fixture.expire_sessions();
    assert_eq!(echo(&handle, "web", "two").await.unwrap(), "two", "the refused call was sent again in a new session");
    assert_eq!(fixture.knobs().initializes, 2);
    let status = status_of(&handle, "web").await;
    assert_eq!((status.state.clone(), status.restarts), (ServerState::Connected, 0), "no restart: {status:?}");
    assert!(status.stderr_tail.iter().any(|l| l.contains("a new session was opened")), "{:?}", status.stderr_tail);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_call_fails_the_call_and_is_reconnected_when_it_is_back() {
    let mut fixture = Fixture::start(Flavour::Json);
    let handle = start(vec![remote("web", &fixture)]).await;
    let pending = {
        let handle = handle.clone();
        tokio::spawn(async move { handle.call_tool("mcp__web__wait", json!({})).await })
    };
    wait_posted(&fixture, "tools/call", 1).await;
    fixture.kill();
    let failed = pending.await.unwrap();
    let Err(CallError::Transport { server, tool, message, cause }) = &failed else { panic!("expected a transport error, got {failed:?}") };
    let http = cause.as_ref().and_then(|cause| cause.downcast_ref::<reqwest::Error>());
    assert!(http.is_some_and(|error| error.is_connect() || error.is_request()), "the HTTP client's error is kept: {cause:?}");
    assert_eq!((server.as_str(), tool.as_str()), ("web", "wait"));
    assert!(message.contains(&format!("POST {} failed", fixture.url())), "it says what broke: {message}");
    assert!(message.contains("not resent"), "{message}");
    fixture.restart();
    wait_connected_with_restarts(&handle, "web", 1).await;
    assert_eq!(echo(&handle, "web", "back").await.unwrap(), "back");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_over_max_frame_fails_its_call_clearly_and_the_server_goes_on() {
    for flavour in [Flavour::Json, Flavour::Events] {
        let fixture = Fixture::start(flavour);
        let mut config = remote("web", &fixture);
        config.limits.max_frame = 4096;
        let handle = start(vec![config]).await;
        let refused = handle.call_tool("mcp__web__big", json!({"size": 20_000})).await;
        let Err(CallError::Rpc { message, .. }) = &refused else { panic!("{flavour:?}: expected an error answer, got {refused:?}") };
        assert!(message.contains("max_frame of 4096 bytes"), "{flavour:?}: {message}");
        assert_eq!(echo(&handle, "web", "still here").await.unwrap(), "still here", "{flavour:?}");
        handle.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_call_is_cancelled_on_the_server() {
    let fixture = Fixture::start(Flavour::Events);
    let handle = start(vec![remote("web", &fixture)]).await;
    call_timing_out(&handle).await;
    wait_posted(&fixture, "notifications/cancelled", 1).await;
    assert_eq!(echo(&handle, "web", "next").await.unwrap(), "next");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_static_credentials_make_the_server_need_auth_without_restarting() {
    let fixture = Fixture::start(Flavour::Json);
    fixture.knobs().token = Some("Bearer right".into());
    let mut wrong = remote("refused", &fixture);
    wrong.auth = Some(Auth::Bearer { token: "s3cret-but-wrong".into() });
    let mut right = remote("right", &fixture);
    right.auth = Some(Auth::Bearer { token: "right".into() });
    let handle = start(vec![wrong, right]).await;
    let status = status_of(&handle, "refused").await;
    assert_eq!((status.state.clone(), status.restarts), (ServerState::NeedsAuth, 0), "{status:?}");
    let why = status.last_error.unwrap_or_default();
    assert!(why.contains("HTTP 401") && why.contains("auth"), "{why}");
    assert!(!why.contains("s3cret"), "no secret in the message: {why}");
    let refused = handle.call_on("refused", CallTool::new("echo", json!({"text": "x"}))).await;
    assert!(matches!(&refused, Err(CallError::NeedsAuth { server, .. }) if server == "refused"), "{refused:?}");
    assert_eq!(echo(&handle, "right", "in").await.unwrap(), "in", "the right token gets through");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_sse_servers_are_reached_directly_and_by_fallback() {
    let fixture = Fixture::start(Flavour::LegacySse);
    let direct = ServerConfig::remote("direct", Transport::Sse, fixture.url());
    let fallback = remote("fallback", &fixture);
    let handle = start(vec![direct, fallback]).await;
    assert_eq!(echo(&handle, "direct", "over sse").await.unwrap(), "over sse");
    assert_eq!(echo(&handle, "fallback", "found sse").await.unwrap(), "found sse");
    for server in ["direct", "fallback"] {
        let status = status_of(&handle, server).await;
        assert_eq!(status.protocol_version.as_deref(), Some("2024-11-05"), "{server}");
    }
    let tail = status_of(&handle, "fallback").await.stderr_tail.join("\n");
    assert!(tail.contains("serves HTTP+SSE; using that"), "{tail}");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stateless_era_mirrors_headers_and_leaves_out_misannotated_tools() {
    let fixture = Fixture::start(Flavour::Stateless);
    let handle = start(vec![remote("web", &fixture)]).await;
    let status = status_of(&handle, "web").await;
    assert_eq!((status.state.clone(), status.era.as_deref()), (ServerState::Connected, Some("modern")), "{status:?}");
    let result = handle.call_tool("mcp__web__region", json!({"region": "eu-west1"})).await.unwrap();
    assert_eq!(text(&result), "header eu-west1");
    let names: Vec<String> = handle.list_tools().await.into_iter().map(|t| t.name).collect();
    assert!(names.contains(&"mcp__web__region".to_string()) && !names.iter().any(|n| n.contains("misannotated")), "{names:?}");
    wait_status(&handle, "web", |s| s.stderr_tail.iter().any(|l| l.contains("`misannotated` was left out"))).await;
    {
        let knobs = fixture.knobs();
        assert!(knobs.posts.iter().all(|h| h.get("mcp-session-id").is_none()), "no sessions in this era");
        let call = knobs.methods.iter().position(|m| m == "tools/call").unwrap();
        assert_eq!(knobs.posts[call].get("mcp-name").and_then(|v| v.to_str().ok()), Some("region"));
        assert_eq!(knobs.posts[call].get("mcp-protocol-version").and_then(|v| v.to_str().ok()), Some("2026-07-28"));
    }
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_server_failing_leaves_a_stdio_server_beside_it_alone() {
    let mut fixture = Fixture::start(Flavour::Json);
    let handle = start(vec![remote("web", &fixture), demo("local", &[])]).await;
    fixture.kill();
    let lost = echo(&handle, "web", "gone").await;
    let broke = format!("POST {} failed", fixture.url());
    assert!(matches!(&lost, Err(CallError::Transport { message, .. }) if message.contains(&broke)), "{lost:?}");
    let local = handle.call_tool("mcp__local__echo", json!({"text": "fine"})).await.unwrap();
    assert_eq!(text(&local), "fine");
    assert_eq!(status_of(&handle, "local").await.restarts, 0);
    fixture.restart();
    wait_connected_with_restarts(&handle, "web", 1).await;
    assert_eq!(echo(&handle, "web", "again").await.unwrap(), "again");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_server_too_busy_to_discover_is_retried_not_failed_as_a_wrong_era() {
    let fixture = Fixture::start(Flavour::Stateless);
    fixture.knobs().discover_busy = 2;
    let mut config = remote("web", &fixture);
    config.era = mcpvisor::config::Era::Modern;
    let handle = start(vec![config]).await;
    // Two busy refusals, then the restart policy's next try connects (backoff 100 ms doubling).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = status_of(&handle, "web").await;
        match status.state {
            ServerState::Connected => break,
            ServerState::Failed { .. } => panic!("a busy refusal is not a wrong era: {status:?}"),
            _ => assert!(Instant::now() < deadline, "not connected within 20 s: {status:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(echo(&handle, "web", "after busy").await.unwrap(), "after busy");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_the_stateless_era_a_cancelled_call_closes_its_stream_and_sends_nothing() {
    let fixture = Fixture::start(Flavour::Stateless);
    let handle = start(vec![remote("web", &fixture)]).await;
    call_timing_out(&handle).await;
    wait_until("the closing of the answer stream", || fixture.knobs().closed_streams > 0).await;
    assert_eq!(echo(&handle, "web", "next").await.unwrap(), "next");
    assert!(!fixture.knobs().methods.iter().any(|m| m == "notifications/cancelled"), "closing the stream is the cancellation");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_get_stream_carries_the_servers_own_requests() {
    let fixture = Fixture::start(Flavour::Json);
    fixture.knobs().offer_get_stream = true;
    let handle = start(vec![remote("web", &fixture)]).await;
    let ping = json!({"jsonrpc": "2.0", "id": "server-ping-1", "method": "ping"});
    wait_until("the opening of a GET stream", || fixture.push(ping.clone())).await;
    wait_posted(&fixture, "-", 1).await;
    assert_eq!(echo(&handle, "web", "both ways").await.unwrap(), "both ways");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_stream_that_ends_at_once_with_retry_zero_is_reopened_at_a_bounded_rate() {
    let fixture = Fixture::start(Flavour::Json);
    fixture.knobs().get_ends_at_once = true;
    let handle = start(vec![remote("web", &fixture)]).await;
    assert_eq!(echo(&handle, "web", "up").await.unwrap(), "up");
    wait_until("a first GET", || fixture.knobs().gets >= 1).await;
    let before = fixture.knobs().gets;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let reopened = fixture.knobs().gets - before;
    // The floor is 250 ms between GETs: at most 8 (plus one in flight) in 2 s;
    // without it the client asks as fast as the server answers (hundreds).
    assert!(reopened <= 9, "{reopened} GETs in 2 s");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_are_followed_within_the_origin_only() {
    let fixture = Fixture::start(Flavour::Json);
    let mut same = ServerConfig::remote("same", Transport::Http, fixture.url_at("/same-origin"));
    same.era = mcpvisor::config::Era::Legacy;
    let mut other = ServerConfig::remote("other", Transport::Http, fixture.url_at("/other-origin"));
    other.era = mcpvisor::config::Era::Legacy;
    other.restart = mcpvisor::restart::RestartPolicy::Never;
    let handle = start(vec![same, other]).await;
    assert_eq!(echo(&handle, "same", "redirected").await.unwrap(), "redirected");
    let status = wait_status(&handle, "other", |s| matches!(s.state, ServerState::Failed { .. })).await;
    let why = status.last_error.unwrap_or_default();
    assert!(why.contains("a redirect to another origin (http://localhost:"), "{why}");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_answering_holds_only_max_in_flight_requests() {
    let fixture = Fixture::start(Flavour::Json);
    let mut config = remote("web", &fixture);
    (config.limits.max_in_flight, config.limits.max_queued) = (2, 1);
    let handle = start(vec![config]).await;
    // Two calls fill the slots and outlive the third, which waits in the
    // queue: its time-out must fire there, before a slot frees (with equal
    // time-outs, the slots could free first and let it reach the server).
    let call = |timeout: Duration| {
        let handle = handle.clone();
        tokio::spawn(async move { handle.call(CallTool::new("mcp__web__wait", json!({})).with_timeout(timeout)).await })
    };
    let mut waiting: Vec<_> = (0..2).map(|_| call(Duration::from_secs(4))).collect();
    wait_status(&handle, "web", |s| s.in_flight == 2).await;
    wait_posted(&fixture, "tools/call", 2).await;
    waiting.push(call(Duration::from_secs(1)));
    wait_status(&handle, "web", |s| s.in_flight == 2 && s.queued == 1).await;
    let refused = echo(&handle, "web", "one too many").await;
    assert!(matches!(refused, Err(CallError::Overloaded { in_flight: 2, queued: 1, .. })), "{refused:?}");
    for call in waiting {
        let ended = call.await.unwrap();
        assert!(matches!(ended, Err(CallError::Timeout { .. })), "{ended:?}");
    }
    let posted = fixture.knobs().methods.iter().filter(|m| *m == "tools/call").count();
    assert_eq!(posted, 2, "the queued call timed out waiting for a slot: it never reached the server");
    assert_eq!(echo(&handle, "web", "free again").await.unwrap(), "free again");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_the_stateless_era_the_listen_stream_brings_list_changes() {
    let fixture = Fixture::start(Flavour::Stateless);
    let handle = start(vec![remote("web", &fixture)]).await;
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}});
    wait_until("the opening of the subscriptions/listen stream", || fixture.push(changed.clone())).await;
    wait_posted(&fixture, "tools/list", 2).await;
    assert_eq!(echo(&handle, "web", "listening").await.unwrap(), "listening");
    handle.shutdown().await;
}
