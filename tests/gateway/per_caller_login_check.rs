//! Who opens a per-caller login link (issue 35, item 2; MCP 2025-11-25's
//! URL-mode elicitation asks that the user who completes a flow be the one
//! it was started for): a real `mcpvisor serve --http` whose callers are
//! the OAuth fixture's users (`[serve.auth]`, JWTs), with `[serve.auth]
//! login` (the gateway a client of that issuer), in front of the fixture's
//! MCP endpoint as `gh` with `per_caller = true`. The fixture approves
//! every authorization as the user the test names.
//! Checked: alice opening her own link logs in at the issuer as alice,
//! then at the third party, and her next call goes out as her login;
//! mallory's link opened by alice's browser is refused and used up, and
//! mallory is still asked to log in (alice's third-party login never
//! becomes mallory's), and the audit log says who opened it; without `login`, the gateway warns at start that
//! links are not checked.

use serde_json::{json, Value};

use crate::gateway_http_support::{call_modern_as, client, modern_meta, Gateway};
use crate::oauth_server::{AuthServer, Options, IDENTITY_CLIENT, LOGIN_CLIENT};

struct Setup {
    fixture: AuthServer,
    gateway: Gateway,
    audience: String,
    /// `XDG_STATE_HOME` of the gateway (its audit log is `mcpvisor/audit.jsonl`).
    state: tempfile::TempDir,
}

/// The fixture and a gateway taking its JWTs; `login` is the `[serve.auth]` line of the login client, if any.
async fn start(login: &str) -> Setup {
    let fixture = AuthServer::start(Options { client_secret: Some(LOGIN_CLIENT), ..Options::default() }).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let audience = format!("{base}/mcp");
    let toml = format!(
        "[servers.gh]\nurl = {:?}\nauth = {{ type = \"oauth\", per_caller = true, client_id = {:?}, client_secret = \"${{GW_SECRET}}\", \
         grant = \"client_credentials\" }}\n\n[serve]\npublic_url = {base:?}\nlogin_key = \"${{LOGIN_KEY}}\"\n\n\
         [serve.auth]\nissuer = {:?}\naudience = {audience:?}\n{login}\n",
        fixture.mcp(),
        LOGIN_CLIENT.0,
        fixture.issuer(),
    );
    let state = tempfile::tempdir().unwrap();
    let key = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, [9u8; 32]);
    let env = [
        ("GW_SECRET", LOGIN_CLIENT.1),
        ("LOGIN_KEY", key.as_str()),
        ("ID_CLIENT", IDENTITY_CLIENT.0),
        ("ID_SECRET", IDENTITY_CLIENT.1),
        ("XDG_STATE_HOME", state.path().to_str().unwrap()),
    ];
    let gateway = Gateway::start_with_config(&toml, &format!("127.0.0.1:{port}"), &[], &env).expect("the gateway starts");
    Setup { fixture, gateway, audience, state }
}

const LOGIN: &str = "login = { client_id = \"${ID_CLIENT}\", client_secret = \"${ID_SECRET}\" }";

impl Setup {
    /// `user`'s call of `gh`'s `whoami`, with a token of the issuer: the JSON-RPC answer.
    async fn whoami(&self, user: &str) -> Value {
        let token = self.fixture.mint(user, "", &self.audience);
        let params = json!({"name": "gh__whoami", "arguments": {}, "_meta": modern_meta()});
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
        call_modern_as(&client(), &self.gateway.mcp(), &body, Some(&token)).await
    }

    /// The login link `user` is given.
    async fn link(&self, user: &str) -> String {
        let answer = self.whoami(user).await;
        assert_eq!(answer["error"]["code"], -32042, "{user} is asked to log in: {answer}");
        answer["error"]["data"]["elicitations"][0]["url"].as_str().expect("a link").to_owned()
    }
}

/// Opens `url` in a browser whose user the fixture approves as `user`: the last page's status and text.
async fn open_as(fixture: &AuthServer, url: &str, user: &str) -> (u16, String) {
    fixture.approve_as(user);
    let response = reqwest::Client::new().get(url).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// Who the third party saw in a `whoami` answer, if the call went through.
fn seen(answer: &Value) -> Option<String> {
    let text = answer["result"]["content"][0]["text"].as_str()?;
    serde_json::from_str::<Value>(text).ok()?["sub"].as_str().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_reaches_the_third_party_only_from_a_browser_that_logs_in_as_its_caller() {
    let setup = start(LOGIN).await;
    assert!(!setup.gateway.stderr_text().contains("are not checked"), "{}", setup.gateway.stderr_text());

    // mallory's link, opened by alice's browser: refused, used up, nothing stored for mallory.
    let mallorys = setup.link("mallory").await;
    let (status, page) = open_as(&setup.fixture, &mallorys, "alice").await;
    assert_eq!(status, 403, "{page}");
    assert!(page.contains("given to another caller"), "{page}");
    let (status, _) = open_as(&setup.fixture, &mallorys, "mallory").await;
    assert_eq!(status, 400, "the link is used up");
    let answer = setup.whoami("mallory").await;
    assert_eq!(answer["error"]["code"], -32042, "mallory never rides on alice's login: {answer}");
    let audit = setup.state.path().join("mcpvisor/audit.jsonl");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let refused = "login link of issuer:mallory refused: opened by issuer:alice";
    while !std::fs::read_to_string(&audit).unwrap_or_default().contains(refused) {
        assert!(std::time::Instant::now() < deadline, "the misuse is in the audit log: {:?}", std::fs::read_to_string(&audit));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // alice's own link: the issuer says alice, then the third party logs her in.
    let alices = setup.link("alice").await;
    let (status, page) = open_as(&setup.fixture, &alices, "alice").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Logged in to gh"), "{page}");
    let answer = setup.whoami("alice").await;
    assert_eq!(seen(&answer).as_deref(), Some("alice"), "{answer}");
    assert_eq!(setup.whoami("mallory").await["error"]["code"], -32042);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_login_client_the_gateway_warns_that_links_are_not_checked() {
    let setup = start("").await;
    let stderr = setup.gateway.stderr_text();
    assert!(stderr.contains("login links of per-caller login servers are not checked") && stderr.contains("[serve.auth]"), "{stderr}");
}
