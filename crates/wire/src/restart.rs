//! Restart decisions: policy, exponential backoff with jitter, and
//! restart intensity (OTP's "at most N restarts in T").
//!
//! Plain data, no actors: the connection actor asks [`RestartTracker`]
//! what to do each time its server goes down, and the answer depends only
//! on the policy, the history kept here and the time passed in.
//!
//! A server that exceeds its restart intensity is `failed`, but not for
//! good when a [`Cooldown`] is set (the default, in every runtime): it is
//! tried again after the cool-down, which doubles at each further give-up
//! up to its cap and starts again from `initial` after a healthy run. Only
//! the intensity limit cools down; a `never` or `on-failure` policy that
//! gives up, or an error no restart can fix (a missing command), stays
//! failed until a reconnect. Short-lived programs (one CLI command) end
//! long before a cool-down passes, so it costs them nothing.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// When a server that went down is started again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    /// Never restart: the first exit is final.
    Never,
    /// Restart after failures (non-zero exit, signal, failed handshake, a
    /// caught panic) but not after a clean exit with code 0, at most
    /// `max_restarts` times in a row without a healthy run in between.
    OnFailure { max_restarts: u32 },
    /// Restart after every exit, clean or not (bounded by the intensity limit).
    Always,
}

impl Default for RestartPolicy {
    /// A runtime's job is to keep servers up, so any unexpected exit is
    /// restarted; the intensity limit stops crash loops.
    fn default() -> Self {
        RestartPolicy::Always
    }
}

/// The numbers behind restarts. Defaults are those of DESIGN.md.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RestartLimits {
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// A run at least this long counts as healthy: the next backoff starts
    /// again at `initial_backoff` and `OnFailure` counting restarts from zero.
    pub healthy_after: Duration,
    /// More than `max_restarts_in_window` restarts within `window` → failed.
    pub max_restarts_in_window: usize,
    pub window: Duration,
    /// Each delay is multiplied by a random factor in `1 ± jitter`.
    pub jitter: f64,
    /// After the intensity limit: how long the server stays `failed` before
    /// it is tried again; `None` gives it up until a reconnect.
    pub cooldown: Option<Cooldown>,
}

/// The growing wait before a server that exceeded its restart intensity is
/// tried again: `initial`, doubled at each further give-up, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cooldown {
    pub initial: Duration,
    pub max: Duration,
}

impl Default for Cooldown {
    fn default() -> Self {
        Cooldown { initial: Duration::from_secs(30), max: Duration::from_secs(600) }
    }
}

impl Default for RestartLimits {
    fn default() -> Self {
        RestartLimits {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(30),
            healthy_after: Duration::from_secs(60),
            max_restarts_in_window: 5,
            window: Duration::from_secs(60),
            jitter: 0.2,
            cooldown: Some(Cooldown::default()),
        }
    }
}

/// How a run of the server ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Exit code 0 (or EOF with a clean exit).
    Clean,
    /// Anything else: non-zero code, signal, failed handshake, caught panic.
    Failure,
}

/// What to do about a server that went down.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Restart {
        attempt: u32,
        after: Duration,
    },
    /// Failed on the intensity limit; tried again `after` the cool-down.
    CoolDown {
        reason: String,
        after: Duration,
    },
    GiveUp {
        reason: String,
    },
}

#[derive(Debug, Clone)]
pub struct RestartTracker {
    policy: RestartPolicy,
    limits: RestartLimits,
    /// Restarts since the last healthy run (drives backoff and `OnFailure`).
    consecutive: u32,
    /// When recent restarts were decided, oldest first, within `window`.
    recent: VecDeque<Instant>,
    total: u64,
    /// Cool-downs since the last healthy run (drives their growth).
    cooldowns: u32,
}

impl RestartTracker {
    pub fn new(policy: RestartPolicy, limits: RestartLimits) -> Self {
        RestartTracker { policy, limits, consecutive: 0, recent: VecDeque::new(), total: 0, cooldowns: 0 }
    }

