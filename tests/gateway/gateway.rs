//! `mcpvisor serve` over stdio in front of real `mcpvisor demo-server`
//! processes, driven by a small JSON-lines client (tests/gateway_support).

use crate::gateway_support;

use std::path::PathBuf;

use crate::gateway_support::{demo_table, pid_of, within, Gateway, PATIENCE, POLL};
use serde_json::{json, Value};

fn config(dir: &tempfile::TempDir, tables: &[String]) -> PathBuf {
    let path = dir.path().join("servers.toml");
    std::fs::write(&path, tables.concat()).unwrap();
    path
}

fn two_demos(dir: &tempfile::TempDir) -> PathBuf {
    config(dir, &[demo_table("demo", &[]), demo_table("other", &[])])
}

#[tokio::test]
async fn tools_prompts_resources_and_completion_are_served_under_prefixed_names() {
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = Gateway::start(&two_demos(&dir), &[], json!({})).await;
    let names = gateway.tool_names().await;
    for name in ["demo__echo", "other__echo", "demo__progress", "other__sample"] {
        assert!(names.contains(&name.to_string()), "{name} in {names:?}");
    }
    assert_eq!(gateway.call_text("other__echo", json!({"text": "hi"})).await, "hi");
    let sum = gateway.call("demo__add", json!({"a": 2, "b": 3})).await;
    assert_eq!(sum["result"]["structuredContent"]["sum"], 5, "{sum}");

    let prompts = gateway.result("prompts/list", json!({})).await;
    let prompt_names: Vec<&str> = prompts["prompts"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert!(prompt_names.contains(&"demo__greet") && prompt_names.contains(&"other__plain"), "{prompt_names:?}");
    let greet = gateway.result("prompts/get", json!({"name": "demo__greet", "arguments": {"name": "Ada"}})).await;
    assert!(greet["messages"][0]["content"]["text"].as_str().unwrap().contains("Ada"), "{greet}");

    let resources = gateway.result("resources/list", json!({})).await;
    let uris: Vec<&str> = resources["resources"].as_array().unwrap().iter().map(|r| r["uri"].as_str().unwrap()).collect();
    assert_eq!(uris[0], "mcpvisor://status");
    assert!(uris.contains(&"demo://counter"), "{uris:?}");
    // demo://item/7 is listed by neither server: it is routed by the template.
    let item = gateway.result("resources/read", json!({"uri": "demo://item/7"})).await;
    assert_eq!(item["contents"][0]["text"], "item 7", "{item}");
    let templates = gateway.result("resources/templates/list", json!({})).await;
    assert_eq!(templates["resourceTemplates"][0]["uriTemplate"], "demo://item/{id}");

    let style = json!({"ref": {"type": "ref/prompt", "name": "other__greet"}, "argument": {"name": "style", "value": "pi"}});
    let completion = gateway.result("completion/complete", style).await;
    assert_eq!(completion["completion"]["values"], json!(["pirate"]), "{completion}");
    let id = json!({"ref": {"type": "ref/resource", "uri": "demo://item/{id}"}, "argument": {"name": "id", "value": "2"}});
    let completion = gateway.result("completion/complete", id).await;
    assert!(completion["completion"]["values"].as_array().unwrap().contains(&json!("2")), "{completion}");

    let statuses = gateway.statuses().await;
    let states: Vec<(&str, &str)> = statuses.iter().map(|s| (s["name"].as_str().unwrap(), s["state"].as_str().unwrap())).collect();
    assert_eq!(states, [("demo", "connected"), ("other", "connected")]);
    assert_eq!(gateway.result("ping", json!({})).await, json!({}));
    assert_eq!(gateway.close().await, Some(0));
}

#[tokio::test]
async fn bad_input_gets_the_json_rpc_error_it_deserves_and_the_gateway_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = Gateway::start(&config(&dir, &[demo_table("demo", &[])]), &[], json!({})).await;
    let unknown = gateway.call("demo__nope", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(unknown["error"]["message"].as_str().unwrap().contains("demo__nope"));
    let method = gateway.request("tools/frobnicate", json!({})).await;
    assert_eq!(method["error"]["code"], -32601, "{method}");
    let typed = gateway.request("tools/call", json!({"name": 5})).await;
    assert_eq!(typed["error"]["code"], -32602, "{typed}");
    assert!(typed["error"]["message"].as_str().unwrap().contains("`name` must be a string"), "{typed}");
    let arguments = gateway.request("tools/call", json!({"name": "demo__echo", "arguments": [1]})).await;
    assert_eq!(arguments["error"]["code"], -32602, "{arguments}");
    let no_uri = gateway.request("resources/read", json!({"uri": "nowhere://x"})).await;
    assert_eq!(no_uri["error"]["code"], -32002, "{no_uri}");

    gateway.send_line(b"{this is not json").await;
    let parse = gateway.next_answer().await;
    assert_eq!((parse["error"]["code"].clone(), parse["id"].clone()), (json!(-32700), Value::Null), "{parse}");
    gateway.send_line(b"[1, 2]").await;
    assert!(gateway.next_answer().await["error"]["code"].as_i64().is_some());
    // A frame past the codec's 16 MiB limit is refused by its id, unread.
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":"huge","method":"tools/call","params":{{"name":"demo__echo","arguments":{{"text":"{}"}}}}}}"#,
        "x".repeat(17 << 20)
    );
    gateway.send_line(huge.as_bytes()).await;
    let refused = gateway.response(json!("huge")).await;
    assert_eq!(refused["error"]["code"], -32600, "{}", &refused.to_string()[..200.min(refused.to_string().len())]);
    let old = gateway.request("tools/list", json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "1999-01-01"}})).await;
    assert_eq!(old["error"]["code"], -32022, "{old}");
    // An id still in use by an open request is refused; the open request is not disturbed.
    gateway
        .send_line(br#"{"jsonrpc":"2.0","id":"dup","method":"tools/call","params":{"name":"demo__sleep","arguments":{"ms":600000}}}"#)
        .await;
    gateway.send_line(br#"{"jsonrpc":"2.0","id":"dup","method":"ping"}"#).await;
    let reused = gateway.response(json!("dup")).await;
    assert_eq!(reused["error"]["code"], -32600, "{reused}");
    gateway.notify("notifications/cancelled", json!({"requestId": "dup"})).await;
    assert_eq!(gateway.call_text("demo__echo", json!({"text": "still here"})).await, "still here");
    assert_eq!(gateway.close().await, Some(0));
}

#[tokio::test]
async fn the_2026_era_is_served_per_request_without_initialize() {
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = Gateway::spawn(&config(&dir, &[demo_table("demo", &[])]), &[]);
    let discover = gateway.result("server/discover", json!({})).await;
    assert_eq!(discover["supportedVersions"][0], "2026-07-28");
    assert_eq!(discover["supportedVersions"][1], "2025-11-25");
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    let listed = gateway.result("tools/list", json!({"_meta": meta})).await;
    assert_eq!((listed["resultType"].as_str(), listed["cacheScope"].as_str()), (Some("complete"), Some("private")));
    let called = gateway.result("tools/call", json!({"_meta": meta, "name": "demo__echo", "arguments": {"text": "modern"}})).await;
    assert_eq!((called["content"][0]["text"].as_str(), called["resultType"].as_str()), (Some("modern"), Some("complete")));

    // Changes reach a 2026-07-28 client on its listen stream, tagged with the stream's id.
    let filter = json!({"toolsListChanged": true, "resourceSubscriptions": ["demo://counter"]});
    let listen = gateway.send("subscriptions/listen", json!({"_meta": meta, "notifications": filter})).await;
    let ack = gateway.notification("notifications/subscriptions/acknowledged").await;
    assert_eq!(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], listen, "{ack}");
    assert_eq!(ack["params"]["notifications"], filter);
    gateway.result("tools/call", json!({"_meta": meta, "name": "demo__touch", "arguments": {}})).await;
    let updated = gateway.notification("notifications/resources/updated").await;
    assert_eq!(updated["params"]["uri"], "demo://counter");
    assert_eq!(updated["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], listen, "{updated}");
    let bad = gateway.request("subscriptions/listen", json!({"_meta": meta, "notifications": 3})).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    gateway.notify("notifications/cancelled", json!({"requestId": listen})).await;
    assert_eq!(gateway.close().await, Some(0));
}

/// The `notifications/cancelled` the demo server got, once it got one.
async fn cancellations_received(gateway: &mut Gateway) -> Vec<Value> {
    within("the demo server to receive a notifications/cancelled", async {
        loop {
            let answer = gateway.call("demo__cancellations", json!({})).await;
            let received = answer["result"]["structuredContent"]["cancellations"].as_array().cloned().unwrap_or_default();
            if !received.is_empty() {
                return received;
            }
            tokio::time::sleep(POLL).await;
        }
    })
    .await
}

#[tokio::test]
async fn progress_carries_the_clients_token_and_cancellation_reaches_the_upstream_call() {
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = Gateway::start(&config(&dir, &[demo_table("demo", &[])]), &[], json!({})).await;
    let call = json!({"name": "demo__progress", "arguments": {"steps": 3, "ms": 1}, "_meta": {"progressToken": "mine"}});
    let done = gateway.result("tools/call", call).await;
    assert_eq!(done["content"][0]["text"], "done 3 steps");
    let mut seen = Vec::new();
    while let Some(at) = gateway.notifications.iter().position(|n| n["method"] == "notifications/progress") {
        seen.push(gateway.notifications.remove(at).unwrap());
    }
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(seen.iter().all(|n| n["params"]["progressToken"] == "mine"), "{seen:?}");

    let slow = gateway.send("tools/call", json!({"name": "demo__sleep", "arguments": {"ms": 600000}})).await;
    // Wait until the call is in flight upstream, as the status resource shows.
    gateway.statuses_until("the sleep call in flight upstream", |s| s[0]["in_flight"].as_u64() == Some(1)).await;
    gateway.notify("notifications/cancelled", json!({"requestId": slow, "reason": "changed my mind"})).await;
    let received = cancellations_received(&mut gateway).await;
    assert_eq!(received[0]["tool"], "sleep", "{received:?}");
    // The cancelled request is never answered: the next answer is the ping's
    // (the pool's notifications, such as tools/list_changed, may come first).
    let ping = gateway.send("ping", json!({})).await;
    let next = gateway.next_answer().await;
    assert_eq!(next["id"], ping, "{next}");
    assert_eq!(gateway.close().await, Some(0));
}

#[tokio::test]
async fn subscriptions_logs_and_server_requests_pass_through() {
    let dir = tempfile::tempdir().unwrap();
    let capabilities = json!({"sampling": {}, "elicitation": {"form": {}}, "roots": {"listChanged": true}});
    let mut gateway = Gateway::start(&config(&dir, &[demo_table("demo", &[])]), &[], capabilities).await;
    gateway.answerer = Box::new(|method, params| match method {
        "sampling/createMessage" => {
            let asked = params["messages"][0]["content"]["text"].as_str().unwrap_or_default();
            Some(json!({"role": "assistant", "content": {"type": "text", "text": format!("client model: {asked}")}, "model": "m"}))
        }
        "elicitation/create" => Some(json!({"action": "accept", "content": {"name": "Grace"}})),
        "roots/list" => Some(json!({"roots": [{"uri": "file:///client/root", "name": "root"}]})),
        _ => None,
    });
    gateway.result("resources/subscribe", json!({"uri": "demo://counter"})).await;
    gateway.call_text("demo__touch", json!({})).await;
    let updated = gateway.notification("notifications/resources/updated").await;
    assert_eq!(updated["params"]["uri"], "demo://counter");

    gateway.result("logging/setLevel", json!({"level": "debug"})).await;
    let sent = gateway.call_text("demo__log", json!({"level": "warning", "message": "careful"})).await;
    assert!(sent.starts_with("sent"), "{sent}");
    let log = gateway.notification("notifications/message").await;
    assert_eq!((log["params"]["logger"].as_str(), log["params"]["level"].as_str()), (Some("demo"), Some("warning")), "{log}");

    let sampled = gateway.call_text("demo__sample", json!({"prompt": "hello"})).await;
    assert!(sampled.contains("client model: hello"), "{sampled}");
    let elicited = gateway.call_text("demo__elicit", json!({"message": "Your name?"})).await;
    assert!(elicited.contains("accept") && elicited.contains("Grace"), "{elicited}");
    let roots = gateway.call_text("demo__roots", json!({})).await;
    assert!(roots.contains("file:///client/root"), "{roots}");
    let methods: Vec<&str> = gateway.asked.iter().map(|asked| asked["method"].as_str().unwrap()).collect();
    assert!(methods.contains(&"sampling/createMessage") && methods.contains(&"elicitation/create"), "{methods:?}");
    assert_eq!(gateway.close().await, Some(0));
}

#[tokio::test]
async fn without_the_clients_capabilities_server_requests_get_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = Gateway::start(&config(&dir, &[demo_table("demo", &[])]), &[], json!({})).await;
    let sampled = gateway.call("demo__sample", json!({"prompt": "hello"})).await;
    assert!(sampled.to_string().contains("the gateway's client does not offer sampling"), "{sampled}");
    let elicited = gateway.call_text("demo__elicit", json!({"message": "Your name?"})).await;
    assert!(elicited.contains("decline"), "{elicited}");
    assert!(gateway.asked.is_empty(), "{:?}", gateway.asked);
    assert_eq!(gateway.close().await, Some(0));
}

#[tokio::test]
async fn a_killed_upstream_sends_list_changed_and_serves_again_after_its_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = Gateway::start(&two_demos(&dir), &[], json!({})).await;
    gateway.tool_names().await;
    gateway.notifications.clear();
    let pid = pid_of(&gateway.statuses().await, "other");
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    // Announced once its connection saw it go: wait for an announcement made after that.
    within("a tools/list_changed after `other` went down", async {
        loop {
            gateway.notification("notifications/tools/list_changed").await;
            let statuses = gateway.statuses().await;
            if statuses.iter().any(|s| s["name"] == "other" && (s["restarts"].as_u64() >= Some(1) || s["state"] != "connected")) {
                break;
            }
        }
    })
    .await;
    // The restarted server answers (the call waits for it if it is not back yet).
    assert_eq!(gateway.call_text("other__echo", json!({"text": "back"})).await, "back");
    let statuses = gateway.statuses().await;
    let other = statuses.iter().find(|s| s["name"] == "other").unwrap();
    assert!(other["restarts"].as_u64() >= Some(1) && other["pid"] != json!(pid), "{other}");
    assert_eq!(gateway.close().await, Some(0));
}

