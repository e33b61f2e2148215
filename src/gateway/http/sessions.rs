//! The `initialize`-era sessions of the HTTP front, by `Mcp-Session-Id`.
//!
//! Invariants:
//! - at most `max` sessions at once, and `limits.sessions_per_client` of
//!   one client: one more is refused, never queued. A client at its own
//!   bound (while the table has room) gets room by ending its own oldest
//!   idle session, never another client's;
//! - a session unused for `idle` (no request in flight, no stream open) is
//!   ended and forgotten: its id then answers 404 and the client
//!   initializes again, as the specification says;
//! - each session keeps its GET stream (stream 0) and at most
//!   [`MAX_STREAMS`] request streams for resumption, each bounded by
//!   [`EventLog`]; the oldest is forgotten first, and streams read to
//!   their end are forgotten at once;
//! - the bytes a session's streams keep stay within
//!   `limits.buffer_per_session`, and all sessions' within
//!   `limits.buffer_total` ([`Sessions::trim`]): the session's oldest
//!   events go first, and past the total those of the session keeping the
//!   most; the newest event of the stream being written is never dropped
//!   (its reader may still be reading it);
//! - ending a session (DELETE, expiry, shutdown) closes its port once:
//!   the gateway session stops and its calls are cancelled.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ring::rand::{SecureRandom, SystemRandom};

use super::event_log::{Budget, EventLog};
use super::limits::{Bound, ClientKey, Limits, Refused};
use super::Port;
use crate::identity::Identity;
use crate::server::outbox::Outbox;

/// Request streams a session keeps for `Last-Event-ID` resumption.
pub const MAX_STREAMS: usize = 32;

