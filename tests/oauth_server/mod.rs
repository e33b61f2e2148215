//! An OAuth authorization server and an MCP endpoint it protects, on
//! loopback, each behaviour a knob: where the metadata lives, whether PKCE,
//! dynamic registration or client ID metadata documents are offered, what
//! the redirect's `iss` says, how long tokens live, which scopes a call
//! needs, whether tokens are DPoP-bound and nonces required. Every request
//! is recorded for the test to check; PKCE verifiers, refresh tokens,
//! client secrets, private-key JWT assertions and DPoP proofs are verified
//! for real. The endpoint answers JSON-RPC enough for a real connection
//! (`initialize`, `tools/list`, an `echo` tool).

#![allow(dead_code)]

mod dpop;

use dpop::Refused;
mod exchange;
mod grants;
mod logins;

#[allow(unused_imports)] // not every test binary that mounts the fixture uses them
pub use exchange::{Subject, TOKEN_EXCHANGE};
#[allow(unused_imports)]
pub use grants::{PlatformKey, JWT_BEARER};
#[allow(unused_imports)]
pub use logins::{login_config, start_login_gateway, LoginGateway, IDENTITY_CLIENT, LOGIN_CLIENT};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use serde_json::{json, Value};

/// Where the protected-resource metadata is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prm {
    /// Only at the URL the 401's `resource_metadata` names.
    Header,
    /// Only at `/.well-known/oauth-protected-resource/mcp`.
    PathAware,
    /// Only at `/.well-known/oauth-protected-resource`.
    Root,
    /// Nowhere (a 2025-03-26 server).
    Absent,
}

/// Where the authorization-server metadata is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meta {
    /// RFC 8414 `/.well-known/oauth-authorization-server{path}`.
    OAuth,
    /// OpenID `/.well-known/openid-configuration{path}`.
    OpenIdInserted,
    /// OpenID `{path}/.well-known/openid-configuration`.
    OpenIdAppended,
    /// Nowhere: the 2025-03-26 default endpoints are used.
    Absent,
}

/// What the redirect says in `iss`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Iss {
    Correct,
    Wrong,
    Absent,
}

#[derive(Clone, Debug)]
pub struct Options {
    pub issuer_path: &'static str,
    /// The resource metadata names these authorization servers instead of this one.
    pub authorization_servers: Option<Vec<String>>,
    /// `/token` answers 307 with this `Location` instead of a token.
    pub token_redirect: Option<String>,
    pub prm: Prm,
    pub meta: Meta,
    pub pkce: bool,
    pub dcr: bool,
    pub cimd: bool,
    pub iss: Iss,
    pub advertise_iss: bool,
    /// `expires_in` of tokens from a code exchange (refreshed ones live an hour).
    pub first_expires_in: u64,
    pub scopes_supported: Vec<&'static str>,
    /// `scope` of the 401's challenge.
    pub challenge_scope: Option<&'static str>,
    /// A call needs this scope, else 403 `insufficient_scope`.
    pub required_scope: Option<&'static str>,
    /// Every call with a token is refused with 403 `insufficient_scope`.
    pub always_insufficient: bool,
    /// A pre-registered confidential client (id, secret).
    pub client_secret: Option<(&'static str, &'static str)>,
    /// The public key of a private-key JWT client: an uncompressed P-256
    /// point (ES256), or with `jwt_rsa` an RSAPublicKey in DER (RS256).
    pub jwt_public_key: Option<Vec<u8>>,
    pub jwt_rsa: bool,
    /// `resource` of the protected-resource metadata, instead of the endpoint.
    pub declared_resource: Option<&'static str>,
    /// The JWT-bearer grant: the P-256 public key (uncompressed point) that
    /// signs a workload's assertions.
    pub assertion_key: Option<Vec<u8>>,
    /// The identity provider at `/idp/token` exchanges this ID token for
    /// an ID-JAG the JWT-bearer grant accepts.
    pub id_token: Option<&'static str>,
    /// `issuer` of the authorization-server metadata (and of the redirect's
    /// `iss`), instead of the real one; one starting with `/` is a path on
    /// this server.
    pub declared_issuer: Option<&'static str>,
    /// DPoP offered (ES256): a token request with a proof gets tokens bound
    /// to its key, which the endpoint then takes only with a proof.
    pub dpop: bool,
    /// The nonce token requests' proofs must carry (`use_dpop_nonce` until they do).
    pub as_nonce: Option<&'static str>,
    /// The nonce the endpoint's proofs must carry.
    pub rs_nonce: Option<&'static str>,
    /// The identity provider whose ID-JAGs the JWT-bearer grant redeems:
    /// its issuer and signing key (another fixture's `issuer()` and `signing_key()`).
    pub id_jag_issuer: Option<(String, Vec<u8>)>,
    /// The client the ID-JAGs this fixture issues name (the gateway's
    /// client at the authorization server they are for).
    pub id_jag_client: Option<&'static str>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            issuer_path: "",
            authorization_servers: None,
            token_redirect: None,
            prm: Prm::Header,
            meta: Meta::OAuth,
            pkce: true,
            dcr: true,
            cimd: false,
            iss: Iss::Correct,
            advertise_iss: true,
            first_expires_in: 3600,
            scopes_supported: vec![],
            challenge_scope: None,
            required_scope: None,
            always_insufficient: false,
            client_secret: None,
            jwt_public_key: None,
            jwt_rsa: false,
            declared_resource: None,
            declared_issuer: None,
            dpop: false,
            as_nonce: None,
            rs_nonce: None,
            assertion_key: None,
            id_token: None,
            id_jag_issuer: None,
            id_jag_client: None,
        }
    }
}

