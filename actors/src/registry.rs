//! The catalog of every connected server's tools, and call routing.
//!
//! Invariants:
//! - an exposed name maps to exactly one (server, tool); names that read
//!   alike are told apart deterministically and every such case is kept as
//!   a warning of the server (see [`catalog`]), never silently dropped;
//! - a server that went down leaves the listing but keeps its routes, so a
//!   call made during a restart reaches the connection, which holds it until
//!   the server is back (within the call's time-out);
//! - a call by a name no listing has shown yet waits when a configured,
//!   enabled server that has not listed its tools could own it, until that
//!   server lists (then it is routed or refused as unknown), fails, is
//!   disabled or removed, or the call's time-out passes;
//! - the registry holds only weak addresses of connections: the Hub decides
//!   their lifetime.

pub mod catalog;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use actix::dev::{MessageResponse, OneshotSender};
use actix::prelude::*;
use actix::WeakAddr;
use rmcp::model::CallToolResult;
use tokio::sync::oneshot;

use super::connection::{Connection, Routed};
use super::guard::{KeepsStateOnPanic, PanicSwitch, Panicked};
use super::listeners::Listeners;
use super::Instance;
use super::{CallTool, Event, KeptTool, ListKeptTools, ListTools, ServerDown, ServerState, Subscribe, ToolEntry, ToolsChanged, ToolsStale};
use crate::error::CallError;
use crate::pool::whole_tools;

use catalog::{Catalog, Change};

struct ServerRoutes {
    connection: WeakAddr<Connection>,
    /// The connection's instance: reports from another are ignored.
    instance: Instance,
    up: bool,
    /// Whether the server has listed its tools since it was registered.
    listed: bool,
    /// Its state as the Hub last saw it.
    state: ServerState,
    /// The server's default call time-out (bounds a waiting call).
    call_timeout: Duration,
    /// How many calls may wait for its first listing (its `max_queued`).
    max_waiting: usize,
    /// It acts as each caller: its connection lists, but calls go to the
    /// caller's own (`Handle::call_on`), never through here.
    per_caller: bool,
}

type CallReply = OneshotSender<Result<CallToolResult, CallError>>;

/// A call waiting for a server's first listing.
struct Waiting {
    call: CallTool,
    reply: Option<CallReply>,
    /// Servers that have not listed yet and may own the name.
    candidates: Vec<String>,
    started: Instant,
    timeout: Duration,
}

/// The longest a [`ListTools`] waits for servers that are re-listing.
pub const STALE_WAIT: Duration = Duration::from_secs(5);

#[derive(Default)]
pub struct Registry {
    catalog: Catalog<KeptTool>,
    servers: HashMap<String, ServerRoutes>,
    waiting: BTreeMap<u64, Waiting>,
    next_waiting: u64,
    subscribers: Vec<Recipient<Event>>,
    /// `Handle::subscribe`'s channels (shared with the Hub).
    listeners: Listeners,
    /// Servers re-listing after `tools/list_changed`.
    stale: HashSet<String>,
    /// Listings waiting for them.
    listings: Vec<oneshot::Sender<Vec<ToolEntry<KeptTool>>>>,
    /// Arms a handler to panic (tests; see [`super::guard`]).
    panic_next: PanicSwitch,
}

/// Makes a server's calls routable (sent by the Hub when it starts one).
#[derive(Message)]
#[rtype(result = "()")]
pub struct RegisterServer {
    pub server: String,
    pub connection: WeakAddr<Connection>,
    /// What its reports carry (see [`Instance`]).
    pub instance: Instance,
    /// `Pending`, or `Disabled` for a server configured disabled.
    pub state: ServerState,
    pub call_timeout: Duration,
    /// Calls that may wait for the first listing (the server's `max_queued`).
    pub max_waiting: usize,
    /// The server acts as each caller (see [`ServerRoutes`]).
    pub per_caller: bool,
}

