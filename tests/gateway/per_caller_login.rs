//! Per-caller logins to a third-party OAuth server (issue 35, item 2): a
//! real `mcpvisor serve --http` with the named keys alice, bob and carol
//! (an admin), in front of the OAuth fixture's MCP endpoint as server `gh`
//! with `auth = { type = "oauth", per_caller = true }`. The fixture approves
//! authorizations as the user the test names, and its `whoami` tool says
//! whose login a call came with.
//! Checked: alice's first call is answered with a URL-mode elicitation
//! (-32042) naming a login link of the gateway; following it (redirects
//! followed, no person) logs her in, tells her session so, and her next
//! call reaches `gh` as her login; bob is still asked to log in and never
//! rides on alice's; the stored login is 0600 in 0700, named and filled
//! without the caller or the tokens in clear; an admin lists and revokes
//! it, and alice is asked again; the stateless 2026-07-28 era is asked and
//! served alike; a login the third party revoked (refresh refused too)
//! makes the call ask again; a link is single use; and the
//! gateway refuses to start such a server without `[serve] public_url`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::gateway_http_support::{call_modern_as, client, json_of, modern_meta, Gateway, KeySession, ALICE, BOB, CAROL, THREE_KEYS_ENV};
use crate::oauth_server::{
    login_config as config, start_login_gateway as start, AuthServer, LoginGateway as Setup, Options, LOGIN_CLIENT as CLIENT,
};

/// How long a test waits for a state it expects.
const PATIENCE: Duration = Duration::from_secs(30);

