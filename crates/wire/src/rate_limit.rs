//! Rate limits of tool calls, per server and per tool: calls per second
//! with a burst (a token bucket) and calls at once (a semaphore).
//!
//! Passive: no actor, no task. A connection builds one [`Limiter`] from its
//! server's [`RateLimits`] and asks it, for every tool call, for a
//! [`Permit`] before the call is admitted (`actors::connection::calls`).
//!
//! Invariants:
//! - a call is never dropped silently: it gets its permit within its
//!   time-out, or a [`Refusal`] saying which limit refused it and, for a
//!   rate, when a call would be let through;
//! - a call that would wait for a token past its time-out is refused at
//!   once and takes no token; a call that waits reserves its token, so
//!   waiting calls go through in the order they came, `1 / rate` apart;
//! - a permit holds its concurrency slots until it is dropped (when the
//!   call's answer is in, or its caller went away);
//! - a tool without limits of its own is bounded by its server's only; a
//!   server without limits costs nothing per call.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// One set of limits; each is off when `None`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RateLimit {
    /// Calls per second, sustained.
    pub rate: Option<f64>,
    /// Calls let through at once after a quiet spell (default: `rate`
    /// rounded up, at least 1).
    pub burst: Option<u32>,
    /// Calls running at once.
    pub concurrent: Option<usize>,
}

impl RateLimit {
    pub fn is_empty(&self) -> bool {
        self.rate.is_none() && self.concurrent.is_none()
    }

    fn burst(&self) -> f64 {
        let rate = self.rate.unwrap_or(1.0);
        f64::from(self.burst.unwrap_or_else(|| rate.ceil().clamp(1.0, f64::from(u32::MAX)) as u32).max(1))
    }
}

/// A server's limits: its own (all its tools together) and each tool's,
/// by the server's own tool name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RateLimits {
    pub server: RateLimit,
    pub tools: BTreeMap<String, RateLimit>,
}

impl RateLimits {
    pub fn is_empty(&self) -> bool {
        self.server.is_empty() && self.tools.values().all(RateLimit::is_empty)
    }
}

/// Which limit refused a call.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// "the rate limit of server `s` (10/s, burst 20)" and the like.
    pub limit: String,
    /// When a token is due (rate limits only).
    pub retry_after: Option<Duration>,
}

/// Holds the call's concurrency slots until dropped.
#[derive(Debug, Default)]
pub struct Permit {
    _slots: Vec<OwnedSemaphorePermit>,
}

/// The limits of one server, applied.
#[derive(Debug)]
pub struct Limiter {
    server_name: String,
    server: Option<Arc<Gate>>,
    tools: HashMap<String, Arc<Gate>>,
}

impl Limiter {
    /// One limit on everything its holder does, named `scope` in refusals
    /// ("caller `alice`").
    pub fn single(scope: &str, limit: RateLimit) -> Limiter {
        Limiter {
            server_name: scope.into(),
            server: (!limit.is_empty()).then(|| Arc::new(Gate::new(scope.into(), limit))),
            tools: HashMap::new(),
        }
    }

    pub fn new(server_name: &str, limits: &RateLimits) -> Limiter {
        let gate = |scope: String, limit: &RateLimit| (!limit.is_empty()).then(|| Arc::new(Gate::new(scope, *limit)));
        Limiter {
            server_name: server_name.into(),
            server: gate(format!("server `{server_name}`"), &limits.server),
            tools: limits
                .tools
                .iter()
                .filter_map(|(tool, limit)| Some((tool.clone(), gate(format!("tool `{tool}` of server `{server_name}`"), limit)?)))
                .collect(),
        }
    }

    /// Whether calls to `tool` are limited at all (else no permit is needed).
    pub fn limits(&self, tool: &str) -> bool {
        self.server.is_some() || self.tools.contains_key(tool)
    }

    pub fn server(&self) -> &str {
        &self.server_name
    }

