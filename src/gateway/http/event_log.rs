//! One server-sent-event stream of a session, kept so it can be resumed.
//!
//! Each stream (a POST's answer, the session's GET stream) appends its
//! messages to an [`EventLog`]; HTTP responses read it from a cursor. Event
//! ids are `{stream}:{seq}`, so a `Last-Event-ID` names both the stream and
//! the position to resume after.
//!
//! Invariants:
//! - a log holds at most [`MAX_EVENTS`] events and [`MAX_BYTES`] bytes
//!   (the newest event is always kept): a client that stops reading never
//!   makes memory grow; a reader that fell behind the oldest kept event
//!   skips to it (it misses the oldest notifications, never the answer,
//!   which is a request stream's last event);
//! - appending never waits for a reader;
//! - what a client confirmed it read is dropped by a releasing reader:
//!   the events before where it starts (a `Last-Event-ID` names the last
//!   one the client has), and the whole log once the reader reached its
//!   end (the stream ended normally, its answer last, handed whole to the
//!   HTTP layer); a reader that is dropped before the end releases nothing
//!   more, so a broken or stalled stream stays resumable;
//! - a log of a session counts its bytes in the session's [`Budget`];
//!   the session drops its oldest events ([`EventLog::evict_oldest`]) to
//!   stay within it, and a resumption that asks for an event dropped so is
//!   told ([`EventLog::lost`]), never served a stream with a hole.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// Most events one stream keeps for resumption.
pub const MAX_EVENTS: usize = 256;
/// Most bytes of event data one stream keeps for resumption.
pub const MAX_BYTES: usize = 4 * 1024 * 1024;

/// One event read from a log: its id and its JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedEvent {
    pub id: String,
    pub data: Arc<str>,
}

/// Orders events across every log: the oldest has the smallest stamp.
static STAMPS: AtomicU64 = AtomicU64::new(0);

/// Bytes of events kept: one session's, and every session's together.
#[derive(Debug, Default)]
pub struct Budget {
    session: AtomicUsize,
    total: Arc<AtomicUsize>,
}

impl Budget {
    /// A session's budget, counting also in `total`.
    pub fn new(total: Arc<AtomicUsize>) -> Arc<Budget> {
        Arc::new(Budget { session: AtomicUsize::new(0), total })
    }

    /// Bytes the session keeps now.
    pub fn session(&self) -> usize {
        self.session.load(Ordering::Acquire)
    }

    fn add(&self, bytes: usize) {
        self.session.fetch_add(bytes, Ordering::AcqRel);
        self.total.fetch_add(bytes, Ordering::AcqRel);
    }

    fn remove(&self, bytes: usize) {
        self.session.fetch_sub(bytes, Ordering::AcqRel);
        self.total.fetch_sub(bytes, Ordering::AcqRel);
    }
}

#[derive(Debug, Default)]
struct Inner {
    /// The sequence number of `events[0]`.
    first_seq: u64,
    /// Each event with its stamp.
    events: VecDeque<(u64, Arc<str>)>,
    bytes: usize,
    closed: bool,
    /// How far a reader of the GET stream got: where the next one starts.
    delivered: u64,
    /// Events before this one were dropped to keep within the session's budget.
    lost_before: u64,
}

/// A bounded, replayable stream of JSON-RPC messages (see the module docs).
#[derive(Debug)]
pub struct EventLog {
    stream: u64,
    inner: Mutex<Inner>,
    changed: watch::Sender<()>,
    budget: Option<Arc<Budget>>,
}

impl Drop for EventLog {
    fn drop(&mut self) {
        if let Some(budget) = &self.budget {
            budget.remove(self.lock().bytes);
        }
    }
}

impl EventLog {
    /// A log of no session (a stateless request's): nothing counts it.
    pub fn new(stream: u64) -> Arc<EventLog> {
        EventLog::counted(stream, None)
    }

    /// A log whose bytes count in `budget`.
    pub fn counted(stream: u64, budget: Option<Arc<Budget>>) -> Arc<EventLog> {
        Arc::new(EventLog { stream, inner: Mutex::default(), changed: watch::channel(()).0, budget })
    }

    /// Drops the oldest event; its bytes leave the budget.
    fn drop_front(&self, inner: &mut Inner) {
        if let Some((_, dropped)) = inner.events.pop_front() {
            inner.bytes -= dropped.len();
            inner.first_seq += 1;
            if let Some(budget) = &self.budget {
                budget.remove(dropped.len());
            }
        }
    }

