//! A stdio server run once per caller (issue 35, item 3) through a real
//! `mcpvisor serve --http`, the named keys alice, bob and carol: a request
//! a caller's own process makes (sampling) goes to that caller's session,
//! even while another caller's call to the same server is open and its
//! own process asks too; the process of each answers as its caller, and
//! the audit log says which process each call reached; a
//! `${caller.…}` outside a per-caller server's `env` is refused at start.

use crate::gateway_http_support::{post, request, Gateway, KeySession, Sse, SseReader, ALICE, BIN, BOB, CAROL, THREE_KEYS, THREE_KEYS_ENV};
use serde_json::{json, Value};

fn start() -> Gateway {
    let toml = format!(
        "[servers.demo]\ncommand = {BIN:?}\nargs = [\"demo-server\"]\nenv = {{ WHO = \"${{caller.subject}}\" }}\nper_caller = true\n{THREE_KEYS}"
    );
    Gateway::start_with_config(&toml, "127.0.0.1:0", &[], &THREE_KEYS_ENV).expect("the gateway starts")
}

/// A call of `demo__sample` by `session`, read up to the server's sampling request on the call's own stream.
async fn sample_until_asked(session: &KeySession, id: u64) -> (SseReader, Value) {
    let call = request(id, "tools/call", json!({"name": "demo__sample", "arguments": {"prompt": "who?"}}));
    let response = session.send(&call).await;
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"), "a call that asks streams");
    let mut stream = SseReader::new(response);
    loop {
        let Sse { data, .. } = stream.next().await.expect("the call's stream carries the server's request");
        if data["method"] == "sampling/createMessage" {
            return (stream, data);
        }
        assert!(data["id"] != id, "the call ended without asking: {data}");
    }
}

/// Answers `asked` as `session`'s model named `model`, then reads the call's answer.
async fn answer(session: &KeySession, mut stream: SseReader, asked: &Value, model: &str, id: u64) -> Value {
    let result = json!({"role": "assistant", "content": {"type": "text", "text": format!("{model}'s model")}, "model": model});
    let sent = post(&session.http, &session.url, &json!({"jsonrpc": "2.0", "id": asked["id"], "result": result}))
        .bearer_auth(session.key)
        .header("mcp-session-id", &session.id)
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 202);
    stream.answer_to(id).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_callers_process_asks_its_own_callers_session_while_both_calls_are_open() {
    let gateway = start();
    let sampling = json!({"sampling": {}});
    let alice = KeySession::open(&gateway, ALICE, sampling.clone()).await;
    let bob = KeySession::open(&gateway, BOB, sampling).await;
    // alice's call is open, waiting on her model, when bob's process asks too.
    let (alices_stream, alices_question) = sample_until_asked(&alice, 1).await;
    let (bobs_stream, bobs_question) = sample_until_asked(&bob, 2).await;
    let bobs = answer(&bob, bobs_stream, &bobs_question, "bob", 2).await;
    let alices = answer(&alice, alices_stream, &alices_question, "alice", 1).await;
    assert!(bobs.to_string().contains("bob's model") && !bobs.to_string().contains("alice"), "{bobs}");
    assert!(alices.to_string().contains("alice's model") && !alices.to_string().contains("bob"), "{alices}");
    let carol = KeySession::open(&gateway, CAROL, json!({})).await;
    let status = carol.call(3, "demo__stderr", json!({"text": "carol was here"})).await;
    assert_eq!(status["result"]["content"][0]["text"], "ok", "{status}");
    let admin = crate::gateway_http_support::client().get(format!("{}/admin/status", gateway.base)).bearer_auth(CAROL);
    let admin = crate::gateway_http_support::json_of(admin.send().await.unwrap()).await;
    let demo = admin["servers"].as_array().and_then(|servers| servers.iter().find(|s| s["name"] == "demo")).cloned();
    assert_eq!(demo.map(|demo| demo["callers"]["callers"].clone()), Some(json!(["key:alice", "key:bob", "key:carol"])));

    // The audit log (written out when the gateway stops) says which process each call reached.
    let mut gateway = gateway;
    gateway.terminate();
    assert!(gateway.wait_exit(std::time::Duration::from_secs(30)).is_some(), "the gateway stops on SIGTERM");
    let audit = gateway.config_file().with_file_name(".local/state/mcpvisor/audit.jsonl");
    let text = std::fs::read_to_string(&audit).unwrap_or_else(|e| panic!("{}: {e}", audit.display()));
    let upstreams: Vec<(String, Value)> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["tool"] == "sample")
        .map(|line| (line["subject"].as_str().unwrap_or_default().to_owned(), line["upstream"].clone()))
        .collect();
    for who in ["alice", "bob"] {
        let expected = json!({"subject": who, "audience": format!("process of key:{who}")});
        assert!(upstreams.iter().any(|(subject, upstream)| subject == who && *upstream == expected), "{who}: {upstreams:?}");
    }
}

#[test]
fn a_caller_reference_outside_a_per_caller_servers_env_is_refused_naming_the_field() {
    for (server, field) in [
        (format!("command = {BIN:?}\nargs = [\"demo-server\", \"${{caller.subject}}\"]\nper_caller = true\n"), "args[1]"),
        (format!("command = {BIN:?}\nargs = [\"demo-server\"]\nenv = {{ WHO = \"${{caller.subject}}\" }}\n"), "env.WHO"),
    ] {
        let error = match Gateway::start_with_config(&format!("[servers.demo]\n{server}"), "127.0.0.1:0", &[], &[]) {
            Ok(_) => panic!("a gateway started with {server}"),
            Err(error) => error,
        };
        assert!(error.contains(&format!("`{field}` holds a ${{caller.…}} reference")), "{error}");
    }
}