    /// Restarts decided over the tracker's whole life (tries after a
    /// cool-down are not counted).
    pub fn total_restarts(&self) -> u64 {
        self.total
    }

    /// Forgets the recent history (backoff and intensity), as after a
    /// deliberate reconnect; the total count is kept.
    pub fn forgive(&mut self) {
        self.consecutive = 0;
        self.recent.clear();
        self.cooldowns = 0;
    }

    /// Decides about a run that lasted `ran_for` and ended as `ending`.
    pub fn on_down(&mut self, now: Instant, ran_for: Duration, ending: Ending) -> Decision {
        if ran_for >= self.limits.healthy_after {
            self.consecutive = 0;
            self.cooldowns = 0;
        }
        match (self.policy, ending) {
            (RestartPolicy::Never, _) => return Decision::GiveUp { reason: "restart policy is `never`".into() },
            (RestartPolicy::OnFailure { .. }, Ending::Clean) => {
                return Decision::GiveUp { reason: "exited cleanly (code 0) and the restart policy is `on-failure`".into() };
            }
            (RestartPolicy::OnFailure { max_restarts }, Ending::Failure) if self.consecutive >= max_restarts => {
                return Decision::GiveUp { reason: format!("gave up after {max_restarts} restarts in a row (restart policy on-failure)") };
            }
            _ => {}
        }
        while self.recent.front().is_some_and(|t| now.duration_since(*t) >= self.limits.window) {
            self.recent.pop_front();
        }
        if self.recent.len() >= self.limits.max_restarts_in_window {
            let reason = format!("restarted {} times within {:?} (restart intensity limit)", self.recent.len(), self.limits.window);
            let Some(cooldown) = self.limits.cooldown else {
                return Decision::GiveUp { reason: format!("{reason}; not restarting again") };
            };
            let after = cooldown.initial.saturating_mul(2u32.saturating_pow(self.cooldowns)).min(cooldown.max);
            self.cooldowns = self.cooldowns.saturating_add(1);
            // The try after the cool-down starts a fresh intensity window and backoff.
            self.recent.clear();
            self.consecutive = 0;
            return Decision::CoolDown { reason: format!("{reason}; trying again in {after:?}"), after };
        }
        self.recent.push_back(now);
        self.total += 1;
        let after = self.backoff(self.consecutive);
        self.consecutive += 1;
        Decision::Restart { attempt: self.consecutive, after }
    }