    /// The stream's number, the first part of its event ids.
    pub fn stream(&self) -> u64 {
        self.stream
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Appends one message, dropping the oldest ones past the bounds.
    pub fn push(&self, data: Arc<str>) {
        {
            let mut inner = self.lock();
            if inner.closed {
                return;
            }
            inner.bytes += data.len();
            if let Some(budget) = &self.budget {
                budget.add(data.len());
            }
            inner.events.push_back((STAMPS.fetch_add(1, Ordering::Relaxed), data));
            while inner.events.len() > MAX_EVENTS || (inner.bytes > MAX_BYTES && inner.events.len() > 1) {
                self.drop_front(&mut inner);
            }
        }
        self.changed.send_replace(());
    }

    /// The stamp of the oldest event kept, `None` when there is none
    /// (or only the newest, when `keep_newest`).
    pub fn oldest_stamp(&self, keep_newest: bool) -> Option<u64> {
        let inner = self.lock();
        let spare = if keep_newest { 1 } else { 0 };
        (inner.events.len() > spare).then(|| inner.events.front().map(|(stamp, _)| *stamp)).flatten()
    }

    /// Drops the oldest event to make room in the budget (see
    /// [`EventLog::oldest_stamp`]); `false` when there was none to drop.
    pub fn evict_oldest(&self, keep_newest: bool) -> bool {
        let mut inner = self.lock();
        if inner.events.len() <= usize::from(keep_newest) {
            return false;
        }
        self.drop_front(&mut inner);
        inner.lost_before = inner.first_seq;
        true
    }

    /// Drops the events before `seq`: a reader took them on a stream that was not broken.
    pub fn release_before(&self, seq: u64) {
        let mut inner = self.lock();
        while inner.first_seq < seq && !inner.events.is_empty() {
            self.drop_front(&mut inner);
        }
    }

    /// Whether a reader starting at `seq` would miss events dropped to keep within the budget.
    pub fn lost(&self, seq: u64) -> bool {
        seq < self.lock().lost_before
    }

    /// Closed, and every event read or dropped: nothing left to resume.
    pub fn is_spent(&self) -> bool {
        let inner = self.lock();
        inner.closed && inner.events.is_empty() && inner.lost_before < inner.first_seq
    }

    /// Ends the stream: readers finish once they have read every event.
    pub fn close(&self) {
        self.lock().closed = true;
        self.changed.send_replace(());
    }

    /// The event at `seq` (or the oldest kept one after it), `Ok(None)`
    /// when there is none yet, `Err(())` when there is none and the log is closed.
    fn at(&self, seq: u64) -> Result<Option<(u64, LoggedEvent)>, ()> {
        let inner = self.lock();
        let seq = seq.max(inner.first_seq);
        match inner.events.get((seq - inner.first_seq) as usize) {
            Some((_, data)) => Ok(Some((seq, LoggedEvent { id: format!("{}:{seq}", self.stream), data: data.clone() }))),
            None if inner.closed => Err(()),
            None => Ok(None),
        }
    }

    /// Every event from `seq` on, then the live ones until the log closes.
    /// A `releasing` reader drops the events before `seq` at once, and
    /// every event once it reaches the end (see the module docs).
    pub fn read_from(self: &Arc<Self>, seq: u64, releasing: bool) -> impl futures::Stream<Item = LoggedEvent> + Send + 'static {
        if releasing {
            self.release_before(seq);
        }
        let log = self.clone();
        let changed = self.changed.subscribe();
        futures::stream::unfold((log, changed, seq), move |(log, mut changed, seq)| async move {
            loop {
                changed.borrow_and_update();
                match log.at(seq) {
                    Ok(Some((at, event))) => return Some((event, (log, changed, at + 1))),
                    Err(()) => {
                        if releasing {
                            log.release_before(u64::MAX);
                        }
                        return None;
                    }
                    Ok(None) => changed.changed().await.ok()?,
                }
            }
        })
    }

    /// Where the next reader of the GET stream starts: after the last event
    /// a previous reader took.
    pub fn undelivered(&self) -> u64 {
        self.lock().delivered
    }

    /// Records that a reader of the GET stream took the event with `seq`.
    pub fn mark_delivered(&self, seq: u64) {
        let mut inner = self.lock();
        inner.delivered = inner.delivered.max(seq + 1);
    }
}

/// The stream and position an event id names, `None` when it is not ours.
pub fn parse_event_id(id: &str) -> Option<(u64, u64)> {
    let (stream, seq) = id.trim().split_once(':')?;
    Some((stream.parse().ok()?, seq.parse().ok()?))
}

/// The sequence number of an event id this module made.
pub fn seq_of(event: &LoggedEvent) -> u64 {
    parse_event_id(&event.id).map_or(0, |(_, seq)| seq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[tokio::test]
    async fn a_reader_resumes_after_an_id_and_ends_with_the_log() {
        let log = EventLog::new(3);
        for text in ["a", "b", "c"] {
            log.push(text.into());
        }
        log.close();
        let read: Vec<LoggedEvent> = log.read_from(1, false).collect().await;
        assert_eq!(read.iter().map(|e| (e.id.as_str(), &*e.data)).collect::<Vec<_>>(), [("3:1", "b"), ("3:2", "c")]);
        assert_eq!(parse_event_id(" 3:2 "), Some((3, 2)));
        assert_eq!(parse_event_id("x"), None);
    }

    #[tokio::test]
    async fn the_log_stays_bounded_and_keeps_the_newest() {
        let log = EventLog::new(0);
        for n in 0..(MAX_EVENTS + 10) {
            log.push(n.to_string().into());
        }
        log.close();
        let read: Vec<LoggedEvent> = log.read_from(0, false).collect().await;
        assert_eq!(read.len(), MAX_EVENTS);
        assert_eq!(&*read.last().unwrap().data, (MAX_EVENTS + 9).to_string());
        let big: Arc<str> = "x".repeat(MAX_BYTES).into();
        let log = EventLog::new(1);
        log.push("small".into());
        log.push(big.clone());
        log.close();
        let read: Vec<LoggedEvent> = log.read_from(0, false).collect().await;
        assert_eq!(read.len(), 1, "the oldest event went to make room");
    }

    #[tokio::test]
    async fn a_live_reader_sees_later_events() {
        let log = EventLog::new(0);
        let mut reader = Box::pin(log.read_from(0, false));
        let writer = log.clone();
        tokio::spawn(async move {
            writer.push("late".into());
            writer.close();
        });
        assert_eq!(&*reader.next().await.unwrap().data, "late");
        assert!(reader.next().await.is_none());
    }
}
