//! `private_key_jwt` client authentication (RFC 7523 §2.2): a short-lived
//! JWT the client signs with its private key and sends as
//! `client_assertion`.
//!
//! Signed with `ring` (already linked for TLS) rather than a JWT crate:
//! the assertion is three base64url parts and one signature, and the JWT
//! crates would bring a second cryptography stack. The key is a PKCS#8 PEM
//! (`BEGIN PRIVATE KEY`): ECDSA P-256 signs ES256, RSA signs RS256.
//! Claims: `iss` = `sub` = the client ID, `aud` = the authorization
//! server's issuer, `iat`, `exp` (five minutes later) and a random `jti`.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{EcdsaKeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING, RSA_PKCS1_SHA256};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::PrivatePkcs8KeyDer;

use super::store::now_secs;
use super::OAuthError;

/// `client_assertion_type` of a JWT assertion.
pub const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// How long an assertion is valid.
const LIFETIME_SECS: u64 = 300;

/// A signed assertion for `client_id` towards the issuer `audience`.
pub fn client_assertion(private_key_pem: &str, client_id: &str, audience: &str) -> Result<String, OAuthError> {
    let der = PrivatePkcs8KeyDer::from_pem_slice(private_key_pem.as_bytes()).map_err(|_| {
        OAuthError::new(
            "the private key is not a PKCS#8 PEM (-----BEGIN PRIVATE KEY-----); convert it with `openssl pkcs8 -topk8 -nocrypt`",
        )
    })?;
    let rng = SystemRandom::new();
    let key = Key::from_pkcs8(der.secret_pkcs8_der(), &rng)?;
    let mut jti = [0u8; 16];
    rng.fill(&mut jti).map_err(|_| OAuthError::new("no randomness for the assertion's jti"))?;
    let now = now_secs();
    let header = serde_json::json!({ "alg": key.algorithm(), "typ": "JWT" });
    let claims = serde_json::json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now,
        "exp": now + LIFETIME_SECS,
        "jti": URL_SAFE_NO_PAD.encode(jti),
    });
    compact(&header, &claims, |input| key.sign(&rng, input))
}

/// A compact JWS: `header.claims.signature`, each part base64url, the
/// signature made by `sign` over the first two.
pub(super) fn compact(
    header: &serde_json::Value,
    claims: &serde_json::Value,
    sign: impl FnOnce(&[u8]) -> Result<Vec<u8>, OAuthError>,
) -> Result<String, OAuthError> {
    let signing_input = format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
    let signature = sign(signing_input.as_bytes())?;
    Ok(format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

enum Key {
    Ecdsa(EcdsaKeyPair),
    Rsa(RsaKeyPair),
}

impl Key {
    fn from_pkcs8(der: &[u8], rng: &SystemRandom) -> Result<Key, OAuthError> {
        if let Ok(key) = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der, rng) {
            return Ok(Key::Ecdsa(key));
        }
        RsaKeyPair::from_pkcs8(der)
            .map(Key::Rsa)
            .map_err(|_| OAuthError::new("the private key is neither an ECDSA P-256 nor an RSA key; use one of those for private_key_jwt"))
    }

    fn algorithm(&self) -> &'static str {
        match self {
            Key::Ecdsa(_) => "ES256",
            Key::Rsa(_) => "RS256",
        }
    }

    fn sign(&self, rng: &SystemRandom, message: &[u8]) -> Result<Vec<u8>, OAuthError> {
        let failed = |_| OAuthError::new("signing the client assertion failed");
        match self {
            Key::Ecdsa(key) => key.sign(rng, message).map(|signature| signature.as_ref().to_vec()).map_err(failed),
            Key::Rsa(key) => {
                let mut signature = vec![0; key.public().modulus_len()];
                key.sign(&RSA_PKCS1_SHA256, rng, message, &mut signature).map_err(failed)?;
                Ok(signature)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_that_is_not_pem_is_refused_without_echoing_it() {
        let error = client_assertion("not-a-key-secret-material", "c", "https://as").unwrap_err();
        assert!(!error.to_string().contains("secret-material"), "{error}");
    }
}