/// A client that writes its requests and closes stdin at once (a shell
/// pipe) still gets every answer: the gateway answers what is open, then
/// exits 0.
#[test]
fn requests_piped_in_are_answered_after_stdin_closes() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let config = config(&dir, &[demo_table("demo", &[])]);
    let mut child = std::process::Command::new(gateway_support::BIN)
        .arg("--config")
        .arg(&config)
        .arg("serve")
        .env("XDG_STATE_HOME", dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "demo__sleep", "arguments": {"ms": 300}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "demo__echo", "arguments": {"text": "piped"}}}),
    ];
    let mut stdin = child.stdin.take().unwrap();
    for request in &requests {
        writeln!(stdin, "{request}").unwrap();
    }
    drop(stdin);
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let answers: Vec<Value> = out.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let text = |id: i64| answers.iter().find(|a| a["id"] == id).map(|a| a["result"]["content"][0]["text"].clone());
    assert_eq!((text(1), text(2)), (Some(json!("slept 300 ms")), Some(json!("piped"))), "{out}");
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// A call in flight when its server is killed is answered at once with an
/// `isError` result that names the server and says what happened; the
/// server is then restarted and serves again.
#[tokio::test]
async fn an_upstream_killed_mid_call_answers_the_call_with_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = Gateway::start(&two_demos(&dir), &[], json!({})).await;
    let slow = gateway.send("tools/call", json!({"name": "other__sleep", "arguments": {"ms": 600000}})).await;
    let other_busy = |s: &[Value]| s.iter().any(|s| s["name"] == "other" && s["in_flight"].as_u64() == Some(1));
    let pid = pid_of(&gateway.statuses_until("the sleep call in flight on `other`", other_busy).await, "other");
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let answer = gateway.response(json!(slow)).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("other") && text.contains("sleep") && text.contains("SIGKILL"), "{text}");
    assert_eq!(gateway.call_text("other__echo", json!({"text": "back"})).await, "back");
    assert_eq!(gateway.close().await, Some(0));
}

