//! The bearer token a gateway's caller proved itself with, kept apart
//! from its [`crate::identity::Identity`] (which never holds a credential
//! and may be logged), for the one use that needs it: exchanging it for a
//! token of an upstream server that acts as that caller (RFC 8693).
//!
//! Invariants:
//! - a [`CallerToken`] never shows its value: `Debug` prints a mask, it is
//!   not `Serialize`, and [`CallerToken::expose`] is the one way to read it;
//! - the [`CallerTokens`] book keeps the latest token of each caller only
//!   until it expires (a JWT's `exp`, else [`UNDATED_TTL`] after it was
//!   last presented), and at most [`MAX_CALLERS`] callers: the oldest
//!   entry makes room.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;

/// How long a token without a readable `exp` (an opaque, introspected one)
/// is kept after the caller last presented it.
pub const UNDATED_TTL: Duration = Duration::from_secs(300);
/// The most callers whose tokens are kept at once.
pub const MAX_CALLERS: usize = 10_000;
/// The longest a token is kept, whatever its `exp` says.
const MAX_KEPT: Duration = Duration::from_secs(24 * 3600);

/// A caller's bearer token. Cheap to clone.
#[derive(Clone, PartialEq, Eq)]
pub struct CallerToken {
    token: Arc<str>,
    /// When it stops being usable: its `exp` (a JWT), else [`UNDATED_TTL`] from now.
    until: Instant,
}

impl std::fmt::Debug for CallerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallerToken(***)")
    }
}

impl CallerToken {
    /// The token as presented (already checked by the gateway).
    pub fn new(token: &str) -> CallerToken {
        let now = Instant::now();
        let until = match jwt_expiry(token) {
            Some(exp) => {
                let unix_now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
                now + Duration::from_secs(exp.saturating_sub(unix_now)).min(MAX_KEPT)
            }
            None => now + UNDATED_TTL,
        };
        CallerToken { token: token.into(), until }
    }

    /// The token itself, to send to the issuer that exchanges it.
    pub fn expose(&self) -> &str {
        &self.token
    }

    /// When it can no longer be used.
    pub fn until(&self) -> Instant {
        self.until
    }

    pub fn is_expired(&self) -> bool {
        Instant::now() >= self.until
    }
}

/// The `exp` of a JWT's claims (see [`unverified_claims`]).
fn jwt_expiry(token: &str) -> Option<u64> {
    unverified_claims(token)?.get("exp")?.as_u64()
}

/// The claims of a JWT, read without checking its signature: only for a
/// token someone else checked (the gateway, the issuer that just issued
/// it), and only to read what it says of itself (`exp`, `sub`). `None` for
/// a token that is not a JWT.
pub fn unverified_claims(token: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
    let claims = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(claims.trim_end_matches('=')).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The latest token of each caller, by `Identity::caller_key`. Cheap to
/// clone: clones share one book.
#[derive(Clone, Default)]
pub struct CallerTokens(Arc<Mutex<HashMap<String, CallerToken>>>);

impl std::fmt::Debug for CallerTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallerTokens").field("callers", &self.lock().len()).finish()
    }
}

impl CallerTokens {
    /// Keeps `token` as `caller`'s latest.
    pub fn offer(&self, caller: &str, token: CallerToken) {
        let mut book = self.lock();
        if book.get(caller).is_some_and(|known| known.token == token.token) {
            // The same token again: an undated one lives on from now.
            if let Some(known) = book.get_mut(caller) {
                known.until = known.until.max(token.until);
            }
            return;
        }
        if book.len() >= MAX_CALLERS && !book.contains_key(caller) {
            book.retain(|_, kept| !kept.is_expired());
            if book.len() >= MAX_CALLERS {
                let oldest = book.iter().min_by_key(|(_, kept)| kept.until).map(|(key, _)| key.clone());
                if let Some(oldest) = oldest {
                    book.remove(&oldest);
                }
            }
        }
        book.insert(caller.to_owned(), token);
    }

    /// `caller`'s latest token, unless it expired (then it is forgotten).
    pub fn latest(&self, caller: &str) -> Option<CallerToken> {
        let mut book = self.lock();
        match book.get(caller) {
            Some(token) if !token.is_expired() => Some(token.clone()),
            Some(_) => {
                book.remove(caller);
                None
            }
            None => None,
        }
    }

    /// Forgets `caller`'s token.
    pub fn forget(&self, caller: &str) {
        self.lock().remove(caller);
    }

    /// How many callers' tokens are kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    // Each change is one map operation: a panic elsewhere leaves a whole book.
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CallerToken>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(exp: u64) -> String {
        let encode = |value: serde_json::Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string());
        format!("{}.{}.c2ln", encode(serde_json::json!({"alg": "ES256"})), encode(serde_json::json!({"sub": "alice", "exp": exp})))
    }

    #[test]
    fn a_token_is_never_shown_and_lives_until_its_exp() {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        let token = CallerToken::new(&jwt(now + 600));
        assert_eq!(format!("{token:?}"), "CallerToken(***)");
        assert!(token.until() > Instant::now() + Duration::from_secs(590) && !token.is_expired());
        assert!(CallerToken::new(&jwt(now.saturating_sub(5))).is_expired());
        let opaque = CallerToken::new("opaque-token-value");
        assert!(opaque.until() <= Instant::now() + UNDATED_TTL && !opaque.is_expired());
    }

    #[test]
    fn the_book_keeps_the_latest_unexpired_token_per_caller() {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        let book = CallerTokens::default();
        book.offer("issuer:alice", CallerToken::new(&jwt(now + 60)));
        book.offer("issuer:alice", CallerToken::new(&jwt(now + 120)));
        assert_eq!(book.latest("issuer:alice").unwrap().expose(), jwt(now + 120));
        book.offer("issuer:bob", CallerToken::new(&jwt(now.saturating_sub(1))));
        assert!(book.latest("issuer:bob").is_none(), "an expired token is not handed out");
        assert_eq!(book.len(), 1, "and is forgotten");
        book.forget("issuer:alice");
        assert!(book.is_empty());
    }
}