/// Removes a server and all its tools (sent by the Hub when it removes one).
#[derive(Message)]
#[rtype(result = "()")]
pub struct UnregisterServer {
    pub server: String,
}

/// A server's new state, as the Hub heard it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ServerStateChanged {
    pub server: String,
    pub state: ServerState,
}

/// The runtime is shutting down: calls waiting for a first listing fail
/// with `CallError::RuntimeStopped` (sent by the Hub).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopWaiting;

/// Each server's naming warnings (collisions, duplicates), by server name.
#[derive(Message)]
#[rtype(result = "BTreeMap<String, Vec<String>>")]
pub struct NamingWarnings;

impl Actor for Registry {
    type Context = Context<Self>;
}

/// The Registry keeps its state through a panic (docs/decisions.md, "Panics").
impl KeepsStateOnPanic for Registry {
    const NAME: &'static str = "registry";

    fn panic_switch(&mut self) -> &mut PanicSwitch {
        &mut self.panic_next
    }

    fn panicked(&mut self, panic: &Panicked) {
        self.publish(Event::panicked(panic));
    }
}

impl Registry {
    /// A registry whose events also go to `listeners`.
    pub(crate) fn publishing_to(listeners: Listeners) -> Registry {
        Registry { listeners, ..Registry::default() }
    }

    fn publish(&mut self, event: Event) {
        self.listeners.publish(&event);
        self.subscribers.retain(|s| s.connected());
        for subscriber in &self.subscribers {
            subscriber.do_send(event.clone());
        }
    }

    /// Publishes catalog changes and collisions; a renamed server that is
    /// down keeps its routes but shows nothing.
    fn publish_changes(&mut self, changes: Vec<Change>) {
        for collision in self.catalog.take_collisions() {
            tracing::warn!(name = %collision.name, kept = %collision.kept, rejected = %collision.rejected, "tool names read alike; disambiguated");
            self.publish(Event::NameCollision { name: collision.name, kept: collision.kept, rejected: collision.rejected });
        }
        for change in changes {
            let up = self.servers.get(&change.server).is_some_and(|s| s.up);
            let added = if up { change.added } else { Vec::new() };
            if !added.is_empty() || !change.removed.is_empty() {
                self.publish(Event::Catalog { server: change.server, added, removed: change.removed });
            }
        }
    }

    /// Servers that could still list `name`: registered, not listed yet,
    /// in a state that will list, and whose names can look like it. (A
    /// connection lists before it reports `Connected`, so one that is
    /// connected and has not listed will not.)
    fn candidates(&self, name: &str) -> Vec<String> {
        self.servers
            .iter()
            .filter(|(_, s)| !s.listed && !refusal_of(&s.state) && s.state != ServerState::Connected)
            .filter(|(server, _)| self.catalog.segment(server).is_some_and(|segment| crate::naming::may_belong_to(name, segment)))
            .map(|(server, _)| server.clone())
            .collect()
    }

    /// Why a call by `name` cannot wait: a server that may own it but
    /// failed, is disabled or needs authorisation without ever listing.
    fn unlisted_refusal(&self, name: &str) -> Option<CallError> {
        self.servers
            .iter()
            .filter(|(_, s)| !s.listed)
            .filter(|(server, _)| self.catalog.segment(server).is_some_and(|segment| crate::naming::may_belong_to(name, segment)))
            .find_map(|(server, s)| refused_by_state(server, name, &s.state))
    }

    /// Whether as many calls wait for `server`'s first listing as it may queue.
    fn waiting_full(&self, server: &str) -> bool {
        let limit = self.servers.get(server).map_or(0, |s| s.max_waiting);
        self.waiting.values().filter(|w| w.candidates.iter().any(|c| c == server)).count() >= limit
    }