#[tokio::test]
async fn serve_server_serves_one_server_under_its_own_names() {
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = Gateway::start(&two_demos(&dir), &["--server", "other"], json!({})).await;
    let names = gateway.tool_names().await;
    assert!(names.contains(&"echo".to_string()) && !names.iter().any(|n| n.contains("__")), "{names:?}");
    assert_eq!(gateway.call_text("echo", json!({"text": "plain"})).await, "plain");
    let prompt = gateway.result("prompts/get", json!({"name": "plain"})).await;
    assert!(prompt["messages"].as_array().is_some_and(|m| !m.is_empty()), "{prompt}");
    let statuses = gateway.statuses().await;
    assert_eq!(statuses.len(), 1);
    assert_eq!(statuses[0]["name"], "other");
    assert_eq!(gateway.close().await, Some(0));
}

#[tokio::test]
async fn sighup_applies_the_changed_configuration_and_keeps_unchanged_servers() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(&dir, &[demo_table("demo", &[]), demo_table("gone", &[])]);
    let mut gateway = Gateway::start(&path, &[], json!({})).await;
    let names = gateway.tool_names().await;
    assert!(names.contains(&"gone__echo".to_string()) && !names.iter().any(|n| n.starts_with("other__")), "{names:?}");
    let pid = pid_of(&gateway.statuses().await, "demo");
    std::fs::write(&path, [demo_table("demo", &[]), demo_table("other", &[])].concat()).unwrap();
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(gateway.child.id().unwrap() as i32, libc::SIGHUP) };
    // Each change of the pool is announced; look again after each until it is all there.
    within("the reloaded pool's tools (other__echo in, gone__echo out)", async {
        loop {
            let names = gateway.tool_names().await;
            if names.contains(&"other__echo".to_string()) && !names.contains(&"gone__echo".to_string()) {
                break;
            }
            gateway.notification("notifications/tools/list_changed").await;
        }
    })
    .await;
    assert_eq!(gateway.call_text("other__echo", json!({"text": "added"})).await, "added");
    let statuses = gateway.statuses().await;
    assert_eq!(pid_of(&statuses, "demo"), pid, "the unchanged server kept running");
    let servers: Vec<&str> = statuses.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(servers, ["demo", "other"]);
    let gone = gateway.call("gone__echo", json!({"text": "x"})).await;
    assert_eq!(gone["error"]["code"], -32602, "{gone}");
    assert_eq!(gateway.close().await, Some(0));
}

