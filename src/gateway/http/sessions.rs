//! The `initialize`-era sessions of the HTTP front, by `Mcp-Session-Id`.
//!
//! Invariants:
//! - at most `max` sessions at once: one more is refused, never queued;
//! - a session unused for `idle` (no request in flight, no stream open) is
//!   ended and forgotten: its id then answers 404 and the client
//!   initializes again, as the specification says;
//! - each session keeps its GET stream (stream 0) and at most
//!   [`MAX_STREAMS`] request streams for resumption, each bounded by
//!   [`EventLog`]; the oldest is forgotten first;
//! - ending a session (DELETE, expiry, shutdown) closes its port once:
//!   the gateway session stops and its calls are cancelled.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ring::rand::{SecureRandom, SystemRandom};

use super::event_log::EventLog;
use super::Port;
use crate::gateway::outbox::Outbox;

/// Request streams a session keeps for `Last-Event-ID` resumption.
pub const MAX_STREAMS: usize = 32;

/// One downstream session.
pub struct Session {
    pub id: String,
    pub port: Arc<dyn Port>,
    /// Messages that belong to no request (the GET stream, or the whole
    /// stream of a legacy HTTP+SSE client).
    pub standalone: Arc<EventLog>,
    streams: Mutex<VecDeque<Arc<EventLog>>>,
    next_stream: AtomicU64,
    last_seen: Mutex<Instant>,
    busy: AtomicUsize,
    /// A GET stream is open (one per session).
    pub get_open: AtomicBool,
    /// A legacy HTTP+SSE session's outbox: every message's answers go down its one stream.
    pub legacy_outbox: OnceLock<Outbox>,
    closed: AtomicBool,
}

/// Marks a session in use while it lives.
pub struct Busy(Arc<Session>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.touch();
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Session {
    fn new(id: String, port: Arc<dyn Port>) -> Arc<Session> {
        Arc::new(Session {
            id,
            port,
            standalone: EventLog::new(0),
            streams: Mutex::default(),
            next_stream: AtomicU64::new(1),
            last_seen: Mutex::new(Instant::now()),
            busy: AtomicUsize::new(0),
            get_open: AtomicBool::new(false),
            legacy_outbox: OnceLock::new(),
            closed: AtomicBool::new(false),
        })
    }

    fn touch(&self) {
        *self.last_seen.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// Keeps the session from expiring until the guard is dropped.
    pub fn hold(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.touch();
        Busy(self.clone())
    }

    /// A new request stream, kept for resumption.
    pub fn open_stream(&self) -> Arc<EventLog> {
        let log = EventLog::new(self.next_stream.fetch_add(1, Ordering::Relaxed));
        let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        if streams.len() >= MAX_STREAMS {
            streams.pop_front();
        }
        streams.push_back(log.clone());
        log
    }

    /// The stream numbered `stream` (0: the GET stream), if still kept.
    pub fn stream(&self, stream: u64) -> Option<Arc<EventLog>> {
        if stream == 0 {
            return Some(self.standalone.clone());
        }
        self.streams.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|log| log.stream() == stream).cloned()
    }

    /// Ends the session: its streams close and its gateway session stops. Idempotent.
    pub fn end(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.standalone.close();
        self.port.close();
    }

    fn idle_for(&self, now: Instant) -> Option<Duration> {
        let last = *self.last_seen.lock().unwrap_or_else(|p| p.into_inner());
        (self.busy.load(Ordering::Acquire) == 0).then(|| now.saturating_duration_since(last))
    }
}

/// Why a session could not be opened.
#[derive(Debug, PartialEq, Eq)]
pub struct Full {
    pub max: usize,
}

/// The system's random generator failed: no session id can be made.
#[derive(Debug)]
pub struct NoRandom;

/// Every live session.
pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
    max: usize,
    idle: Duration,
    random: SystemRandom,
    /// Sessions opened so far: the number in each one's caller label.
    opened: std::sync::atomic::AtomicU64,
}

/// Fills `bytes` from `random`; the `fault-injection` feature can make it fail.
fn fill_random(random: &SystemRandom, bytes: &mut [u8]) -> Result<(), NoRandom> {
    #[cfg(feature = "fault-injection")]
    if std::env::var_os("MCPVISOR_FAULT_NO_RANDOM").is_some() {
        return Err(NoRandom);
    }
    random.fill(bytes).map_err(|_| NoRandom)
}

impl Sessions {
    pub fn new(max: usize, idle: Duration) -> Sessions {
        Sessions { map: Mutex::default(), max, idle, random: SystemRandom::new(), opened: Default::default() }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A fresh id: 128 bits of the operating system's generator, hex
    /// (visible ASCII, as the specification requires). An id is a
    /// capability, so there is no weaker fallback: without the system's
    /// generator no session opens.
    pub fn new_id(&self) -> Result<String, NoRandom> {
        let mut bytes = [0u8; 16];
        fill_random(&self.random, &mut bytes)?;
        Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
    }

    /// The caller label of the next session (`http:session-N`): what the
    /// audit log and the task store know it by instead of its id.
    pub fn next_caller(&self) -> String {
        let number = self.opened.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        format!("http:session-{number}")
    }

    /// Whether one more session may open (idle ones are ended to make room).
    pub fn has_room(&self) -> Result<(), Full> {
        if self.map().len() >= self.max {
            self.expire();
        }
        match self.map().len() < self.max {
            true => Ok(()),
            false => Err(Full { max: self.max }),
        }
    }

    /// Keeps a session `id` (from [`Sessions::new_id`]) around `port`,
    /// unless there are `max` already (then the port is closed).
    pub fn insert(&self, id: String, port: Arc<dyn Port>) -> Result<Arc<Session>, Full> {
        let mut map = self.map();
        if map.len() >= self.max {
            port.close();
            return Err(Full { max: self.max });
        }
        let session = Session::new(id, port);
        map.insert(session.id.clone(), session.clone());
        Ok(session)
    }

    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.map().get(id.trim()).cloned()
    }

    /// Forgets and ends the session `id`; `false` when there is none.
    pub fn end(&self, id: &str) -> bool {
        let session = self.map().remove(id.trim());
        session.map(|session| session.end()).is_some()
    }

    /// Ends every session idle for longer than the limit; how many.
    pub fn expire(&self) -> usize {
        let now = Instant::now();
        let expired: Vec<Arc<Session>> = {
            let mut map = self.map();
            let ids: Vec<String> =
                map.iter().filter(|(_, s)| s.idle_for(now).is_some_and(|idle| idle > self.idle)).map(|(id, _)| id.clone()).collect();
            ids.iter().filter_map(|id| map.remove(id)).collect()
        };
        expired.iter().for_each(|session| session.end());
        expired.len()
    }

    /// Ends every session (shutdown).
    pub fn end_all(&self) {
        let all: Vec<Arc<Session>> = self.map().drain().map(|(_, session)| session).collect();
        all.iter().for_each(|session| session.end());
    }

    pub(super) fn len(&self) -> usize {
        self.map().len()
    }

    /// How often idle sessions are looked for.
    pub fn sweep_every(&self) -> Duration {
        (self.idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(30))
    }
}
