//! The complete client against the demo server, in both protocol eras:
//! negotiation, resources, prompts, completion, logging, progress,
//! server-to-client requests, tasks, schema checks and list changes.

use std::time::Duration;

use crate::common::*;
use mcpvisor::actors::connection::Request;
use mcpvisor::actors::hub::ToServer;
use mcpvisor::actors::operation::LogLevel;
use mcpvisor::actors::{Event, Progress, ProgressSink};
use mcpvisor::config::{Era, RuntimeConfig, ServerConfig};
use mcpvisor::{CallError, CallTool, Handle, Runtime, ServerState};
use rmcp::model::{ArgumentInfo, Reference, ResourceContents};
use serde_json::{json, Value};

fn with_era(mut config: ServerConfig, era: Era) -> ServerConfig {
    config.era = era;
    config
}

/// A dual-era demo server driven in `era` (auto finds modern).
fn in_era(name: &str, era: Era) -> ServerConfig {
    with_era(demo(name, &[]), era)
}

async fn call(handle: &Handle, server: &str, tool: &str, arguments: Value) -> Result<mcpvisor::CallToolResult, CallError> {
    handle.call_on(server, CallTool::new(tool, arguments)).await
}

/// Waits for the first event that `pick` accepts (bounded: 10 s).
async fn next_event<T>(events: &mut mcpvisor::Events, pick: impl Fn(Event) -> Option<T>) -> T {
    let wait = async {
        while let Some(event) = events.recv().await {
            if let Some(found) = pick(event) {
                return found;
            }
        }
        panic!("the event stream ended");
    };
    tokio::time::timeout(Duration::from_secs(10), wait).await.expect("the event came within 10 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_finds_the_era_and_caches_it_across_restarts() {
    let handle = start(vec![
        in_era("dual", Era::Auto),
        with_era(demo("old", &["--era", "legacy"]), Era::Auto),
        with_era(demo("new", &["--era", "modern"]), Era::Auto),
        in_era("forced", Era::Legacy),
    ])
    .await;
    let eras: Vec<_> = handle.status().await.into_iter().map(|s| (s.name, s.era, s.protocol_version)).collect();
    let some = |s: &str| Some(s.to_string());
    assert_eq!(
        eras,
        [
            ("dual".into(), some("modern"), some("2026-07-28")),
            ("forced".into(), some("legacy"), some("2025-11-25")),
            ("new".into(), some("modern"), some("2026-07-28")),
            ("old".into(), some("legacy"), some("2025-11-25")),
        ]
    );
    for server in ["dual", "old", "new", "forced"] {
        let echoed = call(&handle, server, "echo", json!({"text": server})).await.unwrap();
        assert_eq!(text(&echoed), server);
    }
    // A restart goes straight to the cached era: the legacy server sees no second probe.
    let _ = call(&handle, "old", "crash", json!({"code": 3})).await;
    wait_connected_with_restarts(&handle, "old", 1).await;
    let received = call(&handle, "old", "received", json!({})).await.unwrap();
    assert_eq!(text(&call(&handle, "old", "echo", json!({"text": "back"})).await.unwrap()), "back");
    let counts = received.structured_content.unwrap_or_default();
    assert_eq!(counts["initializeRequests"], 1, "{counts}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_only_setting_fails_clearly_on_a_legacy_server() {
    let handle = start(vec![with_era(demo("old", &["--era", "legacy"]), Era::Modern)]).await;
    let status = status_of(&handle, "old").await;
    let ServerState::Failed { error, .. } = &status.state else { panic!("{status:?}") };
    assert!(error.contains("era = modern") && error.contains("server/discover"), "{error}");
    assert_eq!(status.restarts, 0, "a server of the wrong era fails at once: restarting cannot change its era");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_list_read_and_templates_in_both_eras() {
    let paged = |name: &str, era: Era| with_era(demo(name, &["--page-size", "2"]), era);
    let handle = start(vec![paged("new", Era::Modern), paged("old", Era::Legacy), demo("bare", &["--no-templates"])]).await;
    for server in ["new", "old"] {
        let resources = handle.list_resources(server).await.unwrap();
        let uris: Vec<_> = resources.iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(uris, ["demo://counter", "demo://blob", "demo://item/1", "demo://item/2", "demo://item/3"], "{server}: all pages");
        assert_eq!(wait_status(&handle, server, |s| s.resources == 5).await.resources, 5, "counted at connect");
        let templates = handle.list_resource_templates(server).await.unwrap();
        assert_eq!(templates.iter().map(|t| t.uri_template.as_str()).collect::<Vec<_>>(), ["demo://item/{id}"]);
        let item = handle.read_resource(server, "demo://item/42").await.unwrap();
        assert!(matches!(&item.contents[..], [ResourceContents::TextResourceContents { text, .. }] if text == "item 42"), "{item:?}");
        let blob = handle.read_resource(server, "demo://blob").await.unwrap();
        assert!(matches!(&blob.contents[..], [ResourceContents::BlobResourceContents { blob, .. }] if !blob.is_empty()), "{blob:?}");
        let missing = handle.read_resource(server, "demo://nope").await.unwrap_err();
        assert!(
            matches!(&missing, CallError::Rpc { tool, .. } | CallError::InvalidArguments { tool, .. } if tool.contains("demo://nope")),
            "{missing:?}"
        );
    }
    assert_eq!(handle.list_resource_templates("bare").await.unwrap(), [], "-32601 on templates/list means none");
    assert!(matches!(handle.list_resources("nobody").await, Err(CallError::UnknownServer { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribed_resources_report_updates_in_both_eras() {
    let handle = start(vec![in_era("new", Era::Modern), in_era("old", Era::Legacy)]).await;
    let mut events = handle.subscribe();
    for server in ["new", "old"] {
        handle.subscribe_resource(server, "demo://counter").await.unwrap();
        // The modern listen stream is reopened before `subscribe_resource` answers, so it is on the wire before `touch`.
        call(&handle, server, "touch", json!({})).await.unwrap();
        let uri = next_event(&mut events, |e| match e {
            Event::ResourceUpdated { server: s, uri } if s == server => Some(uri),
            _ => None,
        })
        .await;
        assert_eq!(uri, "demo://counter");
        let counter = handle.read_resource(server, "demo://counter").await.unwrap();
        assert!(matches!(&counter.contents[..], [ResourceContents::TextResourceContents { text, .. }] if text == "1"), "{counter:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_and_completion_in_both_eras() {
    let handle = start(vec![in_era("new", Era::Modern), in_era("old", Era::Legacy)]).await;
    for server in ["new", "old"] {
        let prompts = handle.list_prompts(server).await.unwrap();
        assert_eq!(prompts.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["greet", "plain"]);
        let greeting = handle.get_prompt(server, "greet", json!({"name": "Ada", "style": "pirate"}).as_object().cloned()).await.unwrap();
        let said = serde_json::to_string(&greeting.messages).unwrap();
        assert!(said.contains("Ada"), "{said}");
        let styles = handle.complete(server, Reference::for_prompt("greet"), ArgumentInfo::new("style", "p")).await.unwrap();
        assert_eq!(styles.values, ["pirate"]);
        let ids = handle.complete(server, Reference::for_resource("demo://item/{id}"), ArgumentInfo::new("id", "1")).await.unwrap();
        assert!(ids.values.iter().all(|v| v.starts_with('1')) && !ids.values.is_empty(), "{ids:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_messages_reach_subscribers_at_the_level_set_in_both_eras() {
    let handle = start(vec![in_era("new", Era::Modern), in_era("old", Era::Legacy)]).await;
    let mut events = handle.subscribe();
    for server in ["new", "old"] {
        handle.set_log_level(server, LogLevel::Warning).await.unwrap();
        let filtered = call(&handle, server, "log", json!({"level": "info", "message": "quiet"})).await.unwrap();
        assert_eq!(text(&filtered), "filtered");
        let sent = call(&handle, server, "log", json!({"level": "error", "message": format!("loud {server}")})).await.unwrap();
        assert!(text(&sent).starts_with("sent"), "{sent:?}");
        let (level, data) = next_event(&mut events, |e| match e {
            Event::Log { server: s, level, data, .. } if s == server => Some((level, data)),
            _ => None,
        })
        .await;
        assert_eq!(level, "error");
        assert!(data.to_string().contains(&format!("loud {server}")), "{data}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_caller_and_keeps_a_slow_call_alive() {
    let handle = start(vec![in_era("new", Era::Modern), in_era("old", Era::Legacy)]).await;
    for server in ["new", "old"] {
        let (sink, mut updates) = ProgressSink::channel();
        // 6 steps of 100 ms take 600 ms; the 250 ms time-out counts from the last progress.
        let call = CallTool::new("progress", json!({"steps": 6, "ms": 100})).with_timeout(Duration::from_millis(250)).with_progress(sink);
        let result = handle.call_on(server, call).await.unwrap();
        assert_eq!(text(&result), "done 6 steps");
        let mut seen: Vec<Progress> = Vec::new();
        while let Ok(update) = updates.try_recv() {
            seen.push(update);
        }
        assert_eq!(seen.iter().map(|p| p.progress).collect::<Vec<_>>(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "{server}");
        assert!(seen.iter().all(|p| p.total == Some(6.0) && p.server == server));
    }
    // A function sink (no channel, no actor) hears the same steps and keeps the call alive as well.
    let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = heard.clone();
    let sink = ProgressSink::function(move |step: Progress| kept.lock().unwrap().push(step.progress));
    let call = CallTool::new("progress", json!({"steps": 4, "ms": 100})).with_timeout(Duration::from_millis(250)).with_progress(sink);
    assert_eq!(text(&handle.call_on("old", call).await.unwrap()), "done 4 steps");
    assert_eq!(*heard.lock().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    // Without progress the same time-out ends the call.
    let slow = handle.call_on("old", CallTool::new("sleep", json!({"ms": 600})).with_timeout(Duration::from_millis(250))).await;
    assert!(matches!(slow, Err(CallError::Timeout { .. })), "{slow:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_and_elicitation_go_to_the_embedders_handlers_in_both_eras() {
    let config = RuntimeConfig::new([in_era("new", Era::Modern), in_era("old", Era::Legacy)]);
    let handle = Runtime::builder(config).client_handlers(assistant_handlers()).start().unwrap();
    assert!(handle.wait_ready(Duration::from_secs(20)).await);
    for server in ["new", "old"] {
        let sampled = call(&handle, server, "sample", json!({"prompt": "hello"})).await.unwrap();
        assert!(text(&sampled).contains("model says: hello"), "{server}: {sampled:?}");
        let elicited = call(&handle, server, "elicit", json!({"message": "Who are you?"})).await.unwrap();
        let said = serde_json::to_string(&elicited).unwrap();
        assert!(said.contains("accept"), "{server}: {said}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_handlers_sampling_is_refused_and_elicitation_declined() {
    let handle = start(vec![in_era("new", Era::Modern), in_era("old", Era::Legacy)]).await;
    let legacy = call(&handle, "old", "sample", json!({"prompt": "hello"})).await.unwrap();
    assert_eq!(legacy.is_error, Some(true));
    assert!(text(&legacy).contains("sampling handler"), "the refusal reaches the tool: {legacy:?}");
    let modern = call(&handle, "new", "sample", json!({"prompt": "hello"})).await;
    assert!(
        matches!(&modern, Err(CallError::Rpc { message, .. }) if message.contains("sampling handler"))
            || modern.as_ref().is_ok_and(|r| r.is_error == Some(true)),
        "{modern:?}"
    );
    for server in ["new", "old"] {
        let declined = call(&handle, server, "elicit", json!({"message": "Who?"})).await.unwrap();
        assert!(serde_json::to_string(&declined).unwrap().contains("decline"), "{server}: {declined:?}");
        let url = call(&handle, server, "elicit_url", json!({"url": "https://example.com/consent"})).await.unwrap();
        assert!(serde_json::to_string(&url).unwrap().contains("decline"), "{server}: {url:?}");
        let needs_url = call(&handle, server, "needs_url", json!({})).await.unwrap_err();
        assert!(
            matches!(&needs_url, CallError::Rpc { code: -32042, data: Some(data), .. } if data.get("elicitations").is_some()),
            "{needs_url:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_are_the_configured_ones_and_changes_are_announced() {
    let mut old = in_era("old", Era::Legacy);
    old.roots = vec!["/srv/data".into(), "https://example.com/repo".into()];
    let mut new = in_era("new", Era::Modern);
    new.cwd = Some("/tmp".into());
    let handle = start(vec![old, new]).await;
    let roots = call(&handle, "old", "roots", json!({})).await.unwrap();
    assert_eq!(text(&roots), "file:///srv/data\nhttps://example.com/repo");
    let roots = call(&handle, "new", "roots", json!({})).await.unwrap();
    let listed = roots.structured_content.as_ref().map(|content| content["roots"].clone());
    assert_eq!(listed, Some(json!([])), "none when none are configured, not the working directory: {roots:?}");
    handle.roots_changed("old").await.unwrap();
    let received = wait_for(
        || async { call(&handle, "old", "received", json!({})).await.unwrap().structured_content.unwrap_or_default() },
        |r: &Value| r["rootsListChanged"] == 1,
    )
    .await;
    assert_eq!(received["rootsListChanged"], 1);
}

/// Polls `probe` until `done` holds (bounded: 10 s).
async fn wait_for<T, F, Fut>(probe: F, done: impl Fn(&T) -> bool) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let value = probe().await;
        if done(&value) || tokio::time::Instant::now() > deadline {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_mode_tools_are_polled_to_their_result_and_cancelled_on_time_out() {
    let handle = start(vec![in_era("old", Era::Legacy)]).await;
    let result = call(&handle, "old", "slow_task", json!({"ms": 300})).await.unwrap();
    assert!(text(&result).contains("300"), "{result:?}");
    let dropped = tokio::time::timeout(Duration::from_millis(300), call(&handle, "old", "slow_task", json!({"ms": 5000}))).await;
    assert!(dropped.is_err(), "the caller gave up");
    let tasks = || async {
        let list = Request { method: "tasks/list".into(), params: json!({}), label: "tasks/list".into(), timeout: None, progress: None };
        let raw = mcpvisor::actors::hub_of(&handle).send(ToServer { server: "old".into(), message: list }).await.unwrap().unwrap();
        serde_json::from_str::<Value>(raw.get()).unwrap()
    };
    let statuses = |tasks: &Value| tasks["tasks"].as_array().into_iter().flatten().map(|t| t["status"].to_string()).collect::<Vec<_>>();
    let listed = wait_for(tasks, |t| statuses(t).contains(&"\"cancelled\"".to_string())).await;
    assert_eq!(statuses(&listed), ["\"completed\"", "\"cancelled\""], "the abandoned task was cancelled: {listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_and_structured_results_are_checked_against_the_schemas() {
    let handle = start(vec![in_era("new", Era::Modern), in_era("old", Era::Legacy)]).await;
    for server in ["new", "old"] {
        let wrong = call(&handle, server, "add", json!({"a": 1, "b": "2"})).await.unwrap_err();
        assert!(
            matches!(&wrong, CallError::InvalidArguments { tool, message, .. } if tool == "add" && message.contains("`b`")),
            "{wrong:?}"
        );
        let missing = call(&handle, server, "echo", json!({})).await.unwrap_err();
        assert!(matches!(&missing, CallError::InvalidArguments { message, .. } if message.contains("text")), "{missing:?}");
        let fine = call(&handle, server, "structured", json!({"a": 1, "b": 2})).await.unwrap();
        assert_eq!(fine.structured_content.as_ref().map(|s| s["sum"].as_f64()), Some(Some(3.0)));
        let bad = call(&handle, server, "bad_structured", json!({})).await.unwrap_err();
        assert!(matches!(&bad, CallError::Protocol { message, .. } if message.contains("outputSchema")), "{bad:?}");
    }
    let received = call(&handle, "old", "received", json!({})).await.unwrap();
    assert!(!serde_json::to_string(&received).unwrap().contains("\"b\":\"2\""), "an invalid call is never sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_content_type_is_kept() {
    let handle = start(vec![in_era("new", Era::Modern)]).await;
    let media = call(&handle, "new", "media", json!({})).await.unwrap();
    let kinds: Vec<String> = serde_json::to_value(&media.content)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(kinds, ["text", "image", "audio", "resource_link", "resource"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changes_reach_the_catalog_and_subscribers_in_both_eras() {
    let handle = start(vec![in_era("new", Era::Modern), in_era("old", Era::Legacy)]).await;
    let mut events = handle.subscribe();
    for server in ["new", "old"] {
        call(&handle, server, "add_tool", json!({"name": "fresh"})).await.unwrap();
        let exposed = format!("mcp__{server}__fresh");
        let added = next_event(&mut events, |e| match e {
            Event::Catalog { added, .. } if added.contains(&exposed) => Some(added),
            _ => None,
        })
        .await;
        assert!(added.contains(&exposed));
        assert_eq!(text(&handle.call_tool(&exposed, json!({"text": "new tool"}).as_object().cloned()).await.unwrap()), "new tool");
        call(&handle, server, "add_prompt", json!({"name": "extra"})).await.unwrap();
        next_event(&mut events, |e| matches!(e, Event::ListChanged { server: s, list } if s == server && list == "prompts").then_some(()))
            .await;
        assert_eq!(wait_status(&handle, server, |s| s.prompts == 3).await.prompts, 3);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_go_both_ways_and_a_silent_server_is_restarted_by_the_health_ping() {
    let mut silent = demo("silent", &["--stop-reading-after", "12"]);
    silent.era = Era::Legacy;
    silent.timeouts.health_ping = Some(Duration::from_millis(100));
    silent.timeouts.call = Duration::from_millis(300);
    let handle = start(vec![in_era("old", Era::Legacy), silent]).await;
    let first = status_of(&handle, "silent").await.pid.unwrap();
    assert!(handle.ping("old").await.unwrap() < Duration::from_secs(5));
    let pong = call(&handle, "old", "ping_client", json!({})).await.unwrap();
    assert!(text(&pong).starts_with("pong in"), "{pong:?}");
    let why = wait_status(&handle, "silent", |s| s.restarts >= 1).await;
    assert!(why.last_error.as_deref().is_some_and(|e| e.contains("health ping")), "restarted because of the health ping: {why:?}");
    assert!(!matches!(why.state, ServerState::Failed { .. }), "{why:?}");
    wait_status(&handle, "silent", |s| s.pid.is_some_and(|pid| pid != first)).await;
    assert!(alive(first).is_none(), "the silent process was stopped: {:?}", alive(first));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_server_did_not_announce_is_not_asked_for() {
    // The fixture announces only tools and would answer -32601 to the rest.
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tools_only_server.py");
    let handle = start(vec![ServerConfig::stdio("lean", "python3", [fixture])]).await;
    let unsupported = |result: Result<(), CallError>, wanted: &str| match result {
        Err(CallError::Unsupported { server, capability, .. }) => assert_eq!((server.as_str(), capability.as_str()), ("lean", wanted)),
        other => panic!("expected Unsupported({wanted}), got {other:?}"),
    };
    unsupported(handle.list_resources("lean").await.map(drop), "resources");
    unsupported(handle.read_resource("lean", "file:///x").await.map(drop), "resources");
    unsupported(handle.list_prompts("lean").await.map(drop), "prompts");
    unsupported(handle.get_prompt("lean", "p", None).await.map(drop), "prompts");
    let status = status_of(&handle, "lean").await;
    assert_eq!((status.resources, status.prompts, status.restarts), (0, 0, 0));
    handle.shutdown().await;
}