#[tokio::test]
async fn an_overloaded_server_is_a_json_rpc_error_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let table = format!("{}max_in_flight = 1\nmax_queued = 0\n", demo_table("demo", &[]));
    let mut gateway = Gateway::start(&config(&dir, &[table]), &[], json!({})).await;
    // Once the server is connected, listed and idle, one call takes its only slot.
    gateway.tool_names().await;
    gateway.statuses_until("`demo` idle", |s| s[0]["in_flight"].as_u64() == Some(0)).await;
    let slow = gateway.send("tools/call", json!({"name": "demo__sleep", "arguments": {"ms": 600000}})).await;
    gateway.statuses_until("the sleep call in flight", |s| s[0]["in_flight"].as_u64() == Some(1)).await;
    let refused = gateway.call("demo__echo", json!({"text": "x"})).await;
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    assert_eq!(refused["error"]["data"]["kind"], "overloaded", "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("server `demo` is overloaded"), "{refused}");
    gateway.notify("notifications/cancelled", json!({"requestId": slow})).await;
    gateway.statuses_until("the cancelled call to leave", |s| s[0]["in_flight"].as_u64() == Some(0)).await;
    assert_eq!(gateway.call_text("demo__echo", json!({"text": "free again"})).await, "free again");
    assert_eq!(gateway.close().await, Some(0));
}

