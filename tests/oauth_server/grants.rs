//! The JWT-bearer grant (RFC 7523) at the authorization server, and an
//! enterprise identity provider at `/idp/token` that exchanges an ID token
//! for an ID-JAG (RFC 8693, SEP-990). Assertions are verified for real:
//! a workload's by its ES256 signature, audience and expiry; an ID-JAG by
//! being one the identity provider issued for this resource, or (another
//! fixture's, `Options::id_jag_issuer`) by its signature, issuer,
//! audience, resource, expiry and its `client_id` being the client that
//! authenticated; the token it redeems stands for the ID-JAG's subject
//! with the scopes both it and the request name.

use axum::response::Response;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use serde_json::{json, Value};

use super::{json_response, Issued, Recorded, State};

pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

impl State {
    /// The scope granted for a JWT-bearer request, and the claims of the
    /// other fixture's ID-JAG it presented, or the OAuth error (status, body).
    pub(super) fn jwt_bearer(&self, request: &Recorded, issued: &Issued) -> Result<(String, Option<Value>), (u16, Value)> {
        let form = &request.form;
        let refuse = |error: &str| (400, json!({"error": error}));
        let assertion = form.get("assertion").ok_or_else(|| refuse("invalid_request"))?;
        if let Some(claims) = self.id_jag_claims(assertion) {
            let claims = claims?;
            let client = request.headers.get("authorization").and_then(|basic| STANDARD.decode(basic.strip_prefix("Basic ")?).ok());
            let client = client.map(|pair| String::from_utf8_lossy(&pair).split(':').next().unwrap_or("").to_owned());
            if !self.client_authenticated(request) || client.as_deref() != claims["client_id"].as_str() {
                return Err((401, json!({"error": "invalid_client", "error_description": "not the ID-JAG's client"})));
            }
            let granted: Vec<&str> = claims["scope"].as_str().unwrap_or("").split(' ').collect();
            let asked = form.get("scope").map(String::as_str).unwrap_or("");
            let scope = asked.split(' ').filter(|scope| !scope.is_empty() && granted.contains(scope)).collect::<Vec<_>>().join(" ");
            return Ok((scope, Some(claims)));
        }
        let resource = format!("{}/mcp", self.base);
        let valid = match issued.id_jags.get(assertion) {
            Some(for_resource) => *for_resource == resource,
            None => self.workload_assertion_valid(assertion),
        };
        if !valid {
            return Err(refuse("invalid_grant"));
        }
        if self.options.client_secret.is_some() && !self.client_authenticated(request) {
            return Err(refuse("invalid_client"));
        }
        Ok((form.get("scope").cloned().unwrap_or_default(), None))
    }

