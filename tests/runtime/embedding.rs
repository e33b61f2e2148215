//! The runtime embedded: from tokio through `Handle`, and inside an
//! existing actix System through the Hub's address.

use std::time::Duration;

use crate::common::*;
use mcpvisor::actors::hub::{GetRegistry, Hub, Shutdown, WaitReady};
use mcpvisor::actors::{CallTool, ListTools};
use mcpvisor::config::{RuntimeConfig, ServerConfig};
use mcpvisor::{CallError, Runtime, ServerState};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_handle_stops_every_child() {
    let handle = start(vec![demo("one", &[]), demo("two", &[])]).await;
    let pids: Vec<u32> = handle.status().await.iter().filter_map(|s| s.pid).collect();
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|pid| alive(*pid).is_some()));
    let clone = handle.clone();
    let other_thread = std::thread::spawn(move || drop(clone));
    other_thread.join().unwrap();
    assert!(pids.iter().all(|pid| alive(*pid).is_some()), "a clone's drop stops nothing");
    // The last drop shuts down and joins the runtime: the children are reaped when it returns.
    tokio::task::spawn_blocking(move || drop(handle)).await.unwrap();
    for pid in pids {
        assert!(alive(pid).is_none(), "child {pid} survived the last handle: {:?}", alive(pid));
    }
}

#[test]
fn a_hub_runs_inside_an_existing_actix_system() {
    actix::System::new().block_on(async {
        let hub = Hub::start(RuntimeConfig::new([demo("inside", &[])]));
        tokio::time::timeout(Duration::from_secs(20), hub.send(WaitReady)).await.unwrap().unwrap();
        let registry = hub.send(GetRegistry).await.unwrap();
        let tools = registry.send(ListTools).await.unwrap();
        assert!(tools.iter().any(|t| t.name == "mcp__inside__add" && t.server == "inside"));
        let result = registry.send(CallTool::new("mcp__inside__echo", json!({"text": "in actix"}))).await.unwrap().unwrap();
        assert_eq!(text(&result), "in actix");
        hub.send(Shutdown).await.unwrap();
    });
}

