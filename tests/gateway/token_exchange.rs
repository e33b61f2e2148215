//! Each caller is itself upstream (issue 35, item 1): a real `mcpvisor
//! serve --http` whose `[serve.auth]` takes the JWTs of the OAuth fixture
//! (tests/oauth_server), in front of the fixture's MCP endpoint as server
//! `up` with `auth = { type = "token_exchange" }`. The endpoint's `whoami`
//! tool says whose token it got; the fixture counts its exchanges.
//! Checked: alice and bob reach `up` as themselves, each with only its own
//! scopes, and their own tokens never reach it; one exchange serves 100
//! concurrent calls of a caller, and one more after the token expired; an
//! issuer's refusal reaches the caller naming the server and the issuer's
//! error; a token the upstream refuses is exchanged again; per-caller connections are bounded and the idle ones ended;
//! a resource of the server is read as its caller too; a caller the issuer stops exchanging for is told, and
//! served again on the same connection once the issuer grants again.

use std::time::{Duration, Instant};

use crate::gateway_http_support::{client, json_of, post, request, Gateway, SseReader, LEGACY};
use crate::oauth_server::{AuthServer, Options, WHOAMI_URI};
use serde_json::{json, Value};

/// The audience of the callers' tokens: the gateway.
pub(crate) const GATEWAY_AUDIENCE: &str = "https://gateway.test/mcp";
/// The audience the gateway asks tokens for: the upstream.
const UPSTREAM: &str = "https://upstream.test";
/// The gateway as a client of the issuer.
pub(crate) const CLIENT: (&str, &str) = ("gw-client", "gw-secret-0f3a9c2e7b1d");
/// How long a test waits for a state it expects.
const PATIENCE: Duration = Duration::from_secs(30);

/// The issuer and a gateway in front of its endpoint; `extra` goes into `up`'s auth table.
async fn start(extra: &str) -> (AuthServer, Gateway) {
    let issuer = AuthServer::start(Options { client_secret: Some(CLIENT), ..Options::default() }).await;
    let toml = format!(
        "[servers.up]\nurl = {:?}\nauth = {{ type = \"token_exchange\", issuer = {:?}, client_id = {:?}, client_secret = \"${{GW_SECRET}}\", \
         audience = {UPSTREAM:?}, scopes = [\"read\", \"write\"]{extra} }}\n\n[serve.auth]\nissuer = {:?}\naudience = {GATEWAY_AUDIENCE:?}\n",
        issuer.mcp(),
        issuer.issuer(),
        CLIENT.0,
        issuer.issuer(),
    );
    let gateway = Gateway::start_with_config(&toml, "127.0.0.1:0", &[], &[("GW_SECRET", CLIENT.1)]).expect("the gateway starts");
    (issuer, gateway)
}

/// A handshake-era session of the caller whose token is `token` (shared
/// with token_exchange_id_jag.rs).
pub(crate) struct Caller {
    http: reqwest::Client,
    url: String,
    token: String,
    id: String,
}

