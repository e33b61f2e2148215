//! Identities kept apart by a real `mcpvisor serve --http` in front of two
//! demo servers, `demo` and `vault`, with the named keys alice, bob and
//! carol and a policy that gives `vault` to alice only:
//! - a server's request (elicitation, sampling) raised by alice's call goes
//!   to alice's session only; when her client cannot answer it, the server
//!   gets the no-client answer, never bob's;
//! - bob's session hears none of `vault`'s log lines (it hears `demo`'s);
//! - the status resource and `/admin` show each caller only the servers it
//!   may use something of; `/metrics` is for the admin scope only.

use crate::gateway_http_support::{
    client, json_of, post, request, Gateway, KeySession as Session, Sse, SseReader, ALICE, BIN, BOB, CAROL, THREE_KEYS, THREE_KEYS_ENV,
};
use serde_json::{json, Value};

/// The policy (and limits) after [`THREE_KEYS`].
const CONFIG: &str = r#"
[serve.policy]
default = "deny"

[[serve.policy.rules]]
name = "alice-everything"
effect = "allow"
when = 'identity.subject == "alice"'

[[serve.policy.rules]]
name = "others-demo-and-status"
effect = "allow"
servers = ["demo", "mcpvisor"]
when = 'identity.subject != "alice"'
"#;

fn start() -> Gateway {
    let servers = format!(
        "[servers.demo]\ncommand = {BIN:?}\nargs = [\"demo-server\"]\n[servers.vault]\ncommand = {BIN:?}\nargs = [\"demo-server\"]\n"
    );
    let env = THREE_KEYS_ENV;
    Gateway::start_with_config(&format!("{servers}{THREE_KEYS}{CONFIG}"), "127.0.0.1:0", &[], &env).expect("the gateway starts")
}

/// Reads `stream` until a log message whose data is `marker`; every event before it.
async fn until_marker(stream: &mut SseReader, marker: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let Sse { data, .. } = stream.next().await.expect("the stream stays open until the marker");
        if data["method"] == "notifications/message" && data["params"]["data"] == marker {
            return seen;
        }
        seen.push(data);
    }
}

/// Bob's session declares elicitation and sampling and would accept
/// anything; alice's declares neither. Her calls that make `vault` ask
/// get the no-client answers, and bob's stream never carries her question.
#[tokio::test]
async fn a_servers_request_goes_only_to_the_session_whose_call_caused_it() {
    let gateway = start();
    let alice = Session::open(&gateway, ALICE, json!({})).await;
    let bob = Session::open(&gateway, BOB, json!({"elicitation": {"form": {}}, "sampling": {}})).await;
    let mut bobs_stream = bob.listen().await;
    // Whatever bob's stream is asked, bob's client accepts (as a misrouted question would be answered).
    let (answers, answering) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let accepting = {
        let (http, url, id) = (bob.http.clone(), bob.url.clone(), bob.id.clone());
        tokio::spawn(async move {
            let mut answering = answering;
            while let Some(asked) = answering.recv().await {
                let result = match asked["method"].as_str() {
                    Some("sampling/createMessage") => {
                        json!({"role": "assistant", "content": {"type": "text", "text": "bob's model"}, "model": "bob"})
                    }
                    _ => json!({"action": "accept", "content": {"approve": true}}),
                };
                let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": result});
                let _ = post(&http, &url, &answer).bearer_auth(BOB).header("mcp-session-id", &id).send().await;
            }
        })
    };
    let reader = tokio::spawn(async move {
        let mut seen = Vec::new();
        loop {
            let Sse { data, .. } = bobs_stream.next().await.expect("bob's stream stays open");
            if data.get("id").is_some() && data.get("method").is_some() {
                let _ = answers.send(data.clone());
            }
            if data["method"] == "notifications/message" && data["params"]["data"] == "bob's marker" {
                return seen;
            }
            seen.push(data);
        }
    });

    let question = "approve wiring $1M from alice's account?";
    let elicited = alice.call(1, "vault__elicit", json!({"message": question})).await;
    assert_eq!(elicited["result"]["structuredContent"]["action"], "decline", "the no-client answer, not bob's: {elicited}");
    let sampled = alice.call(2, "vault__sample", json!({"prompt": "alice's secret prompt"})).await;
    let text = sampled.to_string();
    assert!(text.contains("does not offer sampling") && !text.contains("bob's model"), "the no-client answer: {sampled}");

    // A line of bob's own, after alice's calls ended: what his stream carried before it is all it will of them.
    bob.call(3, "demo__log", json!({"level": "error", "message": "bob's marker"})).await;
    let seen = reader.await.unwrap();
    accepting.abort();
    let carried = serde_json::to_string(&seen).unwrap();
    assert!(!carried.contains("wiring") && !carried.contains("alice's secret prompt"), "bob saw alice's questions: {carried}");
    assert!(!seen.iter().any(|event| event.get("id").is_some() && event.get("method").is_some()), "bob was asked: {carried}");
}

