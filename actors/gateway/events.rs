//! The pool's [`Event`]s as notifications to the gateway's client:
//! `*/list_changed` when a server comes, goes, restarts or changes a list;
//! log messages with the server's name as `logger`; `resources/updated`
//! for the URIs this session subscribed to (and [`STATUS_URI`] when a
//! server's state changes).

use actix::prelude::*;
use futures::Stream;
use serde_json::json;

use super::GatewaySession;
use crate::actors::Event;
use crate::gateway::names::serves;
use crate::gateway::STATUS_URI;
use crate::protocol::methods;
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
                for method in [methods::TOOLS_LIST_CHANGED, methods::PROMPTS_LIST_CHANGED, methods::RESOURCES_LIST_CHANGED] {
                    self.notify(method, json!({}));
                }
                self.updated(STATUS_URI);
            }
            Event::Catalog { added, .. } => {
                self.pool.routes.invalidate();
                self.notify(methods::TOOLS_LIST_CHANGED, json!({}));
                if added.is_empty() {
                    // Tools only leaving: the server may have been removed, its prompts and resources with it.
                    self.notify(methods::PROMPTS_LIST_CHANGED, json!({}));
                    self.notify(methods::RESOURCES_LIST_CHANGED, json!({}));
                }
            }
            Event::ListChanged { list, .. } => {
                self.pool.routes.invalidate();
                self.notify(&format!("notifications/{list}/list_changed"), json!({}));
            }
            Event::Log { server, level, data, .. } => {
                self.notify(methods::LOG_MESSAGE, json!({ "level": level, "logger": server, "data": data }));
            }
            Event::ResourceUpdated { uri, .. } => self.updated(&uri),
            // The gateway's own names are checked when its tables are built.
            Event::NameCollision { .. } => {}
        }
    }

    fn finished(&mut self, _: &mut Context<Self>) {
        // The runtime stopped: nothing more will happen.
    }
}

impl GatewaySession {
    /// `notifications/resources/updated` for `uri` if this session subscribed to it.
    fn updated(&mut self, uri: &str) {
        let subscribed = self.pool.subscribed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).contains(uri);
        if subscribed {
            self.notify(methods::RESOURCE_UPDATED, json!({ "uri": uri }));
        }
    }
}
