//! The audit log of a real `mcpvisor serve --http` with named keys, a
//! policy and per-caller limits says what the gateway did: every call is a
//! line, refused ones included (who, what, which rule, the arguments only as
//! their digest), and each admin action names its caller.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::gateway_http_support::{
    client, json_of, modern_meta, post, request, Gateway, ALICE, BIN, BOB, CAROL, MODERN, THREE_KEYS, THREE_KEYS_ENV,
};
use serde_json::{json, Value};

/// The policy (and limits) after [`THREE_KEYS`].
const CONFIG: &str = r#"
[serve.caller_limits]
rate = 0.01
burst = 2

[serve.policy]
default = "deny"

[[serve.policy.rules]]
name = "alice-everything"
effect = "allow"
when = 'identity.subject == "alice"'

[[serve.policy.rules]]
name = "others-demo"
effect = "allow"
servers = ["demo"]
when = 'identity.subject != "alice"'

[[serve.policy.rules]]
name = "no-crash"
effect = "deny"
tools = ["crash"]
"#;

/// A stateless (2026-07-28) call of `tool` by `key`: its answer.
async fn call(http: &reqwest::Client, gateway: &Gateway, key: &str, tool: &str, arguments: Value) -> Value {
    let body = request(1, "tools/call", json!({"name": tool, "arguments": arguments, "_meta": modern_meta()}));
    let builder = post(http, &gateway.mcp(), &body).bearer_auth(key).header("mcp-protocol-version", MODERN);
    json_of(builder.header("mcp-method", "tools/call").header("mcp-name", tool).send().await.unwrap()).await
}

/// The audit log's lines once it holds `count` of them (at most 20 s).
async fn lines(path: &Path, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<Value> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
        if lines.len() >= count {
            return lines;
        }
        assert!(Instant::now() < deadline, "the audit log holds {} lines, not {count}: {text}", lines.len());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn every_call_refused_ones_too_and_every_admin_action_is_a_line_naming_who() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let servers = format!(
        "[servers.demo]\ncommand = {BIN:?}\nargs = [\"demo-server\"]\n[servers.vault]\ncommand = {BIN:?}\nargs = [\"demo-server\"]\n"
    );
    let env = THREE_KEYS_ENV;
    let extra = ["--audit", audit.to_str().unwrap()];
    let gateway =
        Gateway::start_with_config(&format!("{servers}{THREE_KEYS}{CONFIG}"), "127.0.0.1:0", &extra, &env).expect("the gateway starts");
    let http = client();
    let secret = json!({"text": "alice-secret-argument"});

    let denied = call(&http, &gateway, BOB, "vault__echo", secret.clone()).await;
    assert!(denied["error"].is_object(), "{denied}");
    let crash = call(&http, &gateway, ALICE, "demo__crash", json!({})).await;
    assert_eq!(crash["error"]["data"]["policyRule"], "no-crash", "{crash}");
    let unknown = call(&http, &gateway, ALICE, "nowhere__tool", json!({})).await;
    assert!(unknown["error"].is_object(), "{unknown}");
    for _ in 0..2 {
        let echoed = call(&http, &gateway, ALICE, "demo__echo", secret.clone()).await;
        assert_eq!(echoed["result"]["content"][0]["text"], "alice-secret-argument", "{echoed}");
    }
    let limited = call(&http, &gateway, ALICE, "demo__echo", secret.clone()).await;
    assert!(limited.to_string().contains("rate limit of caller `key:alice`"), "{limited}");
    let restart = http.post(format!("{}/admin/servers/demo/restart", gateway.base)).bearer_auth(CAROL).send().await.unwrap();
    assert_eq!(restart.status(), 200);

    let lines = lines(&audit, 7).await;
    let text = serde_json::to_string(&lines).unwrap();
    assert!(!text.contains("alice-secret-argument"), "arguments appear as their digest only: {text}");
    let line = |subject: &str, tool: &str, outcome: &str| {
        lines
            .iter()
            .find(|line| line["subject"] == subject && line["tool"] == tool && line["outcome"] == outcome)
            .unwrap_or_else(|| panic!("no line of {subject}'s {tool} with outcome {outcome}: {text}"))
    };
    let bobs = line("bob", "echo", "denied");
    assert_eq!((&bobs["server"], &bobs["error_kind"]), (&json!("vault"), &json!("policy")), "{bobs}");
    assert!(bobs.get("rule").is_none(), "the default denied, no rule did: {bobs}");
    assert!(bobs["arguments"]["sha256"].as_str().is_some_and(|digest| digest.len() == 64), "{bobs}");
    assert_eq!(line("alice", "crash", "denied")["rule"], "no-crash");
    let unknown = line("alice", "nowhere__tool", "error");
    assert_eq!((&unknown["server"], &unknown["error_kind"]), (&Value::Null, &json!("unknown_tool")), "{unknown}");
    assert_eq!(line("alice", "echo", "rate_limited")["error_kind"], "rate_limited");
    assert_eq!(lines.iter().filter(|line| line["subject"] == "alice" && line["outcome"] == "ok").count(), 2, "{text}");
    let admin = lines.iter().find(|line| line["action"] == "restart").unwrap_or_else(|| panic!("no admin line: {text}"));
    assert_eq!((&admin["subject"], &admin["server"], &admin["outcome"]), (&json!("carol"), &json!("demo"), &json!("ok")), "{admin}");
}