/// When alice's own client declared elicitation, her question comes on her call's stream and her answer is the call's.
#[tokio::test]
async fn the_calling_session_is_asked_on_its_calls_stream() {
    let gateway = start();
    let alice = Session::open(&gateway, ALICE, json!({"elicitation": {"form": {}}})).await;
    let _bob = Session::open(&gateway, BOB, json!({"elicitation": {"form": {}}})).await;
    let response = alice.send(&request(1, "tools/call", json!({"name": "vault__elicit", "arguments": {"message": "ok?"}}))).await;
    let mut events = SseReader::new(response);
    let asked = loop {
        let event = events.next().await.expect("the question, on the call's stream").data;
        if event.get("id").is_some() {
            break event;
        }
    };
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"approve": true}}});
    assert_eq!(alice.send(&answer).await.status(), 202);
    let answered = events.answer_to(1).await;
    assert_eq!(answered["result"]["structuredContent"]["action"], "accept", "{answered}");
}

/// Bob's session hears `demo`'s log lines and none of `vault`'s, though
/// alice's calls make `vault` log while bob listens.
#[tokio::test]
async fn a_denied_servers_log_lines_never_reach_the_session() {
    let gateway = start();
    let alice = Session::open(&gateway, ALICE, json!({})).await;
    let bob = Session::open(&gateway, BOB, json!({})).await;
    let mut alices_stream = alice.listen().await;
    let mut bobs_stream = bob.listen().await;
    let logged = alice.call(1, "vault__log", json!({"level": "error", "message": "vault: alice's secret line"})).await;
    assert!(logged["result"]["content"][0]["text"].as_str().is_some_and(|text| text.starts_with("sent")), "{logged}");
    alice.call(2, "demo__log", json!({"level": "error", "message": "demo marker"})).await;

    let alices = serde_json::to_string(&until_marker(&mut alices_stream, "demo marker").await).unwrap();
    assert!(alices.contains("vault: alice's secret line"), "alice hears vault: {alices}");
    let bobs = until_marker(&mut bobs_stream, "demo marker").await;
    let carried = serde_json::to_string(&bobs).unwrap();
    assert!(!carried.contains("secret line") && !carried.contains("\"logger\":\"vault\""), "bob heard vault: {carried}");
}

/// The status resource and `/admin` show each caller its own servers only;
/// `/metrics` answers the admin scope only.
#[tokio::test]
async fn status_admin_and_metrics_are_filtered_by_caller() {
    let gateway = start();
    let http = client();
    let servers_in = |answer: &Value| -> Vec<String> {
        let text = answer["result"]["contents"][0]["text"].as_str().unwrap_or_else(|| panic!("{answer}"));
        let statuses: Value = serde_json::from_str(text).unwrap();
        statuses.as_array().unwrap().iter().map(|status| status["name"].as_str().unwrap().to_string()).collect()
    };
    let alice = Session::open(&gateway, ALICE, json!({})).await;
    let bob = Session::open(&gateway, BOB, json!({})).await;
    let read = request(1, "resources/read", json!({"uri": "mcpvisor://status"}));
    assert_eq!(servers_in(&json_of(alice.send(&read).await).await), ["demo", "vault"]);
    assert_eq!(servers_in(&json_of(bob.send(&read).await).await), ["demo"], "bob does not see vault's state or stderr");

    let metrics = format!("{}/metrics", gateway.base);
    let refused = http.get(&metrics).bearer_auth(BOB).send().await.unwrap();
    assert_eq!(refused.status(), 403);
    assert!(refused.text().await.unwrap().contains("mcpvisor:admin"));
    let served = http.get(&metrics).bearer_auth(CAROL).send().await.unwrap();
    assert_eq!(served.status(), 200);

    let status = json_of(http.get(format!("{}/admin/status", gateway.base)).bearer_auth(CAROL).send().await.unwrap()).await;
    let names: Vec<_> = status["servers"].as_array().unwrap().iter().map(|server| server["name"].clone()).collect();
    assert_eq!(names, [json!("demo")], "carol's policy gives her demo only: {status}");
    let restart = http.post(format!("{}/admin/servers/vault/restart", gateway.base)).bearer_auth(CAROL).send().await.unwrap();
    assert_eq!(restart.status(), 404, "a server hidden from carol is one she cannot act on");
}