    /// Routes `call`, or returns the error to answer.
    /// The call leaves with the server's own name of the tool, written over
    /// the exposed name in place (no allocation when it is not longer).
    fn route(&self, mut call: CallTool) -> Result<(Addr<Connection>, CallTool), CallError> {
        let Some(route) = self.catalog.route(&call.name) else {
            return Err(self.unlisted_refusal(&call.name).unwrap_or(CallError::UnknownTool { name: call.name }));
        };
        let tool = route.tool.name();
        if self.servers.get(&route.server).is_some_and(|s| s.per_caller) {
            let message = "the server acts as each caller of the gateway (token exchange); call it through `mcpvisor serve --http` as an \
                           authenticated caller";
            return Err(CallError::AsCaller { server: route.server.clone(), tool: tool.to_string(), message: message.into() });
        }
        let Some(connection) = self.servers.get(&route.server).and_then(|s| s.connection.upgrade()) else {
            return Err(CallError::Stopped { server: route.server.clone(), tool: tool.to_string() });
        };
        call.name.clear();
        call.name.push_str(tool);
        Ok((connection, call))
    }

    /// Looks again at every waiting call after a listing or a state change.
    fn recheck_waiting(&mut self) {
        let ids: Vec<u64> = self.waiting.keys().copied().collect();
        for id in ids {
            let Some(waiting) = self.waiting.get_mut(&id) else { continue };
            if waiting.reply.as_ref().is_none_or(|reply| reply.is_closed()) {
                // The caller gave up: the call must not run.
                self.waiting.remove(&id);
                continue;
            }
            let name = waiting.call.name.clone();
            let known = self.catalog.route(&name).is_some();
            let candidates = self.candidates(&name);
            let Some(waiting) = self.waiting.get_mut(&id) else { continue };
            waiting.candidates.retain(|server| candidates.contains(server));
            if !known && !waiting.candidates.is_empty() {
                continue;
            }
            let Some(mut waiting) = self.waiting.remove(&id) else { continue };
            let left = waiting.timeout.saturating_sub(waiting.started.elapsed());
            waiting.call.timeout = Some(left);
            let answer = self.route(waiting.call);
            deliver(answer, waiting.reply);
        }
    }

    /// The tools of the servers that are up, sorted by name.
    fn listing(&self) -> Vec<ToolEntry<KeptTool>> {
        let up = |server: &str| self.servers.get(server).is_some_and(|s| s.up);
        let routes = self.catalog.routes();
        // Room for every route at once: doubling would peak at three times the entries.
        let mut listing = Vec::with_capacity(routes.size_hint().0);
        listing.extend(routes.filter(|(_, route)| up(&route.server)).map(|(name, route)| ToolEntry {
            name: name.clone(),
            server: route.server.clone(),
            tool: route.tool.clone(),
        }));
        listing
    }

    /// The listing now, or once no server is re-listing.
    fn kept_listing(&mut self) -> ResponseFuture<Vec<ToolEntry<KeptTool>>> {
        if self.stale.is_empty() {
            let listing = self.listing();
            return Box::pin(async move { listing });
        }
        let (reply, answer) = oneshot::channel();
        self.listings.push(reply);
        Box::pin(async move { answer.await.unwrap_or_default() })
    }

    /// `server` is no longer re-listing; waiting listings go out once none is.
    fn fresh(&mut self, server: &str) {
        self.stale.remove(server);
        if self.stale.is_empty() {
            self.answer_listings();
        }
    }

    fn answer_listings(&mut self) {
        let waiting = std::mem::take(&mut self.listings);
        if waiting.is_empty() {
            return;
        }
        let listing = self.listing();
        for reply in waiting {
            let _ = reply.send(listing.clone());
        }
    }

    fn expire(&mut self, id: u64) {
        let Some(waiting) = self.waiting.remove(&id) else { return };
        let error =
            CallError::NotListed { server: waiting.candidates.join("`, `"), tool: waiting.call.name, after: waiting.started.elapsed() };
        if let Some(reply) = waiting.reply {
            let _ = reply.send(Err(error));
        }
    }
}

/// States in which a server that has not listed will not list by itself.
fn refusal_of(state: &ServerState) -> bool {
    matches!(state, ServerState::Failed { .. } | ServerState::Disabled | ServerState::NeedsAuth)
}

