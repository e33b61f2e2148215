//! The gateway as an OAuth 2.1 resource server (`[serve.auth]`): access
//! tokens of one issuer are checked (a JWT against the issuer's keys, an
//! opaque token by RFC 7662 introspection) and become the caller's
//! `Identity`; refusals carry RFC 6750 / RFC 9728 challenges, and the
//! protected resource metadata is served at [`METADATA_PATH`].
//!
//! Invariants:
//! - a JWT passes only when its `alg` is among the configured ones (never
//!   `none` or HS*), a key of the issuer's JWKS fitting its `kid` and
//!   `alg` verifies it, `iss` is the issuer, `aud` names the audience,
//!   `exp` is in the future and `nbf` is not (both within `leeway`), and it
//!   has a `sub`;
//! - an identity has a non-empty subject (`sub`, else `client_id`): a token
//!   or an introspection answer that names none is refused (401);
//! - an opaque token passes only when introspection is configured and the
//!   issuer says it is `active`, for this audience when it says one;
//! - every token must grant all `required_scopes`: else 403
//!   `insufficient_scope` naming them;
//! - introspection answers are kept and the issuer asked within bounds
//!   (`gateway::http::introspected`);
//! - a token longer than [`MAX_TOKEN_BYTES`] is refused unread, and one
//!   without `kid` is tried against at most 4 keys; no token,
//!   claim value or secret goes into a log line or an answer.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{json, Map, Value};

use super::introspected::Introspected;
use super::jwks::{Issuer, KeyError};
pub use super::rejection::Rejection;
use crate::config::AuthSettings;
use crate::identity::{Identity, Proof};
use crate::oauth::http::{Answer, Http};

/// The protected resource metadata's path (RFC 9728 §3); its path-aware
/// form for `/mcp` is [`METADATA_PATH`] followed by [`super::MCP_PATH`].
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";
/// The most keys a token without `kid` is tried against.
const MAX_KEYS_WITHOUT_KID: usize = 4;
/// The longest token read, in bytes.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Checks the tokens of one issuer.
pub struct Authenticator {
    settings: AuthSettings,
    algorithms: Vec<Algorithm>,
    issuer: Issuer,
    /// `(client_id, client_secret)` for introspection, expanded.
    introspection_client: Option<(String, String)>,
    /// The issuer's recent introspection answers, and the bound on asking.
    introspected: Introspected,
    http: Http,
    /// The absolute URL of this resource's metadata, for challenges.
    metadata_url: String,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("issuer", &self.settings.issuer)
            .field("audience", &self.settings.audience)
            .finish_non_exhaustive()
    }
}

/// The URL of the metadata of the resource `audience` (RFC 9728 §3.1: the
/// well-known path goes between the host and the resource's path).
pub fn metadata_url(audience: &str) -> Result<String, String> {
    let url = url::Url::parse(audience).map_err(|e| format!("the audience {audience:?} is not a URL: {e}"))?;
    let path = url.path().trim_end_matches('/');
    Ok(format!("{}{METADATA_PATH}{path}", url.origin().ascii_serialization()))
}

impl Authenticator {
    /// `introspection_client`: the expanded credentials of
    /// `settings.introspection`, if set. Refuses an issuer that is neither
    /// https nor loopback http, and an unknown algorithm name.
    pub fn new(settings: AuthSettings, introspection_client: Option<(String, String)>) -> Result<Authenticator, String> {
        crate::oauth::http::require_secure(&settings.issuer, "serve.auth.issuer").map_err(|e| e.to_string())?;
        let algorithms = settings
            .algorithms
            .iter()
            .map(|name| name.parse::<Algorithm>().map_err(|_| format!("serve.auth.algorithms: {name:?} is not an algorithm")))
            .collect::<Result<Vec<_>, _>>()?;
        let http = Http::new().map_err(|e| e.to_string())?;
        let metadata_url = metadata_url(&settings.audience)?;
        let issuer = Issuer::new(&settings.issuer, settings.jwks_min_refresh, http.clone());
        let introspected = Introspected::default();
        Ok(Authenticator { settings, algorithms, issuer, introspection_client, introspected, http, metadata_url })
    }

    /// How often the issuer's keys were fetched so far.
    pub fn key_fetches(&self) -> u64 {
        self.issuer.fetches()
    }