/// A request the server received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub query: BTreeMap<String, String>,
    pub form: BTreeMap<String, String>,
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

#[derive(Default)]
struct Issued {
    /// ID-JAGs the identity provider issued → the resource they are for
    id_jags: BTreeMap<String, String>,
    /// code → (PKCE challenge, scope, client_id)
    codes: BTreeMap<String, (String, String, String)>,
    /// access token → scope
    tokens: BTreeMap<String, String>,
    /// refresh token → scope
    refresh: BTreeMap<String, String>,
    /// access or refresh token → the thumbprint of the DPoP key it is bound to
    bound: BTreeMap<String, String>,
    /// the `jti` of every DPoP proof accepted
    jtis: BTreeSet<String>,
    counter: u64,
}

#[derive(Clone)]
struct State {
    base: String,
    options: Options,
    log: Arc<Mutex<Vec<Recorded>>>,
    issued: Arc<Mutex<Issued>>,
    /// Why DPoP proofs were refused (a nonce asked for is not a refusal).
    dpop_refusals: Arc<Mutex<Vec<String>>>,
    /// The resource now names another authorization server (at `/moved`),
    /// and tokens of the first one are refused.
    moved: Arc<AtomicBool>,
    /// The callers' JWTs and their exchanges (`exchange`).
    exchanges: Arc<exchange::Exchanges>,
    /// Who approves authorizations, whose tokens are whose (`logins`).
    logins: Arc<logins::Logins>,
}

pub struct AuthServer {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    state: State,
}

impl AuthServer {
    pub async fn start(options: Options) -> AuthServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let base = format!("http://{}", listener.local_addr().unwrap());
        let state = State {
            base: base.clone(),
            options,
            log: Arc::default(),
            issued: Arc::default(),
            dpop_refusals: Arc::default(),
            moved: Arc::default(),
            exchanges: Arc::default(),
            logins: Arc::default(),
        };
        let app = axum::Router::new().fallback({
            let state = state.clone();
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let state = state.clone();
                async move {
                    // A slow issuer (`set_exchange_delay`) answers exchanges late, never other requests.
                    let delay = state.exchange_delay(&body);
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    state.answer(method, uri, headers, body)
                }
            }
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        AuthServer { base, state }
    }

    /// The MCP endpoint.
    pub fn mcp(&self) -> String {
        format!("{}/mcp", self.base)
    }

