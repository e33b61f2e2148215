//! The issuer as a gateway's callers see it, and RFC 8693 token exchange:
//! it mints ES256 JWT access tokens for callers (its keys at `/jwks`,
//! named by `jwks_uri` in its metadata), and exchanges one of them at
//! `/token` (`grant_type` token-exchange, the client in HTTP Basic) for an
//! opaque token whose subject is the caller's, for the audience asked, with
//! the scopes both the caller's token and the request name. The MCP
//! endpoint's `whoami` tool tells the subject, scopes and audience of the
//! bearer token it got. Exchanges are counted; refusals and the lifetime
//! of exchanged tokens are knobs.
//!
//! Enterprise-managed authorization (SEP-990): an exchange asking
//! `requested_token_type` id-jag gets an ID-JAG instead, a JWT signed with
//! the same key (`typ` oauth-id-jag+jwt) whose audience is the
//! authorization server asked for, naming the caller, the resource, the
//! scopes and `Options::id_jag_client`; another fixture that trusts this
//! one (`Options::id_jag_issuer`) redeems it by the JWT-bearer grant
//! (grants.rs). Both sides keep whom they did it for.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use axum::response::Response;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::{json, Value};

use super::{json_response, AuthServer, Recorded, State};

pub const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";
const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
/// The `typ` of an ID-JAG's header.
pub(super) const ID_JAG_TYP: &str = "oauth-id-jag+jwt";
const KID: &str = "fixture-es256";

/// Who a token the fixture issued stands for.
#[derive(Clone, Debug, PartialEq)]
pub struct Subject {
    pub sub: Option<String>,
    pub scope: String,
    pub audience: Option<String>,
}

/// The callers' tokens and the exchanges.
pub struct Exchanges {
    key: EcdsaKeyPair,
    /// Minted JWT → its claims.
    minted: Mutex<BTreeMap<String, Value>>,
    /// Exchanged token → who it stands for.
    pub(super) subjects: Mutex<BTreeMap<String, Subject>>,
    count: AtomicU64,
    lifetime: AtomicU64,
    /// How long an exchange takes to be answered, in milliseconds.
    delay_ms: AtomicU64,
    refusal: Mutex<Option<(String, String)>>,
    /// For whom ID-JAGs were issued (an identity provider), and redeemed (an authorization server).
    id_jags_issued: Mutex<Vec<Subject>>,
    id_jags_redeemed: Mutex<Vec<Subject>>,
    /// The JWT-bearer grant of an ID-JAG is refused with this OAuth error.
    id_jag_refusal: Mutex<Option<(String, String)>>,
}

impl Default for Exchanges {
    fn default() -> Exchanges {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        Exchanges {
            key: EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap(),
            minted: Mutex::default(),
            subjects: Mutex::default(),
            count: AtomicU64::new(0),
            lifetime: AtomicU64::new(3600),
            delay_ms: AtomicU64::new(0),
            refusal: Mutex::default(),
            id_jags_issued: Mutex::default(),
            id_jags_redeemed: Mutex::default(),
            id_jag_refusal: Mutex::default(),
        }
    }
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

impl AuthServer {
    /// An access token of this issuer for `sub`, `audience` and `scope`, living an hour.
    pub fn mint(&self, sub: &str, scope: &str, audience: &str) -> String {
        let claims = json!({"iss": self.issuer(), "sub": sub, "aud": audience, "scope": scope, "client_id": "caller-app",
                            "iat": now(), "exp": now() + 3600});
        let token = self.state.exchanges.sign("JWT", &claims);
        self.state.exchanges.minted.lock().unwrap().insert(token.clone(), claims);
        token
    }

    /// The public key its JWTs are signed with (an uncompressed P-256
    /// point), for a fixture that trusts its ID-JAGs (`Options::id_jag_issuer`).
    pub fn signing_key(&self) -> Vec<u8> {
        self.state.exchanges.key.public_key().as_ref().to_vec()
    }

    /// For whom this identity provider issued ID-JAGs, in order.
    pub fn issued_id_jags(&self) -> Vec<Subject> {
        self.state.exchanges.id_jags_issued.lock().unwrap().clone()
    }

    /// For whom this authorization server redeemed ID-JAGs, in order.
    pub fn redeemed_id_jags(&self) -> Vec<Subject> {
        self.state.exchanges.id_jags_redeemed.lock().unwrap().clone()
    }

    /// Refuses every JWT-bearer grant of an ID-JAG from now on with this OAuth error.
    pub fn refuse_id_jags(&self, error: &str, description: &str) {
        *self.state.exchanges.id_jag_refusal.lock().unwrap() = Some((error.into(), description.into()));
    }

