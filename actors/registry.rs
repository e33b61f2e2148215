//! The catalog of every connected server's tools, and call routing.
//!
//! Invariants:
//! - an exposed name maps to exactly one (server, tool); when two tools map
//!   to one name, the one registered first keeps it and the collision is
//!   logged and sent to subscribers, never silently overwritten;
//! - a server that went down leaves the listing but keeps its routes, so a
//!   call made during a restart reaches the connection, which holds it until
//!   the server is back (within the call's time-out);
//! - the registry holds only weak addresses of connections: the Hub decides
//!   their lifetime.

use std::collections::{BTreeMap, HashMap};

use actix::dev::{MessageResponse, OneshotSender};
use actix::prelude::*;
use actix::WeakAddr;
use rmcp::model::{CallToolResult, Tool};

use super::connection::{Connection, Routed};
use super::{CallTool, Event, ListTools, ServerDown, Subscribe, ToolEntry, ToolsChanged};
use crate::error::CallError;
use crate::naming::exposed_name;

struct Route {
    server: String,
    tool: Tool,
}

struct ServerRoutes {
    connection: WeakAddr<Connection>,
    /// Exposed names this server owns.
    names: Vec<String>,
    up: bool,
}

#[derive(Default)]
pub struct Registry {
    routes: BTreeMap<String, Route>,
    servers: HashMap<String, ServerRoutes>,
    subscribers: Vec<Recipient<Event>>,
}

/// Makes a server's calls routable (sent by the Hub when it starts one).
#[derive(Message)]
#[rtype(result = "()")]
pub struct RegisterServer {
    pub server: String,
    pub connection: WeakAddr<Connection>,
}

/// Removes a server and all its tools (sent by the Hub when it removes one).
#[derive(Message)]
#[rtype(result = "()")]
pub struct UnregisterServer {
    pub server: String,
}

impl Actor for Registry {
    type Context = Context<Self>;
}

impl Registry {
    fn publish(&mut self, event: Event) {
        self.subscribers.retain(|s| s.connected());
        for subscriber in &self.subscribers {
            subscriber.do_send(event.clone());
        }
    }

    /// Drops a server's names; returns them.
    fn drop_names(&mut self, server: &str) -> Vec<String> {
        let Some(entry) = self.servers.get_mut(server) else { return Vec::new() };
        let names = std::mem::take(&mut entry.names);
        for name in &names {
            self.routes.remove(name);
        }
        names
    }
}

impl Handler<RegisterServer> for Registry {
    type Result = ();

    fn handle(&mut self, msg: RegisterServer, _: &mut Context<Self>) {
        self.servers.insert(msg.server, ServerRoutes { connection: msg.connection, names: Vec::new(), up: false });
    }
}

impl Handler<UnregisterServer> for Registry {
    type Result = ();

    fn handle(&mut self, msg: UnregisterServer, _: &mut Context<Self>) {
        let removed = self.drop_names(&msg.server);
        self.servers.remove(&msg.server);
        if !removed.is_empty() {
            self.publish(Event::Catalog { server: msg.server, added: Vec::new(), removed });
        }
    }
}

impl Handler<ToolsChanged> for Registry {
    type Result = ();

    fn handle(&mut self, msg: ToolsChanged, _: &mut Context<Self>) {
        if !self.servers.contains_key(&msg.server) {
            return;
        }
        let old = self.drop_names(&msg.server);
        let mut names = Vec::with_capacity(msg.tools.len());
        let mut collisions = Vec::new();
        for tool in msg.tools {
            let name = exposed_name(&msg.server, &tool.name);
            if let Some(existing) = self.routes.get(&name) {
                let kept = format!("{}/{}", existing.server, existing.tool.name);
                let rejected = format!("{}/{}", msg.server, tool.name);
                tracing::warn!(name, kept, rejected, "two tools map to one exposed name; the second is left out of the catalog");
                collisions.push(Event::NameCollision { name, kept, rejected });
                continue;
            }
            self.routes.insert(name.clone(), Route { server: msg.server.clone(), tool });
            names.push(name);
        }
        let added = names.iter().filter(|n| !old.contains(n)).cloned().collect();
        let removed = old.iter().filter(|n| !names.contains(n)).cloned().collect();
        if let Some(entry) = self.servers.get_mut(&msg.server) {
            entry.names = names;
            entry.up = true;
        }
        for event in collisions {
            self.publish(event);
        }
        self.publish(Event::Catalog { server: msg.server, added, removed });
    }
}

impl Handler<ServerDown> for Registry {
    type Result = ();

    fn handle(&mut self, msg: ServerDown, _: &mut Context<Self>) {
        if let Some(entry) = self.servers.get_mut(&msg.server) {
            entry.up = false;
            let removed = entry.names.clone();
            self.publish(Event::Catalog { server: msg.server, added: Vec::new(), removed });
        }
    }
}

impl Handler<ListTools> for Registry {
    type Result = MessageResult<ListTools>;

    fn handle(&mut self, _: ListTools, _: &mut Context<Self>) -> Self::Result {
        let up = |server: &str| self.servers.get(server).is_some_and(|s| s.up);
        MessageResult(
            self.routes
                .iter()
                .filter(|(_, route)| up(&route.server))
                .map(|(name, route)| ToolEntry { name: name.clone(), server: route.server.clone(), tool: route.tool.clone() })
                .collect(),
        )
    }
}

/// The Registry's answer to a call: an immediate error, or the call handed
/// on to its connection with the caller's reply channel.
pub enum Routing {
    Refused(CallError),
    Forward { connection: Addr<Connection>, call: CallTool },
}

impl MessageResponse<Registry, CallTool> for Routing {
    fn handle(self, _: &mut Context<Registry>, reply: Option<OneshotSender<Result<CallToolResult, CallError>>>) {
        match self {
            Routing::Refused(error) => {
                if let Some(reply) = reply {
                    let _ = reply.send(Err(error));
                }
            }
            // If the connection is gone, the dropped reply reaches the caller as a mailbox error.
            Routing::Forward { connection, call } => connection.do_send(Routed { call, reply }),
        }
    }
}

impl Handler<CallTool> for Registry {
    type Result = Routing;

    fn handle(&mut self, call: CallTool, _: &mut Context<Self>) -> Self::Result {
        let Some(route) = self.routes.get(&call.name) else {
            return Routing::Refused(CallError::UnknownTool { name: call.name });
        };
        let server = route.server.clone();
        let tool = route.tool.name.to_string();
        let Some(connection) = self.servers.get(&server).and_then(|s| s.connection.upgrade()) else {
            return Routing::Refused(CallError::Stopped { server, tool });
        };
        Routing::Forward { connection, call: CallTool { name: tool, ..call } }
    }
}

impl Handler<Subscribe> for Registry {
    type Result = ();

    fn handle(&mut self, msg: Subscribe, _: &mut Context<Self>) {
        self.subscribers.push(msg.0);
    }
}
