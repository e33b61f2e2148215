//! The pool's [`Event`]s as notifications to the gateway's client:
//! `*/list_changed` when a server comes, goes, restarts or changes a list;
//! log messages with the server's name as `logger`; `resources/updated`
//! for the URIs this session subscribed to (and [`STATUS_URI`] when a
//! server's state changes). 2026-07-28 clients hear them on their
//! `subscriptions/listen` streams.

use actix::prelude::*;
use futures::Stream;
use serde_json::json;

use super::GatewaySession;
use crate::actors::Event;
use crate::gateway::listen::Change;
use crate::gateway::names::serves;
use crate::gateway::outbox::Frame;
use crate::gateway::STATUS_URI;
use crate::protocol::methods;
use crate::protocol::session::META_SUBSCRIPTION_ID;
use crate::Handle;

/// The pool's events as a stream (bounded: a session that falls behind
/// loses the oldest, see [`crate::Events`]).
pub fn stream(handle: &Handle) -> impl Stream<Item = Event> {
    futures::stream::unfold(handle.subscribe(), |mut events| async move { events.recv().await.map(|event| (event, events)) })
}

impl StreamHandler<Event> for GatewaySession {
    fn handle(&mut self, event: Event, _: &mut Context<Self>) {
        let server = match &event {
            Event::ServerState { server, .. }
            | Event::Catalog { server, .. }
            | Event::Log { server, .. }
            | Event::ResourceUpdated { server, .. }
            | Event::ListChanged { server, .. } => Some(server.as_str()),
            Event::NameCollision { .. } => None,
        };
        if server.is_some_and(|server| !serves(&self.pool.options, server)) {
            return;
        }
        match event {
            Event::ServerState { .. } => {
                self.pool.routes.invalidate();
                for change in [Change::Tools, Change::Prompts, Change::Resources, Change::Updated(STATUS_URI.into())] {
                    self.announce(change);
                }
            }
            Event::Catalog { added, .. } => {
                self.pool.routes.invalidate();
                self.announce(Change::Tools);
                if added.is_empty() {
                    // Tools only leaving: the server may have been removed, its prompts and resources with it.
                    self.announce(Change::Prompts);
                    self.announce(Change::Resources);
                }
            }
            Event::ListChanged { list, .. } => {
                self.pool.routes.invalidate();
                match list.as_str() {
                    "prompts" => self.announce(Change::Prompts),
                    "resources" => self.announce(Change::Resources),
                    _ => self.announce(Change::Tools),
                }
            }
            Event::Log { server, level, data, .. } => {
                self.notify(methods::LOG_MESSAGE, json!({ "level": level, "logger": server, "data": data }));
            }
            Event::ResourceUpdated { uri, .. } => self.announce(Change::Updated(uri)),
            // The gateway's own names are checked when its tables are built.
            Event::NameCollision { .. } => {}
        }
    }

    fn finished(&mut self, _: &mut Context<Self>) {
        // The runtime stopped: nothing more will happen.
    }
}

impl GatewaySession {
    /// Tells the client about `change`: as an unsolicited notification in
    /// the handshake era (`resources/updated` only for subscribed URIs),
    /// and on every 2026-07-28 listen stream that asked for it, tagged with
    /// its subscription id.
    fn announce(&mut self, change: Change) {
        let subscribed = match &change {
            Change::Updated(uri) => self.pool.subscribed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).contains(uri),
            _ => true,
        };
        if subscribed {
            self.notify(change.method(), change.params());
        }
        self.listens.retain(|listen| !listen.stream.is_closed());
        for listen in self.listens.iter().filter(|listen| listen.filter.wants(&change)) {
            let mut params = change.params();
            params["_meta"] = json!({ META_SUBSCRIPTION_ID: listen.id });
            listen.stream.offer(Frame::notification(change.method(), &params));
        }
    }
}
