//! Progress of a running request: where `notifications/progress` go, and
//! the clock that lets them push the request's deadline out.
//!
//! A request with a [`ProgressSink`] carries its own request id as
//! `_meta.progressToken`; the connection routes each progress notification
//! of that token to the sink and touches the request's `ProgressClock`.
//! The caller's time-out then counts from the last progress, never past
//! the server's `timeouts.max_call`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use serde::Serialize;
use tokio::sync::mpsc;

use super::outlet::Outlet;

/// One progress notification of a running request.
#[derive(Message, Debug, Clone, PartialEq, Serialize)]
#[rtype(result = "()")]
pub struct Progress {
    pub server: String,
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Where a request's progress goes: a channel or a function (or, on the
/// actix side, an actor: [`to_actor`]).
#[derive(Clone, Debug)]
pub struct ProgressSink(Outlet<Progress>);

impl ProgressSink {
    /// A sink whose notifications arrive on the returned receiver.
    pub fn channel() -> (ProgressSink, mpsc::UnboundedReceiver<Progress>) {
        let (outlet, rx) = Outlet::channel();
        (ProgressSink(outlet), rx)
    }

    /// A sink that calls `function` with each notification, on the
    /// runtime's thread: it must not block.
    pub fn function(function: impl Fn(Progress) + Send + Sync + 'static) -> ProgressSink {
        ProgressSink(Outlet::function(function))
    }

    pub(crate) fn send(&self, progress: Progress) {
        self.0.send(progress)
    }
}

/// The actix side of [`ProgressSink`]: each notification goes to `recipient`.
pub fn to_actor(recipient: Recipient<Progress>) -> ProgressSink {
    ProgressSink(super::outlet::to_actor(recipient))
}

/// When a request last heard of progress, shared by the connection (which
/// touches it) and the caller's deadline (which reads it).
#[derive(Debug)]
pub(crate) struct ProgressClock {
    started: Instant,
    /// Milliseconds after `started` of the last progress; 0 = none yet.
    last_ms: AtomicU64,
}

impl ProgressClock {
    pub(crate) fn new() -> Arc<ProgressClock> {
        Arc::new(ProgressClock { started: Instant::now(), last_ms: AtomicU64::new(0) })
    }

    pub(crate) fn touch(&self) {
        let ms = self.started.elapsed().as_millis().max(1) as u64;
        self.last_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// The deadline of a request allowed `timeout` of silence, at most `max` in all.
    pub(crate) fn deadline(&self, timeout: Duration, max: Duration) -> tokio::time::Instant {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        let silence_ends = last + timeout;
        tokio::time::Instant::from_std(self.started + silence_ends.min(max.max(timeout)))
    }
}

/// What the connection keeps for a request that reports progress.
#[derive(Debug, Clone)]
pub(crate) struct ProgressRoute {
    pub sink: ProgressSink,
    pub clock: Arc<ProgressClock>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_pushes_the_deadline_out_but_never_past_the_maximum() {
        let clock = ProgressClock::new();
        let (timeout, max) = (Duration::from_secs(10), Duration::from_secs(60));
        let start = tokio::time::Instant::from_std(clock.started);
        assert_eq!(clock.deadline(timeout, max), start + timeout);
        clock.last_ms.store(30_000, Ordering::Relaxed);
        assert_eq!(clock.deadline(timeout, max), start + Duration::from_secs(40));
        clock.last_ms.store(55_000, Ordering::Relaxed);
        assert_eq!(clock.deadline(timeout, max), start + max, "capped at the maximum");
        clock.touch();
        assert_eq!(clock.last_ms.load(Ordering::Relaxed), 55_000, "the clock never goes back");
    }

    #[test]
    fn a_maximum_below_the_timeout_does_not_shorten_it() {
        let clock = ProgressClock::new();
        let start = tokio::time::Instant::from_std(clock.started);
        assert_eq!(clock.deadline(Duration::from_secs(90), Duration::from_secs(60)), start + Duration::from_secs(90));
    }
}
