//! DPoP proofs (RFC 9449) checked for real, as an authorization server
//! and a resource server check them: the signature by the header's `jwk`,
//! `typ`, `alg`, `htm`, `htu`, `iat`, a `jti` never seen before, `ath` of
//! the presented token, and the server's nonce.

use std::collections::BTreeSet;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};

/// Why a proof is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Well-formed, but without the nonce the server wants.
    NeedsNonce,
    Invalid(String),
}

/// Checks `proof` for a request `method` to `url`, presenting `token` (a
/// resource request) or none (a token request), with `nonce` required if
/// set. Returns the key's RFC 7638 thumbprint (`jkt`).
pub fn verify(
    proof: Option<&str>,
    method: &str,
    url: &str,
    token: Option<&str>,
    nonce: Option<&str>,
    seen: &mut BTreeSet<String>,
) -> Result<String, Refusal> {
    let invalid = |why: &str| Refusal::Invalid(why.to_owned());
    let proof = proof.ok_or_else(|| invalid("no DPoP header"))?;
    let parts: Vec<&str> = proof.split('.').collect();
    let [header_text, claims_text, signature] = parts[..] else { return Err(invalid("not a compact JWS")) };
    let decode = |text: &str| -> Option<Value> { serde_json::from_slice(&URL_SAFE_NO_PAD.decode(text).ok()?).ok() };
    let header = decode(header_text).ok_or_else(|| invalid("header is not JSON"))?;
    let claims = decode(claims_text).ok_or_else(|| invalid("claims are not JSON"))?;
    if header["typ"] != "dpop+jwt" || header["alg"] != "ES256" {
        return Err(invalid("typ must be dpop+jwt and alg ES256"));
    }
    let jwk = &header["jwk"];
    if jwk["kty"] != "EC" || jwk["crv"] != "P-256" || jwk.get("d").is_some() {
        return Err(invalid("jwk must be a public P-256 key"));
    }
    let coordinate = |name: &str| jwk[name].as_str().and_then(|c| URL_SAFE_NO_PAD.decode(c).ok()).filter(|c| c.len() == 32);
    let (Some(x), Some(y)) = (coordinate("x"), coordinate("y")) else { return Err(invalid("jwk coordinates")) };
    let point = [&[4u8][..], &x, &y].concat();
    let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| invalid("signature is not base64url"))?;
    let key = ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, point);
    key.verify(format!("{header_text}.{claims_text}").as_bytes(), &signature).map_err(|_| invalid("signature does not verify"))?;
    if claims["htm"] != method {
        return Err(invalid(&format!("htm {} is not {method}", claims["htm"])));
    }
    if claims["htu"] != url {
        return Err(invalid(&format!("htu {} is not {url}", claims["htu"])));
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    if claims["iat"].as_u64().is_none_or(|iat| iat.abs_diff(now) > 60) {
        return Err(invalid("iat is not now"));
    }
    let jti = claims["jti"].as_str().ok_or_else(|| invalid("no jti"))?;
    if !seen.insert(jti.to_owned()) {
        return Err(invalid("a jti used before (a replayed proof)"));
    }
    match token {
        Some(token) => {
            let ath = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref());
            if claims["ath"] != json!(ath) {
                return Err(invalid("ath is not the token's hash"));
            }
        }
        None if claims.get("ath").is_some() => return Err(invalid("ath on a token request")),
        None => {}
    }
    if nonce.is_some_and(|nonce| claims["nonce"] != nonce) {
        return Err(Refusal::NeedsNonce);
    }
    Ok(thumbprint(jwk))
}

/// RFC 7638: SHA-256 of the required members in lexicographic order.
pub fn thumbprint(jwk: &Value) -> String {
    let canonical = format!(r#"{{"crv":"P-256","kty":"EC","x":{},"y":{}}}"#, jwk["x"], jwk["y"]);
    URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes()).as_ref())
}

/// A DPoP proof the fixture did not take.
pub(super) enum Refused {
    /// Answered with `use_dpop_nonce` and this nonce.
    NeedsNonce(String),
    /// Recorded in `dpop_refusals`.
    Invalid,
}

impl super::State {
    /// Checks a DPoP proof; `Err` is the answer refusing it.
    pub(super) fn check_proof(
        &self,
        request: &super::Recorded,
        path: &str,
        token: Option<&str>,
        nonce: Option<&str>,
    ) -> Result<String, Refused> {
        let proof = request.headers.get("dpop").map(String::as_str);
        let url = format!("{}{path}", self.base);
        let verified = verify(proof, &request.method, &url, token, nonce, &mut self.issued.lock().unwrap().jtis);
        verified.map_err(|refusal| match refusal {
            Refusal::NeedsNonce => Refused::NeedsNonce(nonce.unwrap_or_default().to_owned()),
            Refusal::Invalid(why) => {
                self.dpop_refusals.lock().unwrap().push(format!("{} {path}: {why}", request.method));
                Refused::Invalid
            }
        })
    }
}
