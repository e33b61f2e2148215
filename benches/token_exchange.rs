//! What acting as each caller costs a call through `serve --http` (issue
//! 35): a real gateway with `[serve.auth]` in front of the OAuth fixture's
//! MCP endpoint (tests/oauth_server), reached three ways: `up`, whose auth is
//! `token_exchange`, `plain`, the same endpoint with a static bearer
//! token, and `jag`, a second fixture's endpoint whose own authorization
//! server redeems the first one's ID-JAGs (`token_exchange` with
//! `authorization_server`). Callers are JWTs of the fixture's issuer.
//!
//! Measured, each a median: a caller's first call to `up` (an exchange at
//! the issuer, then a new connection with its `initialize`), its next calls
//! (the kept token, the caller's connection), calls to `plain` (no
//! exchange), and the first and next calls to `jag` (the first adds an
//! ID-JAG at the issuer and its redemption at the upstream's server). `cargo bench --bench token_exchange` prints them (env
//! `CALLERS`, default 20 first calls; `CALLS`, default 500 calls each):
//! reported, never asserted.

#[path = "../tests/gateway_http_support/mod.rs"]
mod gateway_http_support;
#[path = "../tests/oauth_server/mod.rs"]
mod oauth_server;

use std::time::{Duration, Instant};

use gateway_http_support::{client, json_of, post, request, Gateway, SseReader, LEGACY};
use oauth_server::{AuthServer, Options};
use serde_json::{json, Value};

const AUDIENCE: &str = "https://gateway.bench/mcp";
const CLIENT: (&str, &str) = ("gw-client", "gw-secret-0f3a9c2e7b1d");
const UPSTREAM_CLIENT: (&str, &str) = ("gw-at-upstream", "up-secret-7c41e09b5a2d");

fn main() {
    let callers: usize = std::env::var("CALLERS").ok().and_then(|n| n.parse().ok()).unwrap_or(20);
    let calls: usize = std::env::var("CALLS").ok().and_then(|n| n.parse().ok()).unwrap_or(500);
    let tokio = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio");
    let [first, kept, plain, jag_first, jag_kept] = tokio.block_on(measure(callers, calls));
    let median = |mut values: Vec<Duration>| {
        values.sort();
        values[values.len() / 2].as_secs_f64() * 1e6
    };
    let (first, kept, plain, jag_first, jag_kept) = (median(first), median(kept), median(plain), median(jag_first), median(jag_kept));
    println!("| call through serve --http | median µs |");
    println!("|---|---:|");
    println!("| first call of a caller, token_exchange (exchange + new connection) | {first:.0} |");
    println!("| next calls, token_exchange (kept token, the caller's connection) | {kept:.0} |");
    println!("| calls, static bearer (no exchange) | {plain:.0} |");
    println!("| first call of a caller, ID-JAG (ID-JAG at the issuer + its redemption + new connection) | {jag_first:.0} |");
    println!("| next calls, ID-JAG (kept token, the caller's connection) | {jag_kept:.0} |");
    println!("\nkept / static: {:.2}x; first / static: {:.1}x ({callers} callers, {calls} calls each way)", kept / plain, first / plain);
}

