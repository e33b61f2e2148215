//! Named keys and the access policy through a real `mcpvisor serve --http`:
//! alice (team red) and bob (team blue) each see and use only what the
//! policy gives them, in both eras; SIGHUP changes what bob sees on the
//! next request, and a policy that does not compile keeps the old one.

use std::time::{Duration, Instant};

use crate::gateway_http_support::{client, initialize, json_of, modern_meta, post, request, Gateway, BIN, LEGACY, MODERN};
use serde_json::{json, Value};

const ALICE: &str = "alice-0f3a9c2e7b1d4a6f8e0c";
const BOB: &str = "bob-9e8d7c6b5a4f3e2d1c0b";

/// Two demo servers, `demo` and `github`; alice and bob's keys; `rules` after the policy's head.
fn config(rules: &str) -> String {
    format!(
        "[servers.demo]\ncommand = {BIN:?}\nargs = [\"demo-server\"]\n\
         [servers.github]\ncommand = {BIN:?}\nargs = [\"demo-server\"]\n\n\
         [serve.keys.alice]\ntoken = \"${{ALICE_KEY}}\"\nscopes = [\"tools:call\"]\nclaims = {{ team = \"red\" }}\n\
         [serve.keys.bob]\ntoken = \"${{BOB_KEY}}\"\nscopes = [\"tools:call\"]\nclaims = {{ team = \"blue\" }}\n\n\
         [serve.policy]\ndefault = \"deny\"\n{rules}"
    )
}

const RULES: &str = r#"
[[serve.policy.rules]]
name = "red-team-github"
effect = "allow"
servers = ["git*"]
when = 'identity.claims.team == "red" && "tools:call" in identity.scopes'

[[serve.policy.rules]]
name = "everyone-echoes"
effect = "allow"
servers = ["demo"]
tools = ["echo", "add"]

[[serve.policy.rules]]
name = "no-crash"
effect = "deny"
tools = ["crash"]
"#;

const BLUE_TOO: &str = r#"
[[serve.policy.rules]]
name = "blue-team-github-echo"
effect = "allow"
servers = ["github"]
tools = ["echo"]
when = 'identity.claims.team == "blue"'
"#;

fn start(rules: &str) -> Gateway {
    Gateway::start_with_config(&config(rules), "127.0.0.1:0", &[], &[("ALICE_KEY", ALICE), ("BOB_KEY", BOB)]).expect("the gateway starts")
}

/// One caller speaking the handshake era (a session of its own) or the stateless one.
struct Caller {
    http: reqwest::Client,
    url: String,
    key: &'static str,
    session: Option<String>,
}

impl Caller {
    async fn legacy(gateway: &Gateway, key: &'static str) -> Caller {
        let http = client();
        let response = post(&http, &gateway.mcp(), &initialize(LEGACY)).bearer_auth(key).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let session = response.headers()["mcp-session-id"].to_str().unwrap().to_string();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let sent = post(&http, &gateway.mcp(), &initialized)
            .bearer_auth(key)
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", LEGACY)
            .send()
            .await
            .unwrap();
        assert_eq!(sent.status(), 202);
        Caller { http, url: gateway.mcp(), key, session: Some(session) }
    }

    fn modern(gateway: &Gateway, key: &'static str) -> Caller {
        Caller { http: client(), url: gateway.mcp(), key, session: None }
    }

    /// The JSON-RPC answer to `method` with `params`.
    async fn ask(&self, method: &str, mut params: Value) -> Value {
        let mut builder = match &self.session {
            Some(session) => {
                let body = request(7, method, params);
                post(&self.http, &self.url, &body).header("mcp-session-id", session).header("mcp-protocol-version", LEGACY)
            }
            None => {
                params["_meta"] = modern_meta();
                let name = params.get("name").or(params.get("uri")).and_then(Value::as_str).map(str::to_string);
                let body = request(7, method, params);
                let builder = post(&self.http, &self.url, &body).header("mcp-protocol-version", MODERN).header("mcp-method", method);
                match name {
                    Some(name) => builder.header("mcp-name", name),
                    None => builder,
                }
            }
        };
        builder = builder.bearer_auth(self.key);
        json_of(builder.send().await.unwrap()).await
    }

