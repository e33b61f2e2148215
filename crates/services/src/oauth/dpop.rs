//! DPoP (RFC 9449): access tokens bound to a key pair the client holds,
//! so that a stolen token is useless without the key.
//!
//! - **When.** Used automatically when the authorization server lists
//!   `ES256` in `dpop_signing_alg_values_supported`, or the resource's
//!   metadata sets `dpop_bound_access_tokens_required`; `auth.dpop = false`
//!   turns it off (tokens are then plain bearer tokens). A server that
//!   offers DPoP only with other algorithms gets bearer tokens.
//! - **The key.** One ES256 (P-256) key pair per server and issuer, made
//!   with `ring` at the first token request and kept with the tokens in
//!   the token file (0600), so a stored or refreshed DPoP-bound token keeps
//!   working after a restart. It is never shown (`Debug` masks it).
//! - **Proofs.** A fresh JWT (`typ` `dpop+jwt`, the public `jwk` in the
//!   header; `jti`, `htm`, `htu` without query or fragment, `iat`, and
//!   `nonce` when the server gave one) on every token request, and on
//!   every request to the MCP server with `ath` (the token's SHA-256) and
//!   `Authorization: DPoP <token>`. A token the authorization server
//!   issued as `Bearer` despite the proof is sent as a bearer token.
//! - **Nonces.** The latest `DPoP-Nonce` of each origin is kept (in memory:
//!   servers hand out new ones freely); a token request refused with
//!   `use_dpop_nonce`, or an MCP request refused with `WWW-Authenticate:
//!   DPoP error="use_dpop_nonce"`, is sent again once with the new nonce.
//!   A nonce that is not RFC 9449's `1*NQCHAR` (or is over 1 KiB) is ignored.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::{json, Value};
use url::Url;

use super::jwt;
use super::store::now_secs;
use super::OAuthError;

/// The only algorithm mcpvisor signs proofs with.
pub const ALGORITHM: &str = "ES256";
/// The response header carrying a server's nonce.
pub const NONCE_HEADER: &str = "DPoP-Nonce";
/// The OAuth error code of a server that wants a (new) nonce.
pub const USE_NONCE: &str = "use_dpop_nonce";
/// The longest nonce kept.
const MAX_NONCE_BYTES: usize = 1024;

/// A DPoP key pair (ECDSA P-256).
pub struct DpopKey {
    pair: EcdsaKeyPair,
    pkcs8: Vec<u8>,
    jwk: Value,
}

impl std::fmt::Debug for DpopKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DpopKey").field("jwk", &self.jwk).finish_non_exhaustive()
    }
}

impl DpopKey {
    /// A new random key pair.
    pub fn generate() -> Result<DpopKey, OAuthError> {
        let rng = SystemRandom::new();
        let document = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| OAuthError::new("cannot make a DPoP key pair (no randomness?)"))?;
        DpopKey::from_pkcs8(document.as_ref().to_vec())
    }

    /// The key as [`DpopKey::stored`] wrote it.
    pub fn from_stored(text: &str) -> Result<DpopKey, OAuthError> {
        let unreadable = || OAuthError::new("the DPoP key in the token file cannot be read; log in again (the file is rewritten)");
        let der = URL_SAFE_NO_PAD.decode(text.trim()).map_err(|_| unreadable())?;
        DpopKey::from_pkcs8(der).map_err(|_| unreadable())
    }

    fn from_pkcs8(pkcs8: Vec<u8>) -> Result<DpopKey, OAuthError> {
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &SystemRandom::new())
            .map_err(|_| OAuthError::new("the DPoP key is not an ECDSA P-256 key"))?;
        // An uncompressed point: 0x04, then x and y of 32 bytes each.
        let point = pair.public_key().as_ref();
        let (x, y) = point.get(1..33).zip(point.get(33..65)).ok_or_else(|| OAuthError::new("unexpected DPoP public key"))?;
        let jwk = json!({"kty": "EC", "crv": "P-256", "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y)});
        Ok(DpopKey { pair, pkcs8, jwk })
    }

    /// The private key as text for the token file (PKCS#8, base64url).
    pub fn stored(&self) -> String {
        URL_SAFE_NO_PAD.encode(&self.pkcs8)
    }

    /// A proof for one request: `method` to `url`, presenting `access_token`
    /// (a resource request) or none (a token request), with `nonce` if any.
    pub fn proof(&self, method: &str, url: &str, access_token: Option<&str>, nonce: Option<&str>) -> Result<String, OAuthError> {
        let rng = SystemRandom::new();
        let mut jti = [0u8; 16];
        rng.fill(&mut jti).map_err(|_| OAuthError::new("no randomness for a DPoP proof's jti"))?;
        let header = json!({"typ": "dpop+jwt", "alg": ALGORITHM, "jwk": self.jwk});
        let mut claims = json!({"jti": URL_SAFE_NO_PAD.encode(jti), "htm": method, "htu": htu(url)?, "iat": now_secs()});
        if let Some(token) = access_token {
            let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
            claims["ath"] = json!(URL_SAFE_NO_PAD.encode(digest.as_ref()));
        }
        if let Some(nonce) = nonce {
            claims["nonce"] = json!(nonce);
        }
        jwt::compact(&header, &claims, |input| {
            self.pair.sign(&rng, input).map(|s| s.as_ref().to_vec()).map_err(|_| OAuthError::new("signing a DPoP proof failed"))
        })
    }
}