/// One downstream session.
pub struct Session {
    pub id: String,
    pub port: Arc<dyn Port>,
    /// Whose session it is (the per-client bound counts it).
    client: ClientKey,
    /// The caller that opened it; only the same caller may use it.
    identity: Option<Arc<Identity>>,
    /// The bytes its streams keep.
    budget: Arc<Budget>,
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
    fn new(id: String, port: Arc<dyn Port>, client: ClientKey, identity: Option<Arc<Identity>>, budget: Arc<Budget>) -> Arc<Session> {
        Arc::new(Session {
            id,
            port,
            client,
            identity,
            standalone: EventLog::counted(0, Some(budget.clone())),
            budget,
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

    fn streams(&self) -> std::sync::MutexGuard<'_, VecDeque<Arc<EventLog>>> {
        self.streams.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new request stream, kept for resumption.
    pub fn open_stream(&self) -> Arc<EventLog> {
        let log = EventLog::counted(self.next_stream.fetch_add(1, Ordering::Relaxed), Some(self.budget.clone()));
        let mut streams = self.streams();
        streams.retain(|stream| !stream.is_spent());
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
        self.streams().iter().find(|log| log.stream() == stream).cloned()
    }

    /// Whether `stream` was opened here (it may be forgotten since).
    pub fn opened(&self, stream: u64) -> bool {
        stream < self.next_stream.load(Ordering::Relaxed)
    }

    /// Drops the oldest event of the session's streams, but not the newest
    /// of `writing`; `false` when nothing could be dropped.
    fn evict_oldest(&self, writing: Option<&Arc<EventLog>>) -> bool {
        let streams = self.streams();
        let oldest = std::iter::once(&self.standalone)
            .chain(streams.iter())
            .filter_map(|log| {
                let keep_newest = writing.is_some_and(|writing| Arc::ptr_eq(writing, log));
                log.oldest_stamp(keep_newest).map(|stamp| (stamp, log, keep_newest))
            })
            .min_by_key(|(stamp, _, _)| *stamp);
        oldest.is_some_and(|(_, log, keep_newest)| log.evict_oldest(keep_newest))
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

/// The system's random generator failed: no session id can be made.
#[derive(Debug)]
pub struct NoRandom;

/// Every live session.
pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
    max: usize,
    limits: Limits,
    /// Bytes every session's streams keep.
    buffered: Arc<AtomicUsize>,
    idle: Duration,
    random: SystemRandom,
    /// What every id begins with: `REPLICA.` when the replica is named, else nothing.
    id_prefix: String,
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
    /// `replica` (a checked [`super::replica_name`]) begins every id, so an
    /// ingress can route a session to the replica that opened it.
    pub fn new(max: usize, idle: Duration, limits: Limits, replica: Option<&str>) -> Sessions {
        let limits = Limits { sessions_per_client: limits.sessions_per_client.clamp(1, max), ..limits };
        Sessions {
            map: Mutex::default(),
            max,
            limits,
            buffered: Arc::default(),
            idle,
            random: SystemRandom::new(),
            id_prefix: replica.map(|name| format!("{name}.")).unwrap_or_default(),
            opened: Default::default(),
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A fresh id: the replica's prefix, then 128 bits of the operating
    /// system's generator, hex (visible ASCII, as the specification
    /// requires). An id is a capability, so there is no weaker fallback:
    /// without the system's generator no session opens. The prefix is not
    /// secret; the random part alone makes the id unguessable.
    pub fn new_id(&self) -> Result<String, NoRandom> {
        let mut bytes = [0u8; 16];
        fill_random(&self.random, &mut bytes)?;
        Ok(bytes.iter().fold(self.id_prefix.clone(), |mut id, byte| {
            id.push_str(&format!("{byte:02x}"));
            id
        }))
    }

    /// The caller label of the next session (`http:session-N`): what the
    /// audit log and the task store know it by instead of its id.
    pub fn next_caller(&self) -> String {
        let number = self.opened.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        format!("http:session-{number}")
    }

    /// Whether `client` may open one more session: expired ones are
    /// ended to make room, and, when the client is at its own bound, its
    /// oldest idle session.
    pub fn has_room(&self, client: &ClientKey) -> Result<(), Refused> {
        if self.map().len() >= self.max {
            self.expire();
        }
        let ended = {
            let mut map = self.map();
            if map.len() >= self.max {
                return Err(Refused { bound: Bound::Sessions, limit: self.max });
            }
            let now = Instant::now();
            let mine = map.values().filter(|session| session.client == *client);
            match mine.clone().count() >= self.limits.sessions_per_client {
                false => None,
                true => {
                    let idle = mine.filter_map(|session| Some((session.idle_for(now)?, session.id.clone()))).max();
                    let Some((_, id)) = idle else {
                        return Err(Refused { bound: Bound::SessionsPerClient, limit: self.limits.sessions_per_client });
                    };
                    map.remove(&id)
                }
            }
        };
        if let Some(session) = ended {
            tracing::info!(
                "a client at its bound of {} sessions opened another: its oldest idle session ended",
                self.limits.sessions_per_client
            );
            session.end();
        }
        Ok(())
    }

    /// The bound one more session of `client` would pass, if any.
    fn refusal(&self, map: &HashMap<String, Arc<Session>>, client: &ClientKey) -> Result<(), Refused> {
        if map.len() >= self.max {
            return Err(Refused { bound: Bound::Sessions, limit: self.max });
        }
        let mine = map.values().filter(|session| session.client == *client).count();
        match mine >= self.limits.sessions_per_client {
            true => Err(Refused { bound: Bound::SessionsPerClient, limit: self.limits.sessions_per_client }),
            false => Ok(()),
        }
    }

    /// Keeps a session `id` (from [`Sessions::new_id`]) of `client` around
    /// `port`, unless a bound is reached meanwhile (then the port is closed).
    pub fn insert(
        &self,
        id: String,
        port: Arc<dyn Port>,
        client: ClientKey,
        identity: Option<Arc<Identity>>,
    ) -> Result<Arc<Session>, Refused> {
        let mut map = self.map();
        if let Err(refused) = self.refusal(&map, &client) {
            port.close();
            return Err(refused);
        }
        let session = Session::new(id, port, client, identity, Budget::new(self.buffered.clone()));
        map.insert(session.id.clone(), session.clone());
        Ok(session)
    }

    /// Drops the oldest kept events until `session` is within its bound
    /// and every session within the total; `writing` (the stream just
    /// written) keeps its newest event.
    pub fn trim(&self, session: &Session, writing: &Arc<EventLog>) {
        while session.budget.session() > self.limits.buffer_per_session {
            if !session.evict_oldest(Some(writing)) {
                break;
            }
        }
        while self.buffered() > self.limits.buffer_total {
            let mut all: Vec<Arc<Session>> = self.map().values().cloned().collect();
            all.sort_by_key(|other| std::cmp::Reverse(other.budget.session()));
            let evicted = all.iter().any(|other| other.evict_oldest(std::ptr::eq(Arc::as_ptr(other), session).then_some(writing)));
            if !evicted {
                break;
            }
        }
    }

    /// The bounds sessions are kept within.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Bytes every session's streams keep now.
    pub fn buffered(&self) -> usize {
        self.buffered.load(Ordering::Acquire)
    }

    /// The live session `id`. A session whose actor is gone (closed
    /// after a panic) is forgotten here, so its client gets 404 and starts
    /// a new one instead of errors until it idles out.
    /// Another caller's session is not found either: a session id that
    /// leaked is no use without its opener's credentials.
    pub fn get(&self, id: &str, caller: Option<&Identity>) -> Option<Arc<Session>> {
        let session = self.map().get(id.trim()).cloned()?;
        let same_caller = match (session.identity.as_deref(), caller) {
            (None, None) => true,
            (Some(opener), Some(caller)) => opener.same_caller(caller),
            _ => false,
        };
        if !same_caller {
            return None;
        }
        if session.port.is_open() {
            return Some(session);
        }
        self.end(id);
        None
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

    /// Sends `message` (a notification's JSON text) down the GET stream of
    /// every session of `caller` (`Identity::caller_key`); how many.
    pub fn notify_caller(&self, caller: &str, message: &str) -> usize {
        let theirs: Vec<Arc<Session>> = self
            .map()
            .values()
            .filter(|session| session.identity.as_ref().is_some_and(|identity| identity.caller_key() == caller))
            .cloned()
            .collect();
        for session in &theirs {
            session.standalone.push(message.into());
            self.trim(session, &session.standalone);
        }
        theirs.len()
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