    /// A client secret in HTTP Basic, or a private-key JWT whose signature and claims check out.
    pub(super) fn client_authenticated(&self, request: &Recorded) -> bool {
        if let (Some((id, secret)), Some(basic)) = (self.options.client_secret, request.headers.get("authorization")) {
            return basic.strip_prefix("Basic ").is_some_and(|b| STANDARD.decode(b).ok() == Some(format!("{id}:{secret}").into_bytes()));
        }
        let (Some(key), Some(assertion)) = (&self.options.jwt_public_key, request.form.get("client_assertion")) else { return false };
        if request.form.get("client_assertion_type").map(String::as_str) != Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer") {
            return false;
        }
        let parts: Vec<&str> = assertion.split('.').collect();
        let [header, claims, signature] = parts[..] else { return false };
        let (algorithm, name): (&dyn ring::signature::VerificationAlgorithm, &str) = match self.options.jwt_rsa {
            true => (&ring::signature::RSA_PKCS1_2048_8192_SHA256, "RS256"),
            false => (&ring::signature::ECDSA_P256_SHA256_FIXED, "ES256"),
        };
        let key = ring::signature::UnparsedPublicKey::new(algorithm, key);
        let signed = format!("{header}.{claims}");
        let Ok(signature) = URL_SAFE_NO_PAD.decode(signature) else { return false };
        if key.verify(signed.as_bytes(), &signature).is_err() {
            return false;
        }
        let header: Value = URL_SAFE_NO_PAD.decode(header).ok().and_then(|h| serde_json::from_slice(&h).ok()).unwrap_or_default();
        if header["alg"] != json!(name) {
            return false;
        }
        let claims: Value = URL_SAFE_NO_PAD.decode(claims).ok().and_then(|c| serde_json::from_slice(&c).ok()).unwrap_or_default();
        let client_id = request.form.get("client_id").cloned().unwrap_or_default();
        claims["iss"] == json!(client_id)
            && claims["sub"] == json!(client_id)
            && claims["aud"] == json!(self.issuer())
            && claims["exp"].is_u64()
    }

    /// An ES256 JWT signed with `assertion_key`, for this issuer, not expired.
    fn workload_assertion_valid(&self, assertion: &str) -> bool {
        self.options.assertion_key.as_ref().and_then(|key| self.verified_jwt(assertion, key)).is_some()
    }

    /// The header and claims of an ES256 JWT signed by `key` (an
    /// uncompressed P-256 point), for this issuer, not expired.
    pub(super) fn verified_jwt(&self, jwt: &str, key: &[u8]) -> Option<(Value, Value)> {
        let parts: Vec<&str> = jwt.split('.').collect();
        let [header, claims, signature] = parts[..] else { return None };
        let key = ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, key);
        key.verify(format!("{header}.{claims}").as_bytes(), &URL_SAFE_NO_PAD.decode(signature).ok()?).ok()?;
        let decode = |part: &str| URL_SAFE_NO_PAD.decode(part).ok().and_then(|json| serde_json::from_slice::<Value>(&json).ok());
        let (header, claims) = (decode(header)?, decode(claims)?);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        (claims["aud"] == json!(self.issuer()) && claims["exp"].as_u64().is_some_and(|exp| exp > now)).then_some((header, claims))
    }

    /// RFC 8693 at the identity provider: the configured ID token, for an
    /// ID-JAG whose audience is this issuer.
    pub(super) fn token_exchange(&self, request: &Recorded) -> Response {
        let form = &request.form;
        let field = |key: &str| form.get(key).map(String::as_str);
        let well_formed = field("grant_type") == Some("urn:ietf:params:oauth:grant-type:token-exchange")
            && field("subject_token_type") == Some("urn:ietf:params:oauth:token-type:id_token")
            && field("requested_token_type") == Some("urn:ietf:params:oauth:token-type:id-jag")
            && field("audience") == Some(self.issuer().as_str());
        if !well_formed {
            return json_response(400, json!({"error": "invalid_request"}));
        }
        if self.options.id_token.is_none() || field("subject_token") != self.options.id_token {
            return json_response(
                400,
                json!({"error": "invalid_grant", "error_description": format!("unknown ID token {}", field("subject_token").unwrap_or(""))}),
            );
        }
        let mut issued = self.issued.lock().unwrap();
        issued.counter += 1;
        let id_jag = format!("id-jag-{}", issued.counter);
        issued.id_jags.insert(id_jag.clone(), field("resource").unwrap_or("").to_owned());
        json_response(
            200,
            json!({"access_token": id_jag, "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag", "token_type": "N_A"}),
        )
    }
}

/// The key a workload platform signs its tokens with (ES256).
pub struct PlatformKey {
    pair: ring::signature::EcdsaKeyPair,
}

impl PlatformKey {
    pub fn new() -> PlatformKey {
        use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        PlatformKey { pair: EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap() }
    }

    /// For `Options::assertion_key`.
    pub fn public_key(&self) -> Vec<u8> {
        use ring::signature::KeyPair;
        self.pair.public_key().as_ref().to_vec()
    }

    /// A workload token for `audience`, ending `lifetime` seconds from now
    /// (negative: already expired).
    pub fn token(&self, audience: &str, lifetime: i64) -> String {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        let header = URL_SAFE_NO_PAD.encode(json!({"alg": "ES256", "typ": "JWT"}).to_string());
        let claims = json!({"iss": "https://platform.example", "sub": "workload", "aud": audience, "iat": now, "exp": now + lifetime});
        let signing_input = format!("{header}.{}", URL_SAFE_NO_PAD.encode(claims.to_string()));
        let signature = self.pair.sign(&ring::rand::SystemRandom::new(), signing_input.as_bytes()).unwrap();
        format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
    }
}