/// Waits until the catalog lists `gh`'s tools (listed with the gateway's own client-credentials token).
async fn wait_for_catalog(session: &KeySession) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let listed = json_of(session.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await).await;
        if listed["result"]["tools"].as_array().is_some_and(|tools| tools.iter().any(|tool| tool["name"] == "gh__whoami")) {
            return;
        }
        assert!(Instant::now() < deadline, "gh's tools were never listed: {listed}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `gh`'s `whoami` as `session`: who the third party saw, or the whole error answer.
async fn whoami(session: &KeySession, id: u64) -> Result<Value, Value> {
    let answer = session.call(id, "gh__whoami", json!({})).await;
    let text = answer["result"]["content"][0]["text"].as_str().filter(|_| answer["result"]["isError"] != json!(true));
    text.and_then(|text| serde_json::from_str(text).ok()).ok_or(answer)
}

/// The login link of a -32042 answer, after checking its shape.
fn login_link(answer: &Value, gateway: &Gateway) -> (String, String) {
    assert_eq!(answer["error"]["code"], -32042, "{answer}");
    let elicitation = &answer["error"]["data"]["elicitations"][0];
    assert_eq!(elicitation["mode"], "url", "{answer}");
    let url = elicitation["url"].as_str().expect("a url").to_owned();
    assert!(url.starts_with(&format!("{}/login/", gateway.base)), "{url}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("`gh`") && message.contains(&url), "a client that cannot open URLs is told where: {message}");
    (url, elicitation["elicitationId"].as_str().unwrap().to_owned())
}

/// Follows `url` as a browser whose user the third party approves.
async fn follow(url: &str) -> (u16, String) {
    let response = reqwest::Client::new().get(url).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn stored(setup: &Setup) -> Vec<PathBuf> {
    std::fs::read_dir(setup.logins()).map_or(Vec::new(), |dir| dir.map(|entry| entry.unwrap().path()).collect())
}

/// The audit line of `subject`'s call of `gh__whoami` with `outcome`, once written (the whole log holds no token).
async fn audit_line_of(setup: &Setup, subject: &str, outcome: &str) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = std::fs::read_to_string(setup.state.path().join("mcpvisor/audit.jsonl")).unwrap_or_default();
        assert!(!text.contains("access-") && !text.contains("refresh-") && !text.contains("/login/"), "{text}");
        let lines: Vec<Value> = text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
        if let Some(line) =
            lines.into_iter().find(|line| line["subject"] == subject && line["outcome"] == outcome && line["server"] == "gh")
        {
            return line;
        }
        assert!(
            Instant::now() < deadline,
            "no audit line of {subject}'s call with outcome {outcome}: {text}\n{}",
            setup.gateway.stderr_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn admin_logins(gateway: &Gateway) -> Value {
    json_of(client().get(format!("{}/admin/logins", gateway.base)).bearer_auth(CAROL).send().await.unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_caller_logs_in_itself_and_an_admin_revokes_it() {
    let setup = start().await;
    let gateway = &setup.gateway;
    let alice = KeySession::open(gateway, ALICE, json!({"elicitation": {"url": {}}})).await;
    let bob = KeySession::open(gateway, BOB, json!({})).await;
    wait_for_catalog(&alice).await;

    let first = whoami(&alice, 2).await.expect_err("alice has no login yet");
    let (link, elicitation) = login_link(&first, gateway);
    let again = whoami(&alice, 3).await.expect_err("still no login");
    assert_eq!(login_link(&again, gateway).0, link, "a caller asking again gets the same live link");

    let mut stream = alice.listen().await;
    setup.fixture.approve_as("alice-at-gh");
    let (status, page) = follow(&link).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Logged in to gh"), "{page}");
    let complete = tokio::time::timeout(PATIENCE, async {
        loop {
            let event = stream.next().await.expect("the GET stream stays open");
            if event.data["method"] == "notifications/elicitation/complete" {
                return event.data;
            }
        }
    })
    .await
    .expect("alice's session hears that her login completed");
    assert_eq!(complete["params"]["elicitationId"], json!(elicitation));
    let (used, page) = follow(&link).await;
    assert_eq!(used, 400, "a link is single use: {page}");

    let seen = whoami(&alice, 4).await.expect("alice's call goes through with her login");
    assert_eq!(seen["sub"], "alice-at-gh", "{seen}");
    let bobs = whoami(&bob, 5).await.expect_err("bob never rides on alice's login");
    let (bobs_link, _) = login_link(&bobs, gateway);
    assert_ne!(bobs_link, link);

    let files = stored(&setup);
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(mode(&setup.logins()), 0o700);
    assert_eq!(mode(setup.logins().parent().unwrap()), 0o700);
    assert_eq!(mode(&files[0]), 0o600);
    let bytes = std::fs::read(&files[0]).unwrap();
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    for clear in ["access-", "refresh-", "alice", "Bearer"] {
        assert!(!bytes.windows(clear.len()).any(|w| w == clear.as_bytes()), "{clear} is in the file in clear");
        assert!(!name.contains(clear), "{name}");
    }

    let audit = audit_line_of(&setup, "alice", "ok").await;
    let upstream = json!({"subject": "alice", "audience": setup.fixture.mcp()});
    assert_eq!(audit["upstream"], upstream, "the upstream is alice's login, never a token: {audit}");

    let status = json_of(client().get(format!("{}/admin/status", gateway.base)).bearer_auth(CAROL).send().await.unwrap()).await;
    let gh = status["servers"].as_array().and_then(|servers| servers.iter().find(|server| server["name"] == "gh")).cloned();
    let callers = gh.map(|gh| gh["callers"].clone()).unwrap_or_default();
    assert_eq!((&callers["logins"], &callers["callers"]), (&json!(1), &json!(["key:alice"])), "what `top` shows: {status}");

    let listed = admin_logins(gateway).await;
    let logins = listed["logins"].as_array().expect("a list");
    assert_eq!(logins.len(), 1, "{listed}");
    assert_eq!((&logins[0]["server"], &logins[0]["caller"]), (&json!("gh"), &json!("key:alice")), "{listed}");
    let refused = client().get(format!("{}/admin/logins", gateway.base)).bearer_auth(ALICE).send().await.unwrap();
    assert_eq!(refused.status(), 403, "only an admin lists logins");

    let revoke = client().delete(format!("{}/admin/logins/gh/key:alice", gateway.base)).bearer_auth(CAROL).send().await.unwrap();
    assert_eq!(json_of(revoke).await, json!({"server": "gh", "caller": "key:alice", "revoked": true}));
    assert!(stored(&setup).is_empty(), "the revoked login's file is gone");
    let asked = whoami(&alice, 6).await.expect_err("a revoked caller is asked to log in again");
    login_link(&asked, gateway);
    let logged = gateway.stderr_text();
    assert!(!logged.contains("/login/") && !logged.contains("access-") && !logged.contains("code-"), "{logged}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_the_third_party_revoked_asks_for_a_new_one_and_a_caller_revokes_its_own() {
    let setup = start().await;
    let gateway = &setup.gateway;
    let alice = KeySession::open(gateway, ALICE, json!({})).await;
    wait_for_catalog(&alice).await;
    setup.fixture.approve_as("alice-at-gh");
    // The stateless 2026-07-28 era is asked and served the same way.
    let modern = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "gh__whoami", "arguments": {}, "_meta": modern_meta()}});
    let (link, _) = login_link(&call_modern_as(&client(), &gateway.mcp(), &modern, Some(ALICE)).await, gateway);
    assert_eq!(follow(&link).await.0, 200);
    let answered = call_modern_as(&client(), &gateway.mcp(), &modern, Some(ALICE)).await;
    let seen: Value = serde_json::from_str(answered["result"]["content"][0]["text"].as_str().expect("an answer")).unwrap();
    assert_eq!(seen["sub"], "alice-at-gh", "{answered}");
    assert_eq!(whoami(&alice, 3).await.expect("logged in, in the handshake era too")["sub"], "alice-at-gh");

    // Its token and refresh token refused: the call cannot be fixed by a refresh, and asks for a login.
    setup.fixture.revoke_user("alice-at-gh");
    let asked = whoami(&alice, 4).await.expect_err("a login the third party revoked is no login");
    let (link, _) = login_link(&asked, gateway);
    assert!(stored(&setup).is_empty(), "the dead login was deleted");
    setup.fixture.approve_as("alice-again");
    assert_eq!(follow(&link).await.0, 200);
    assert_eq!(whoami(&alice, 5).await.expect("logged in again")["sub"], "alice-again");

    let own = client().delete(format!("{}/login/gh", gateway.base)).bearer_auth(ALICE).send().await.unwrap();
    assert_eq!(json_of(own).await, json!({"server": "gh", "caller": "key:alice", "revoked": true}));
    login_link(&whoami(&alice, 6).await.expect_err("revoked by herself"), gateway);
    let anonymous = client().delete(format!("{}/login/gh", gateway.base)).send().await.unwrap();
    assert_eq!(anonymous.status(), 401, "revoking needs the caller's own credentials");
}

#[tokio::test]
async fn a_per_caller_login_server_needs_the_public_url_and_the_key() {
    let fixture = AuthServer::start(Options::default()).await;
    let env = [("GW_SECRET", CLIENT.1), THREE_KEYS_ENV[0], THREE_KEYS_ENV[1], THREE_KEYS_ENV[2]];
    let refused = Gateway::start_with_config(&config(&fixture, "login_key = \"${LOGIN_KEY}\""), "127.0.0.1:0", &[], &env)
        .err()
        .expect("no public_url: the gateway does not start");
    assert!(refused.contains("`public_url`") && refused.contains("`gh`"), "{refused}");
    let refused = Gateway::start_with_config(&config(&fixture, "public_url = \"http://127.0.0.1:9\""), "127.0.0.1:0", &[], &env)
        .err()
        .expect("no login_key: the gateway does not start");
    assert!(refused.contains("`login_key`") && refused.contains("`gh`"), "{refused}");
    let plain = Gateway::start_with_config(&config(&fixture, "public_url = \"http://gw.example.com\""), "127.0.0.1:0", &[], &env)
        .err()
        .expect("a public http URL is refused");
    assert!(plain.contains("serve.public_url") && plain.contains("https://"), "{plain}");
}