/// A client that stops reading: the gateway stops reading it too (its
/// stdin pipe fills up) instead of queueing answers, and it answers every
/// request once the client reads again.
#[tokio::test]
async fn a_client_that_stops_reading_is_not_read_from_and_memory_stays_bounded() {
    use tokio::io::AsyncWriteExt;
    const REQUESTS: i64 = 1500;
    const BYTES: usize = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = Gateway::start(&config(&dir, &[demo_table("demo", &[])]), &[], json!({})).await;
    assert_eq!(gateway.call_text("demo__echo", json!({"text": "warm"})).await, "warm");
    let before = gateway.memory_kib("VmRSS");
    let first = gateway.next_id();
    gateway.skip_ids(REQUESTS);
    let stdin = gateway.stdin.clone();
    // Unbounded, the gateway would hold REQUESTS * BYTES = 150 MB of answers.
    let flood = tokio::spawn(async move {
        let mut stdin = stdin.lock().await;
        for id in first..first + REQUESTS {
            let call =
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "demo__big", "arguments": {"bytes": BYTES}}});
            let mut line = serde_json::to_vec(&call).unwrap();
            line.push(b'\n');
            stdin.write_all(&line).await.unwrap();
        }
        stdin.flush().await.unwrap();
    });
    // Wait until the gateway has stopped reading: its stdin pipe is (nearly) full.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while gateway.unread_input() < 32 * 1024 {
        assert!(!flood.is_finished(), "all {REQUESTS} requests were read though nobody read an answer");
        assert!(tokio::time::Instant::now() < deadline, "the gateway's stdin never filled up within {PATIENCE:?}");
        tokio::task::yield_now().await;
        std::thread::yield_now();
    }
    let stuck = gateway.memory_kib("VmRSS");
    let mut answered = 0;
    for id in first..first + REQUESTS {
        let answer = gateway.response(json!(id)).await;
        assert_eq!(answer["result"]["content"][0]["text"].as_str().map(str::len), Some(BYTES), "request {id}");
        answered += 1;
    }
    flood.await.unwrap();
    let peak = gateway.memory_kib("VmHWM");
    assert_eq!(answered, REQUESTS);
    let grew_mib = peak.saturating_sub(before) / 1024;
    eprintln!("gateway memory: {before} KiB before, {stuck} KiB while stuck, peak {peak} KiB (+{grew_mib} MiB)");
    assert!(grew_mib < 64, "the gateway grew by {grew_mib} MiB for a client that did not read");
    assert_eq!(gateway.call_text("demo__echo", json!({"text": "still serving"})).await, "still serving");
    assert_eq!(gateway.close().await, Some(0));
}

