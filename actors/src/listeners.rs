//! The listeners: the channels of `Handle::subscribe`, which the Hub and
//! the Registry send their events into as they publish them.
//!
//! Invariants:
//! - a listener is in place when `add` returns, so every event published
//!   after it (the events of an operation started after subscribing) is
//!   heard: the list is written and read under one lock;
//! - only the Hub and the Registry hold the list; a `Handle` holds it
//!   weakly, so once both actors are gone (the runtime stopped) every
//!   channel closes and a new subscription is closed from the start;
//! - publishing never waits: a channel drops its oldest events for a reader
//!   that lags (see `Events`);
//! - a listener whose reader is gone leaves at the next `add` or publish,
//!   so the list holds at most the readers alive at the last `add`.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::broadcast;

use super::Event;

type Senders = Mutex<Vec<broadcast::Sender<Event>>>;

/// The listeners, as the actors that publish hold them.
#[derive(Clone, Default)]
#[doc(hidden)]
pub struct Listeners(Arc<Senders>);

impl Listeners {
    /// The side a `Handle` keeps.
    #[doc(hidden)]
    pub fn adder(&self) -> ListenerAdder {
        ListenerAdder(Arc::downgrade(&self.0))
    }

    /// Sends `event` to every listener.
    pub(super) fn publish(&self, event: &Event) {
        let senders = live(&self.0);
        for sender in senders.iter() {
            // Fails only for a reader gone since the line above.
            let _ = sender.send(event.clone());
        }
    }
}

/// Adds listeners while the runtime runs.
#[derive(Clone)]
#[doc(hidden)]
pub struct ListenerAdder(Weak<Senders>);

impl ListenerAdder {
    /// A new listener holding at most `capacity` unread events; closed at
    /// once when the runtime has stopped.
    pub(crate) fn add(&self, capacity: usize) -> broadcast::Receiver<Event> {
        let (sender, receiver) = broadcast::channel(capacity);
        if let Some(senders) = self.0.upgrade() {
            live(&senders).push(sender);
        }
        receiver
    }
}

/// The list, locked, without the listeners whose readers are gone.
fn live(senders: &Senders) -> MutexGuard<'_, Vec<broadcast::Sender<Event>>> {
    let mut senders = lock(senders);
    senders.retain(|sender| sender.receiver_count() > 0);
    senders
}

// A panic elsewhere while the lock was held leaves a whole list: each write is one operation on it.
fn lock(senders: &Senders) -> MutexGuard<'_, Vec<broadcast::Sender<Event>>> {
    senders.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ServerState;

    fn event(server: &str) -> Event {
        Event::ServerState { server: server.into(), state: ServerState::Connected }
    }

    #[test]
    fn a_listener_hears_what_is_published_after_it_is_added_and_closes_with_the_list() {
        let listeners = Listeners::default();
        let adder = listeners.adder();
        listeners.publish(&event("before"));
        let mut heard = adder.add(4);
        listeners.publish(&event("after"));
        assert!(matches!(heard.try_recv(), Ok(Event::ServerState { server, .. }) if server == "after"));
        drop(listeners);
        assert_eq!(heard.try_recv(), Err(broadcast::error::TryRecvError::Closed));
        let mut late = adder.add(4);
        assert_eq!(late.try_recv(), Err(broadcast::error::TryRecvError::Closed));
    }

    #[test]
    fn listeners_whose_readers_are_gone_leave_the_list() {
        let listeners = Listeners::default();
        let adder = listeners.adder();
        for _ in 0..100 {
            drop(adder.add(4));
        }
        let _kept = adder.add(4);
        assert_eq!(lock(&listeners.0).len(), 1);
        drop(_kept);
        listeners.publish(&event("s"));
        assert_eq!(lock(&listeners.0).len(), 0);
    }
}
