//! `mcpvisor serve --http` as an OAuth 2.1 resource server (`[serve.auth]`)
//! against a real identity provider on loopback: oauth2-mock-server from
//! npm (tests/interop/idp.mjs), whose RS256 keys sign the tokens and whose
//! JWKS the gateway fetches. Checked: the challenges of RFC 6750/9728, the
//! protected resource metadata, expiry, audience, scopes, unknown keys
//! (one JWKS fetch, not one per token), key rotation, sessions kept to
//! their opener, the audit line's subject, and mcpvisor's own OAuth client
//! logging in to the gateway through the provider (client credentials).
//!
//! Like the other interop tests, every test is `#[ignore]`d and `.ci/run`
//! runs them with `MCPVISOR_INTEROP=1 cargo test --test interop gateway_auth:: -- --ignored`
//! after `.ci/interop-setup` (a missing variable or package fails, never skips).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::gateway_http_support::{client, client_from, initialize, json_of, post, request, Gateway, BIN, LEGACY};
use crate::interop_support::http::{free_port, HttpServer};
use serde_json::{json, Value};

const SCOPE: &str = "mcp:tools";
/// The gateway's `jwks_min_refresh` in these tests: short, so that a refresh can be awaited.
const MIN_REFRESH: Duration = Duration::from_secs(4);

/// The provider, a gateway that takes its tokens, and the gateway's audit log.
struct Setup {
    idp: HttpServer,
    gateway: Gateway,
    audience: String,
    audit: PathBuf,
    _state: tempfile::TempDir,
}

fn setup() -> Setup {
    setup_with("", &[], &[])
}

/// [`setup`] with `extra` lines in `[serve.auth]`, `env` and `flags` for the gateway.
fn setup_with(extra: &str, env: &[(&str, &str)], flags: &[&str]) -> Setup {
    let idp = HttpServer::start("idp");
    let port = free_port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let toml = format!(
        "[servers.demo]\ncommand = {BIN:?}\nargs = [\"demo-server\"]\n\n[serve.auth]\nissuer = {:?}\naudience = {audience:?}\n\
         required_scopes = [{SCOPE:?}]\nclaims = [\"email\"]\njwks_min_refresh = \"{}s\"\n{extra}\n",
        idp.url,
        MIN_REFRESH.as_secs()
    );
    let state = tempfile::tempdir().unwrap();
    let mut env = env.to_vec();
    env.push(("XDG_STATE_HOME", state.path().to_str().unwrap()));
    let gateway = Gateway::start_with_config(&toml, &format!("127.0.0.1:{port}"), flags, &env).expect("the gateway starts");
    let audit = state.path().join("mcpvisor/audit.jsonl");
    Setup { idp, gateway, audience, audit, _state: state }
}

impl Setup {
    /// A token of the provider: `claims` over the defaults (this audience, the scope, `sub` alice).
    async fn mint(&self, claims: Value, extra: Value) -> String {
        let mut all = json!({"sub": "alice", "aud": self.audience, "scope": SCOPE, "client_id": "test-cli", "email": "alice@example.com"});
        all.as_object_mut().unwrap().extend(claims.as_object().unwrap().clone());
        let mut body = json!({"claims": all});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let answer = client()
            .post(format!("{}/test/mint", self.idp.url))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        json_of(answer).await["token"].as_str().expect("a token").to_string()
    }

    async fn jwks_fetches(&self) -> u64 {
        json_of(client().get(format!("{}/test/jwks-fetches", self.idp.url)).send().await.unwrap()).await["count"].as_u64().unwrap()
    }

    /// `initialize` with `token`: the answer.
    async fn initialize(&self, token: Option<&str>) -> reqwest::Response {
        let mut builder = post(&client(), &self.gateway.mcp(), &initialize(LEGACY));
        if let Some(token) = token {
            builder = builder.bearer_auth(token);
        }
        builder.send().await.unwrap()
    }
}

fn challenge(response: &reqwest::Response) -> String {
    response.headers().get("www-authenticate").map(|value| value.to_str().unwrap().to_string()).unwrap_or_default()
}