    pub fn issuer(&self) -> String {
        format!("{}{}", self.base, self.state.options.issuer_path)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.log.lock().unwrap().clone()
    }

    /// The requests to `path`.
    pub fn to(&self, path: &str) -> Vec<Recorded> {
        self.requests().into_iter().filter(|r| r.path == path).collect()
    }

    /// Why DPoP proofs were refused; empty when every proof checked out.
    pub fn dpop_refusals(&self) -> Vec<String> {
        self.state.dpop_refusals.lock().unwrap().clone()
    }

    /// How many tokens are bound to a DPoP key.
    pub fn bound_tokens(&self) -> usize {
        self.state.issued.lock().unwrap().bound.len()
    }

    /// Makes the protected-resource metadata name a second authorization
    /// server, `{base}/moved`, with its own registration, endpoints and
    /// tokens; the MCP endpoint refuses the first one's tokens from now on.
    pub fn move_authorization_server(&self) {
        self.state.moved.store(true, Ordering::SeqCst);
    }

    /// Token requests of this grant type.
    pub fn grants(&self, grant_type: &str) -> Vec<Recorded> {
        self.to("/token").into_iter().filter(|r| r.form.get("grant_type").map(String::as_str) == Some(grant_type)).collect()
    }
}

/// The path of the second authorization server (`move_authorization_server`).
const MOVED: &str = "/moved";

fn json_response(status: u16, value: Value) -> Response {
    Response::builder().status(status).header("Content-Type", "application/json").body(Body::from(value.to_string())).unwrap()
}

fn pairs(text: &str) -> BTreeMap<String, String> {
    url::form_urlencoded::parse(text.as_bytes()).into_owned().collect()
}

