//! What the issuer said of opaque tokens (RFC 7662 introspection), kept a
//! while, and a bound on how often it is asked.
//!
//! Invariants:
//! - a token is kept by its SHA-256, never as itself;
//! - an active answer is kept until the token's `exp` or [`KEEP_ACTIVE`],
//!   whichever comes first; a refusal ("not active", another audience) for
//!   [`KEEP_REFUSED`]; the issuer being unreachable is never kept;
//! - at most [`MAX_ENTRIES`] answers are kept (the oldest go first), at
//!   most [`MAX_IN_FLIGHT`] introspections run at once, and at most
//!   [`RATE`] per second are started (burst [`BURST`]); past that a token
//!   not kept gets "cannot be checked now" (503, retry later), while kept
//!   ones go on being served from memory.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::Semaphore;

use super::rejection::Rejection;
use crate::identity::Identity;

/// The longest an active answer is believed (a revoked token passes at most this long).
pub const KEEP_ACTIVE: Duration = Duration::from_secs(60);
/// How long a refusal is kept.
pub const KEEP_REFUSED: Duration = Duration::from_secs(10);
/// The most answers kept.
pub const MAX_ENTRIES: usize = 10_000;
/// The most introspections under way at once.
pub const MAX_IN_FLIGHT: usize = 4;
/// Introspections started per second, on average.
pub const RATE: f64 = 20.0;
/// Introspections that may start at once after a quiet while.
pub const BURST: f64 = 40.0;

type Key = [u8; 32];

/// An answer and until when it holds.
struct Kept {
    answer: Result<Identity, Rejection>,
    until: Instant,
}

#[derive(Default)]
struct Table {
    entries: HashMap<Key, Kept>,
    /// Keys in the order they were kept (some may be gone since).
    order: VecDeque<Key>,
    /// Tokens of the rate bound, and when they were last counted.
    tokens: f64,
    counted: Option<Instant>,
}

/// The kept answers of one issuer.
pub struct Introspected {
    table: Mutex<Table>,
    in_flight: Semaphore,
}

impl Default for Introspected {
    fn default() -> Introspected {
        Introspected { table: Mutex::default(), in_flight: Semaphore::new(MAX_IN_FLIGHT) }
    }
}

impl Introspected {
    /// The answer for `token`: kept, or asked of `introspect` within the bounds.
    pub async fn answer<F>(&self, token: &str, introspect: F) -> Result<Identity, Rejection>
    where
        F: std::future::Future<Output = Result<(Identity, Option<u64>), Rejection>>,
    {
        let key = key_of(token);
        if let Some(kept) = self.kept(&key) {
            return kept;
        }
        if !self.take_token() {
            return Err(Rejection::Unavailable(format!(
                "more than {RATE} opaque tokens a second are being introspected; the issuer is spared"
            )));
        }
        let _permit = self.in_flight.acquire().await.map_err(|error| Rejection::Unavailable(error.to_string()))?;
        // Another request may have asked for the same token meanwhile.
        if let Some(kept) = self.kept(&key) {
            return kept;
        }
        let answer = introspect.await;
        let now = Instant::now();
        let until = match &answer {
            Ok((_, exp)) => now + KEEP_ACTIVE.min(until_exp(*exp)),
            Err(Rejection::Invalid(_)) | Err(Rejection::InsufficientScope(_)) => now + KEEP_REFUSED,
            Err(Rejection::Missing) | Err(Rejection::Unavailable(_)) => return answer.map(|(identity, _)| identity),
        };
        let answer = answer.map(|(identity, _)| identity);
        self.keep(key, Kept { answer: answer.clone(), until });
        answer
    }

    fn kept(&self, key: &Key) -> Option<Result<Identity, Rejection>> {
        let mut table = self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match table.entries.get(key) {
            Some(kept) if kept.until > Instant::now() => Some(kept.answer.clone()),
            Some(_) => {
                table.entries.remove(key);
                None
            }
            None => None,
        }
    }

