//! Each caller is itself upstream through enterprise-managed authorization
//! (issue 35, item 1; SEP-990): two OAuth fixtures (tests/oauth_server),
//! the gateway's issuer, which also acts as the identity provider, and the
//! upstream's own authorization server in front of its MCP endpoint, which
//! trusts the first one's ID-JAGs. `up` has `auth = { type =
//! "token_exchange", ..., authorization_server = { ... } }`: a caller's
//! token is exchanged at the issuer for an ID-JAG, redeemed at the
//! upstream's authorization server by the JWT-bearer grant. The endpoint's
//! `whoami` tool says whose token it got; each fixture keeps for whom it
//! issued and redeemed ID-JAGs.
//!
//! Checked: alice and bob reach `up` as themselves with their own scopes,
//! their own tokens going only to the issuer, and the catalog listed with
//! the gateway's client at the upstream's server; one flow serves 100
//! concurrent calls of a caller and the calls after them; a refusal at
//! either step reaches the caller naming the server, the step and the
//! error; a token the upstream refuses runs the flow again.

use crate::gateway_http_support::Gateway;
use crate::oauth_server::{AuthServer, Options, Subject, TOKEN_EXCHANGE};
use crate::token_exchange::{alice_and_bob_call, caller_counts, Caller, CLIENT, GATEWAY_AUDIENCE};

/// The gateway as a client of the upstream's authorization server.
const UPSTREAM_CLIENT: (&str, &str) = ("gw-at-upstream", "up-secret-7c41e09b5a2d");

/// The issuer (identity provider), the upstream (its authorization server
/// and MCP endpoint), and a gateway in front of it.
async fn start() -> (AuthServer, AuthServer, Gateway) {
    let issuer =
        AuthServer::start(Options { client_secret: Some(CLIENT), id_jag_client: Some(UPSTREAM_CLIENT.0), ..Options::default() }).await;
    let trusted = Some((issuer.issuer(), issuer.signing_key()));
    let upstream = AuthServer::start(Options { client_secret: Some(UPSTREAM_CLIENT), id_jag_issuer: trusted, ..Options::default() }).await;
    let toml = format!(
        "[servers.up]\nurl = {:?}\n\n[servers.up.auth]\ntype = \"token_exchange\"\nissuer = {:?}\nclient_id = {:?}\n\
         client_secret = \"${{GW_SECRET}}\"\nscopes = [\"read\", \"write\"]\nauthorization_server = {{ issuer = {:?}, client_id = {:?}, \
         client_secret = \"${{UP_SECRET}}\" }}\n\n[serve.auth]\nissuer = {:?}\naudience = {GATEWAY_AUDIENCE:?}\n",
        upstream.mcp(),
        issuer.issuer(),
        CLIENT.0,
        upstream.issuer(),
        UPSTREAM_CLIENT.0,
        issuer.issuer(),
    );
    let secrets = [("GW_SECRET", CLIENT.1), ("UP_SECRET", UPSTREAM_CLIENT.1)];
    let gateway = Gateway::start_with_config(&toml, "127.0.0.1:0", &[], &secrets).expect("the gateway starts");
    (issuer, upstream, gateway)
}