    async fn names(&self, method: &str, field: &str, key: &str) -> Vec<String> {
        let answer = self.ask(method, json!({})).await;
        let listed = answer["result"][field].as_array().unwrap_or_else(|| panic!("{method}: {answer}"));
        listed.iter().map(|item| item[key].as_str().unwrap().to_string()).collect()
    }

    async fn tools(&self) -> Vec<String> {
        self.names("tools/list", "tools", "name").await
    }
}

#[tokio::test]
async fn each_key_sees_and_uses_only_what_the_policy_gives_it_in_both_eras() {
    let gateway = start(RULES);
    assert!(!gateway.stderr_text().contains(ALICE) && !gateway.stderr_text().contains(BOB), "keys are never printed");
    for era in ["legacy", "modern"] {
        let (alice, bob) = match era {
            "legacy" => (Caller::legacy(&gateway, ALICE).await, Caller::legacy(&gateway, BOB).await),
            _ => (Caller::modern(&gateway, ALICE), Caller::modern(&gateway, BOB)),
        };
        let alices = alice.tools().await;
        assert!(alices.contains(&"github__echo".into()) && alices.contains(&"github__sleep".into()), "{era}: {alices:?}");
        assert!(alices.contains(&"demo__echo".into()) && !alices.contains(&"demo__sleep".into()), "{era}: {alices:?}");
        assert!(!alices.iter().any(|name| name.ends_with("__crash")), "{era}: deny wins: {alices:?}");
        let bobs = bob.tools().await;
        assert_eq!(bobs, ["demo__add", "demo__echo"], "{era}");

        let echoed = bob.ask("tools/call", json!({"name": "demo__echo", "arguments": {"text": "hi"}})).await;
        assert_eq!(echoed["result"]["content"][0]["text"], "hi", "{era}: {echoed}");
        let refused = bob.ask("tools/call", json!({"name": "github__echo", "arguments": {"text": "hi"}})).await;
        let message = refused["error"]["message"].as_str().unwrap_or_else(|| panic!("{era}: {refused}"));
        assert!(message.contains("`github__echo`") && message.contains("`bob`"), "{era}: {message}");
        assert!(message.contains("no rule allows it; the default is deny"), "{era}: {message}");
        assert!(!refused.to_string().contains("inputSchema") && !refused.to_string().contains("Echoes"), "{era}: no schema leaks");
        let crash = alice.ask("tools/call", json!({"name": "github__crash", "arguments": {}})).await;
        let message = crash["error"]["message"].as_str().unwrap_or_else(|| panic!("{era}: {crash}"));
        assert!(message.contains("the rule `no-crash` denies it"), "{era}: {message}");
        assert_eq!(crash["error"]["data"]["policyRule"], "no-crash", "{era}");

        assert!(alice.names("prompts/list", "prompts", "name").await.contains(&"github__greet".into()), "{era}");
        assert_eq!(bob.names("prompts/list", "prompts", "name").await, Vec::<String>::new(), "{era}");
        let prompt = bob.ask("prompts/get", json!({"name": "github__greet", "arguments": {"name": "Bo"}})).await;
        assert!(prompt["error"]["message"].as_str().is_some_and(|m| m.contains("the prompt `github__greet`")), "{era}: {prompt}");
        assert_eq!(bob.names("resources/list", "resources", "uri").await, Vec::<String>::new(), "{era}: not even the status");
        let status = bob.ask("resources/read", json!({"uri": "mcpvisor://status"})).await;
        assert!(status["error"]["message"].as_str().is_some_and(|m| m.starts_with("Forbidden")), "{era}: {status}");
        let templates = alice.names("resources/templates/list", "resourceTemplates", "uriTemplate").await;
        assert!(!templates.is_empty(), "{era}: alice sees github's templates");
        assert!(bob.names("resources/templates/list", "resourceTemplates", "uriTemplate").await.is_empty(), "{era}");
    }
}