    /// Token exchanges answered with a token so far.
    pub fn exchanges(&self) -> u64 {
        self.state.exchanges.count.load(Ordering::SeqCst)
    }

    /// `expires_in` of the tokens exchanged from now on.
    pub fn set_exchange_lifetime(&self, seconds: u64) {
        self.state.exchanges.lifetime.store(seconds, Ordering::SeqCst);
    }

    /// Answers every exchange from now on only after `delay` (a slow issuer).
    pub fn set_exchange_delay(&self, delay: std::time::Duration) {
        self.state.exchanges.delay_ms.store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Revokes every exchanged token: the MCP endpoint refuses them from now on.
    pub fn revoke_exchanged(&self) {
        let exchanged: Vec<String> = self.state.exchanges.subjects.lock().unwrap().keys().cloned().collect();
        let mut issued = self.state.issued.lock().unwrap();
        for token in exchanged {
            issued.tokens.remove(&token);
        }
    }

    /// Refuses every exchange from now on with this OAuth error.
    pub fn refuse_exchanges(&self, error: &str, description: &str) {
        *self.state.exchanges.refusal.lock().unwrap() = Some((error.into(), description.into()));
    }

    /// Grants exchanges again (after [`AuthServer::refuse_exchanges`]).
    pub fn allow_exchanges(&self) {
        *self.state.exchanges.refusal.lock().unwrap() = None;
    }
}

impl Exchanges {
    /// An ES256 JWT of these claims, signed with the key at `/jwks`.
    pub(super) fn sign(&self, typ: &str, claims: &Value) -> String {
        let header = URL_SAFE_NO_PAD.encode(json!({"alg": "ES256", "typ": typ, "kid": KID}).to_string());
        let signing_input = format!("{header}.{}", URL_SAFE_NO_PAD.encode(claims.to_string()));
        let signature = self.key.sign(&ring::rand::SystemRandom::new(), signing_input.as_bytes()).unwrap();
        format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
    }
}

impl State {
    /// How long the request with `body` waits before it is answered.
    pub(super) fn exchange_delay(&self, body: &[u8]) -> std::time::Duration {
        let exchange = url::form_urlencoded::parse(body).any(|(key, value)| key == "grant_type" && value == TOKEN_EXCHANGE);
        let delay = if exchange { self.exchanges.delay_ms.load(Ordering::SeqCst) } else { 0 };
        std::time::Duration::from_millis(delay)
    }

    /// `/jwks`: the key the callers' tokens are signed with.
    pub(super) fn jwks(&self) -> Response {
        let point = self.exchanges.key.public_key().as_ref();
        let (x, y) = (URL_SAFE_NO_PAD.encode(&point[1..33]), URL_SAFE_NO_PAD.encode(&point[33..65]));
        json_response(200, json!({"keys": [{"kty": "EC", "crv": "P-256", "x": x, "y": y, "kid": KID, "alg": "ES256", "use": "sig"}]}))
    }

    /// RFC 8693 at `/token`.
    pub(super) fn exchange(&self, request: &Recorded) -> Response {
        let form = &request.form;
        let field = |key: &str| form.get(key).map(String::as_str);
        if !self.client_authenticated(request) {
            return json_response(401, json!({"error": "invalid_client"}));
        }
        if let Some((error, description)) = self.exchanges.refusal.lock().unwrap().clone() {
            return json_response(400, json!({"error": error, "error_description": description}));
        }
        if field("subject_token_type") != Some(ACCESS_TOKEN) {
            return json_response(400, json!({"error": "invalid_request", "error_description": "subject_token_type"}));
        }
        let claims = field("subject_token").and_then(|token| self.exchanges.minted.lock().unwrap().get(token).cloned());
        let Some(claims) = claims.filter(|claims| claims["exp"].as_u64().is_some_and(|exp| exp > now())) else {
            return json_response(400, json!({"error": "invalid_grant", "error_description": "the subject token is not one of mine"}));
        };
        let held: Vec<&str> = claims["scope"].as_str().unwrap_or("").split(' ').filter(|s| !s.is_empty()).collect();
        let asked = field("scope").unwrap_or("");
        let scope: Vec<&str> = asked.split(' ').filter(|scope| held.contains(scope)).collect();
        let scope = scope.join(" ");
        if field("requested_token_type") == Some(ID_JAG) {
            return self.issue_id_jag(&claims, form, scope);
        }
        let audience = field("audience").or(field("resource")).map(str::to_owned);
        let mut issued = self.issued.lock().unwrap();
        issued.counter += 1;
        let token = format!("xchg-{}", issued.counter);
        issued.tokens.insert(token.clone(), scope.clone());
        let subject = Subject { sub: claims["sub"].as_str().map(str::to_owned), scope: scope.clone(), audience };
        self.exchanges.subjects.lock().unwrap().insert(token.clone(), subject);
        self.exchanges.count.fetch_add(1, Ordering::SeqCst);
        let expires_in = self.exchanges.lifetime.load(Ordering::SeqCst);
        json_response(
            200,
            json!({"access_token": token, "issued_token_type": ACCESS_TOKEN, "token_type": "Bearer", "expires_in": expires_in,
                   "scope": scope}),
        )
    }