    /// Waits for `tool`'s permit, at most `timeout`: tokens of the server
    /// and the tool first, then their concurrency slots.
    pub fn admit(&self, tool: &str, timeout: Duration) -> impl std::future::Future<Output = Result<Permit, Refusal>> + 'static {
        let gates: Vec<Arc<Gate>> = self.server.iter().chain(self.tools.get(tool)).cloned().collect();
        async move {
            let deadline = Instant::now() + timeout;
            let mut taken: Vec<&Gate> = Vec::new();
            let mut wait = Duration::ZERO;
            for gate in &gates {
                match gate.reserve(timeout) {
                    Ok(after) => wait = wait.max(after),
                    Err(refusal) => {
                        taken.iter().for_each(|gate| gate.give_back());
                        return Err(refusal);
                    }
                }
                taken.push(gate);
            }
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let mut slots = Vec::new();
            for gate in &gates {
                let Some(semaphore) = &gate.slots else { continue };
                let slot = match semaphore.clone().try_acquire_owned() {
                    Ok(slot) => slot,
                    Err(_) => match tokio::time::timeout_at(deadline, semaphore.clone().acquire_owned()).await {
                        Ok(Ok(slot)) => slot,
                        _ => {
                            // Refused calls take no token: the rate stays for calls that run.
                            gates.iter().for_each(|gate| gate.give_back());
                            return Err(Refusal { limit: gate.describe_concurrency(), retry_after: None });
                        }
                    },
                };
                slots.push(slot);
            }
            Ok(Permit { _slots: slots })
        }
    }
}

/// One scope's limits: a token bucket and a semaphore.
#[derive(Debug)]
struct Gate {
    scope: String,
    limit: RateLimit,
    bucket: Option<Mutex<Bucket>>,
    slots: Option<Arc<Semaphore>>,
}

#[derive(Debug)]
struct Bucket {
    rate: f64,
    burst: f64,
    /// Below zero while calls wait for tokens they reserved.
    tokens: f64,
    updated: Instant,
}

impl Gate {
    fn new(scope: String, limit: RateLimit) -> Gate {
        let bucket = limit.rate.filter(|rate| *rate > 0.0).map(|rate| {
            let burst = limit.burst();
            Mutex::new(Bucket { rate, burst, tokens: burst, updated: Instant::now() })
        });
        let slots = limit.concurrent.map(|n| Arc::new(Semaphore::new(n.max(1))));
        Gate { scope, limit, bucket, slots }
    }

    /// Takes a token, now or `Ok(wait)` from now; refuses when the wait
    /// would pass `max_wait`.
    fn reserve(&self, max_wait: Duration) -> Result<Duration, Refusal> {
        let Some(bucket) = &self.bucket else { return Ok(Duration::ZERO) };
        let mut bucket = bucket.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let refill = now.duration_since(bucket.updated).as_secs_f64() * bucket.rate;
        bucket.tokens = (bucket.tokens + refill).min(bucket.burst);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(Duration::ZERO);
        }
        let wait = Duration::try_from_secs_f64((1.0 - bucket.tokens) / bucket.rate).unwrap_or(Duration::MAX);
        if wait > max_wait {
            return Err(Refusal { limit: self.describe_rate(), retry_after: Some(wait) });
        }
        bucket.tokens -= 1.0;
        Ok(wait)
    }

    fn give_back(&self) {
        if let Some(bucket) = &self.bucket {
            let mut bucket = bucket.lock().unwrap_or_else(|e| e.into_inner());
            bucket.tokens = (bucket.tokens + 1.0).min(bucket.burst);
        }
    }

    fn describe_rate(&self) -> String {
        format!("the rate limit of {} ({}/s, burst {})", self.scope, self.limit.rate.unwrap_or_default(), self.limit.burst())
    }

    fn describe_concurrency(&self) -> String {
        format!("the concurrency limit of {} ({} at once; none finished in time)", self.scope, self.limit.concurrent.unwrap_or_default())
    }
}

/// Callers one [`PerCaller`] keeps a bucket for; past it, the buckets
/// start afresh (each caller needs credentials, so this bounds memory, not
/// fairness between strangers).
pub const MAX_CALLERS: usize = 10_000;

/// One limit applied to each caller apart (the gateway's identities): a
/// caller's calls never use another's tokens or slots.
#[derive(Debug)]
pub struct PerCaller {
    limit: RateLimit,
    callers: Mutex<HashMap<String, Arc<Limiter>>>,
}

impl PerCaller {
    pub fn new(limit: RateLimit) -> PerCaller {
        PerCaller { limit, callers: Mutex::default() }
    }

    /// The limiter of `caller` (made on first use).
    pub fn limiter(&self, caller: &str) -> Arc<Limiter> {
        let mut callers = self.callers.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(limiter) = callers.get(caller) {
            return limiter.clone();
        }
        if callers.len() >= MAX_CALLERS {
            callers.clear();
        }
        let limiter = Arc::new(Limiter::single(&format!("caller `{caller}`"), self.limit));
        callers.insert(caller.to_string(), limiter.clone());
        limiter
    }