/// `[serve.caller_limits]` keys each caller by its kind of credential and
/// subject: the named key `token` spending its share leaves the shared
/// token's holders theirs (both were the caller `token`, one bucket).
#[tokio::test]
async fn a_named_key_and_the_shared_token_never_share_a_rate_limit() {
    let servers = format!("[servers.demo]\ncommand = {BIN:?}\nargs = [\"demo-server\"]\n");
    let config = format!(
        "{servers}[serve]\ntoken = \"${{SHARED_TOKEN}}\"\n[serve.keys.token]\ntoken = \"${{KEY_TOKEN}}\"\n\
         [serve.caller_limits]\nrate = 0.01\nburst = 1\n"
    );
    const SHARED: &str = "shared-4b3a2f1e0d9c8b7a6f5e";
    const KEY: &str = "key-named-token-1a2b3c4d5e6f";
    let env = [("SHARED_TOKEN", SHARED), ("KEY_TOKEN", KEY)];
    let gateway = Gateway::start_with_config(&config, "127.0.0.1:0", &[], &env).expect("the gateway starts");
    let key = Session::open(&gateway, KEY, json!({})).await;
    let shared = Session::open(&gateway, SHARED, json!({})).await;
    let echo = |text: &str| json!({"text": text});
    assert_eq!(key.call(1, "demo__echo", echo("first")).await["result"]["content"][0]["text"], "first");
    let refused = key.call(2, "demo__echo", echo("second")).await;
    let answer = shared.call(3, "demo__echo", echo("shared")).await;
    assert_eq!(answer["result"]["content"][0]["text"], "shared", "the shared token's share is its own: {answer}");
    assert!(refused.to_string().contains("rate limit of caller `key:token`"), "the key's share is spent: {refused}");
}

/// A list change of a server bob may not use reaches alice, who made it,
/// and not bob; nor may bob subscribe to that server's resources.
#[tokio::test]
async fn a_denied_servers_list_changes_and_resources_never_reach_the_session() {
    let gateway = start();
    let alice = Session::open(&gateway, ALICE, json!({})).await;
    let bob = Session::open(&gateway, BOB, json!({})).await;
    let mut alices_stream = alice.listen().await;
    let mut bobs_stream = bob.listen().await;
    let added = alice.call(1, "vault__add_tool", json!({"name": "alices_tool"})).await;
    assert!(added.get("result").is_some(), "{added}");
    let added = alice.call(2, "vault__add_resource", json!({"name": "alices-file"})).await;
    assert!(added.get("result").is_some(), "{added}");
    let subscribe = |id| request(id, "resources/subscribe", json!({"uri": "demo://added/alices-file"}));
    let refused = json_of(bob.send(&subscribe(3)).await).await;
    assert!(refused["error"]["message"].as_str().is_some_and(|message| message.contains("Forbidden")), "{refused}");
    let subscribed = json_of(alice.send(&subscribe(4)).await).await;
    assert!(subscribed.get("result").is_some(), "{subscribed}");
    let touched = alice.call(5, "vault__touch", json!({"uri": "demo://added/alices-file"})).await;
    assert!(touched.get("result").is_some(), "{touched}");
    alice.call(6, "demo__log", json!({"level": "error", "message": "list marker"})).await;

    let alices = until_marker(&mut alices_stream, "list marker").await;
    let methods = |events: &[Value]| events.iter().filter_map(|event| event["method"].as_str().map(str::to_string)).collect::<Vec<_>>();
    let heard = methods(&alices);
    assert!(heard.iter().any(|method| method == "notifications/resources/updated"), "alice hears her resource: {heard:?}");
    let bobs = until_marker(&mut bobs_stream, "list marker").await;
    let carried = serde_json::to_string(&bobs).unwrap();
    assert!(!carried.contains("alices-file") && !carried.contains("list_changed"), "bob heard vault's lists: {carried}");
    // Alice's tools changed: her session is told (gathered for 50 ms, so it may follow the marker).
    if !heard.iter().any(|method| method == "notifications/tools/list_changed") {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let event = tokio::time::timeout_at(deadline, alices_stream.next()).await.expect("alice is told her tools changed");
            if event.expect("alice's stream stays open").data["method"] == "notifications/tools/list_changed" {
                break;
            }
        }
    }
}