    fn backoff(&self, previous: u32) -> Duration {
        let base = self.limits.initial_backoff.saturating_mul(2u32.saturating_pow(previous)).min(self.limits.max_backoff);
        let factor = 1.0 + self.limits.jitter * (fastrand::f64() * 2.0 - 1.0);
        base.mul_f64(factor.max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_jitter() -> RestartLimits {
        RestartLimits { jitter: 0.0, cooldown: None, ..RestartLimits::default() }
    }

    #[test]
    fn the_intensity_limit_cools_down_growing_to_the_cap_and_resets_after_a_healthy_run() {
        let cooldown = Cooldown { initial: Duration::from_secs(30), max: Duration::from_secs(100) };
        let limits = RestartLimits { max_restarts_in_window: 1, cooldown: Some(cooldown), ..no_jitter() };
        let mut t = RestartTracker::new(RestartPolicy::Always, limits);
        let now = Instant::now();
        let mut cooldowns = Vec::new();
        for _ in 0..4 {
            assert!(matches!(t.on_down(now, Duration::ZERO, Ending::Failure), Decision::Restart { attempt: 1, .. }));
            match t.on_down(now, Duration::ZERO, Ending::Failure) {
                Decision::CoolDown { after, reason } => {
                    assert!(reason.contains("intensity") && reason.contains("trying again"), "{reason}");
                    cooldowns.push(after.as_secs());
                }
                d => panic!("{d:?}"),
            }
        }
        assert_eq!(cooldowns, [30, 60, 100, 100]);
        assert!(matches!(t.on_down(now, Duration::from_secs(60), Ending::Failure), Decision::Restart { .. }));
        assert!(matches!(t.on_down(now, Duration::ZERO, Ending::Failure), Decision::CoolDown { after, .. } if after.as_secs() == 30));
        // Policies other than the intensity limit still give up for good.
        let mut never = RestartTracker::new(RestartPolicy::Never, limits);
        assert!(matches!(never.on_down(now, Duration::ZERO, Ending::Failure), Decision::GiveUp { .. }));
    }

    #[test]
    fn backoff_doubles_to_the_cap_and_resets_after_a_healthy_run() {
        let limits = RestartLimits { max_restarts_in_window: 100, ..no_jitter() };
        let mut t = RestartTracker::new(RestartPolicy::Always, limits);
        let start = Instant::now();
        let delays: Vec<Duration> = (0..11)
            .map(|i| match t.on_down(start + Duration::from_secs(61 * i), Duration::ZERO, Ending::Failure) {
                Decision::Restart { after, .. } => after,
                d => panic!("{d:?}"),
            })
            .collect();
        assert_eq!(delays[0], Duration::from_millis(100));
        assert_eq!(delays[1], Duration::from_millis(200));
        assert_eq!(delays[8], Duration::from_millis(25_600));
        assert_eq!(delays[9], Duration::from_secs(30));
        assert_eq!(delays[10], Duration::from_secs(30));
        let d = t.on_down(start + Duration::from_secs(2000), Duration::from_secs(60), Ending::Failure);
        assert_eq!(d, Decision::Restart { attempt: 1, after: Duration::from_millis(100) });
    }

    #[test]
    fn more_than_five_restarts_in_a_minute_gives_up() {
        let mut t = RestartTracker::new(RestartPolicy::Always, no_jitter());
        let now = Instant::now();
        for attempt in 1..=5 {
            assert!(matches!(t.on_down(now, Duration::ZERO, Ending::Failure), Decision::Restart { attempt: a, .. } if a == attempt));
        }
        assert!(matches!(t.on_down(now, Duration::ZERO, Ending::Failure), Decision::GiveUp { reason } if reason.contains("intensity")));
        // Once the window has passed, restarts are allowed again.
        assert!(matches!(t.on_down(now + Duration::from_secs(60), Duration::ZERO, Ending::Failure), Decision::Restart { .. }));
    }

    #[test]
    fn policies() {
        let now = Instant::now();
        let mut never = RestartTracker::new(RestartPolicy::Never, no_jitter());
        assert!(matches!(never.on_down(now, Duration::ZERO, Ending::Failure), Decision::GiveUp { .. }));
        let mut on_failure = RestartTracker::new(RestartPolicy::OnFailure { max_restarts: 2 }, no_jitter());
        assert!(matches!(on_failure.on_down(now, Duration::ZERO, Ending::Clean), Decision::GiveUp { .. }));
        assert!(matches!(on_failure.on_down(now, Duration::ZERO, Ending::Failure), Decision::Restart { .. }));
        assert!(matches!(on_failure.on_down(now, Duration::ZERO, Ending::Failure), Decision::Restart { .. }));
        assert!(matches!(on_failure.on_down(now, Duration::ZERO, Ending::Failure), Decision::GiveUp { .. }));
        let mut always = RestartTracker::new(RestartPolicy::Always, no_jitter());
        assert!(matches!(always.on_down(now, Duration::ZERO, Ending::Clean), Decision::Restart { .. }));
    }

    #[test]
    fn jitter_stays_within_bounds() {
        let mut t = RestartTracker::new(RestartPolicy::Always, RestartLimits { max_restarts_in_window: 1000, ..RestartLimits::default() });
        let now = Instant::now();
        for _ in 0..200 {
            t.consecutive = 0;
            let Decision::Restart { after, .. } = t.on_down(now, Duration::ZERO, Ending::Failure) else { panic!() };
            assert!(after >= Duration::from_millis(80) && after <= Duration::from_millis(120), "{after:?}");
        }
    }
}