/// Polls `check` every 50 ms until it holds, for at most 20 s.
async fn eventually<F: std::future::Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(Instant::now() < deadline, "{what} did not happen within 20 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn hang_up(gateway: &Gateway) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(gateway.child.id() as i32, libc::SIGHUP) };
}

#[tokio::test]
async fn sighup_changes_what_bob_sees_and_a_policy_that_does_not_compile_keeps_the_old_one() {
    let gateway = start(RULES);
    let bob = Caller::legacy(&gateway, BOB).await;
    let stateless_bob = Caller::modern(&gateway, BOB);
    assert!(!bob.tools().await.contains(&"github__echo".into()));

    std::fs::write(gateway.config_file(), config(&format!("{RULES}{BLUE_TOO}"))).unwrap();
    hang_up(&gateway);
    eventually("bob seeing github__echo after SIGHUP", || async { bob.tools().await.contains(&"github__echo".into()) }).await;
    assert!(stateless_bob.tools().await.contains(&"github__echo".into()), "the stateless era reads the same policy");
    let echoed = bob.ask("tools/call", json!({"name": "github__echo", "arguments": {"text": "now"}})).await;
    assert_eq!(echoed["result"]["content"][0]["text"], "now", "{echoed}");

    let broken = format!("{RULES}{BLUE_TOO}\n[[serve.policy.rules]]\nname = \"broken\"\neffect = \"deny\"\nwhen = 'identity.('\n");
    std::fs::write(gateway.config_file(), config(&broken)).unwrap();
    hang_up(&gateway);
    eventually("the warning about the broken rule", || async {
        let stderr = gateway.stderr_text();
        stderr.contains("the previous ones stay") && stderr.contains("serve.policy.rules.broken.when")
    })
    .await;
    assert!(bob.tools().await.contains(&"github__echo".into()), "the old policy stays");
    assert!(!gateway.stderr_text().contains(BOB), "keys are never printed");
}

#[tokio::test]
async fn a_rule_that_does_not_compile_stops_serve_naming_the_file_and_the_rule() {
    let broken = "[[serve.policy.rules]]\nname = \"typo\"\neffect = \"allow\"\nwhen = 'identity.claims.team =='\n";
    let refused = Gateway::start_with_config(&config(broken), "127.0.0.1:0", &[], &[("ALICE_KEY", ALICE), ("BOB_KEY", BOB)])
        .err()
        .expect("no start with a broken rule");
    assert!(
        refused.contains("servers.toml") && refused.contains("`serve.policy.rules.typo.when` is not a valid CEL expression"),
        "{refused}"
    );
    let short = Gateway::start_with_config(&config(""), "127.0.0.1:0", &[], &[("ALICE_KEY", "short"), ("BOB_KEY", BOB)])
        .err()
        .expect("no start with a weak key");
    assert!(short.contains("serve.keys.alice.token") && short.contains("is 5 characters long"), "{short}");
}

/// `[serve.caller_limits]`: each identity has its own share of calls; alice
/// spending hers is refused at once, naming her limit, while bob's calls
/// still pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_identity_has_its_own_rate_limit() {
    let gateway = start(&format!("{RULES}\n[serve.caller_limits]\nrate = 0.2\nburst = 2\n"));
    let alice = Caller::modern(&gateway, ALICE);
    let bob = Caller::legacy(&gateway, BOB).await;
    let echo = |text: &str| json!({"name": "demo__echo", "arguments": {"text": text}});
    for n in 0..2 {
        let answer = alice.ask("tools/call", echo("hi")).await;
        assert_eq!(answer["result"]["content"][0]["text"], "hi", "call {n} of alice's burst: {answer}");
    }
    let refused = alice.ask("tools/call", echo("one too many")).await;
    let text = refused.to_string();
    assert!(text.contains("rate limit of caller `key:alice` (0.2/s, burst 2)") && !text.contains(ALICE), "{refused}");
    assert!(
        text.contains("[serve.caller_limits]") && !text.contains("server's configuration"),
        "the advice fits a caller's limit: {refused}"
    );
    let answer = bob.ask("tools/call", echo("bob")).await;
    assert_eq!(answer["result"]["content"][0]["text"], "bob", "bob's share is his own: {answer}");
}
