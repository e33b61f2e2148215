//! Who hears about changes, for every server side: the legacy
//! `resources/subscribe`d URIs of a session and its 2026-07-28
//! `subscriptions/listen` streams with their [`Filter`]s.
//!
//! Invariants: a legacy session hears every list change, and
//! `resources/updated` only for a subscribed URI; a listen stream hears
//! what its filter asked for, tagged with its subscription id (the id of
//! the request that opened it); an id has at most one stream. Where a
//! stream's frames go is the user's `S` (the gateway's outbox of the
//! stream; the demo's one stdout).

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard};

use serde::Serialize;
use serde_json::{json, Value};

use super::listen::{Change, Filter};
use crate::protocol::methods;
use crate::protocol::session::META_SUBSCRIPTION_ID;

/// One open listen stream.
struct Listen<Id, S> {
    id: Id,
    filter: Filter,
    stream: S,
}

pub struct Subscriptions<Id, S> {
    uris: Mutex<BTreeSet<String>>,
    /// In opening order.
    listens: Mutex<Vec<Listen<Id, S>>>,
}

impl<Id, S> Default for Subscriptions<Id, S> {
    fn default() -> Self {
        Subscriptions { uris: Mutex::default(), listens: Mutex::default() }
    }
}

/// A poisoned lock still holds a usable set (each change is one call).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<Id: PartialEq + Serialize, S> Subscriptions<Id, S> {
    /// Records `resources/subscribe` (or, for any other `method`,
    /// `resources/unsubscribe`) of `uri`.
    pub fn record(&self, method: &str, uri: &str) {
        let mut uris = lock(&self.uris);
        if method == methods::RESOURCES_SUBSCRIBE {
            uris.insert(uri.to_owned());
        } else {
            uris.remove(uri);
        }
    }

    /// Opens the listen stream of request `id` (replacing one of the same
    /// id); returns the params of its `notifications/subscriptions/acknowledged`.
    pub fn open(&self, id: Id, filter: Filter, stream: S) -> Value {
        let ack = json!({"_meta": { META_SUBSCRIPTION_ID: id }, "notifications": filter.to_json()});
        let mut listens = lock(&self.listens);
        listens.retain(|open| open.id != id);
        listens.push(Listen { id, filter, stream });
        ack
    }

    /// Ends the listen stream of request `id`; false if there was none.
    pub fn end(&self, id: &Id) -> bool {
        let mut listens = lock(&self.listens);
        let before = listens.len();
        listens.retain(|open| &open.id != id);
        listens.len() < before
    }

    /// Whether request `id` is an open listen stream.
    pub fn is_listening(&self, id: &Id) -> bool {
        lock(&self.listens).iter().any(|open| &open.id == id)
    }

    /// Ends every listen stream.
    pub fn end_all(&self) {
        lock(&self.listens).clear();
    }

    /// Ends the listen streams whose stream is `closed`.
    pub fn end_closed(&self, closed: impl Fn(&S) -> bool) {
        lock(&self.listens).retain(|open| !closed(&open.stream));
    }

    /// Calls `deliver` with the params of each notification announcing
    /// `change` (its method is [`Change::method`]): with `None` for the
    /// session's unsolicited one when it has a `legacy_session`, then with
    /// each listen stream that asked for it.
    pub fn announce(&self, change: &Change, legacy_session: bool, mut deliver: impl FnMut(Option<&S>, Value)) {
        let subscribed = match change {
            Change::Updated(uri) => lock(&self.uris).contains(uri),
            _ => true,
        };
        if legacy_session && subscribed {
            deliver(None, change.params());
        }
        for open in lock(&self.listens).iter().filter(|open| open.filter.wants(change)) {
            let mut params = change.params();
            params["_meta"] = json!({ META_SUBSCRIPTION_ID: open.id });
            deliver(Some(&open.stream), params);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each delivery as (the stream, or "session", and its params).
    fn deliveries(subscriptions: &Subscriptions<u64, &'static str>, change: &Change, legacy: bool) -> Vec<(&'static str, Value)> {
        let mut delivered = Vec::new();
        subscriptions.announce(change, legacy, |stream, params| delivered.push((stream.copied().unwrap_or("session"), params)));
        delivered
    }

    fn filter(notifications: Value) -> Filter {
        Filter::parse(&json!({ "notifications": notifications })).unwrap()
    }

    #[test]
    fn a_listen_stream_is_acknowledged_and_hears_only_what_it_asked() {
        let subscriptions = Subscriptions::default();
        let ack = subscriptions.open(7, filter(json!({"toolsListChanged": true, "resourceSubscriptions": ["demo://counter"]})), "a");
        assert_eq!(
            ack,
            json!({"_meta": {META_SUBSCRIPTION_ID: 7}, "notifications": {"toolsListChanged": true, "resourceSubscriptions": ["demo://counter"]}})
        );
        assert_eq!(deliveries(&subscriptions, &Change::Tools, false), [("a", json!({"_meta": {META_SUBSCRIPTION_ID: 7}}))]);
        assert!(deliveries(&subscriptions, &Change::Prompts, false).is_empty());
        assert!(deliveries(&subscriptions, &Change::Updated("demo://blob".into()), false).is_empty());
        let updated = deliveries(&subscriptions, &Change::Updated("demo://counter".into()), false);
        assert_eq!(updated[0].1["uri"], "demo://counter");
        assert!(subscriptions.is_listening(&7));
        assert!(subscriptions.end(&7) && !subscriptions.end(&7) && !subscriptions.is_listening(&7));
        assert!(deliveries(&subscriptions, &Change::Tools, false).is_empty());
    }

    #[test]
    fn reopening_an_id_replaces_its_stream_and_closed_streams_end() {
        let subscriptions = Subscriptions::default();
        subscriptions.open(1, filter(json!({"toolsListChanged": true})), "old");
        subscriptions.open(1, filter(json!({"toolsListChanged": true})), "new");
        subscriptions.open(2, filter(json!({"toolsListChanged": true})), "other");
        let streams: Vec<_> = deliveries(&subscriptions, &Change::Tools, false).into_iter().map(|(s, _)| s).collect();
        assert_eq!(streams, ["new", "other"]);
        subscriptions.end_closed(|stream| *stream == "other");
        assert_eq!(deliveries(&subscriptions, &Change::Tools, false).len(), 1);
        subscriptions.end_all();
        assert!(deliveries(&subscriptions, &Change::Tools, false).is_empty());
    }

    #[test]
    fn a_legacy_session_hears_list_changes_and_only_subscribed_updates() {
        let subscriptions = Subscriptions::default();
        assert_eq!(deliveries(&subscriptions, &Change::Resources, true), [("session", json!({}))]);
        let counter = Change::Updated("demo://counter".into());
        assert!(deliveries(&subscriptions, &counter, true).is_empty());
        subscriptions.record("resources/subscribe", "demo://counter");
        assert_eq!(deliveries(&subscriptions, &counter, true).len(), 1);
        assert!(deliveries(&subscriptions, &counter, false).is_empty());
        subscriptions.record("resources/unsubscribe", "demo://counter");
        assert!(deliveries(&subscriptions, &counter, true).is_empty());
    }
}
