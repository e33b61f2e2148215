//! The `[serve]` table of the configuration, read by a real
//! `mcpvisor serve --http`: the bearer token (a `${VAR}` reference, or the
//! environment's `MCPVISOR_SERVE_TOKEN`, which wins), allowed origins, and
//! `[serve.auth]` (an OAuth issuer instead of the token).

use crate::gateway_http_support::{client, initialize, json_of, post, Gateway, BIN, LEGACY};

fn demo_with(serve_table: &str) -> String {
    format!("[servers.demo]\ncommand = {BIN:?}\nargs = [\"demo-server\"]\n\n[serve]\n{serve_table}")
}

/// The status of an `initialize` POST to a gateway bound on every address, with `token` if any.
async fn initialize_status(gateway: &Gateway, token: Option<&str>, origin: Option<&str>) -> u16 {
    let port = gateway.base.rsplit(':').next().unwrap();
    let mut request = post(&client(), &format!("http://127.0.0.1:{port}/mcp"), &initialize(LEGACY));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    request.send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn a_token_from_the_configuration_lets_a_non_loopback_bind_start_and_is_required() {
    let config = demo_with("token = \"${GW_TEST_TOKEN}\"\nallowed_origins = [\"https://app.example.com\"]\n");
    let gateway = Gateway::start_with_config(&config, "0.0.0.0:0", &[], &[("GW_TEST_TOKEN", "from-the-file-1234")])
        .expect("starts with the file's token");
    assert!(!gateway.stderr_text().contains("from-the-file-1234"), "the token is never printed: {}", gateway.stderr_text());
    assert_eq!(initialize_status(&gateway, None, None).await, 401);
    assert_eq!(initialize_status(&gateway, Some("wrong-token-5678"), None).await, 401);
    assert_eq!(initialize_status(&gateway, Some("from-the-file-1234"), None).await, 200);
    assert_eq!(initialize_status(&gateway, Some("from-the-file-1234"), Some("https://app.example.com")).await, 200);
    assert_eq!(initialize_status(&gateway, Some("from-the-file-1234"), Some("https://evil.example.com")).await, 403);
}

#[tokio::test]
async fn the_environment_token_wins_over_the_file() {
    let config = demo_with("token = \"${GW_TEST_TOKEN}\"\n");
    let env = [("GW_TEST_TOKEN", "from-the-file-1234"), ("MCPVISOR_SERVE_TOKEN", "from-the-env-5678")];
    let gateway = Gateway::start_with_config(&config, "0.0.0.0:0", &[], &env).expect("starts");
    assert_eq!(initialize_status(&gateway, Some("from-the-file-1234"), None).await, 401);
    assert_eq!(initialize_status(&gateway, Some("from-the-env-5678"), None).await, 200);
}

#[tokio::test]
async fn without_any_token_a_non_loopback_bind_is_refused() {
    let refused = Gateway::start_with_config(&demo_with(""), "0.0.0.0:0", &[], &[]).err().expect("no token, no start");
    assert!(refused.contains("MCPVISOR_SERVE_TOKEN") && refused.contains("[serve]"), "{refused}");
    let unset = Gateway::start_with_config(&demo_with("token = \"${GW_UNSET_TOKEN}\"\n"), "0.0.0.0:0", &[], &[])
        .err()
        .expect("a token whose variable is unset, no start");
    assert!(unset.contains("serve.token") && unset.contains("${GW_UNSET_TOKEN}"), "{unset}");
}

#[tokio::test]
async fn an_oauth_issuer_lets_a_non_loopback_bind_start_and_its_metadata_is_served() {
    let auth = "[serve.auth]\nissuer = \"http://127.0.0.1:9\"\naudience = \"https://mcp.example.com/mcp\"\nrequired_scopes = [\"mcp\"]\n";
    let gateway = Gateway::start_with_config(&demo_with(auth), "0.0.0.0:0", &[], &[]).expect("starts with [serve.auth] alone");
    let port = gateway.base.rsplit(':').next().unwrap().to_string();
    let refused = post(&client(), &format!("http://127.0.0.1:{port}/mcp"), &initialize(LEGACY)).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let challenge = refused.headers()["www-authenticate"].to_str().unwrap().to_string();
    let metadata_url = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp";
    assert_eq!(challenge, format!("Bearer resource_metadata=\"{metadata_url}\", scope=\"mcp\""));
    let url = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp");
    let metadata = json_of(client().get(url).send().await.unwrap()).await;
    assert_eq!(metadata["resource"], "https://mcp.example.com/mcp");
    assert_eq!(metadata["authorization_servers"][0], "http://127.0.0.1:9");

    let remote_http = demo_with("[serve.auth]\nissuer = \"http://idp.example.com\"\naudience = \"https://mcp.example.com/mcp\"\n");
    let refused = Gateway::start_with_config(&remote_http, "127.0.0.1:0", &[], &[]).err().expect("a plain http issuer off loopback");
    assert!(refused.contains("[serve.auth]") && refused.contains("https"), "{refused}");
    let unset = format!("{auth}introspection = {{ client_id = \"${{GW_INTRO_ID}}\", client_secret = \"${{GW_INTRO_SECRET}}\" }}\n");
    let refused = Gateway::start_with_config(&demo_with(&unset), "127.0.0.1:0", &[], &[]).err().expect("unset introspection variables");
    assert!(refused.contains("serve.auth.introspection.client_id") && refused.contains("${GW_INTRO_ID}"), "{refused}");
}

/// The status of an `initialize` POST on the gateway's own address, with `key`.
async fn status_with(gateway: &Gateway, key: &str) -> u16 {
    post(&client(), &gateway.mcp(), &initialize(LEGACY)).bearer_auth(key).send().await.unwrap().status().as_u16()
}

/// Sends SIGHUP, then waits (20 s at most) until `key` gets `status`.
async fn after_hangup(gateway: &Gateway, key: &str, status: u16) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(gateway.child.id() as i32, libc::SIGHUP) };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while status_with(gateway, key).await != status {
        assert!(std::time::Instant::now() < deadline, "{status} not answered after SIGHUP: {}", gateway.stderr_text());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn keys_from_files_are_rotated_and_added_by_sighup_without_a_restart() {
    let secrets = tempfile::tempdir().unwrap();
    let (alice_file, bob_file) = (secrets.path().join("alice"), secrets.path().join("bob"));
    let (first, second, bob) = ("0f3a9c2e7b1d4a6f8e0c2b4d6f8a0c1e", "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b", "a1b2c3d4e5f60718293a4b5c6d7e8f90");
    std::fs::write(&alice_file, format!("{first}\n")).unwrap();
    let alice_only = format!("[serve.keys.alice]\ntoken_file = {alice_file:?}\n");
    let gateway = Gateway::start_with_config(&demo_with(&alice_only), "127.0.0.1:0", &[], &[]).expect("the gateway starts");
    assert_eq!(status_with(&gateway, first).await, 200);

    // The mounted secret is replaced: the old key stops working, the new one works.
    std::fs::write(&alice_file, second).unwrap();
    after_hangup(&gateway, second, 200).await;
    assert_eq!(status_with(&gateway, first).await, 401);

    // A key added by SIGHUP works at once: its file is read then, unlike a ${VAR} set after start.
    std::fs::write(&bob_file, bob).unwrap();
    let both = format!("{alice_only}\n[serve.keys.bob]\ntoken_file = {bob_file:?}\n");
    std::fs::write(gateway.config_file(), demo_with(&both)).unwrap();
    after_hangup(&gateway, bob, 200).await;
    assert_eq!(status_with(&gateway, second).await, 200);
    assert!(!gateway.stderr_text().contains(second) && !gateway.stderr_text().contains(bob), "{}", gateway.stderr_text());
}