fn refused_by_state(server: &str, name: &str, state: &ServerState) -> Option<CallError> {
    let (server, tool) = (server.to_string(), name.to_string());
    match state {
        ServerState::Failed { error, cause, .. } => Some(CallError::Failed { server, tool, error: error.clone(), cause: cause.clone() }),
        ServerState::Disabled => Some(CallError::Disabled { server, tool }),
        ServerState::NeedsAuth => Some(CallError::NeedsAuth { server, tool }),
        _ => None,
    }
}

/// Hands a routed call to its connection, or answers the error.
fn deliver(answer: Result<(Addr<Connection>, CallTool), CallError>, reply: Option<CallReply>) {
    match answer {
        // If the connection is gone, the dropped reply reaches the caller as a mailbox error.
        Ok((connection, call)) => connection.do_send(Routed { call, reply }),
        Err(error) => {
            if let Some(reply) = reply {
                let _ = reply.send(Err(error));
            }
        }
    }
}

impl Handler<RegisterServer> for Registry {
    type Result = ();

    fn handle(&mut self, msg: RegisterServer, ctx: &mut Context<Self>) {
        self.guarded("RegisterServer", ctx, |registry, _| registry.register(msg), drop);
    }
}

impl Registry {
    /// The routes of `server` if `instance` is the connection registered under it.
    fn reporting(&mut self, server: &str, instance: Instance) -> Option<&mut ServerRoutes> {
        self.servers.get_mut(server).filter(|routes| routes.instance == instance)
    }

    fn register(&mut self, msg: RegisterServer) {
        let routes = ServerRoutes {
            connection: msg.connection,
            instance: msg.instance,
            up: false,
            listed: false,
            state: msg.state,
            call_timeout: msg.call_timeout,
            max_waiting: msg.max_waiting,
            per_caller: msg.per_caller,
        };
        self.servers.insert(msg.server.clone(), routes);
        let changes = self.catalog.register(&msg.server);
        self.publish_changes(changes);
    }
}

impl Handler<UnregisterServer> for Registry {
    type Result = ();

    fn handle(&mut self, msg: UnregisterServer, ctx: &mut Context<Self>) {
        let unregister = |registry: &mut Self, _: &mut Context<Self>| {
            registry.servers.remove(&msg.server);
            let changes = registry.catalog.unregister(&msg.server);
            registry.publish_changes(changes);
            registry.recheck_waiting();
            registry.fresh(&msg.server);
        };
        self.guarded("UnregisterServer", ctx, unregister, drop);
    }
}

impl Handler<ToolsStale> for Registry {
    type Result = ();

    fn handle(&mut self, msg: ToolsStale, ctx: &mut Context<Self>) {
        let stale = |registry: &mut Self, ctx: &mut Context<Self>| {
            if registry.reporting(&msg.server, msg.instance).is_some() && registry.stale.insert(msg.server.clone()) {
                // A listing that never comes (a server that hangs) does not hold listings for longer.
                ctx.run_later(STALE_WAIT, move |act, ctx| act.guarded("ToolsStale timer", ctx, |act, _| act.fresh(&msg.server), drop));
            }
        };
        self.guarded("ToolsStale", ctx, stale, drop);
    }
}

impl Handler<ToolsChanged> for Registry {
    type Result = ();

    fn handle(&mut self, msg: ToolsChanged, ctx: &mut Context<Self>) {
        let changed = |registry: &mut Self, _: &mut Context<Self>| {
            let Some(entry) = registry.reporting(&msg.server, msg.instance) else { return };
            entry.up = true;
            entry.listed = true;
            let changes = registry.catalog.install(&msg.server, msg.tools);
            registry.publish_changes(changes);
            registry.recheck_waiting();
            registry.fresh(&msg.server);
        };
        self.guarded("ToolsChanged", ctx, changed, drop);
    }
}