impl State {
    fn answer(&self, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
        let recorded = Recorded {
            method: method.to_string(),
            path: uri.path().to_owned(),
            query: pairs(uri.query().unwrap_or("")),
            form: pairs(&String::from_utf8_lossy(&body)),
            headers: headers.iter().map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned())).collect(),
            body: String::from_utf8_lossy(&body).into_owned(),
        };
        self.log.lock().unwrap().push(recorded.clone());
        let options = &self.options;
        let prm_path = match options.prm {
            Prm::Header => "/custom/resource-metadata".to_owned(),
            Prm::PathAware => "/.well-known/oauth-protected-resource/mcp".to_owned(),
            Prm::Root => "/.well-known/oauth-protected-resource".to_owned(),
            Prm::Absent => "/nowhere".to_owned(),
        };
        let path = format!("{}{}", self.prefix(), options.issuer_path);
        let meta_path = match options.meta {
            Meta::OAuth => format!("/.well-known/oauth-authorization-server{path}"),
            Meta::OpenIdInserted => format!("/.well-known/openid-configuration{path}"),
            Meta::OpenIdAppended => format!("{path}/.well-known/openid-configuration"),
            Meta::Absent => "/nowhere".to_owned(),
        };
        let moved = self.moved();
        // The authorization server's own paths, under `/moved` once it moved.
        let as_path = match moved {
            true => recorded.path.strip_prefix(MOVED).unwrap_or("/the-old-authorization-server"),
            false => recorded.path.as_str(),
        };
        match recorded.path.as_str() {
            "/mcp" => return self.mcp(&recorded, &prm_path),
            "/nowhere" => return json_response(404, json!({"error": "not found"})),
            p if p == prm_path => return json_response(200, self.resource_metadata()),
            p if p == meta_path => return json_response(200, self.server_metadata()),
            _ => {}
        }
        match as_path {
            "/authorize" => self.authorize(&recorded),
            "/token" if recorded.form.get("grant_type").map(String::as_str) == Some(TOKEN_EXCHANGE) => self.exchange(&recorded),
            "/token" => self.token(&recorded),
            "/jwks" => self.jwks(),
            "/idp/token" => self.token_exchange(&recorded),
            "/register" if options.dcr => {
                let request: Value = serde_json::from_slice(&body).unwrap_or_default();
                let client_id = if moved { "moved-client" } else { "dynamic-client" };
                json_response(
                    201,
                    json!({"client_id": client_id, "redirect_uris": request["redirect_uris"], "token_endpoint_auth_method": "none"}),
                )
            }
            _ => json_response(404, json!({"error": "not found"})),
        }
    }

    fn issuer(&self) -> String {
        format!("{}{}{}", self.base, self.prefix(), self.options.issuer_path)
    }

    /// The issuer the metadata names.
    fn declared_issuer(&self) -> String {
        match self.options.declared_issuer {
            Some(path) if path.starts_with('/') => format!("{}{path}", self.base),
            Some(issuer) => issuer.to_owned(),
            None => self.issuer(),
        }
    }

    fn moved(&self) -> bool {
        self.moved.load(Ordering::SeqCst)
    }

    /// Where the current authorization server's endpoints are.
    fn prefix(&self) -> &'static str {
        if self.moved() {
            MOVED
        } else {
            ""
        }
    }

    fn resource_metadata(&self) -> Value {
        let resource = self.options.declared_resource.map_or_else(|| format!("{}/mcp", self.base), str::to_owned);
        let servers = self.options.authorization_servers.clone().unwrap_or_else(|| vec![self.issuer()]);
        json!({"resource": resource, "authorization_servers": servers, "scopes_supported": self.options.scopes_supported})
    }

    fn server_metadata(&self) -> Value {
        let base = format!("{}{}", self.base, self.prefix());
        let mut metadata = json!({
            "issuer": self.declared_issuer(),
            "authorization_endpoint": format!("{base}/authorize"),
            "token_endpoint": format!("{base}/token"),
            "jwks_uri": format!("{base}/jwks"),
            "response_types_supported": ["code"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "none", "private_key_jwt"],
            "authorization_response_iss_parameter_supported": self.options.advertise_iss,
            "client_id_metadata_document_supported": self.options.cimd,
        });
        if self.options.pkce {
            metadata["code_challenge_methods_supported"] = json!(["S256"]);
        }
        if self.options.dcr {
            metadata["registration_endpoint"] = json!(format!("{base}/register"));
        }
        if self.options.dpop {
            metadata["dpop_signing_alg_values_supported"] = json!(["ES256"]);
        }
        metadata
    }

    /// What the endpoint answers a request that got past authorization.
    fn json_rpc(&self, request: &Recorded) -> Response {
        let message: Value = serde_json::from_str(&request.body).unwrap_or_default();
        let (Some(method), id) = (message["method"].as_str(), &message["id"]) else {
            return json_response(200, json!({"jsonrpc": "2.0", "id": 0, "result": {}}));
        };
        let result = match method {
            _ if id.is_null() => return Response::builder().status(202).body(Body::empty()).unwrap(),
            "initialize" => json!({"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}, "resources": {}},
                                   "serverInfo": {"name": "oauth-fixture", "version": "1"}}),
            "resources/list" => json!({"resources": [{"uri": WHOAMI_URI, "name": "whoami"}]}),
            "resources/read" => json!({"contents": [{"uri": WHOAMI_URI, "text": self.whoami(request).to_string()}]}),
            "tools/list" => json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}},
                                             {"name": "whoami", "inputSchema": {"type": "object"}}]}),
            "tools/call" if message["params"]["name"] == "whoami" => {
                json!({"content": [{"type": "text", "text": self.whoami(request).to_string()}]})
            }
            "tools/call" => json!({"content": [{"type": "text", "text": message["params"]["arguments"]["text"]}]}),
            _ => return json_response(200, json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no such method"}})),
        };
        json_response(200, json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }

    fn mcp(&self, request: &Recorded, prm_path: &str) -> Response {
        let authorization = request.headers.get("authorization").map(String::as_str).unwrap_or("");
        let (scheme, token) = authorization.split_once(' ').unwrap_or(("", ""));
        let (scope, bound) = {
            let issued = self.issued.lock().unwrap();
            (issued.tokens.get(token).cloned(), issued.bound.get(token).cloned())
        };
        let scheme_name = if self.options.dpop { "DPoP" } else { "Bearer" };
        if let (Some(jkt), Some(_)) = (&bound, &scope) {
            let refused = |challenge: String| Response::builder().status(401).header("WWW-Authenticate", challenge);
            let proved = match scheme {
                "DPoP" => self.check_proof(request, "/mcp", Some(token), self.options.rs_nonce),
                _ => {
                    self.dpop_refusals.lock().unwrap().push(format!("a DPoP-bound token sent with the {scheme:?} scheme"));
                    Err(Refused::Invalid)
                }
            };
            match proved {
                Ok(proof_jkt) if proof_jkt == *jkt => {}
                Ok(_) => {
                    self.dpop_refusals.lock().unwrap().push("a proof by another key than the token's".into());
                    return refused("DPoP error=\"invalid_token\"".into()).body(Body::empty()).unwrap();
                }
                Err(Refused::NeedsNonce(nonce)) => {
                    let response = refused("DPoP error=\"use_dpop_nonce\", error_description=\"a nonce\"".into());
                    return response.header("DPoP-Nonce", nonce).body(Body::empty()).unwrap();
                }
                Err(Refused::Invalid) => return refused("DPoP error=\"invalid_dpop_proof\"".into()).body(Body::empty()).unwrap(),
            }
        } else if scope.is_some() && scheme != "Bearer" {
            return Response::builder().status(401).header("WWW-Authenticate", scheme_name).body(Body::empty()).unwrap();
        }
        // Once moved, only the new authorization server's tokens are taken.
        let scope = scope.filter(|_| !self.moved() || token.starts_with("moved-"));
        let Some(scope) = scope else {
            let mut challenge = match self.options.prm {
                Prm::Header => format!("{scheme_name} resource_metadata=\"{}{prm_path}\"", self.base),
                _ => scheme_name.to_owned(),
            };
            if let Some(scope) = self.options.challenge_scope {
                challenge.push_str(&format!(", scope=\"{scope}\""));
            }
            return Response::builder().status(401).header("WWW-Authenticate", challenge).body(Body::empty()).unwrap();
        };
        let lacking = self.options.required_scope.filter(|needed| !scope.split(' ').any(|s| s == *needed));
        if self.options.always_insufficient || lacking.is_some() {
            let needed = lacking.or(self.options.required_scope).unwrap_or("more");
            let challenge = format!("Bearer error=\"insufficient_scope\", scope=\"{needed}\"");
            return Response::builder().status(403).header("WWW-Authenticate", challenge).body(Body::empty()).unwrap();
        }
        if request.method == "GET" {
            return Response::builder().status(405).body(Body::empty()).unwrap();
        }
        self.json_rpc(request)
    }

    fn authorize(&self, request: &Recorded) -> Response {
        let q = &request.query;
        let iss = self.declared_issuer();
        let mut issued = self.issued.lock().unwrap();
        issued.counter += 1;
        let code = format!("code-{}", issued.counter);
        self.approved(&code);
        let challenge = q.get("code_challenge").cloned().unwrap_or_default();
        issued.codes.insert(
            code.clone(),
            (challenge, q.get("scope").cloned().unwrap_or_default(), q.get("client_id").cloned().unwrap_or_default()),
        );
        let mut target = url::Url::parse(q.get("redirect_uri").map(String::as_str).unwrap_or("http://127.0.0.1:1/")).unwrap();
        target.query_pairs_mut().append_pair("code", &code).append_pair("state", q.get("state").map(String::as_str).unwrap_or(""));
        match self.options.iss {
            Iss::Correct => drop(target.query_pairs_mut().append_pair("iss", &iss)),
            Iss::Wrong => drop(target.query_pairs_mut().append_pair("iss", "https://evil.example")),
            Iss::Absent => {}
        }
        Response::builder().status(StatusCode::FOUND).header("Location", target.to_string()).body(Body::empty()).unwrap()
    }

    fn token(&self, request: &Recorded) -> Response {
        if let Some(location) = &self.options.token_redirect {
            return Response::builder().status(307).header("Location", location.as_str()).body(Body::empty()).unwrap();
        }
        let form = &request.form;
        let refuse = |error: &str| json_response(400, json!({"error": error}));
        let jkt = match (self.options.dpop, request.headers.contains_key("dpop")) {
            (true, true) => match self.check_proof(request, "/token", None, self.options.as_nonce) {
                Ok(jkt) => Some(jkt),
                Err(Refused::NeedsNonce(nonce)) => {
                    let mut answer = refuse("use_dpop_nonce");
                    answer.headers_mut().insert("DPoP-Nonce", nonce.parse().unwrap());
                    return answer;
                }
                Err(Refused::Invalid) => return refuse("invalid_dpop_proof"),
            },
            _ => None,
        };
        let mut issued = self.issued.lock().unwrap();
        // The ID-JAG a JWT-bearer grant redeemed, if it did.
        let mut id_jag = None;
        let (scope, expires_in) = match form.get("grant_type").map(String::as_str) {
            Some("authorization_code") => {
                let Some((challenge, scope, client)) = form.get("code").and_then(|code| issued.codes.remove(code)) else {
                    return refuse("invalid_grant");
                };
                let verifier = form.get("code_verifier").cloned().unwrap_or_default();
                let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
                if URL_SAFE_NO_PAD.encode(digest.as_ref()) != challenge {
                    return refuse("invalid_grant");
                }
                if let Some(token) = self.identity_token(&client, form, &scope) {
                    return json_response(200, json!({"access_token": token, "token_type": "Bearer", "expires_in": 300, "scope": scope}));
                }
                (scope, self.options.first_expires_in)
            }
            Some("refresh_token") => {
                let refresh = form.get("refresh_token").cloned().unwrap_or_default();
                // A refresh token bound to a key is refreshed only with a proof by that key.
                if issued.bound.get(&refresh).is_some_and(|bound| Some(bound) != jkt.as_ref()) {
                    return refuse("invalid_grant");
                }
                match issued.refresh.get(&refresh).cloned() {
                    Some(scope) => (scope, 3600),
                    None => return refuse("invalid_grant"),
                }
            }
            Some("client_credentials") => {
                if !self.client_authenticated(request) {
                    // Echoes what it was sent, as careless servers do.
                    let sent = request.headers.get("authorization").cloned().unwrap_or_default();
                    let sent = sent.strip_prefix("Basic ").and_then(|b| STANDARD.decode(b).ok()).unwrap_or_default();
                    let description = format!("unknown client credentials {}", String::from_utf8_lossy(&sent));
                    return json_response(401, json!({"error": "invalid_client", "error_description": description}));
                }
                (form.get("scope").cloned().unwrap_or_default(), 3600)
            }
            Some(grants::JWT_BEARER) => match self.jwt_bearer(request, &issued) {
                Ok((scope, claims)) => {
                    id_jag = claims;
                    (scope, 3600)
                }
                Err((status, refusal)) => return json_response(status, refusal),
            },
            _ => return refuse("unsupported_grant_type"),
        };
        issued.counter += 1;
        let from = if self.moved() { "moved-" } else { "" };
        let (access, refresh) = (format!("{from}access-{}", issued.counter), format!("{from}refresh-{}", issued.counter));
        issued.tokens.insert(access.clone(), scope.clone());
        issued.refresh.insert(refresh.clone(), scope.clone());
        self.issued_for(form, &access, &refresh, &scope);
        if let Some(claims) = &id_jag {
            self.redeemed_id_jag(&access, claims, &scope);
        }
        if let Some(jkt) = &jkt {
            issued.bound.insert(access.clone(), jkt.clone());
            issued.bound.insert(refresh.clone(), jkt.clone());
        }
        let token_type = if jkt.is_some() { "DPoP" } else { "Bearer" };
        json_response(
            200,
            json!({"access_token": access, "token_type": token_type, "expires_in": expires_in, "refresh_token": refresh, "scope": scope}),
        )
    }
}

/// The endpoint's one resource: who read it (as `whoami` says).
pub const WHOAMI_URI: &str = "fixture://whoami";