/// A 2025-11-25 server's tool that must run as a task is served as a plain
/// tool: the gateway's connection runs the task and the client gets its result.
#[tokio::test]
async fn a_task_required_tool_is_served_and_answered_with_the_tasks_result() {
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = Gateway::start(&config(&dir, &[demo_table("demo", &["--era", "legacy"])]), &[], json!({})).await;
    let listed = gateway.result("tools/list", json!({})).await;
    let tool = listed["tools"].as_array().unwrap().iter().find(|tool| tool["name"] == "demo__slow_task").cloned();
    // The gateway runs any call as a task of its own when asked; the upstream's `required` is its connection's business.
    assert!(tool.as_ref().is_some_and(|tool| tool["execution"]["taskSupport"] == "optional"), "{listed}");
    let answer = gateway.call("demo__slow_task", json!({"ms": 5})).await;
    assert_eq!(answer["result"]["content"][0]["text"], "slept 5 ms", "{answer}");
    assert!(answer["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"].is_string(), "{answer}");
    assert_eq!(gateway.close().await, Some(0));
}

/// A client's task-augmented call is a task of the gateway's: answered at
/// once, its status and result fetched later, cancellable (which cancels
/// the upstream call), seen only by its own session.
#[tokio::test]
async fn a_task_augmented_call_runs_as_a_task_of_the_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = Gateway::start(&config(&dir, &[demo_table("demo", &[])]), &[], json!({})).await;
    let hello = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    let offered = gateway.result("initialize", hello).await;
    assert!(offered["capabilities"]["tasks"]["requests"]["tools"]["call"].is_object(), "{offered}");
    let created = gateway.result("tools/call", json!({"name": "demo__echo", "arguments": {"text": "later"}, "task": {"ttl": 60000}})).await;
    let id = created["task"]["taskId"].as_str().expect("a CreateTaskResult").to_string();
    assert_eq!((created["task"]["ttl"].as_u64(), created["task"]["pollInterval"].is_u64()), (Some(60000), true), "{created}");
    let result = gateway.result("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result["content"][0]["text"], "later", "{result}");
    assert_eq!(result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id.as_str(), "{result}");
    assert_eq!(gateway.result("tasks/get", json!({"taskId": id})).await["status"], "completed");
    let listed = gateway.result("tasks/list", json!({})).await;
    assert!(listed["tasks"].as_array().is_some_and(|tasks| tasks.iter().any(|task| task["taskId"] == id.as_str())), "{listed}");

    let slow = gateway.result("tools/call", json!({"name": "demo__sleep", "arguments": {"ms": 600000}, "task": {}})).await;
    let slow = slow["task"]["taskId"].as_str().unwrap().to_string();
    gateway.statuses_until("the task's sleep call in flight", |s| s[0]["in_flight"].as_u64() == Some(1)).await;
    assert_eq!(gateway.result("tasks/cancel", json!({"taskId": slow})).await["status"], "cancelled");
    let received = cancellations_received(&mut gateway).await;
    assert_eq!(received[0]["tool"], "sleep", "the upstream call was cancelled: {received:?}");
    let refused = gateway.request("tasks/result", json!({"taskId": slow})).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let unknown = gateway.request("tasks/get", json!({"taskId": "task-0"})).await;
    assert!(unknown["error"]["message"].as_str().is_some_and(|m| m.contains("no task")), "{unknown}");
    assert_eq!(gateway.close().await, Some(0));
}