impl Handler<ServerDown> for Registry {
    type Result = ();

    fn handle(&mut self, msg: ServerDown, ctx: &mut Context<Self>) {
        let down = |registry: &mut Self, _: &mut Context<Self>| {
            let Some(entry) = registry.reporting(&msg.server, msg.instance) else { return };
            entry.up = false;
            let removed = registry.catalog.names(&msg.server).to_vec();
            registry.publish(Event::Catalog { server: msg.server.clone(), added: Vec::new(), removed });
            registry.fresh(&msg.server);
        };
        self.guarded("ServerDown", ctx, down, drop);
    }
}

impl Handler<ServerStateChanged> for Registry {
    type Result = ();

    fn handle(&mut self, msg: ServerStateChanged, ctx: &mut Context<Self>) {
        let changed = |registry: &mut Self, _: &mut Context<Self>| {
            if let Some(entry) = registry.servers.get_mut(&msg.server) {
                entry.state = msg.state;
                registry.recheck_waiting();
            }
        };
        self.guarded("ServerStateChanged", ctx, changed, drop);
    }
}

impl Handler<StopWaiting> for Registry {
    type Result = ();

    fn handle(&mut self, _: StopWaiting, ctx: &mut Context<Self>) {
        let stop = |registry: &mut Self, _: &mut Context<Self>| {
            for (_, waiting) in std::mem::take(&mut registry.waiting) {
                deliver(Err(CallError::RuntimeStopped { tool: waiting.call.name }), waiting.reply);
            }
        };
        self.guarded("StopWaiting", ctx, stop, drop);
    }
}

impl Handler<NamingWarnings> for Registry {
    type Result = MessageResult<NamingWarnings>;

    fn handle(&mut self, _: NamingWarnings, ctx: &mut Context<Self>) -> Self::Result {
        let warnings = |registry: &mut Self, _: &mut Context<Self>| {
            registry.servers.keys().map(|server| (server.clone(), registry.catalog.warnings(server))).collect()
        };
        MessageResult(self.guarded("NamingWarnings", ctx, warnings, |_| BTreeMap::new()))
    }
}

impl Handler<ListTools> for Registry {
    type Result = ResponseFuture<Vec<ToolEntry>>;

    fn handle(&mut self, _: ListTools, ctx: &mut Context<Self>) -> Self::Result {
        let list = |registry: &mut Self, _: &mut Context<Self>| -> Self::Result {
            let kept = registry.kept_listing();
            Box::pin(async move { whole_tools(kept.await) })
        };
        // A panic answers an empty listing; its event says why.
        self.guarded("ListTools", ctx, list, |_| Box::pin(async { Vec::new() }))
    }
}

impl Handler<ListKeptTools> for Registry {
    type Result = ResponseFuture<Vec<ToolEntry<KeptTool>>>;

    fn handle(&mut self, _: ListKeptTools, ctx: &mut Context<Self>) -> Self::Result {
        let list = |registry: &mut Self, _: &mut Context<Self>| registry.kept_listing();
        self.guarded("ListKeptTools", ctx, list, |_| Box::pin(async { Vec::new() }))
    }
}

/// The Registry's answer to a call: at once (an error, or the call handed
/// on to its connection with the caller's reply channel), or later, once a
/// server that may own its name has listed.
#[allow(clippy::large_enum_variant)] // `Now` is nearly every call: boxing it would allocate for each
pub enum Routing {
    Now(Result<(Addr<Connection>, CallTool), CallError>),
    Later(oneshot::Receiver<Result<CallToolResult, CallError>>),
}

impl MessageResponse<Registry, CallTool> for Routing {
    fn handle(self, _: &mut Context<Registry>, reply: Option<CallReply>) {
        match self {
            Routing::Now(answer) => deliver(answer, reply),
            // Passes the answer on; a caller that goes away drops `answer`,
            // which tells the registry not to run the call.
            Routing::Later(answer) => {
                actix_rt::spawn(async move {
                    let Some(mut reply) = reply else {
                        let _ = answer.await;
                        return;
                    };
                    tokio::select! {
                        result = answer => if let Ok(result) = result { let _ = reply.send(result); },
                        () = reply.closed() => {}
                    }
                });
            }
        }
    }
}