impl Caller {
    pub(crate) async fn open(gateway: &Gateway, token: &str) -> Caller {
        let http = client();
        let init =
            request(0, "initialize", json!({"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}));
        let response = post(&http, &gateway.mcp(), &init).bearer_auth(token).send().await.unwrap();
        assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
        let id = response.headers()["mcp-session-id"].to_str().unwrap().to_string();
        let caller = Caller { http, url: gateway.mcp(), token: token.to_string(), id };
        assert_eq!(caller.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await.status(), 202);
        caller
    }

    async fn send(&self, body: &Value) -> reqwest::Response {
        let builder = post(&self.http, &self.url, body).bearer_auth(&self.token);
        builder.header("mcp-session-id", &self.id).header("mcp-protocol-version", LEGACY).send().await.unwrap()
    }

    pub(crate) async fn ask(&self, id: u64, method: &str, params: Value) -> Value {
        let response = self.send(&request(id, method, params)).await;
        if response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream") {
            return SseReader::new(response).answer_to(id).await;
        }
        json_of(response).await
    }

    /// `up`'s `whoami`: who the upstream saw, or the whole answer when the call failed.
    pub(crate) async fn whoami(&self, id: u64) -> Result<Value, Value> {
        let answer = self.ask(id, "tools/call", json!({"name": "up__whoami", "arguments": {}})).await;
        let text = answer["result"]["content"][0]["text"].as_str().filter(|_| answer["result"]["isError"] != json!(true));
        text.and_then(|text| serde_json::from_str(text).ok()).ok_or(answer)
    }

    /// Waits until the catalog lists `up`'s tools (listed as the gateway itself).
    pub(crate) async fn wait_for_catalog(&self) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let listed = self.ask(1, "tools/list", json!({})).await;
            let tools = listed["result"]["tools"].as_array().cloned().unwrap_or_default();
            if tools.iter().any(|tool| tool["name"] == "up__whoami") {
                return;
            }
            assert!(Instant::now() < deadline, "up's tools were never listed: {listed}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// `up`'s `callers` counts, as `/admin/status` shows them to an admin of the issuer.
pub(crate) async fn caller_counts(issuer: &AuthServer, gateway: &Gateway) -> Value {
    let admin = issuer.mint("root", "mcpvisor:admin", GATEWAY_AUDIENCE);
    let status = client().get(format!("{}/admin/status", gateway.base)).bearer_auth(admin).send().await.unwrap();
    let status = json_of(status).await;
    let servers = status["servers"].as_array().cloned().unwrap_or_default();
    servers.into_iter().find(|server| server["name"] == "up").map(|up| up["callers"].clone()).unwrap_or(Value::Null)
}

/// Alice (`read write`) and bob (`read`), callers with tokens of `issuer`,
/// each call `up`'s `whoami` once (after the catalog lists it), which must
/// see `audience`: their tokens.
pub(crate) async fn alice_and_bob_call(issuer: &AuthServer, gateway: &Gateway, audience: &str) -> [String; 2] {
    let alice_token = issuer.mint("alice", "read write", GATEWAY_AUDIENCE);
    let bob_token = issuer.mint("bob", "read", GATEWAY_AUDIENCE);
    let alice = Caller::open(gateway, &alice_token).await;
    let bob = Caller::open(gateway, &bob_token).await;
    alice.wait_for_catalog().await;
    let seen_by_alice = alice.whoami(2).await.expect("alice's call went through");
    let seen_by_bob = bob.whoami(2).await.expect("bob's call went through");
    assert_eq!(seen_by_alice, json!({"sub": "alice", "scope": "read write", "aud": audience}));
    assert_eq!(seen_by_bob, json!({"sub": "bob", "scope": "read", "aud": audience}), "bob gets only the scopes his own token has");
    [alice_token, bob_token]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_caller_reaches_the_upstream_as_itself_with_its_own_scopes_and_never_its_own_token() {
    let (issuer, gateway) = start("").await;
    let [alice_token, bob_token] = alice_and_bob_call(&issuer, &gateway, UPSTREAM).await;
    assert_eq!(issuer.exchanges(), 2, "one exchange per caller");
    let sent_upstream: Vec<String> = issuer.to("/mcp").iter().filter_map(|request| request.headers.get("authorization").cloned()).collect();
    assert!(!sent_upstream.is_empty());
    for own in [&alice_token, &bob_token] {
        assert!(sent_upstream.iter().all(|sent| !sent.contains(own.as_str())), "a caller's own token reached the upstream");
    }
    let exchanged = issuer.grants(crate::oauth_server::TOKEN_EXCHANGE);
    assert!(exchanged.iter().all(|grant| grant.form["audience"] == UPSTREAM && grant.form["scope"] == "read write"));
    let counts = caller_counts(&issuer, &gateway).await;
    assert_eq!((counts["connections"].as_u64(), counts["started"].as_u64()), (Some(2), Some(2)), "{counts}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_narrower_token_of_the_same_caller_never_rides_on_a_broader_ones_exchange() {
    let (issuer, gateway) = start("").await;
    let broad = Caller::open(&gateway, &issuer.mint("alice", "read write", GATEWAY_AUDIENCE)).await;
    broad.wait_for_catalog().await;
    assert_eq!(broad.whoami(2).await.expect("the broad call went through")["scope"], "read write");
    // The same subject, with a token granted `read` only (another client, a delegated app).
    let narrow = Caller::open(&gateway, &issuer.mint("alice", "read", GATEWAY_AUDIENCE)).await;
    let seen = narrow.whoami(2).await.expect("the narrow call went through");
    assert_eq!(seen, json!({"sub": "alice", "scope": "read", "aud": UPSTREAM}), "the narrow token acted with the broad one's scopes");
    assert_eq!(broad.whoami(3).await.expect("the broad call still goes through")["scope"], "read write");
    assert_eq!(issuer.exchanges(), 2, "one exchange per grant");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_of_the_upstream_is_read_as_its_caller_not_as_the_gateway() {
    let (issuer, gateway) = start("").await;
    let alice = Caller::open(&gateway, &issuer.mint("alice", "read", GATEWAY_AUDIENCE)).await;
    let bob = Caller::open(&gateway, &issuer.mint("bob", "write", GATEWAY_AUDIENCE)).await;
    alice.wait_for_catalog().await;
    for (caller, subject, scope) in [(&alice, "alice", "read"), (&bob, "bob", "write")] {
        let answer = caller.ask(2, "resources/read", json!({"uri": WHOAMI_URI})).await;
        let text = answer["result"]["contents"][0]["text"].as_str().unwrap_or_else(|| panic!("{subject}'s read failed: {answer}"));
        let seen: Value = serde_json::from_str(text).unwrap();
        assert_eq!(seen, json!({"sub": subject, "scope": scope, "aud": UPSTREAM}), "the gateway's own token read {subject}'s resource");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_exchange_serves_concurrent_calls_and_is_renewed_once_after_it_expires() {
    let (issuer, gateway) = start("").await;
    // Fresh for 3 s: a quarter of the life is the margin.
    const LIFETIME: Duration = Duration::from_secs(4);
    issuer.set_exchange_lifetime(LIFETIME.as_secs());
    // A slow issuer: the calls pile up behind the one exchange under way.
    issuer.set_exchange_delay(Duration::from_millis(500));
    let alice = Caller::open(&gateway, &issuer.mint("alice", "read", GATEWAY_AUDIENCE)).await;
    alice.wait_for_catalog().await;
    let hundred = |first: u64| futures::future::join_all((first..first + 100).map(|id| alice.whoami(id)));
    for seen in hundred(10).await {
        assert_eq!(seen.expect("the call went through")["sub"], "alice");
    }
    let answered = Instant::now();
    assert_eq!(issuer.exchanges(), 1, "100 concurrent calls of one caller share one exchange");
    // The exchanged token was issued before `answered`: past this, it has expired for sure.
    tokio::time::sleep_until((answered + LIFETIME).into()).await;
    for seen in hundred(200).await {
        assert_eq!(seen.expect("the call went through")["sub"], "alice");
    }
    assert_eq!(issuer.exchanges(), 2, "an expired token is exchanged again once for all the calls waiting");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_the_upstream_refuses_is_exchanged_again() {
    let (issuer, gateway) = start("").await;
    let alice = Caller::open(&gateway, &issuer.mint("alice", "read", GATEWAY_AUDIENCE)).await;
    alice.wait_for_catalog().await;
    assert_eq!(alice.whoami(2).await.expect("the call went through")["sub"], "alice");
    issuer.revoke_exchanged();
    assert_eq!(alice.whoami(3).await.expect("the call went through with a new token")["sub"], "alice");
    assert_eq!(issuer.exchanges(), 2, "the refused token was exchanged again, once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_the_issuer_stops_exchanging_for_mid_session_is_told_and_served_again_once_it_grants() {
    let (issuer, gateway) = start("").await;
    let alice = Caller::open(&gateway, &issuer.mint("alice", "read", GATEWAY_AUDIENCE)).await;
    alice.wait_for_catalog().await;
    assert_eq!(alice.whoami(2).await.expect("the call went through")["sub"], "alice");
    // The upstream refuses alice's token and the issuer will not exchange again.
    issuer.revoke_exchanged();
    issuer.refuse_exchanges("invalid_grant", "alice's session at the issuer ended");
    let failed = alice.whoami(3).await.expect_err("the call fails while the issuer refuses").to_string();
    for needed in ["`up`", "invalid_grant", "alice's session at the issuer ended", "was not resent"] {
        assert!(failed.contains(needed), "{needed:?} missing from {failed}");
    }
    issuer.allow_exchanges();
    let seen = alice.whoami(4).await.expect("the next call after the issuer grants again goes through");
    assert_eq!(seen["sub"], "alice");
    let counts = caller_counts(&issuer, &gateway).await;
    assert_eq!(counts["started"].as_u64(), Some(1), "her connection recovered in place: {counts}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issuer_refusal_reaches_the_caller_naming_the_server_and_the_issuer_error() {
    let (issuer, gateway) = start("").await;
    let alice = Caller::open(&gateway, &issuer.mint("alice", "read", GATEWAY_AUDIENCE)).await;
    alice.wait_for_catalog().await;
    issuer.refuse_exchanges("invalid_target", "gw-client may not act for alice at this audience");
    let refused = alice.whoami(2).await.expect_err("the call fails").to_string();
    for needed in ["`up`", "invalid_target", "gw-client may not act for alice at this audience", "token exchange"] {
        assert!(refused.contains(needed), "{needed:?} missing from {refused}");
    }
    assert!(!refused.contains(CLIENT.1), "the client secret is never shown");
    assert!(issuer.to("/mcp").iter().all(|request| request.headers.get("authorization").is_none_or(|sent| !sent.contains("xchg-"))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_caller_connections_are_bounded_and_idle_ones_are_ended() {
    let (issuer, gateway) = start(", max_callers = 1, caller_idle = \"1s\"").await;
    let alice = Caller::open(&gateway, &issuer.mint("alice", "read", GATEWAY_AUDIENCE)).await;
    let bob = Caller::open(&gateway, &issuer.mint("bob", "read", GATEWAY_AUDIENCE)).await;
    alice.wait_for_catalog().await;
    assert_eq!(alice.whoami(2).await.expect("alice's call went through")["sub"], "alice");
    let refused = bob.whoami(2).await.expect_err("a second caller is over max_callers").to_string();
    assert!(refused.contains("`up`") && refused.contains("max_callers"), "{refused}");
    let deadline = Instant::now() + PATIENCE;
    loop {
        let counts = caller_counts(&issuer, &gateway).await;
        if counts["connections"] == 0 && counts["reaped"] == 1 {
            assert_eq!((counts["refused"].as_u64(), counts["max"].as_u64()), (Some(1), Some(1)), "{counts}");
            break;
        }
        assert!(Instant::now() < deadline, "alice's idle connection was never ended: {counts}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(bob.whoami(3).await.expect("bob fits once alice's connection ended")["sub"], "bob");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_callers_of_an_issuer_the_misuse_is_said_at_start_and_calls_are_refused_naming_the_server() {
    let issuer = AuthServer::start(Options { client_secret: Some(CLIENT), ..Options::default() }).await;
    let toml = format!(
        "[servers.up]\nurl = {:?}\nauth = {{ type = \"token_exchange\", issuer = {:?}, client_id = {:?}, client_secret = {:?} }}\n",
        issuer.mcp(),
        issuer.issuer(),
        CLIENT.0,
        CLIENT.1
    );
    let gateway = Gateway::start_with_config(&toml, "127.0.0.1:0", &[], &[]).expect("the gateway starts");
    let warning = gateway.stderr_text();
    assert!(warning.contains("server `up` acts as each caller") && warning.contains("[serve.auth]"), "{warning}");
    let anyone = client();
    let init =
        request(0, "initialize", json!({"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}));
    let response = post(&anyone, &gateway.mcp(), &init).send().await.unwrap();
    let id = response.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let caller = Caller { http: anyone, url: gateway.mcp(), token: String::new(), id };
    caller.wait_for_catalog().await;
    let refused = caller.whoami(2).await.expect_err("no caller to act as").to_string();
    assert!(refused.contains("`up`") && refused.contains("no authenticated caller"), "{refused}");
    assert_eq!(issuer.exchanges(), 0);
}
