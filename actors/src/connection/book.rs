//! The call bookkeeping of one connection: requests on the wire (by id),
//! caller calls waiting for a slot, and the lines from the server that
//! could not be matched to any request.
//!
//! Invariants, kept by the methods (the fields are private):
//! - `in_flight` is the number of counted entries (callers' requests) in
//!   `pending`; it is never more than `max_in_flight`;
//! - `queue` holds at most `max_queued` calls;
//! - every entry leaves `pending` or `queue` exactly once, answered or failed.

use std::collections::{HashMap, VecDeque};

use tokio::sync::oneshot;

use super::{Failure, Outcome};
use crate::progress::ProgressRoute;
use crate::protocol::RequestId;

/// How many descriptions of unusable lines are kept for time-out errors.
const UNUSABLE_KEPT: usize = 5;

/// A request on the wire.
pub(super) struct Pending {
    pub(super) reply: oneshot::Sender<Outcome>,
    /// A caller's call: it holds one of the `max_in_flight` slots.
    pub(super) counted: bool,
    /// Where this request's progress notifications go (token = request id).
    pub(super) progress: Option<ProgressRoute>,
    /// How many unusable lines had arrived when it was written.
    unusable_mark: u64,
}

impl Pending {
    pub(super) fn new(reply: oneshot::Sender<Outcome>, counted: bool, progress: Option<ProgressRoute>) -> Pending {
        Pending { reply, counted, progress, unusable_mark: 0 }
    }
}

/// A call admitted but not yet written.
pub(super) struct Queued {
    pub(super) id: RequestId,
    pub(super) frame: Vec<u8>,
    pub(super) reply: oneshot::Sender<Outcome>,
    pub(super) progress: Option<ProgressRoute>,
    /// When it was queued and the span its wait is told to (OpenTelemetry on).
    pub(super) trace: Option<(std::time::Instant, opentelemetry::Context)>,
    /// The tool a `tools/call` calls: checked again when it leaves the
    /// queue, as the tools may have been listed (and some withheld) meanwhile.
    pub(super) tool: Option<String>,
}

#[derive(Default)]
pub(super) struct CallBook {
    pending: HashMap<RequestId, Pending>,
    in_flight: usize,
    queue: VecDeque<Queued>,
    /// Unusable lines seen in this connection's life.
    unusable_seen: u64,
    /// The last few, numbered by `unusable_seen`.
    unusable: VecDeque<(u64, String)>,
}

impl CallBook {
    /// Callers' requests on the wire.
    pub(super) fn in_flight(&self) -> usize {
        self.in_flight
    }

    pub(super) fn queued(&self) -> usize {
        self.queue.len()
    }