/// Waits (at most 10 s) until the audit log at `path` has a line for `tool`.
fn audit_line(path: &Path, tool: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(line) = text.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok()).find(|line| line["tool"] == tool) {
            return line;
        }
        assert!(std::time::Instant::now() < deadline, "no audit line for {tool} in {}: {text}", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn tokens_of_the_issuer_are_checked_and_the_caller_is_named() {
    let setup = setup();
    // No token: 401 pointing at the metadata, which names the issuer.
    let refused = setup.initialize(None).await;
    assert_eq!(refused.status(), 401);
    let said = challenge(&refused);
    let metadata_url = format!("{}/.well-known/oauth-protected-resource/mcp", setup.gateway.base);
    assert!(said.starts_with("Bearer ") && said.contains(&format!("resource_metadata=\"{metadata_url}\"")), "{said}");
    assert!(!said.contains("invalid_token"), "no token was sent: {said}");
    for url in [metadata_url.clone(), format!("{}/.well-known/oauth-protected-resource", setup.gateway.base)] {
        let metadata = json_of(client().get(&url).send().await.unwrap()).await;
        assert_eq!(metadata["resource"], setup.audience.as_str(), "{metadata}");
        assert_eq!(metadata["authorization_servers"], json!([setup.idp.url]), "{metadata}");
        assert_eq!((&metadata["scopes_supported"], &metadata["bearer_methods_supported"]), (&json!([SCOPE]), &json!(["header"])));
    }

    // A good token opens a session, and a call through it is audited with the subject.
    let alice = setup.mint(json!({}), json!({})).await;
    let opened = setup.initialize(Some(&alice)).await;
    assert_eq!(opened.status(), 200, "{}", setup.gateway.stderr_text());
    let session = opened.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let http = client();
    let in_session = |token: &str, body: &Value| {
        post(&http, &setup.gateway.mcp(), body).bearer_auth(token).header("mcp-session-id", &session).header("mcp-protocol-version", LEGACY)
    };
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(in_session(&alice, &initialized).send().await.unwrap().status(), 202);
    let call = request(1, "tools/call", json!({"name": "demo__echo", "arguments": {"text": "hi"}}));
    let answer = json_of(in_session(&alice, &call).send().await.unwrap()).await;
    assert_eq!(answer["result"]["content"][0]["text"], "hi", "{answer}");
    let line = audit_line(&setup.audit, "echo");
    assert_eq!((&line["subject"], &line["client_id"]), (&json!("alice"), &json!("test-cli")), "{line}");
    assert!(!line.to_string().contains(&alice), "no token in the audit log");

    // Another subject's valid token does not reach alice's session.
    let bob = setup.mint(json!({"sub": "bob"}), json!({})).await;
    assert_eq!(in_session(&bob, &call).send().await.unwrap().status(), 404);

    // Expired, for another audience, from another issuer, without the scope.
    for (claims, extra, why) in [
        (json!({}), json!({"expiresIn": -600}), "expired"),
        (json!({"aud": "https://other.example/mcp"}), json!({}), "another audience"),
        (json!({"iss": "http://127.0.0.1:1"}), json!({}), "another issuer"),
    ] {
        let token = setup.mint(claims, extra).await;
        let refused = setup.initialize(Some(&token)).await;
        let said = challenge(&refused);
        assert_eq!(refused.status(), 401, "{why}");
        assert!(said.contains("error=\"invalid_token\"") && said.contains(&metadata_url) && said.contains(why), "{why}: {said}");
    }
    let unscoped = setup.mint(json!({"scope": "profile"}), json!({})).await;
    let refused = setup.initialize(Some(&unscoped)).await;
    assert_eq!(refused.status(), 403);
    let said = challenge(&refused);
    assert!(said.contains("error=\"insufficient_scope\"") && said.contains(&format!("scope=\"{SCOPE}\"")), "{said}");
    assert!(!setup.gateway.stderr_text().contains(&alice), "no token in the gateway's log");
}

#[tokio::test]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn unknown_keys_cost_one_fetch_and_a_rotated_key_is_picked_up() {
    let setup = setup();
    let first = setup.mint(json!({}), json!({})).await;
    assert_eq!(setup.initialize(Some(&first)).await.status(), 200);
    assert_eq!(setup.jwks_fetches().await, 1, "the keys are fetched once at the first token");

    // Past the refresh interval, tokens signed by a key the provider never published:
    // the first makes the gateway look again, the others find the look recent.
    tokio::time::sleep(MIN_REFRESH + Duration::from_millis(300)).await;
    let forged = setup.mint(json!({}), json!({"foreign": true})).await;
    for _ in 0..5 {
        let refused = setup.initialize(Some(&forged)).await;
        assert_eq!(refused.status(), 401);
        assert!(challenge(&refused).contains("invalid_token"), "{}", challenge(&refused));
    }
    assert_eq!(setup.jwks_fetches().await, 2, "one refresh for five tokens with an unknown key");
    assert_eq!(setup.initialize(Some(&first)).await.status(), 200, "known keys still verify without a fetch");
    assert_eq!(setup.jwks_fetches().await, 2);

    // The provider rotates; once the interval has passed, its new key is fetched and accepted.
    client().post(format!("{}/test/rotate", setup.idp.url)).send().await.unwrap();
    let rotated = setup.mint(json!({}), json!({})).await;
    tokio::time::sleep(MIN_REFRESH + Duration::from_millis(300)).await;
    assert_eq!(setup.initialize(Some(&rotated)).await.status(), 200, "{}", setup.gateway.stderr_text());
    assert_eq!(setup.jwks_fetches().await, 3);
}