/// The subjects of `subjects`, sorted.
fn who(subjects: &[Subject]) -> Vec<String> {
    let mut who: Vec<String> = subjects.iter().map(|subject| subject.sub.clone().unwrap_or_default()).collect();
    who.sort();
    who
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_caller_reaches_the_upstream_as_itself_through_an_id_jag_its_own_token_going_only_to_the_issuer() {
    let (issuer, upstream, gateway) = start().await;
    let [alice_token, bob_token] = alice_and_bob_call(&issuer, &gateway, &upstream.mcp()).await;
    let issued = issuer.issued_id_jags();
    assert_eq!(who(&issued), ["alice", "bob"], "one ID-JAG per caller");
    assert!(issued.iter().all(|id_jag| id_jag.audience.as_deref() == Some(upstream.issuer().as_str())), "{issued:?}");
    assert_eq!(who(&upstream.redeemed_id_jags()), ["alice", "bob"], "each redeemed at the upstream's authorization server");
    for asked in issuer.grants(TOKEN_EXCHANGE) {
        assert_eq!(asked.form["requested_token_type"], "urn:ietf:params:oauth:token-type:id-jag");
        assert_eq!((asked.form["resource"].as_str(), asked.form["scope"].as_str()), (upstream.mcp().as_str(), "read write"));
    }
    for request in upstream.requests() {
        let sent = format!("{:?} {}", request.headers, request.body);
        assert!(!sent.contains(&alice_token) && !sent.contains(&bob_token), "a caller's own token reached the upstream: {request:?}");
    }
    // The catalog: the gateway's own token, from its client at the upstream's server, never from the issuer.
    assert!(!upstream.grants("client_credentials").is_empty() && issuer.grants("client_credentials").is_empty());
    let counts = caller_counts(&issuer, &gateway).await;
    assert_eq!(counts["connections"].as_u64(), Some(2), "{counts}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_id_jag_flow_serves_a_callers_concurrent_and_later_calls() {
    let (issuer, upstream, gateway) = start().await;
    // A slow identity provider: the calls pile up behind the one flow under way.
    issuer.set_exchange_delay(std::time::Duration::from_millis(500));
    let alice = Caller::open(&gateway, &issuer.mint("alice", "read", GATEWAY_AUDIENCE)).await;
    alice.wait_for_catalog().await;
    let hundred = |first: u64| futures::future::join_all((first..first + 100).map(|id| alice.whoami(id)));
    for seen in hundred(10).await {
        assert_eq!(seen.expect("the call went through")["sub"], "alice");
    }
    for seen in hundred(200).await {
        assert_eq!(seen.expect("the call went through")["sub"], "alice");
    }
    assert_eq!((issuer.issued_id_jags().len(), upstream.redeemed_id_jags().len()), (1, 1), "200 calls of one caller, one flow");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_at_either_step_reaches_the_caller_naming_the_server_the_step_and_the_error() {
    let (issuer, upstream, gateway) = start().await;
    let alice = Caller::open(&gateway, &issuer.mint("alice", "read", GATEWAY_AUDIENCE)).await;
    let bob = Caller::open(&gateway, &issuer.mint("bob", "read", GATEWAY_AUDIENCE)).await;
    alice.wait_for_catalog().await;
    upstream.refuse_id_jags("invalid_grant", "ID-JAGs of this issuer are not accepted for gw-at-upstream");
    let refused = alice.whoami(2).await.expect_err("the authorization server refuses").to_string();
    for needed in ["`up`", "second step", "authorization server", "invalid_grant", "not accepted for gw-at-upstream"] {
        assert!(refused.contains(needed), "{needed:?} missing from {refused}");
    }
    assert_eq!((issuer.issued_id_jags().len(), upstream.redeemed_id_jags().len()), (1, 0));
    issuer.refuse_exchanges("access_denied", "bob may not reach this upstream");
    let refused_too = bob.whoami(2).await.expect_err("the identity provider refuses").to_string();
    for needed in ["`up`", "first step", "identity provider", "access_denied", "bob may not reach this upstream"] {
        assert!(refused_too.contains(needed), "{needed:?} missing from {refused_too}");
    }
    for secret in [CLIENT.1, UPSTREAM_CLIENT.1] {
        assert!(!refused.contains(secret) && !refused_too.contains(secret), "a client secret was shown");
    }
    let counts = caller_counts(&issuer, &gateway).await;
    assert_eq!(counts["connections"].as_u64(), Some(0), "a refused caller gets no connection to the upstream: {counts}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_the_upstream_refuses_runs_the_id_jag_flow_again() {
    let (issuer, upstream, gateway) = start().await;
    let alice = Caller::open(&gateway, &issuer.mint("alice", "read", GATEWAY_AUDIENCE)).await;
    alice.wait_for_catalog().await;
    assert_eq!(alice.whoami(2).await.expect("the call went through")["sub"], "alice");
    upstream.revoke_exchanged();
    assert_eq!(alice.whoami(3).await.expect("the call went through with a new token")["sub"], "alice");
    assert_eq!(who(&issuer.issued_id_jags()), ["alice", "alice"], "a new ID-JAG, once");
    assert_eq!(who(&upstream.redeemed_id_jags()), ["alice", "alice"], "redeemed again, once");
}