    /// A permit for one call of `caller`, or at once the refusal naming
    /// the caller's limit and when a call would pass: a gateway answers
    /// rather than queue a caller past its share.
    pub async fn admit(&self, caller: &str) -> Result<Permit, Refusal> {
        let limiter = self.limiter(caller);
        limiter.admit("", Duration::ZERO).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(server: RateLimit, tools: &[(&str, RateLimit)]) -> Limiter {
        let tools = tools.iter().map(|(name, limit)| (name.to_string(), *limit)).collect();
        Limiter::new("s", &RateLimits { server, tools })
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_goes_through_then_calls_wait_their_turn_or_are_refused() {
        let limiter = limits(RateLimit { rate: Some(10.0), burst: Some(3), concurrent: None }, &[]);
        let start = Instant::now();
        for _ in 0..3 {
            limiter.admit("t", Duration::ZERO).await.unwrap();
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "the burst needs no wait");
        let refused = limiter.admit("t", Duration::from_millis(50)).await.unwrap_err();
        assert!(refused.limit.contains("rate limit of server `s` (10/s, burst 3)"), "{refused:?}");
        assert_eq!(refused.retry_after, Some(Duration::from_millis(100)));
        // Waiting calls reserve their tokens: 100 ms apart.
        let (a, b) = (limiter.admit("t", Duration::from_secs(1)), limiter.admit("t", Duration::from_secs(1)));
        let (a, b) = tokio::join!(a, b);
        assert!(a.is_ok() && b.is_ok());
        assert_eq!(start.elapsed(), Duration::from_millis(200));
    }

    #[tokio::test(start_paused = true)]
    async fn concurrency_is_held_by_the_permit_and_a_tool_is_limited_by_both_scopes() {
        let one_at_a_time = RateLimit { concurrent: Some(1), ..RateLimit::default() };
        let limiter = limits(RateLimit { concurrent: Some(2), ..RateLimit::default() }, &[("slow", one_at_a_time)]);
        assert!(limiter.limits("other") && limiter.limits("slow"));
        let first = limiter.admit("slow", Duration::ZERO).await.unwrap();
        let refused = limiter.admit("slow", Duration::from_millis(10)).await.unwrap_err();
        assert!(refused.limit.contains("concurrency limit of tool `slow` of server `s` (1 at once"), "{refused:?}");
        let other = limiter.admit("other", Duration::ZERO).await.unwrap();
        let refused = limiter.admit("other", Duration::from_millis(10)).await.unwrap_err();
        assert!(refused.limit.contains("concurrency limit of server `s` (2 at once"), "{refused:?}");
        let waiting = tokio::spawn(limiter.admit("other", Duration::from_secs(5)));
        drop(first);
        assert!(waiting.await.unwrap().is_ok(), "a slot freed lets a waiting call in");
        drop(other);
    }

    #[test]
    fn no_limits_no_gate() {
        let limiter = limits(RateLimit::default(), &[("t", RateLimit::default())]);
        assert!(!limiter.limits("t"));
        assert_eq!(RateLimit { rate: Some(2.5), ..RateLimit::default() }.burst(), 3.0);
    }

    #[tokio::test(start_paused = true)]
    async fn each_caller_has_its_own_bucket_and_slots_and_is_refused_at_once() {
        let per = PerCaller::new(RateLimit { rate: Some(1.0), burst: Some(2), concurrent: Some(2) });
        let first = per.admit("alice").await.unwrap();
        let _second = per.admit("alice").await.unwrap();
        let refused = per.admit("alice").await.unwrap_err();
        assert!(refused.limit.contains("rate limit of caller `alice` (1/s, burst 2)"), "{refused:?}");
        assert!(refused.retry_after.is_some_and(|after| after <= Duration::from_secs(1)), "{refused:?}");
        let _bob = per.admit("bob").await.expect("bob's bucket is his own");
        tokio::time::advance(Duration::from_secs(1)).await;
        let slots = per.admit("alice").await.unwrap_err();
        assert!(slots.limit.contains("concurrency limit of caller `alice` (2 at once"), "{slots:?}");
        drop(first);
        assert!(per.admit("alice").await.is_ok(), "a finished call gives its slot back");
    }
}