    /// The caller a bearer `token` proves, or why not.
    pub async fn identify(&self, token: Option<&str>) -> Result<Identity, Rejection> {
        let token = token.map(str::trim).filter(|token| !token.is_empty()).ok_or(Rejection::Missing)?;
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Rejection::Invalid(format!("the token is longer than {MAX_TOKEN_BYTES} bytes")));
        }
        let identity = match jsonwebtoken::decode_header(token) {
            Ok(header) => self.verify_jwt(token, header).await?,
            Err(_) if self.introspection_client.is_some() => self.introspected.answer(token, self.introspect(token)).await?,
            Err(_) => return Err(Rejection::Invalid("the token is not a JWT, and this gateway introspects no opaque tokens".into())),
        };
        let missing: Vec<String> = self.settings.required_scopes.iter().filter(|scope| !identity.has_scope(scope)).cloned().collect();
        if !missing.is_empty() {
            return Err(Rejection::InsufficientScope(self.settings.required_scopes.clone()));
        }
        Ok(identity)
    }

    async fn verify_jwt(&self, token: &str, header: jsonwebtoken::Header) -> Result<Identity, Rejection> {
        if !self.algorithms.contains(&header.alg) {
            return Err(Rejection::Invalid(format!(
                "the token is signed with {:?}, which serve.auth.algorithms does not allow",
                header.alg
            )));
        }
        let keys = match self.issuer.keys_for(header.kid.as_deref(), header.alg).await {
            Ok(keys) => keys,
            Err(KeyError::Unknown) => return Err(Rejection::Invalid("no key of the issuer fits the token's kid and alg".into())),
            Err(KeyError::Unreachable(why)) => return Err(Rejection::Unavailable(why)),
        };
        let mut validation = Validation::new(header.alg);
        validation.leeway = self.settings.leeway.as_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let mut last = None;
        // A token without `kid` is tried against a few keys only: each try is a signature check.
        for key in keys.iter().take(if header.kid.is_some() { keys.len() } else { MAX_KEYS_WITHOUT_KID }) {
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation) {
                Ok(data) => return self.identity(&data.claims, Proof::Jwt),
                Err(error) => last = Some(error),
            }
        }
        Err(Rejection::Invalid(last.map_or_else(|| "no key verified the token".into(), |error| describe(&error))))
    }

    /// The issuer's answer for an opaque token, and the token's `exp` if it says one.
    async fn introspect(&self, token: &str) -> Result<(Identity, Option<u64>), Rejection> {
        let Some((client_id, secret)) = &self.introspection_client else { return Err(Rejection::Invalid("no introspection".into())) };
        let endpoint = match &self.settings.introspection.as_ref().and_then(|introspection| introspection.endpoint.clone()) {
            Some(endpoint) => endpoint.clone(),
            None => {
                let metadata = self.issuer.metadata().await.map_err(Rejection::Unavailable)?;
                metadata.introspection_endpoint.ok_or_else(|| {
                    Rejection::Unavailable(format!(
                        "the issuer {} advertises no introspection_endpoint; set serve.auth.introspection.endpoint",
                        self.settings.issuer
                    ))
                })?
            }
        };
        let form = [("token", token), ("token_type_hint", "access_token")];
        let answer = self.http.post_form::<Map<String, Value>>(&endpoint, &form, (client_id, secret)).await;
        let claims = match answer {
            Ok(Answer::Ok(claims)) => claims,
            Ok(Answer::Failed { status, .. }) => return Err(Rejection::Unavailable(format!("{endpoint} answered HTTP {status}"))),
            Err(error) => return Err(Rejection::Unavailable(error.to_string())),
        };
        if claims.get("active") != Some(&Value::Bool(true)) {
            return Err(Rejection::Invalid("the issuer says the token is not active".into()));
        }
        if claims.get("aud").is_some_and(|aud| !names(aud, &self.settings.audience)) {
            return Err(Rejection::Invalid("the token is for another audience".into()));
        }
        if claims
            .get("iss")
            .and_then(Value::as_str)
            .is_some_and(|iss| iss.trim_end_matches('/') != self.settings.issuer.trim_end_matches('/'))
        {
            return Err(Rejection::Invalid("the token is from another issuer".into()));
        }
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let exp = claims.get("exp").and_then(Value::as_u64);
        if exp.is_some_and(|exp| exp.saturating_add(self.settings.leeway.as_secs()) < now) {
            return Err(Rejection::Invalid("the token has expired".into()));
        }
        Ok((self.identity(&claims, Proof::Introspection)?, exp))
    }

    /// The identity of verified `claims` (see [`identity_of`]).
    fn identity(&self, claims: &Map<String, Value>, proof: Proof) -> Result<Identity, Rejection> {
        identity_of(claims, &self.settings.claims, proof)
    }

    /// The answer to a rejected request: 401 with a challenge pointing at
    /// the resource metadata (`invalid_token` when a token was sent), 403
    /// `insufficient_scope`, or 503 when the issuer could not be asked.
    pub fn refusal(&self, rejection: &Rejection) -> Response {
        let metadata = format!("resource_metadata=\"{}\"", self.metadata_url);
        let scope = |scopes: &[String]| format!("scope=\"{}\"", scopes.join(" "));
        let (status, challenge, message) = match rejection {
            Rejection::Missing => {
                let mut challenge = format!("Bearer {metadata}");
                if !self.settings.required_scopes.is_empty() {
                    challenge += &format!(", {}", scope(&self.settings.required_scopes));
                }
                (StatusCode::UNAUTHORIZED, challenge, "Unauthorized: send an access token as `Authorization: Bearer TOKEN`".to_string())
            }
            Rejection::Invalid(why) => {
                let challenge = format!("Bearer error=\"invalid_token\", error_description=\"{}\", {metadata}", why.replace('"', "'"));
                (StatusCode::UNAUTHORIZED, challenge, format!("Unauthorized: {why}"))
            }
            Rejection::InsufficientScope(scopes) => {
                let challenge = format!("Bearer error=\"insufficient_scope\", {}, {metadata}", scope(scopes));
                (StatusCode::FORBIDDEN, challenge, format!("Forbidden: the token must grant the scopes {}", scopes.join(" ")))
            }
            Rejection::Unavailable(why) => {
                tracing::warn!("cannot check an access token: {why}");
                let message = format!("Service Unavailable: the access token cannot be checked now ({why}); retry later");
                let mut response = (StatusCode::SERVICE_UNAVAILABLE, message).into_response();
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(super::limits::RETRY_AFTER_SECS));
                return response;
            }
        };
        let mut response = (status, message).into_response();
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }

    /// The protected resource metadata document (RFC 9728 §2).
    pub fn metadata(&self) -> Value {
        json!({
            "resource": self.settings.audience,
            "authorization_servers": [self.settings.issuer],
            "scopes_supported": self.settings.required_scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "mcpvisor gateway",
        })
    }
}