    fn keep(&self, key: Key, kept: Kept) {
        let mut table = self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        while table.entries.len() >= MAX_ENTRIES {
            let Some(oldest) = table.order.pop_front() else { break };
            table.entries.remove(&oldest);
        }
        if table.entries.insert(key, kept).is_none() {
            table.order.push_back(key);
        }
        // Keys whose entries went (expired and read) are dropped from the order as it grows.
        if table.order.len() > 2 * MAX_ENTRIES {
            let Table { entries, order, .. } = &mut *table;
            order.retain(|key| entries.contains_key(key));
        }
    }

    /// Takes one token of the rate bound, if there is one.
    fn take_token(&self) -> bool {
        let mut table = self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        let elapsed = table.counted.map_or(Duration::from_secs(3600), |counted| now.duration_since(counted));
        table.tokens = (table.tokens + elapsed.as_secs_f64() * RATE).min(BURST);
        table.counted = Some(now);
        if table.tokens >= 1.0 {
            table.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// How many answers are kept now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).entries.len()
    }
}

/// The SHA-256 of `token`.
fn key_of(token: &str) -> Key {
    let mut key = [0; 32];
    key.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref());
    key
}

/// The time left until `exp` (seconds since the epoch); [`KEEP_ACTIVE`] without one.
fn until_exp(exp: Option<u64>) -> Duration {
    let Some(exp) = exp else { return KEEP_ACTIVE };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    Duration::from_secs(exp).saturating_sub(now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Proof;

    fn carol() -> Identity {
        Identity { subject: "carol".into(), client_id: None, scopes: Vec::new(), claims: Default::default(), proof: Proof::Introspection }
    }

    #[tokio::test]
    async fn answers_are_kept_by_kind_and_the_issuer_is_asked_once() {
        let kept = Introspected::default();
        let asked = std::sync::atomic::AtomicUsize::new(0);
        let asked = &asked;
        let ask = |answer: Result<(Identity, Option<u64>), Rejection>| async move {
            asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            answer
        };
        for _ in 0..3 {
            assert_eq!(kept.answer("opaque-carol", ask(Ok((carol(), None)))).await.unwrap().subject, "carol");
            assert!(kept.answer("junk", ask(Err(Rejection::Invalid("not active".into())))).await.is_err());
        }
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 2, "one question per token");
        for _ in 0..2 {
            let unavailable = kept.answer("while-down", ask(Err(Rejection::Unavailable("down".into())))).await;
            assert!(matches!(unavailable, Err(Rejection::Unavailable(_))));
        }
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 4, "an unreachable issuer is asked again");
        let past = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() - 1;
        kept.answer("expired", ask(Ok((carol(), Some(past))))).await.unwrap();
        kept.answer("expired", ask(Ok((carol(), Some(past))))).await.unwrap();
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 6, "an answer is never kept past the token's exp");
    }

    #[tokio::test]
    async fn past_the_burst_new_tokens_are_refused_unasked_and_kept_ones_still_pass() {
        let kept = Introspected::default();
        kept.answer("opaque-carol", async { Ok((carol(), None)) }).await.unwrap();
        let mut refused = 0;
        for n in 0..(BURST as usize + 10) {
            if let Err(Rejection::Unavailable(why)) =
                kept.answer(&format!("junk-{n}"), async { Err(Rejection::Invalid("no".into())) }).await
            {
                assert!(why.contains("spared"), "{why}");
                refused += 1;
            }
        }
        assert!(refused >= 10, "{refused}");
        assert_eq!(kept.answer("opaque-carol", async { Err(Rejection::Invalid("unasked".into())) }).await.unwrap().subject, "carol");
    }

    #[test]
    fn the_table_keeps_at_most_its_bound_and_drops_the_oldest() {
        let kept = Introspected::default();
        let until = Instant::now() + KEEP_ACTIVE;
        for n in 0..MAX_ENTRIES + 5 {
            kept.keep(key_of(&format!("token-{n}")), Kept { answer: Ok(carol()), until });
        }
        assert_eq!(kept.len(), MAX_ENTRIES);
        assert!(kept.kept(&key_of("token-0")).is_none(), "the oldest went first");
        assert!(kept.kept(&key_of(&format!("token-{}", MAX_ENTRIES + 4))).is_some());
    }
}