#[tokio::test]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn mcpvisor_logs_in_to_the_gateway_through_the_provider_and_calls_a_tool() {
    let setup = setup();
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("client.toml");
    let table = format!(
        "[servers.gw]\ntransport = \"http\"\nurl = {:?}\n\
         auth = {{ type = \"oauth\", grant = \"client_credentials\", client_id = \"robot\", client_secret = \"${{ROBOT_SECRET}}\" }}\n",
        setup.gateway.mcp()
    );
    std::fs::write(&config, table).unwrap();
    let output = std::process::Command::new(BIN)
        .arg("--config")
        .arg(&config)
        .args(["call", "gw", "demo__echo", "--arg", "text=through the provider"])
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .env("ROBOT_SECRET", "robot-s3cret-value")
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{stdout}{stderr}\ngateway: {}", setup.gateway.stderr_text());
    assert_eq!(stdout, "through the provider\n");
    let line = audit_line(&setup.audit, "echo");
    assert_eq!((&line["subject"], &line["client_id"]), (&json!("robot"), &json!("robot")), "{line}");
}

const INTROSPECTION: &str = "introspection = { client_id = \"${INTRO_ID}\", client_secret = \"${INTRO_SECRET}\" }";

#[tokio::test]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn opaque_tokens_are_introspected_with_the_gateways_credentials() {
    let setup = setup_with(INTROSPECTION, &[("INTRO_ID", "introspector"), ("INTRO_SECRET", "intro-s3cret")], &[]);
    let register = |token: &'static str, claims: Value| {
        let body = json!({"token": token, "claims": claims});
        let url = format!("{}/test/opaque", setup.idp.url);
        async move { client().post(url).header("content-type", "application/json").body(body.to_string()).send().await.unwrap() }
    };
    register("opaque-carol", json!({"sub": "carol", "scope": SCOPE, "aud": setup.audience, "client_id": "carol-app"})).await;
    register("opaque-elsewhere", json!({"sub": "carol", "scope": SCOPE, "aud": "https://other.example/mcp"})).await;
    register("opaque-unscoped", json!({"sub": "carol", "scope": "profile"})).await;
    assert_eq!(setup.initialize(Some("opaque-carol")).await.status(), 200, "{}", setup.gateway.stderr_text());
    for (token, why) in [("opaque-unknown", "not active"), ("opaque-elsewhere", "another audience")] {
        let refused = setup.initialize(Some(token)).await;
        assert_eq!(refused.status(), 401, "{why}");
        assert!(challenge(&refused).contains("invalid_token") && challenge(&refused).contains(why), "{}", challenge(&refused));
    }
    assert_eq!(setup.initialize(Some("opaque-unscoped")).await.status(), 403);
    // JWTs are still verified locally beside introspection.
    assert_eq!(setup.initialize(Some(&setup.mint(json!({}), json!({})).await)).await.status(), 200);

    // Wrong introspection credentials: the issuer refuses the gateway, which says it cannot check (503), never 200.
    let wrong = setup_with(INTROSPECTION, &[("INTRO_ID", "introspector"), ("INTRO_SECRET", "not-the-secret")], &[]);
    let refused = wrong.initialize(Some("opaque-carol")).await;
    assert_eq!(refused.status(), 503);
    assert!(refused.headers().contains_key("retry-after"));
    let said = refused.text().await.unwrap() + &wrong.gateway.stderr_text();
    assert!(said.contains("/test/introspect answered HTTP 401"), "{said}");
    assert!(!said.contains("not-the-secret") && !said.contains("opaque-carol"), "{said}");
}

