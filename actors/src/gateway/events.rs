//! The pool's [`Event`]s as notifications to the gateway's client (the
//! routing tables watch the same events themselves: see
//! [`crate::gateway::names::RoutesCache::watch`]):
//! `*/list_changed` when a server comes, goes, is back from a restart or
//! changes a list (not when it goes down to restart: the tables keep its
//! last listing meanwhile, see [`super::names`]);
//! log messages at or above the session's level ([`super::logs`]), with the
//! server's name as `logger`; `resources/updated`
//! for the URIs this session subscribed to (and [`STATUS_URI`] when a
//! server's state changes). 2026-07-28 clients hear them on their
//! `subscriptions/listen` streams, which are opened here too.
//!
//! Invariant: a server's events reach a session only if its caller may
//! use something of that server ([`super::audience`]), the verdict of the
//! lists.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use futures::Stream;

use tokio::sync::OwnedSemaphorePermit;

use super::{GatewaySession, Open};
use crate::gateway::names::serves;
use crate::handle::Handle;
use crate::protocol::{methods, RequestId};
use crate::server::listen::{Change, Filter};
use crate::server::outbox::{Frame, Outbox};
use crate::server::STATUS_URI;
use crate::Event;

/// The pool's events as a stream (bounded: a session that falls behind
/// loses the oldest, see [`crate::handle::Events`]).
pub fn stream(handle: &Handle) -> impl Stream<Item = Event> {
    futures::stream::unfold(handle.subscribe(), |mut events| async move { events.recv().await.map(|event| (event, events)) })
}

impl StreamHandler<Event> for GatewaySession {
    fn handle(&mut self, event: Event, ctx: &mut Context<Self>) {
        let server = match &event {
            Event::ServerState { server, .. }
            | Event::Catalog { server, .. }
            | Event::Log { server, .. }
            | Event::ResourceUpdated { server, .. }
            | Event::ListChanged { server, .. }
            | Event::ToolAccepted { server, .. } => Some(server.as_str()),
            Event::NameCollision { .. } | Event::ActorPanicked { .. } => None,
        };
        if server.is_some_and(|server| !serves(&self.pool.options, server) || !self.hears_from(server, ctx)) {
            return;
        }
        match event {
            Event::ServerState { state, .. } => {
                // A server going down keeps its last listing in the tables
                // while it comes back: its lists change (or may have) when it
                // is back, fails, or is turned off, not when it goes down.
                if state.is_settled() {
                    for change in [Change::Tools, Change::Prompts, Change::Resources] {
                        self.soon(change, ctx);
                    }
                }
                self.announce(Change::Updated(STATUS_URI.into()));
            }
            Event::Catalog { added, .. } => {
                self.soon(Change::Tools, ctx);
                if added.is_empty() {
                    // Tools only leaving: the server may have been removed, its prompts and resources with it.
                    self.soon(Change::Prompts, ctx);
                    self.soon(Change::Resources, ctx);
                }
            }
            Event::ListChanged { list, .. } => {
                let change = match list.as_str() {
                    "prompts" => Change::Prompts,
                    "resources" => Change::Resources,
                    _ => Change::Tools,
                };
                self.soon(change, ctx);
            }
            Event::Log { server, level, data, .. } => {
                if self.pool.log_level.passes(&level) {
                    self.notify(methods::LOG_MESSAGE, super::logs::message(&server, &level, &data));
                }
            }
            Event::ResourceUpdated { uri, .. } => self.announce(Change::Updated(uri)),
            // The gateway's own names are checked when its tables are built.
            // A caught panic is the operator's news (logs, /healthz), not the client's.
            // An accepted change reaches clients as the catalog's change.
            Event::NameCollision { .. } | Event::ActorPanicked { .. } | Event::ToolAccepted { .. } => {}
        }
    }

    fn finished(&mut self, _: &mut Context<Self>) {
        // The runtime stopped: nothing more will happen.
    }
}

/// How long list changes are gathered before they are announced: a
/// restart or a reload changes many lists at once, and each announcement
/// makes a client list again.
const COALESCE: Duration = Duration::from_millis(50);

impl GatewaySession {
    pub(super) fn hear_events(&mut self, ctx: &mut Context<Self>) {
        if !std::mem::replace(&mut self.hears_events, true) {
            ctx.add_stream(stream(&self.pool.handle));
        }
    }

    /// Opens a listen stream: acknowledged on it, then fed by the pool's events.
    /// A `subscriptions/listen` request is never answered: it stays open
    /// (and holds its slot) until the client cancels it or goes away.
    pub(super) fn listen(&mut self, id: RequestId, filter: Filter, stream: Outbox, permit: OwnedSemaphorePermit, ctx: &mut Context<Self>) {
        self.hear_events(ctx);
        let uris = filter.uris().cloned().collect();
        let ack = self.pool.subscriptions.open(id.clone(), filter, stream.clone());
        let ack = Frame::notification(methods::SUBSCRIPTIONS_ACKNOWLEDGED, &ack);
        let (answer_to, pool) = (stream.clone(), self.pool.clone());
        let work = ctx.spawn(
            async move {
                pool.watch(uris).await;
                answer_to.send(ack).await;
                // Open until cancelled: the slot is released when the listen ends.
                let _held = permit;
                std::future::pending::<()>().await
            }
            .into_actor(self),
        );
        self.open.insert(id, Open { work, server: Arc::default(), stream, asks: None });
    }

    /// Announces a list change within [`COALESCE`], once however often it happened meanwhile.
    fn soon(&mut self, change: Change, ctx: &mut Context<Self>) {
        if self.coalescing.is_empty() {
            ctx.run_later(COALESCE, |session, _| {
                for change in std::mem::take(&mut session.coalescing) {
                    session.announce(change);
                }
            });
        }
        if !self.coalescing.contains(&change) {
            self.coalescing.push(change);
        }
    }

    /// Tells the client about `change`: as an unsolicited notification in
    /// the handshake era (`resources/updated` only for subscribed URIs),
    /// and on every 2026-07-28 listen stream that asked for it, tagged with
    /// its subscription id.
    fn announce(&mut self, change: Change) {
        let subscriptions = self.pool.subscriptions.clone();
        subscriptions.end_closed(Outbox::is_closed);
        let mut unsolicited = None;
        subscriptions.announce(&change, true, |stream, params| match stream {
            Some(stream) => {
                stream.offer(Frame::notification(change.method(), &params));
            }
            None => unsolicited = Some(params),
        });
        if let Some(params) = unsolicited {
            self.notify(change.method(), params);
        }
    }
}