/// A rule whose cost grows with the square of the input: a call with
/// 20,000 items is refused within a second, naming the rule and the
/// budget, while bob's calls go on; a small input is judged by the rule.
#[tokio::test]
async fn a_costly_rule_refuses_a_huge_input_at_once_and_stalls_no_other_caller() {
    let policy = r#"
[serve.policy]
default = "allow"

[[serve.policy.rules]]
name = "distinct-items"
effect = "deny"
tools = ["echo"]
when = 'has(arguments.items) && !arguments.items.all(x, arguments.items.filter(y, y == x).size() == 1)'
"#;
    let servers = format!("[servers.demo]\ncommand = {BIN:?}\nargs = [\"demo-server\"]\n");
    let config = format!("{servers}{THREE_KEYS}{policy}");
    let gateway = Gateway::start_with_config(&config, "127.0.0.1:0", &[], &THREE_KEYS_ENV).expect("the gateway starts");
    let alice = Session::open(&gateway, ALICE, json!({})).await;
    let bob = Session::open(&gateway, BOB, json!({})).await;

    let distinct: Vec<String> = (0..200).map(|i| format!("item-{i}")).collect();
    let judged = alice.call(1, "demo__echo", json!({"text": "distinct", "items": distinct})).await;
    assert_eq!(judged["result"]["content"][0]["text"], "distinct", "the rule ran and allowed: {judged}");
    let mut repeated = distinct.clone();
    repeated.push("item-7".into());
    let judged = alice.call(2, "demo__echo", json!({"text": "repeated", "items": repeated})).await;
    assert!(judged.to_string().contains("the rule `distinct-items` denies it"), "the rule ran and denied: {judged}");

    let huge: Vec<String> = (0..20_000).map(|i| format!("item-{i}")).collect();
    let bobs_calls = async {
        let mut slowest = std::time::Duration::ZERO;
        for id in 0..20 {
            let started = std::time::Instant::now();
            let answer = bob.call(100 + id, "demo__echo", json!({"text": "bob"})).await;
            assert_eq!(answer["result"]["content"][0]["text"], "bob", "{answer}");
            slowest = slowest.max(started.elapsed());
        }
        slowest
    };
    let alices_call = async {
        let started = std::time::Instant::now();
        let answer = alice.call(3, "demo__echo", json!({"text": "huge", "items": huge})).await;
        (answer, started.elapsed())
    };
    let ((answer, took), bobs_slowest) = tokio::join!(alices_call, bobs_calls);
    println!("a 20,000-item call refused in {took:?}; bob's slowest of 20 calls meanwhile: {bobs_slowest:?}");
    let message = answer["error"]["message"].as_str().unwrap_or_else(|| panic!("refused: {answer}"));
    assert!(message.contains("`distinct-items`") && message.contains("over the budget"), "{message}");
    assert!(took < std::time::Duration::from_secs(1), "the huge call took {took:?}");
    assert!(bobs_slowest < std::time::Duration::from_secs(1), "bob's slowest call took {bobs_slowest:?}");
}