/// Introspection answers are kept: a token used again costs the issuer
/// nothing until its `exp` (then it is refused from memory of its expiry
/// by asking again), junk is asked once, and a flood of new junk tokens
/// costs the issuer at most the burst while kept tokens go on passing.
#[tokio::test]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn introspection_answers_are_kept_and_the_issuer_is_spared() {
    let config = format!("{INTROSPECTION}\nleeway = \"1s\"");
    let setup = setup_with(&config, &[("INTRO_ID", "introspector"), ("INTRO_SECRET", "intro-s3cret")], &[]);
    let asked = || async {
        let answer = client().get(format!("{}/test/introspections", setup.idp.url)).send().await.unwrap();
        json_of(answer).await["count"].as_u64().unwrap()
    };
    let register = |token: &'static str, claims: Value| {
        let body = json!({"token": token, "claims": claims});
        let url = format!("{}/test/opaque", setup.idp.url);
        async move { client().post(url).header("content-type", "application/json").body(body.to_string()).send().await.unwrap() }
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    register("opaque-carol", json!({"sub": "carol", "scope": SCOPE, "aud": setup.audience})).await;
    register("opaque-brief", json!({"sub": "dave", "scope": SCOPE, "aud": setup.audience, "exp": now + 2})).await;
    for _ in 0..5 {
        assert_eq!(setup.initialize(Some("opaque-carol")).await.status(), 200);
        assert_eq!(setup.initialize(Some("opaque-junk")).await.status(), 401);
    }
    assert_eq!(asked().await, 2, "one introspection per token, however often it is used");

    assert_eq!(setup.initialize(Some("opaque-brief")).await.status(), 200);
    let before = asked().await;
    tokio::time::sleep(Duration::from_millis(4500)).await; // past the token's exp and the 1 s leeway: the point
    let expired = setup.initialize(Some("opaque-brief")).await;
    assert_eq!(expired.status(), 401, "a kept answer ends at the token's exp");
    assert!(challenge(&expired).contains("expired"), "{}", challenge(&expired));
    assert_eq!(asked().await, before + 1, "past its exp the token is asked about again");

    let before = asked().await;
    let mut spared = 0;
    for batch in 0..4 {
        let setup = &setup;
        let junk = (0..50).map(|n| async move { setup.initialize(Some(&format!("junk-{batch}-{n}"))).await });
        for refused in futures::future::join_all(junk).await {
            match refused.status().as_u16() {
                401 => {}
                503 => {
                    assert!(refused.headers().contains_key("retry-after"));
                    spared += 1;
                }
                other => panic!("a junk token: HTTP {other}"),
            }
        }
    }
    let flood = asked().await - before;
    println!("200 junk tokens: {flood} introspections, {spared} refused unasked (503)");
    assert!(flood < 200 && spared > 0, "200 junk tokens cost the issuer {flood} introspections ({spared} spared)");
    assert_eq!(setup.initialize(Some("opaque-carol")).await.status(), 200, "a kept token passes during the flood");
}

#[tokio::test]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn per_client_bounds_count_per_subject_not_per_address() {
    let setup = setup_with("", &[], &["--max-sessions-per-client", "1"]);
    let (alice, bob) = (setup.mint(json!({}), json!({})).await, setup.mint(json!({"sub": "bob"}), json!({})).await);
    let open = |from: u8, token: String| {
        let url = setup.gateway.mcp();
        async move {
            let opened = post(&client_from(from), &url, &initialize(LEGACY)).bearer_auth(token).send().await.unwrap();
            assert_eq!(opened.status(), 200);
            opened.headers()["mcp-session-id"].to_str().unwrap().to_string()
        }
    };
    let status = |session: String, token: String| {
        let url = setup.gateway.mcp();
        async move {
            let list = request(1, "tools/list", json!({}));
            let answer =
                post(&client(), &url, &list).bearer_auth(token).header("mcp-session-id", session).header("mcp-protocol-version", LEGACY);
            answer.send().await.unwrap().status().as_u16()
        }
    };
    let first = open(1, alice.clone()).await;
    // Alice again, from another address: her bound is hers wherever she connects from, so her idle first session makes room.
    let second = open(2, alice.clone()).await;
    assert_eq!(status(first, alice.clone()).await, 404, "alice's first session ended for her second");
    // Bob, from the address of alice's second session: his own bound, hers untouched.
    let third = open(2, bob.clone()).await;
    assert_eq!(status(second, alice).await, 200, "bob's session does not count against alice");
    assert_eq!(status(third, bob).await, 200);
}