/// [first calls, kept calls, static calls, first ID-JAG calls, kept ID-JAG calls], each call's latency.
async fn measure(callers: usize, calls: usize) -> [Vec<Duration>; 5] {
    let issuer =
        AuthServer::start(Options { client_secret: Some(CLIENT), id_jag_client: Some(UPSTREAM_CLIENT.0), ..Options::default() }).await;
    let trusted = Some((issuer.issuer(), issuer.signing_key()));
    let upstream = AuthServer::start(Options { client_secret: Some(UPSTREAM_CLIENT), id_jag_issuer: trusted, ..Options::default() }).await;
    let token_request = client().post(format!("{}/token", issuer.base)).basic_auth(CLIENT.0, Some(CLIENT.1));
    let form = token_request.header("content-type", "application/x-www-form-urlencoded").body("grant_type=client_credentials&scope=read");
    let answer = form.send().await.unwrap();
    let static_token = json_of(answer).await["access_token"].as_str().expect("a static token").to_string();
    let toml = format!(
        "[servers.up]\nurl = {mcp:?}\nauth = {{ type = \"token_exchange\", issuer = {iss:?}, client_id = {:?}, client_secret = {:?}, \
         audience = \"https://upstream.bench\", scopes = [\"read\"] }}\n\n[servers.plain]\nurl = {mcp:?}\n\
         auth = {{ type = \"bearer\", token = {static_token:?} }}\n\n[servers.jag]\nurl = {jag:?}\n\
         auth = {{ type = \"token_exchange\", issuer = {iss:?}, client_id = {:?}, client_secret = {:?}, scopes = [\"read\"], \
         authorization_server = {{ issuer = {jag_as:?}, client_id = {:?}, client_secret = {:?} }} }}\n\n\
         [serve.auth]\nissuer = {iss:?}\naudience = {AUDIENCE:?}\n",
        CLIENT.0,
        CLIENT.1,
        CLIENT.0,
        CLIENT.1,
        UPSTREAM_CLIENT.0,
        UPSTREAM_CLIENT.1,
        mcp = issuer.mcp(),
        iss = issuer.issuer(),
        jag = upstream.mcp(),
        jag_as = upstream.issuer(),
    );
    let gateway = Gateway::start_with_config(&toml, "127.0.0.1:0", &[], &[]).expect("the gateway starts");
    let mut first = Vec::new();
    let mut kept = Vec::new();
    let mut plain = Vec::new();
    let mut jag_first = Vec::new();
    let mut jag_kept = Vec::new();
    for n in 0..callers {
        let session = Session::open(&gateway, issuer.mint(&format!("user-{n}"), "read", AUDIENCE)).await;
        if n == 0 {
            session.wait_for(&["up__echo", "plain__echo", "jag__echo"]).await;
        }
        first.push(session.timed_call(1, "up__echo").await);
        jag_first.push(session.timed_call(2, "jag__echo").await);
        if n == 0 {
            for id in 0..calls as u64 {
                kept.push(session.timed_call(100 + id, "up__echo").await);
                plain.push(session.timed_call(100_000 + id, "plain__echo").await);
                jag_kept.push(session.timed_call(200_000 + id, "jag__echo").await);
            }
        }
    }
    assert_eq!(upstream.redeemed_id_jags().len(), callers, "one ID-JAG flow per caller");
    [first, kept, plain, jag_first, jag_kept]
}

struct Session {
    http: reqwest::Client,
    url: String,
    token: String,
    id: String,
}

impl Session {
    async fn open(gateway: &Gateway, token: String) -> Session {
        let http = client();
        let init =
            request(0, "initialize", json!({"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}));
        let response = post(&http, &gateway.mcp(), &init).bearer_auth(&token).send().await.unwrap();
        let id = response.headers()["mcp-session-id"].to_str().unwrap().to_string();
        Session { http, url: gateway.mcp(), token, id }
    }

    async fn ask(&self, id: u64, method: &str, params: Value) -> Value {
        let builder = post(&self.http, &self.url, &request(id, method, params)).bearer_auth(&self.token);
        let response = builder.header("mcp-session-id", &self.id).header("mcp-protocol-version", LEGACY).send().await.unwrap();
        if response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream") {
            return SseReader::new(response).answer_to(id).await;
        }
        json_of(response).await
    }

    /// Waits (at most 30 s) until the catalog lists `tools`.
    async fn wait_for(&self, tools: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let listed = self.ask(1, "tools/list", json!({})).await;
            let names: Vec<&str> = listed["result"]["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
            if tools.iter().all(|tool| names.contains(tool)) {
                return;
            }
            assert!(Instant::now() < deadline, "the tools were never listed: {listed}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// One call of `tool`, which must succeed: how long it took.
    async fn timed_call(&self, id: u64, tool: &str) -> Duration {
        let started = Instant::now();
        let answer = self.ask(id, "tools/call", json!({"name": tool, "arguments": {"text": "hi"}})).await;
        let took = started.elapsed();
        assert_eq!(answer["result"]["content"][0]["text"], "hi", "{answer}");
        took
    }
}