#[test]
fn a_call_waiting_for_a_first_listing_ends_when_the_hub_shuts_down() {
    actix::System::new().block_on(async {
        let hub = Hub::start(RuntimeConfig::new([demo("mute", &["--no-initialize"])]));
        let registry = hub.send(GetRegistry).await.unwrap();
        let waiting = registry.send(CallTool::new("mcp__mute__echo", json!({"text": "x"})).with_timeout(Duration::from_secs(600)));
        let waiting = actix::spawn(waiting);
        hub.send(Shutdown).await.unwrap();
        let ended = tokio::time::timeout(Duration::from_secs(20), waiting).await.expect("the call ends with the hub").unwrap().unwrap();
        assert!(matches!(&ended, Err(CallError::RuntimeStopped { tool }) if tool == "mcp__mute__echo"), "{ended:?}");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_server_stops_it_fails_its_calls_as_stopped_and_drops_its_tools() {
    let handle = start(vec![demo("keep", &[]), demo("gone", &[])]).await;
    let pid = status_of(&handle, "gone").await.pid.unwrap();
    let h = handle.clone();
    let in_flight = tokio::spawn(async move { h.call_tool("mcp__gone__sleep", args(json!({"ms": 30_000}))).await });
    wait_status(&handle, "gone", |s| s.in_flight == 1).await;

    handle.remove_server("gone").await.unwrap();

    let stopped = in_flight.await.unwrap();
    assert!(matches!(&stopped, Err(mcpvisor::CallError::Stopped { server, tool }) if server == "gone" && tool == "sleep"), "{stopped:?}");
    assert!(alive(pid).is_none(), "the removed server's process is reaped");
    assert!(handle.server_status("gone").await.is_none());
    let tools = handle.list_tools().await;
    assert!(tools.iter().all(|t| t.server == "keep") && !tools.is_empty());
    let unknown = handle.call_tool("mcp__gone__echo", None).await;
    assert!(matches!(unknown, Err(mcpvisor::CallError::UnknownTool { .. })), "{unknown:?}");
    assert_eq!(handle.remove_server("gone").await, Err(mcpvisor::ManageError::UnknownServer("gone".into())));
}

/// The crate's own example: a call right after `Runtime::start` waits for
/// the server's first listing instead of failing with `UnknownTool`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_right_after_start_or_add_waits_for_the_first_listing() {
    let handle = Runtime::start(RuntimeConfig::new([demo("early", &[])])).unwrap();
    let result = handle.call_tool("mcp__early__echo", json!({"text": "first"})).await;
    assert_eq!(text(&result.unwrap()), "first");

    handle.add_server(demo("added", &[])).await.unwrap();
    let result = handle.call_tool("mcp__added__echo", json!({"text": "second"})).await;
    assert_eq!(text(&result.unwrap()), "second");

    // Once the server has listed, a name it does not have is unknown.
    handle.add_server(demo("third", &[])).await.unwrap();
    let missing = handle.call_tool("mcp__third__no_such_tool", None).await;
    assert!(matches!(&missing, Err(CallError::UnknownTool { name }) if name == "mcp__third__no_such_tool"), "{missing:?}");
    assert_eq!(status_of(&handle, "third").await.state, ServerState::Connected, "it was refused after the listing, not before");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_call_fails_clearly_when_its_server_never_lists_fails_or_is_disabled() {
    let mut disabled = demo("off", &[]);
    disabled.enabled = false;
    let missing = ServerConfig::stdio("broken", "/nonexistent/mcp-server", Vec::<String>::new());
    let mut mute = demo("mute", &["--no-initialize"]);
    mute.limits.max_queued = 1;
    let handle = Runtime::start(RuntimeConfig::new([mute, disabled, missing])).unwrap();

    // No more calls wait than the server may queue (here 1): the other is refused at once.
    let call = || handle.call(CallTool::new("mcp__mute__echo", json!({"text": "x"})).with_timeout(Duration::from_millis(300)));
    let (one, two) = tokio::join!(call(), call());
    let (silent, refused) = if matches!(one, Err(CallError::Overloaded { .. })) { (two, one) } else { (one, two) };
    assert!(matches!(&refused, Err(CallError::Overloaded { server, queued: 1, .. }) if server == "mute"), "{refused:?}");
    assert!(
        matches!(&silent, Err(CallError::NotListed { server, tool, .. }) if server == "mute" && tool == "mcp__mute__echo"),
        "{silent:?}"
    );

    let off = handle.call_tool("mcp__off__echo", None).await;
    assert!(matches!(&off, Err(CallError::Disabled { server, .. }) if server == "off"), "{off:?}");
    let broken = handle.call_tool("mcp__broken__echo", None).await;
    assert!(matches!(&broken, Err(CallError::Failed { server, .. }) if server == "broken"), "{broken:?}");
    // The operating system's error stays reachable beneath the call's, as an embedder would look for it.
    let error = broken.unwrap_err();
    let os = mcpvisor::Cause::find::<std::io::Error>(&error).map(std::io::Error::kind);
    assert_eq!(os, Some(std::io::ErrorKind::NotFound), "{error:?}");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_that_are_not_an_object_are_refused_and_errors_name_no_cli_command() {
    let handle = start(vec![demo("args", &[])]).await;
    let refused = handle.call_tool("mcp__args__echo", json!(["not", "an", "object"])).await;
    let Err(error @ CallError::InvalidArguments { .. }) = &refused else { panic!("{refused:?}") };
    assert!(error.to_string().contains("not an array"), "{error}");
    let on = handle.call_on("args", CallTool::new("echo", json!("text"))).await;
    assert!(matches!(&on, Err(CallError::InvalidArguments { server, .. }) if server == "args"), "{on:?}");
    let object = handle.call_tool("mcp__args__echo", json!({"text": "ok"}).as_object().cloned().unwrap()).await;
    assert_eq!(text(&object.unwrap()), "ok");

    let unknown = handle.call_tool("mcp__nobody__echo", None).await.unwrap_err().to_string();
    let no_server = handle.ping("nobody").await.unwrap_err().to_string();
    for message in [unknown, no_server] {
        assert!(!message.contains("mcpvisor "), "a library error advises a CLI command: {message}");
    }

    let after = handle.clone();
    handle.shutdown().await;
    let stopped = after.call_tool("mcp__args__echo", json!({"text": "late"})).await;
    assert!(matches!(&stopped, Err(CallError::RuntimeStopped { tool }) if tool == "mcp__args__echo"), "{stopped:?}");
    assert!(!stopped.unwrap_err().to_string().contains("``"));
}

/// A tokio-only program answers sampling, elicitation and roots with async
/// closures: no actix System of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_closures_answer_the_servers_requests_in_both_eras() {
    use mcpvisor::{ClientHandlers, ElicitResult, ElicitationAction, Root};
    let handlers = ClientHandlers::default()
        .sampling_fn(|request| async move {
            let asked = request.params["messages"][0]["content"]["text"].as_str().unwrap_or_default().to_string();
            tokio::task::yield_now().await;
            let answer = json!({"role": "assistant", "content": {"type": "text", "text": format!("closure says: {asked}")}, "model": "m"});
            Ok(answer.as_object().cloned().unwrap_or_default())
        })
        .elicitation_fn(|request| async move {
            let mut result = ElicitResult::new(ElicitationAction::Accept);
            result.content = Some(json!({"asked_by": request.server}));
            Ok(result)
        })
        .roots_fn(|request| async move { Ok(vec![Root { uri: format!("file:///srv/{}", request.server), name: None }]) });
    let servers = [("old", "legacy"), ("new", "modern")].map(|(name, era)| demo(name, &["--era", era]));
    let handle = Runtime::builder(RuntimeConfig::new(servers)).client_handlers(handlers).start().unwrap();
    for server in ["old", "new"] {
        let call = |tool: &str, arguments| handle.call_on(server, CallTool::new(tool, arguments));
        let sampled = call("sample", json!({"prompt": "hello"})).await.unwrap();
        assert!(text(&sampled).contains("closure says: hello"), "{server}: {sampled:?}");
        let elicited = serde_json::to_string(&call("elicit", json!({"message": "Who?"})).await.unwrap()).unwrap();
        assert!(elicited.contains("accept") && elicited.contains(server), "{server}: {elicited}");
        let roots = call("roots", json!({})).await.unwrap();
        assert!(serde_json::to_string(&roots).unwrap().contains(&format!("file:///srv/{server}")), "{server}: {roots:?}");
    }
    handle.shutdown().await;
}

/// A subscriber that does not read keeps at most `EVENT_BUFFER` events;
/// the oldest are dropped and counted, none is lost without a count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unread_subscription_is_bounded_and_counts_what_it_dropped() {
    use mcpvisor::{Event, EVENT_BUFFER};
    let handle = start(vec![demo("chatty", &[])]).await;
    let mut events = handle.subscribe();
    handle.set_log_level("chatty", mcpvisor::LogLevel::Debug).await.unwrap();
    let total = EVENT_BUFFER + 300;
    for i in 0..=total {
        let message = if i == total { "last".to_string() } else { format!("log {i}") };
        handle.call_on("chatty", CallTool::new("log", json!({"level": "error", "message": message}))).await.unwrap();
    }
    let mut received = 0;
    loop {
        let event = tokio::time::timeout(Duration::from_secs(20), events.recv()).await.expect("the last log arrives").unwrap();
        let Event::Log { data, .. } = event else { continue };
        if data.to_string().contains("last") {
            break;
        }
        received += 1;
    }
    assert!(received <= EVENT_BUFFER, "{received} events were held for a reader that did not read");
    assert!(events.missed() > 0);
    assert_eq!(received as u64 + events.missed(), total as u64, "every event is either delivered or counted as missed");
    handle.shutdown().await;
}

/// A subscription hears what happens after `subscribe()` returns, with
/// nothing to wait for first, and every subscription ends with the runtime
/// (one made after it stopped ends at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_hears_at_once_and_ends_with_the_runtime() {
    use mcpvisor::Event;
    let handle = start(vec![demo("chatty", &[])]).await;
    handle.set_log_level("chatty", mcpvisor::LogLevel::Debug).await.unwrap();
    let mut events = handle.subscribe();
    handle.call_on("chatty", CallTool::new("log", json!({"level": "error", "message": "right after"}))).await.unwrap();
    let heard = async {
        loop {
            match events.recv().await {
                Some(Event::Log { data, .. }) if data.to_string().contains("right after") => return,
                Some(_) => continue,
                None => panic!("the events ended before the call's log"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), heard).await.expect("the call's log is heard");
    let kept = handle.clone();
    handle.shutdown().await;
    let ended = tokio::time::timeout(Duration::from_secs(20), async { while events.recv().await.is_some() {} }).await;
    assert!(ended.is_ok(), "a subscription outlived its runtime");
    let mut late = kept.subscribe();
    assert!(tokio::time::timeout(Duration::from_secs(5), late.recv()).await.expect("a late subscription ends at once").is_none());
}