    pub(super) fn has_queued(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Records a request written to the server.
    pub(super) fn insert(&mut self, id: RequestId, mut pending: Pending) {
        pending.unusable_mark = self.unusable_seen;
        if pending.counted {
            self.in_flight += 1;
        }
        if let Some(replaced) = self.pending.insert(id, pending) {
            // Ids are never reused; should it happen, the count stays true.
            if replaced.counted {
                self.in_flight -= 1;
            }
        }
    }

    /// Takes a request off the books (answered, failed or forgotten).
    pub(super) fn take(&mut self, id: &RequestId) -> Option<Pending> {
        let pending = self.pending.remove(id)?;
        if pending.counted {
            self.in_flight -= 1;
        }
        Some(pending)
    }

    pub(super) fn get(&self, id: &RequestId) -> Option<&Pending> {
        self.pending.get(id)
    }

    /// The request in flight whose id is `id` written the other way (the
    /// number 4 for the string "4", or the reverse).
    pub(super) fn same_id_other_type(&self, id: &RequestId) -> Option<RequestId> {
        let other = match id {
            RequestId::String(text) => RequestId::Number(text.trim().parse().ok()?),
            RequestId::Number(n) => RequestId::String(n.to_string()),
        };
        self.pending.contains_key(&other).then_some(other)
    }

    /// The only request awaiting an answer, if exactly one is; `besides`
    /// (a long-lived stream such as `subscriptions/listen`) does not count.
    pub(super) fn only_request(&self, besides: Option<&RequestId>) -> Option<RequestId> {
        let mut ids = self.pending.keys().filter(|id| Some(*id) != besides);
        match (ids.next(), ids.next()) {
            (Some(id), None) => Some(id.clone()),
            _ => None,
        }
    }

    /// Fails every request on the wire (queued calls stay queued).
    pub(super) fn fail_all(&mut self, mut failure: impl FnMut() -> Failure) {
        for (_, pending) in self.pending.drain() {
            let _ = pending.reply.send(Err(failure()));
        }
        self.in_flight = 0;
    }

    pub(super) fn enqueue(&mut self, call: Queued) {
        self.queue.push_back(call);
    }

    /// The next queued call whose caller still waits.
    pub(super) fn next_queued(&mut self) -> Option<Queued> {
        while let Some(call) = self.queue.pop_front() {
            if !call.reply.is_closed() {
                return Some(call);
            }
        }
        None
    }

    /// Drops a queued call; whether it was queued.
    pub(super) fn unqueue(&mut self, id: &RequestId) -> bool {
        let at = self.queue.iter().position(|q| &q.id == id);
        at.and_then(|at| self.queue.remove(at)).is_some()
    }

    /// Fails every queued call.
    pub(super) fn fail_queued(&mut self, mut failure: impl FnMut() -> Failure) {
        for call in self.queue.drain(..) {
            let _ = call.reply.send(Err(failure()));
        }
    }

    /// Notes a line that could not be matched to any request.
    pub(super) fn note_unusable(&mut self, description: String) {
        self.unusable_seen += 1;
        if self.unusable.len() == UNUSABLE_KEPT {
            self.unusable.pop_front();
        }
        self.unusable.push_back((self.unusable_seen, description));
    }

    /// The unusable lines (the last few) that arrived while `pending` was on the wire.
    pub(super) fn unusable_during(&self, pending: &Pending) -> Vec<String> {
        self.unusable.iter().filter(|(n, _)| *n > pending.unusable_mark).map(|(_, text)| text.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(counted: bool) -> (Pending, oneshot::Receiver<Outcome>) {
        let (tx, rx) = oneshot::channel();
        (Pending::new(tx, counted, None), rx)
    }

    #[test]
    fn the_in_flight_count_follows_the_counted_requests() {
        let mut book = CallBook::default();
        let (a, _ra) = pending(true);
        let (b, _rb) = pending(false);
        let (c, mut rc) = pending(true);
        book.insert(RequestId::Number(1), a);
        book.insert(RequestId::Number(2), b);
        book.insert(RequestId::Number(3), c);
        assert_eq!(book.in_flight(), 2);
        assert!(book.take(&RequestId::Number(2)).is_some());
        assert_eq!(book.in_flight(), 2);
        assert!(book.take(&RequestId::Number(1)).is_some());
        assert!(book.take(&RequestId::Number(1)).is_none());
        assert_eq!(book.in_flight(), 1);
        assert_eq!(book.only_request(None), Some(RequestId::Number(3)));
        let (d, _rd) = pending(false);
        book.insert(RequestId::Number(4), d);
        assert_eq!(book.only_request(None), None);
        assert_eq!(book.only_request(Some(&RequestId::Number(4))), Some(RequestId::Number(3)));
        assert_eq!(book.same_id_other_type(&RequestId::String("3".into())), Some(RequestId::Number(3)));
        book.fail_all(|| Failure::Stopped);
        assert_eq!(book.in_flight(), 0);
        assert!(matches!(rc.try_recv(), Ok(Err(Failure::Stopped))));
    }

    #[test]
    fn unusable_lines_are_told_to_the_requests_they_came_during() {
        let mut book = CallBook::default();
        book.note_unusable("before".into());
        let (a, _ra) = pending(true);
        book.insert(RequestId::Number(1), a);
        book.note_unusable("during".into());
        let a = book.take(&RequestId::Number(1)).unwrap();
        assert_eq!(book.unusable_during(&a), ["during"]);
    }
}