/// A server's secret that reaches its stderr is masked in the status resource.
#[tokio::test]
async fn the_status_resource_masks_the_servers_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let table = format!("{}env = {{ DATABASE_URL = \"postgres://u:pa55word@host/db\" }}\n", demo_table("demo", &[]));
    let mut gateway = Gateway::start(&config(&dir, &[table]), &[], json!({})).await;
    gateway.call_text("demo__stderr", json!({"text": "connecting to postgres://u:pa55word@host/db"})).await;
    let has_line = |s: &[Value]| s[0]["stderr_tail"].to_string().contains("connecting to");
    let tail = gateway.statuses_until("the stderr line in the status", has_line).await[0]["stderr_tail"].to_string();
    assert!(!tail.contains("pa55word") && tail.contains("postgres://u:"), "{tail}");
    assert_eq!(gateway.close().await, Some(0));
}

/// One stdio client's calls start on the gateway's runtime thread, so its
/// connections stay there: no `mcpvisor-conn-N` thread, however many servers
/// (docs/operations.md, "Threads"); `MCPVISOR_CONNECTION_THREADS` still spreads them.
#[tokio::test]
async fn over_stdio_the_connections_share_the_runtimes_thread_unless_told_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let connection_threads = |pid: u32| {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
        tasks.filter(|task| std::fs::read_to_string(task.path().join("comm")).unwrap_or_default().starts_with("mcpvisor-conn-")).count()
    };
    let mut shared = Gateway::start(&two_demos(&dir), &[], json!({})).await;
    assert_eq!(shared.call_text("demo__echo", json!({"text": "here"})).await, "here");
    assert_eq!(connection_threads(shared.child.id().unwrap()), 0);
    assert_eq!(shared.close().await, Some(0));

    let state = dir.path().join("state");
    let env = [("XDG_STATE_HOME", state.to_str().unwrap()), ("MCPVISOR_CONNECTION_THREADS", "2")];
    let mut spread = Gateway::start_with_env(&two_demos(&dir), &[], json!({}), &env).await;
    assert_eq!(spread.call_text("other__echo", json!({"text": "there"})).await, "there");
    assert_eq!(connection_threads(spread.child.id().unwrap()), 2, "two servers on two threads");
    assert_eq!(spread.close().await, Some(0));
}