    /// An ID-JAG for the caller of `claims`, for the authorization server
    /// and resource `form` asks, with `scope` (those of both the caller's token and the request).
    fn issue_id_jag(&self, claims: &Value, form: &BTreeMap<String, String>, scope: String) -> Response {
        let (Some(audience), Some(resource)) = (form.get("audience"), form.get("resource")) else {
            return json_response(400, json!({"error": "invalid_target", "error_description": "an ID-JAG needs audience and resource"}));
        };
        let jti = format!("jag-{}", self.exchanges.count.fetch_add(1, Ordering::SeqCst) + 1);
        let id_jag = json!({"iss": self.issuer(), "sub": claims["sub"], "aud": audience, "resource": resource, "scope": scope,
                            "client_id": self.options.id_jag_client, "jti": jti, "iat": now(), "exp": now() + 300});
        let subject = Subject { sub: claims["sub"].as_str().map(str::to_owned), scope: scope.clone(), audience: Some(audience.clone()) };
        self.exchanges.id_jags_issued.lock().unwrap().push(subject);
        json_response(
            200,
            json!({"access_token": self.exchanges.sign(ID_JAG_TYP, &id_jag), "issued_token_type": ID_JAG, "token_type": "N_A",
                   "expires_in": 300, "scope": scope}),
        )
    }

    /// The claims of `assertion` when it is an ID-JAG of the identity
    /// provider this fixture trusts, for this authorization server, not
    /// expired, or the OAuth error (status, body); `None` when it is no ID-JAG at all.
    pub(super) fn id_jag_claims(&self, assertion: &str) -> Option<Result<Value, (u16, Value)>> {
        let (idp, key) = self.options.id_jag_issuer.as_ref()?;
        let (header, claims) = self.verified_jwt(assertion, key)?;
        if header["typ"] != ID_JAG_TYP {
            return None;
        }
        let refuse = |error: &str, description: &str| Err((400, json!({"error": error, "error_description": description})));
        if let Some((error, description)) = self.exchanges.id_jag_refusal.lock().unwrap().clone() {
            return Some(refuse(&error, &description));
        }
        if claims["iss"] != json!(idp) || claims["aud"] != json!(self.issuer()) || claims["resource"] != json!(format!("{}/mcp", self.base))
        {
            return Some(refuse("invalid_grant", "the ID-JAG is not for this authorization server and resource"));
        }
        Some(Ok(claims))
    }

    /// Keeps who the token redeemed from an ID-JAG of `claims` stands for.
    pub(super) fn redeemed_id_jag(&self, token: &str, claims: &Value, scope: &str) {
        let subject = Subject {
            sub: claims["sub"].as_str().map(str::to_owned),
            scope: scope.to_owned(),
            audience: claims["resource"].as_str().map(str::to_owned),
        };
        self.exchanges.id_jags_redeemed.lock().unwrap().push(subject.clone());
        self.exchanges.subjects.lock().unwrap().insert(token.to_owned(), subject);
    }

    /// What `whoami` answers for the bearer token of `request`.
    /// Who the bearer token of `request` stands for, as the upstream sees it.
    pub(super) fn whoami(&self, request: &Recorded) -> Value {
        let authorization = request.headers.get("authorization").map(String::as_str).unwrap_or("");
        let token = authorization.split_once(' ').map_or("", |(_, token)| token);
        let subject = self.exchanges.subjects.lock().unwrap().get(token).cloned();
        let scope = self.issued.lock().unwrap().tokens.get(token).cloned();
        match subject {
            Some(subject) => json!({"sub": subject.sub, "scope": subject.scope, "aud": subject.audience}),
            None => json!({"sub": null, "scope": scope, "aud": null}),
        }
    }
}
