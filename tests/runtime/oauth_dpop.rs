//! DPoP-bound tokens (RFC 9449) through the real HTTP transport, against
//! the loopback authorization server and endpoint of `oauth_server`, which
//! check every proof for real (signature, `htm`/`htu`, `ath`, `jti`, the
//! nonce, the key a token is bound to).

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use crate::common::*;
use crate::oauth_server::{AuthServer, Options};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use mcpvisor::config::{Auth, Era, Grant, OAuthConfig, RuntimeConfig, ServerConfig, Transport};
use mcpvisor::oauth::{FollowRedirects, OAuthCredentials, TokenStore};
use mcpvisor::{Handle, Runtime, ServerState};
use serde_json::{json, Value};

/// The fixture's endpoint as server `remote`, tokens kept in `dir`.
fn remote(server: &AuthServer, dir: &Path, dpop: bool) -> ServerConfig {
    let mut config = ServerConfig::remote("remote", Transport::Http, server.mcp());
    config.era = Era::Legacy;
    config.auth = Some(Auth::OAuth(OAuthConfig { token_dir: Some(dir.to_owned()), dpop, ..OAuthConfig::default() }));
    config
}

/// The fixture with `options`, and a runtime connected to it after a
/// headless login; tokens in the returned directory.
async fn logged_in(options: Options, dpop: bool) -> (AuthServer, tempfile::TempDir, Handle) {
    let server = AuthServer::start(options).await;
    let dir = tempfile::tempdir().unwrap();
    let config = RuntimeConfig::new([remote(&server, dir.path(), dpop)]);
    let handle = start_built(Runtime::builder(config).authorizer("remote", FollowRedirects::new().unwrap())).await;
    (server, dir, handle)
}

async fn echo(handle: &Handle, text: &str) -> String {
    let result = handle.call_tool("mcp__remote__echo", json!({"text": text})).await.expect("the call goes through");
    common::text(&result)
}

/// The claims of a recorded request's DPoP proof.
fn proof_claims(headers: &std::collections::BTreeMap<String, String>) -> Value {
    let proof = headers.get("dpop").expect("a DPoP header");
    let claims = proof.split('.').nth(1).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap()).unwrap()
}

