//! Callers' stored logins at rest: each file sealed with AES-256-GCM
//! (`ring::aead`) under a key derived from the operator's `[serve]
//! login_key`, with a random nonce per write; its name a keyed hash of the
//! caller, so the directory does not list who logged in.
//!
//! ```text
//! login_key (32 bytes) ─HKDF-SHA256─▶ AES-256-GCM key   (file contents)
//!                      └────────────▶ HMAC-SHA256 key   (file names)
//! file = nonce (12 bytes) ‖ ciphertext ‖ tag;  additional data = "{server}/{file name}"
//! ```
//!
//! The additional data binds a file to its place: one moved to another
//! caller's name, or another server's folder, does not open. A wrong key,
//! a truncated or altered file, all fail the same way, saying which file
//! and what to do; no error holds a key or a token.

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use ring::{hkdf, hmac};

use super::OAuthError;

/// Bytes of the operator's key.
pub const LOGIN_KEY_LEN: usize = 32;

/// The keys that seal and name callers' login files.
pub struct LoginKey {
    seal: LessSafeKey,
    names: hmac::Key,
    random: SystemRandom,
}

impl fmt::Debug for LoginKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LoginKey(…)")
    }
}

impl LoginKey {
    /// The key from its base64 text (`[serve] login_key`, expanded); `Err`
    /// says what is wrong, never the value.
    pub fn from_base64(text: &str) -> Result<LoginKey, OAuthError> {
        let bad = || {
            OAuthError::new(format!(
                "serve.login_key must be {LOGIN_KEY_LEN} random bytes in base64 (make one with `openssl rand -base64 32`)"
            ))
        };
        let bytes = STANDARD.decode(text.trim()).map_err(|_| bad())?;
        if bytes.len() != LOGIN_KEY_LEN {
            return Err(bad());
        }
        LoginKey::from_bytes(&bytes)
    }

    fn from_bytes(master: &[u8]) -> Result<LoginKey, OAuthError> {
        let failed = || OAuthError::new("cannot derive the keys of stored logins from serve.login_key");
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, b"mcpvisor per-caller logins").extract(master);
        let seal: UnboundKey = prk.expand(&[b"file contents"], &AES_256_GCM).map_err(|_| failed())?.into();
        let names: hmac::Key = prk.expand(&[b"file names"], hmac::HMAC_SHA256).map_err(|_| failed())?.into();
        Ok(LoginKey { seal: LessSafeKey::new(seal), names, random: SystemRandom::new() })
    }

    /// The file name of `caller`'s login: 32 hex digits of a keyed hash.
    pub fn file_name(&self, caller: &str) -> String {
        let tag = hmac::sign(&self.names, caller.as_bytes());
        tag.as_ref()[..16].iter().map(|byte| format!("{byte:02x}")).collect()
    }

    /// `plain` sealed for `place` (the server and file name).
    pub fn seal(&self, place: &str, plain: &[u8]) -> Result<Vec<u8>, OAuthError> {
        let mut nonce = [0u8; NONCE_LEN];
        self.random.fill(&mut nonce).map_err(|_| OAuthError::new("the system's random generator failed; cannot store a login"))?;
        let mut sealed = plain.to_vec();
        self.seal
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(place.as_bytes()), &mut sealed)
            .map_err(|_| OAuthError::new("cannot encrypt a stored login"))?;
        let mut file = nonce.to_vec();
        file.extend_from_slice(&sealed);
        Ok(file)
    }

    /// What `sealed` holds, if it was sealed with this key for `place`.
    pub fn open(&self, place: &str, sealed: &[u8]) -> Option<Vec<u8>> {
        if sealed.len() < NONCE_LEN {
            return None;
        }
        let (nonce, body) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut body = body.to_vec();
        let plain = self.seal.open_in_place(nonce, Aad::from(place.as_bytes()), &mut body).ok()?;
        Some(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> LoginKey {
        LoginKey::from_base64(&STANDARD.encode([byte; LOGIN_KEY_LEN])).unwrap()
    }

    #[test]
    fn a_sealed_login_opens_only_with_its_key_at_its_place() {
        let sealed = key(1).seal("github/ab", b"access-token-value").unwrap();
        assert!(!sealed.windows(5).any(|w| w == b"token"), "the token is in clear");
        assert_eq!(key(1).open("github/ab", &sealed).as_deref(), Some(&b"access-token-value"[..]));
        assert_eq!(key(2).open("github/ab", &sealed), None);
        assert_eq!(key(1).open("github/cd", &sealed), None);
        let mut altered = sealed.clone();
        *altered.last_mut().unwrap() ^= 1;
        assert_eq!(key(1).open("github/ab", &altered), None);
        assert_eq!(key(1).open("github/ab", &sealed[..5]), None);
        assert_ne!(key(1).seal("github/ab", b"same").unwrap(), key(1).seal("github/ab", b"same").unwrap(), "a nonce per write");
    }

    #[test]
    fn names_are_keyed_and_keys_are_checked() {
        assert_eq!(key(1).file_name("key:alice"), key(1).file_name("key:alice"));
        assert_ne!(key(1).file_name("key:alice"), key(2).file_name("key:alice"));
        assert!(!key(1).file_name("key:alice").contains("alice"));
        for bad in ["", "not base64!", &STANDARD.encode([0u8; 16])] {
            let refused = LoginKey::from_base64(bad).unwrap_err().to_string();
            assert!(refused.contains("serve.login_key") && refused.contains("32"), "{refused}");
        }
    }
}
