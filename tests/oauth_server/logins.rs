//! Users' logins by the authorization code, as a third party (GitHub,
//! Jira) sees them: the test says who approves the next authorization
//! (`approve_as`, no person involved), the tokens of that code (and those
//! refreshed from them) stand for that user, which `whoami` says, and a
//! user's tokens can be revoked at once (`revoke_user`: the endpoint and
//! the token endpoint then refuse them). [`start_login_gateway`] puts a
//! real `serve --http` in front of it, its callers logging in themselves
//! (tests/gateway/per_caller_login.rs, tests/interop/gateway_login.rs).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use super::exchange::Subject;
use super::{AuthServer, Options, State};
use crate::gateway_http_support::{Gateway, THREE_KEYS, THREE_KEYS_ENV};

/// Who approves authorizations, and what each code and refresh token stands for.
#[derive(Default)]
pub(super) struct Logins {
    approver: Mutex<Option<String>>,
    /// code or refresh token → user
    users: Mutex<BTreeMap<String, String>>,
}

impl AuthServer {
    /// The next authorizations are approved as `user`.
    pub fn approve_as(&self, user: &str) {
        *self.state.logins.approver.lock().unwrap() = Some(user.to_owned());
    }

    /// Revokes every token of `user`: its calls get 401, its refreshes `invalid_grant`.
    pub fn revoke_user(&self, user: &str) {
        let mine: Vec<String> = {
            let users = self.state.logins.users.lock().unwrap();
            users.iter().filter(|(_, who)| *who == user).map(|(token, _)| token.clone()).collect()
        };
        let subjects: Vec<String> = {
            let subjects = self.state.exchanges.subjects.lock().unwrap();
            subjects.iter().filter(|(_, subject)| subject.sub.as_deref() == Some(user)).map(|(token, _)| token.clone()).collect()
        };
        let mut issued = self.state.issued.lock().unwrap();
        for token in mine.iter().chain(&subjects) {
            issued.tokens.remove(token);
            issued.refresh.remove(token);
        }
    }
}

impl State {
    /// A code was issued: it stands for the approver, if one is set.
    pub(super) fn approved(&self, code: &str) {
        if let Some(user) = self.logins.approver.lock().unwrap().clone() {
            self.logins.users.lock().unwrap().insert(code.to_owned(), user);
        }
    }

    /// For the gateway's own login client (`[serve.auth] login`), the
    /// access token of a code: a JWT of this issuer naming the approver of
    /// the code, for the `resource` asked; `None` for any other client.
    pub(super) fn identity_token(&self, client: &str, form: &BTreeMap<String, String>, scope: &str) -> Option<String> {
        if client != IDENTITY_CLIENT.0 {
            return None;
        }
        let user = form.get("code").and_then(|code| self.logins.users.lock().unwrap().get(code).cloned())?;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let claims = serde_json::json!({"iss": self.issuer(), "sub": user, "aud": form.get("resource"), "scope": scope,
                                        "client_id": client, "iat": now, "exp": now + 300});
        Some(self.exchanges.sign("JWT", &claims))
    }

    /// Tokens were issued for the grant of `form` (a code, or a refresh
    /// token): they stand for the user that one stood for.
    pub(super) fn issued_for(&self, form: &BTreeMap<String, String>, access: &str, refresh: &str, scope: &str) {
        let from = form.get("code").or_else(|| form.get("refresh_token"));
        let Some(user) = from.and_then(|from| self.logins.users.lock().unwrap().get(from).cloned()) else { return };
        self.logins.users.lock().unwrap().insert(refresh.to_owned(), user.clone());
        let subject = Subject { sub: Some(user), scope: scope.to_owned(), audience: None };
        self.exchanges.subjects.lock().unwrap().insert(access.to_owned(), subject);
    }
}

/// The gateway as a client of its own issuer, for browsers that open login links (`[serve.auth] login`).
pub const IDENTITY_CLIENT: (&str, &str) = ("gw-identity-client", "gw-identity-secret-4c2e9a1f");

/// The gateway as a pre-registered client of the third party.
pub const LOGIN_CLIENT: (&str, &str) = ("gw-login-client", "gw-login-secret-7b1d4a6f");
/// A gateway (`serve --http`, the keys alice, bob and carol) in front of a fixture as `gh`, each caller logging in itself.
pub struct LoginGateway {
    pub fixture: AuthServer,
    pub gateway: Gateway,
    /// `XDG_STATE_HOME` of the gateway; its audit log is `mcpvisor/audit.jsonl` in it (the default).
    pub state: tempfile::TempDir,
}

impl LoginGateway {
    /// The folder of `gh`'s stored logins.
    pub fn logins(&self) -> PathBuf {
        self.state.path().join("mcpvisor/logins/gh")
    }
}

/// A free loopback port for the gateway (its public URL names it before it starts).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The configuration of `gh` with `serve` as the rest of the `[serve]` table.
pub fn login_config(fixture: &AuthServer, serve: &str) -> String {
    format!(
        "[servers.gh]\nurl = {:?}\nauth = {{ type = \"oauth\", per_caller = true, client_id = {:?}, client_secret = \"${{GW_SECRET}}\", \
         grant = \"client_credentials\" }}\n\n[serve]\n{serve}\n{THREE_KEYS}",
        fixture.mcp(),
        LOGIN_CLIENT.0,
    )
}

/// Starts the fixture and the gateway (its public URL on a port chosen first).
pub async fn start_login_gateway() -> LoginGateway {
    let fixture = AuthServer::start(Options { client_secret: Some(LOGIN_CLIENT), ..Options::default() }).await;
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    let serve = format!("public_url = \"http://127.0.0.1:{port}\"\nlogin_key = \"${{LOGIN_KEY}}\"");
    let key = STANDARD.encode([7u8; 32]);
    let mut env: Vec<(&str, &str)> = THREE_KEYS_ENV.to_vec();
    let state_dir = state.path().to_str().unwrap().to_owned();
    env.extend([("GW_SECRET", LOGIN_CLIENT.1), ("LOGIN_KEY", key.as_str()), ("XDG_STATE_HOME", state_dir.as_str())]);
    let gateway =
        Gateway::start_with_config(&login_config(&fixture, &serve), &format!("127.0.0.1:{port}"), &[], &env).expect("the gateway starts");
    LoginGateway { fixture, gateway, state }
}