/// The `/mcp` requests that carried a token, and the schemes they used.
fn schemes(server: &AuthServer) -> Vec<String> {
    let authorized = server.to("/mcp").into_iter().filter_map(|r| r.headers.get("authorization").cloned());
    authorized.map(|value| value.split(' ').next().unwrap_or_default().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dpop_login_binds_the_tokens_to_a_kept_key_and_proves_every_request() {
    let (server, dir, handle) = logged_in(Options { dpop: true, ..Options::default() }, true).await;
    assert_eq!(status_of(&handle, "remote").await.state, ServerState::Connected);
    assert_eq!(echo(&handle, "one").await, "one");
    assert_eq!(echo(&handle, "two").await, "two");

    assert_eq!(server.dpop_refusals(), Vec::<String>::new(), "every proof checks out");
    assert_eq!(server.bound_tokens(), 2, "the access and refresh token are bound to the key");
    let exchange = &server.grants("authorization_code")[0];
    assert_eq!(proof_claims(&exchange.headers)["htm"], "POST");
    let schemes = schemes(&server);
    assert!(schemes.len() >= 3 && schemes.iter().all(|s| s == "DPoP"), "tokens go out as DPoP: {schemes:?}");
    let file = dir.path().join("remote.json");
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    let kept: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let entry = &kept["issuers"][server.issuer()];
    assert!(entry["dpop_key"].is_string() && entry["tokens"]["dpop"] == true, "the key is kept with the tokens: {entry}");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nonces_asked_for_by_the_authorization_server_and_the_endpoint_are_sent_on_a_retry() {
    let options = Options { dpop: true, as_nonce: Some("as-nonce-1"), rs_nonce: Some("rs-nonce-1"), ..Options::default() };
    let (server, _dir, handle) = logged_in(options, true).await;
    assert_eq!(echo(&handle, "nonce").await, "nonce");

    assert_eq!(server.dpop_refusals(), Vec::<String>::new());
    let exchanges = server.grants("authorization_code");
    assert_eq!(exchanges.len(), 2, "refused once for the nonce, then sent again with it");
    assert!(proof_claims(&exchanges[0].headers).get("nonce").is_none());
    assert_eq!(proof_claims(&exchanges[1].headers)["nonce"], "as-nonce-1");
    let proved: Vec<Value> =
        server.to("/mcp").iter().filter(|r| r.headers.contains_key("dpop")).map(|r| proof_claims(&r.headers)).collect();
    // One origin serves both here: the first proof carries the token endpoint's nonce, which the endpoint refuses.
    assert_eq!(proved[0]["nonce"], "as-nonce-1");
    assert!(proved.len() >= 2, "{proved:?}");
    assert!(proved[1..].iter().all(|claims| claims["nonce"] == "rs-nonce-1"), "then every proof carries it: {proved:?}");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_dpop_token_and_its_key_work_after_a_restart_and_refresh() {
    let (server, dir, handle) = logged_in(Options { dpop: true, ..Options::default() }, true).await;
    assert_eq!(echo(&handle, "first").await, "first");
    handle.shutdown().await;

    // A new process, with no way to log in: only the kept token and key can work.
    let handle = start(vec![remote(&server, dir.path(), true)]).await;
    assert_eq!(echo(&handle, "again").await, "again");
    handle.shutdown().await;

    // The kept token ends: the bound refresh token needs the kept key's proof.
    let file = dir.path().join("remote.json");
    let mut kept: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    kept["issuers"][server.issuer()]["tokens"]["expires_at"] = 1.into();
    std::fs::write(&file, kept.to_string()).unwrap();
    let handle = start(vec![remote(&server, dir.path(), true)]).await;
    assert_eq!(echo(&handle, "refreshed").await, "refreshed");
    assert_eq!(server.grants("refresh_token").len(), 1);
    assert_eq!(server.to("/authorize").len(), 1, "one login in all");
    assert_eq!(server.dpop_refusals(), Vec::<String>::new());
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_dpop_turned_off_tokens_are_plain_bearer_tokens() {
    let (server, _dir, handle) = logged_in(Options { dpop: true, ..Options::default() }, false).await;
    assert_eq!(echo(&handle, "plain").await, "plain");
    assert_eq!(server.bound_tokens(), 0);
    assert!(server.to("/token").iter().all(|r| !r.headers.contains_key("dpop")));
    assert!(schemes(&server).iter().all(|s| s == "Bearer"));
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_made_ahead_of_time_reads_a_dpop_challenge_and_binds_the_token() {
    let server = AuthServer::start(Options { dpop: true, ..Options::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    // As `mcpvisor auth` does: the endpoint's challenge is in the DPoP scheme only.
    let credentials = OAuthCredentials::new(&remote(&server, dir.path(), true), Some(TokenStore::new(dir.path())), None).unwrap();
    let logged_in = credentials.log_in(&FollowRedirects::new().unwrap(), Duration::from_secs(60)).await.unwrap();
    assert_eq!(logged_in.issuer, server.issuer());
    assert_eq!(server.to("/custom/resource-metadata").len(), 1, "discovery followed the DPoP challenge's resource_metadata");

    let handle = start(vec![remote(&server, dir.path(), true)]).await;
    assert_eq!(echo(&handle, "later").await, "later");
    assert_eq!((server.bound_tokens(), server.dpop_refusals()), (2, Vec::<String>::new()));
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_client_gets_a_bound_token_with_no_browser() {
    let server = AuthServer::start(Options { dpop: true, client_secret: Some(("machine", "machine-secret")), ..Options::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = remote(&server, dir.path(), true);
    if let Some(Auth::OAuth(oauth)) = &mut config.auth {
        (oauth.grant, oauth.client_id, oauth.client_secret) =
            (Grant::ClientCredentials, Some("machine".into()), Some("machine-secret".into()));
    }
    let handle = start(vec![config]).await;
    assert_eq!(echo(&handle, "machine").await, "machine");
    assert_eq!(server.grants("client_credentials").len(), 1);
    assert_eq!((server.bound_tokens(), server.dpop_refusals()), (2, Vec::<String>::new()));
    assert!(schemes(&server).iter().all(|s| s == "DPoP"));
    handle.shutdown().await;
}