/// Whether an `aud` claim (a string or a list) names `audience`.
fn names(aud: &Value, audience: &str) -> bool {
    match aud {
        Value::String(one) => one == audience,
        Value::Array(many) => many.iter().any(|one| one.as_str() == Some(audience)),
        _ => false,
    }
}

/// A refused JWT's reason, without the token.
fn describe(error: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match error.kind() {
        ErrorKind::ExpiredSignature => "the token has expired".into(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        ErrorKind::InvalidAudience => "the token is for another audience".into(),
        ErrorKind::InvalidIssuer => "the token is from another issuer".into(),
        ErrorKind::InvalidSignature => "the token's signature does not verify".into(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no `{claim}` claim"),
        ErrorKind::InvalidAlgorithm => "the token's alg does not fit the issuer's key".into(),
        _ => "the token is malformed".into(),
    }
}

/// The caller that verified `claims` prove: `sub` (else `client_id`) as
/// subject, `client_id` (else `azp`), scopes from `scope` (space separated)
/// or `scp` (a list or a string), and the claims named in `keep`. Refused
/// when the subject would be empty: policies, limits, sessions and the
/// audit log tell callers apart by it, and every token without one would
/// be the same caller `""`.
pub fn identity_of(claims: &Map<String, Value>, keep: &[String], proof: Proof) -> Result<Identity, Rejection> {
    let text = |name: &str| claims.get(name).and_then(Value::as_str).map(str::to_string);
    let client_id = text("client_id").or_else(|| text("azp"));
    let scopes = match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(scope)), _) | (None, Some(Value::String(scope))) => scope.split_whitespace().map(str::to_string).collect(),
        (None, Some(Value::Array(list))) => list.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => Vec::new(),
    };
    let kept = keep.iter().filter_map(|name| Some((name.clone(), claims.get(name)?.clone()))).collect();
    let subject = text("sub").filter(|sub| !sub.trim().is_empty()).or_else(|| client_id.clone()).unwrap_or_default();
    if subject.trim().is_empty() {
        return Err(Rejection::Invalid("the token names no subject (its `sub` and `client_id` are missing or empty)".into()));
    }
    Ok(Identity { subject, client_id, scopes, claims: kept, proof })
}