/// `htu`: the request's URL without query and fragment (RFC 9449 §4.2).
fn htu(url: &str) -> Result<String, OAuthError> {
    let mut url = Url::parse(url).map_err(|_| OAuthError::new("a DPoP proof needs an absolute request URL"))?;
    url.set_query(None);
    url.set_fragment(None);
    Ok(url.to_string())
}

/// The latest nonce each origin gave.
#[derive(Debug, Default)]
pub struct Nonces {
    by_origin: Mutex<HashMap<String, String>>,
}

impl Nonces {
    /// The nonce to send to `url`'s origin.
    pub fn get(&self, url: &str) -> Option<String> {
        let origin = origin(url)?;
        self.by_origin.lock().ok()?.get(&origin).cloned()
    }

    /// Keeps `nonce` for `url`'s origin; false when it is not a valid nonce
    /// or is the one already kept (sending again would not help).
    pub fn offer(&self, url: &str, nonce: &str) -> bool {
        let valid =
            !nonce.is_empty() && nonce.len() <= MAX_NONCE_BYTES && nonce.bytes().all(|b| matches!(b, 0x21 | 0x23..=0x5B | 0x5D..=0x7E));
        let (true, Some(origin), Ok(mut kept)) = (valid, origin(url), self.by_origin.lock()) else { return false };
        kept.insert(origin, nonce.to_owned()).as_deref() != Some(nonce)
    }
}

/// `scheme://host[:port]` of `url`: the unit of the same-origin rules here and in `http`.
pub(super) fn origin(url: &str) -> Option<String> {
    Url::parse(url).ok().map(|url| url.origin().ascii_serialization())
}

/// What signs the token requests of one login: its key and the nonces.
#[derive(Debug, Clone)]
pub struct Prover {
    pub key: Arc<DpopKey>,
    pub nonces: Arc<Nonces>,
}

impl Prover {
    /// The proof of a token request (no `ath`).
    pub fn token_request_proof(&self, method: &str, url: &str) -> Result<String, OAuthError> {
        self.key.proof(method, url, None, self.nonces.get(url).as_deref())
    }
}

/// Whether an authorization server's error answer asks for a nonce.
pub fn asks_for_nonce(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body).is_ok_and(|answer| answer.get("error").and_then(Value::as_str) == Some(USE_NONCE))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(jwt: &str, index: usize) -> Value {
        let text = jwt.split('.').nth(index).unwrap();
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(text).unwrap()).unwrap()
    }

    #[test]
    fn a_proof_is_signed_by_its_jwk_and_names_the_request_without_its_query() {
        let key = DpopKey::generate().unwrap();
        let proof = key.proof("POST", "https://rs.example/mcp?x=1#f", Some("tok"), Some("n-1")).unwrap();
        let (header, claims) = (part(&proof, 0), part(&proof, 1));
        assert_eq!((header["typ"].as_str(), header["alg"].as_str()), (Some("dpop+jwt"), Some("ES256")));
        assert!(header["jwk"].get("d").is_none(), "no private part: {header}");
        assert_eq!(claims["htu"], "https://rs.example/mcp");
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["nonce"], "n-1");
        let ath = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, b"tok").as_ref());
        assert_eq!(claims["ath"], json!(ath));
        let point = [
            &[4u8][..],
            &URL_SAFE_NO_PAD.decode(header["jwk"]["x"].as_str().unwrap()).unwrap(),
            &URL_SAFE_NO_PAD.decode(header["jwk"]["y"].as_str().unwrap()).unwrap(),
        ]
        .concat();
        let (input, signature) = proof.rsplit_once('.').unwrap();
        let public = ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, point);
        public.verify(input.as_bytes(), &URL_SAFE_NO_PAD.decode(signature).unwrap()).expect("the proof verifies with its jwk");
        let again = key.proof("POST", "https://rs.example/mcp", Some("tok"), None).unwrap();
        assert_ne!(part(&again, 1)["jti"], claims["jti"], "a fresh jti per proof");
    }

    #[test]
    fn a_stored_key_is_the_same_key() {
        let key = DpopKey::generate().unwrap();
        assert_eq!(DpopKey::from_stored(&key.stored()).unwrap().jwk, key.jwk);
        assert!(DpopKey::from_stored("not a key").is_err());
        assert!(DpopKey::from_stored(&URL_SAFE_NO_PAD.encode(b"garbage")).is_err());
    }

    #[test]
    fn nonces_are_kept_per_origin_and_malformed_ones_ignored() {
        let nonces = Nonces::default();
        assert!(nonces.offer("https://a.example/token", "n1"));
        assert!(!nonces.offer("https://a.example/other", "n1"), "the same nonce again is no news");
        assert_eq!(nonces.get("https://a.example/mcp").as_deref(), Some("n1"));
        assert_eq!(nonces.get("https://b.example/mcp"), None);
        for bad in ["", "with space", "quote\"", "back\\slash", "é", &"x".repeat(MAX_NONCE_BYTES + 1)] {
            assert!(!nonces.offer("https://a.example/", bad), "{bad:?}");
        }
        assert!(!nonces.offer("not a url", "n2"));
        assert_eq!(nonces.get("https://a.example/"), Some("n1".to_owned()));
    }

    #[test]
    fn only_a_use_dpop_nonce_error_asks_for_a_nonce() {
        assert!(asks_for_nonce(br#"{"error":"use_dpop_nonce"}"#));
        for body in [&br#"{"error":"invalid_grant"}"#[..], b"", b"{", br#"{"error":5}"#] {
            assert!(!asks_for_nonce(body));
        }
    }
}