impl Handler<CallTool> for Registry {
    type Result = Routing;

    fn handle(&mut self, call: CallTool, ctx: &mut Context<Self>) -> Self::Result {
        let tool = call.name.clone();
        let failed = |panic| Routing::Now(Err(CallError::Internal { tool, panic }));
        self.guarded("CallTool", ctx, |registry, ctx| registry.call(call, ctx), failed)
    }
}

impl Registry {
    fn call(&mut self, call: CallTool, ctx: &mut Context<Self>) -> Routing {
        if self.catalog.route(&call.name).is_some() {
            return Routing::Now(self.route(call));
        }
        let candidates = self.candidates(&call.name);
        if candidates.is_empty() {
            return Routing::Now(self.route(call));
        }
        if let Some(full) = candidates.iter().find(|server| self.waiting_full(server)) {
            let queued = self.waiting.values().filter(|w| w.candidates.contains(full)).count();
            return Routing::Now(Err(CallError::Overloaded { server: full.clone(), tool: call.name, in_flight: 0, queued }));
        }
        let longest = candidates.iter().filter_map(|s| self.servers.get(s)).map(|s| s.call_timeout).max();
        let timeout = call.timeout.or(longest).unwrap_or_default();
        let (reply, answer) = oneshot::channel();
        let id = self.next_waiting;
        self.next_waiting += 1;
        self.waiting.insert(id, Waiting { call, reply: Some(reply), candidates, started: Instant::now(), timeout });
        ctx.run_later(timeout, move |act, ctx| act.guarded("CallTool timer", ctx, |act, _| act.expire(id), drop));
        Routing::Later(answer)
    }
}

impl Handler<Subscribe> for Registry {
    type Result = ();

    fn handle(&mut self, msg: Subscribe, ctx: &mut Context<Self>) {
        let subscribe = |registry: &mut Self, _: &mut Context<Self>| {
            // Subscribers that went away leave here too, not only at the next event.
            registry.subscribers.retain(|s| s.connected());
            registry.subscribers.push(msg.0);
        };
        self.guarded("Subscribe", ctx, subscribe, drop);
    }
}

#[cfg(feature = "fault-injection")]
impl Handler<super::guard::PanicNext> for Registry {
    type Result = ();

    fn handle(&mut self, msg: super::guard::PanicNext, _: &mut Context<Self>) {
        self.panic_next.arm(msg.0);
    }
}

/// Sends an operation ([`super::operation`], [`super::skills`]) to the
/// connection of `server`: how an agent, which holds only the registry,
/// reaches a server's resources and skills.
impl<M, T> Handler<super::operation::ToServer<M>> for Registry
where
    M: Message<Result = Result<T, CallError>> + Send + 'static,
    T: Send + 'static,
    Connection: Handler<M>,
{
    type Result = ResponseFuture<Result<T, CallError>>;

    fn handle(&mut self, msg: super::operation::ToServer<M>, ctx: &mut Context<Self>) -> Self::Result {
        let to_server = |registry: &mut Self, _: &mut Context<Self>| -> Self::Result {
            let server = msg.server;
            let Some(connection) = registry.servers.get(&server).and_then(|routes| routes.connection.upgrade()) else {
                return Box::pin(async move { Err(CallError::UnknownServer { server }) });
            };
            let ask = connection.send(msg.message);
            Box::pin(async move { ask.await.unwrap_or_else(|_| Err(CallError::Stopped { server, tool: String::new() })) })
        };
        let failed = |panic| -> Self::Result { Box::pin(async move { Err(CallError::Internal { tool: String::new(), panic }) }) };
        self.guarded("ToServer", ctx, to_server, failed)
    }
}