/// Whether `path` is the resource metadata (served without credentials).
pub fn is_metadata_path(path: &str) -> bool {
    path == METADATA_PATH || path.strip_prefix(METADATA_PATH).is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AuthSettings;

    fn claims(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn claims_become_an_identity() {
        let keep = ["email".to_string(), "absent".to_string()];
        let jwt =
            identity_of(&claims(json!({"sub": "alice", "azp": "cli", "scope": "a  b", "email": "a@x", "secret": 1})), &keep, Proof::Jwt)
                .unwrap();
        assert_eq!(
            (jwt.subject.as_str(), jwt.client_id.as_deref(), jwt.scopes.clone()),
            ("alice", Some("cli"), vec!["a".into(), "b".into()])
        );
        assert_eq!(Value::Object(jwt.claims), json!({"email": "a@x"}));
        let scp =
            identity_of(&claims(json!({"sub": "bob", "client_id": "c", "azp": "other", "scp": ["x", 2, "y"]})), &[], Proof::Jwt).unwrap();
        assert_eq!((scp.client_id.as_deref(), scp.scopes), (Some("c"), vec!["x".into(), "y".into()]));
        let machine = identity_of(&claims(json!({"client_id": "svc", "scp": "r w"})), &[], Proof::Introspection).unwrap();
        assert_eq!((machine.subject.as_str(), machine.scopes.len()), ("svc", 2));
    }

    /// An introspection answer without `sub` used to become the caller `""`,
    /// one identity for every such token.
    #[test]
    fn a_token_that_names_no_subject_is_no_identity() {
        for nameless in [json!({"active": true, "scope": "a"}), json!({"sub": "", "client_id": " "}), json!({"sub": "  "})] {
            let refused = identity_of(&claims(nameless.clone()), &[], Proof::Introspection);
            assert!(matches!(&refused, Err(Rejection::Invalid(why)) if why.contains("no subject")), "{nameless}: {refused:?}");
        }
        let empty_sub = identity_of(&claims(json!({"sub": "", "client_id": "svc"})), &[], Proof::Jwt).unwrap();
        assert_eq!(empty_sub.subject, "svc", "an empty `sub` falls back to the client like a missing one");
    }

    fn jwt_shaped(header: &str) -> String {
        use base64::Engine;
        let b64 = |text: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text);
        format!("{}.{}.c2ln", b64(header), b64(r#"{"sub":"x"}"#))
    }

    #[tokio::test]
    async fn refusals_without_a_reachable_issuer() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let settings = AuthSettings {
            issuer: format!("http://127.0.0.1:{port}"),
            audience: "https://gw.example/mcp".into(),
            algorithms: vec!["RS256".into()],
            leeway: std::time::Duration::from_secs(60),
            required_scopes: vec!["mcp".into()],
            claims: Vec::new(),
            introspection: None,
            login: None,
            jwks_min_refresh: std::time::Duration::from_secs(30),
        };
        let auth = Authenticator::new(settings.clone(), None).unwrap();
        let missing = auth.refusal(&auth.identify(None).await.unwrap_err());
        assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);
        let challenge = missing.headers()[header::WWW_AUTHENTICATE].to_str().unwrap().to_string();
        assert_eq!(challenge, "Bearer resource_metadata=\"https://gw.example/.well-known/oauth-protected-resource/mcp\", scope=\"mcp\"");
        // Refused before any key is looked for: another algorithm, no JWT, too long.
        for (token, says) in [
            (jwt_shaped(r#"{"alg":"HS256"}"#), "HS256"),
            (jwt_shaped(r#"{"alg":"none"}"#), "not a JWT"),
            ("x".repeat(MAX_TOKEN_BYTES + 1), "longer than"),
        ] {
            match auth.identify(Some(&token)).await {
                Err(Rejection::Invalid(why)) => assert!(why.contains(says), "{why}"),
                other => panic!("{says}: {other:?}"),
            }
        }
        assert_eq!(auth.key_fetches(), 0);
        // An RS256 token while the issuer is down: 503, never a pass, and the port is said.
        let rejection = auth.identify(Some(&jwt_shaped(r#"{"alg":"RS256","kid":"k"}"#))).await.unwrap_err();
        assert!(matches!(&rejection, Rejection::Unavailable(why) if why.contains(&port.to_string())), "{rejection:?}");
        assert_eq!(auth.refusal(&rejection).status(), StatusCode::SERVICE_UNAVAILABLE);
        let plain = Authenticator::new(AuthSettings { issuer: "http://idp.example".into(), ..settings }, None).unwrap_err();
        assert!(plain.contains("https"), "{plain}");
    }

    #[test]
    fn metadata_urls_are_path_aware() {
        assert_eq!(metadata_url("https://gw.example/mcp").unwrap(), "https://gw.example/.well-known/oauth-protected-resource/mcp");
        assert_eq!(metadata_url("http://127.0.0.1:8080/").unwrap(), "http://127.0.0.1:8080/.well-known/oauth-protected-resource");
        assert!(is_metadata_path("/.well-known/oauth-protected-resource") && is_metadata_path("/.well-known/oauth-protected-resource/mcp"));
        assert!(!is_metadata_path("/.well-known/oauth-protected-resourcex") && !is_metadata_path("/mcp"));
        assert!(names(&json!(["x", "https://gw"]), "https://gw") && !names(&json!("y"), "https://gw") && !names(&json!(1), "x"));
    }
}
