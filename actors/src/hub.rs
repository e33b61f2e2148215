//! The Hub: supervisor of connections. It starts each under an actix
//! `Supervisor`, holds the only strong address of each, tracks their
//! states, and shuts them down together.
//!
//! Start-up never fails because one server fails: a bad server ends up
//! `failed` in the status table while the others serve.

use std::collections::BTreeMap;

use actix::prelude::*;
use futures::future::join_all;
use tokio::sync::oneshot;

use super::connection::{self, Connection, GetStatus, StateChanged};
use super::directory::Directory;
use super::guard::{KeepsStateOnPanic, PanicSwitch, Panicked};
use super::listeners::Listeners;
pub use super::operation::ToServer;
use super::parts::{Parts, ServerParts};
use super::registry::{NamingWarnings, RegisterServer, Registry, ServerStateChanged, StopWaiting, UnregisterServer};
use super::reply::Reply;
use super::threads::{stop_and_join, ConnectionThreads};
use super::{Event, Instance, ServerState, ServerStatus, Subscribe};
use crate::config::{RuntimeConfig, ServerConfig};
use crate::error::{CallError, ManageError};

mod callers;
mod messages;
pub use messages::*;

/// How long the shutdown waits for the connections' threads to end once
/// their servers are stopped (each has only its actors' drops left to run).
const THREADS_STOP_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

struct Slot {
    connection: Addr<Connection>,
    /// Its reports carry this; others under the same name are an old connection's.
    instance: Instance,
    state: ServerState,
    /// As last set, to tell what `SetServers` changes.
    config: ServerConfig,
    /// A server that acts as each caller: its callers' connections.
    callers: Option<callers::CallerSlot>,
}

impl Slot {
    /// Its connection and its callers' (each to be shut down with it).
    fn connections(&self) -> impl Iterator<Item = &Addr<Connection>> {
        std::iter::once(&self.connection).chain(self.callers.iter().flat_map(|callers| callers.connections.values()))
    }
}

pub struct Hub {
    registry: Addr<Registry>,
    servers: BTreeMap<String, Slot>,
    /// The same servers' connections, for handles to reach them without this mailbox.
    directory: Directory,
    /// Actix subscribers ([`Subscribe`]).
    subscribers: Vec<Recipient<Event>>,
    /// `Handle::subscribe`'s channels, which hear what `subscribers` hear.
    listeners: Listeners,
    /// Answered once every server's state is settled.
    ready_waiters: Vec<oneshot::Sender<()>>,
    initial: Vec<ServerConfig>,
    /// The live parts each connection gets its share of.
    parts: Parts,
    shut_down: bool,
    /// End the processes reparented to us once every server is stopped
    /// (`RuntimeConfig::end_orphans`, and we are a subreaper).
    end_orphans: bool,
    /// Arms a handler to panic (tests; see [`super::guard`]).
    panic_next: PanicSwitch,
    /// The threads the connections run on.
    threads: ConnectionThreads,
    /// The instance of the last connection started.
    last_instance: Instance,
    /// How often idle per-caller connections are looked for (`None`: no
    /// server acts as each caller; see `callers`).
    reaping: Option<std::time::Duration>,
}

/// The Hub keeps its state through a panic: each handler changes its
/// table in one step, and the connections (the real state) live in their
/// own actors (docs/decisions.md, "Panics").
impl KeepsStateOnPanic for Hub {
    const NAME: &'static str = "hub";

    fn panic_switch(&mut self) -> &mut PanicSwitch {
        &mut self.panic_next
    }

    fn panicked(&mut self, panic: &Panicked) {
        self.publish(Event::panicked(panic));
    }
}

impl Hub {
    /// Starts a hub with its registry and servers in the current actix
    /// System, with the default live parts (no in-process handlers).
    pub fn start(config: RuntimeConfig) -> Addr<Hub> {
        Hub::start_with(config, Parts::default())
    }

    /// Starts a hub whose servers get their live parts from `parts`.
    pub fn start_with(config: RuntimeConfig, parts: Parts) -> Addr<Hub> {
        Hub::start_sharing(config, parts, Directory::default(), Listeners::default())
    }

    /// [`Hub::start_with`], keeping `directory` equal to its table of servers
    /// and publishing to `listeners` too (as its registry does).
    #[doc(hidden)]
    pub fn start_sharing(config: RuntimeConfig, parts: Parts, directory: Directory, listeners: Listeners) -> Addr<Hub> {
        let subreaper = config.subreaper && crate::transport::stdio::become_subreaper();
        if config.subreaper && !subreaper {
            tracing::warn!("could not become a child subreaper; orphans of killed servers are left to init");
        }
        let registry = Registry::publishing_to(listeners.clone()).start();
        Hub {
            registry,
            servers: BTreeMap::new(),
            directory,
            subscribers: Vec::new(),
            listeners,
            ready_waiters: Vec::new(),
            initial: config.servers,
            parts,
            shut_down: false,
            end_orphans: config.end_orphans && subreaper,
            panic_next: PanicSwitch::default(),
            last_instance: 0,
            reaping: None,
            threads: ConnectionThreads::new(config.connection_threads),
        }
        .start()
    }

    fn add(&mut self, mut config: ServerConfig, ctx: &mut Context<Self>) -> Result<(), ManageError> {
        if self.shut_down {
            return Err(ManageError::RuntimeStopped);
        }
        config.validate()?;
        if self.servers.contains_key(&config.name) {
            return Err(ManageError::DuplicateServer(config.name));
        }
        let name = config.name.clone();
        let state = if config.enabled { ServerState::Pending } else { ServerState::Disabled };
        let mut parts = self.parts.for_server(&name);
        let kept = config.clone();
        let callers = self.callers_of(&mut config, &mut parts, ctx);
        let (call_timeout, max_waiting) = (config.timeouts.call, config.limits.max_queued);
        let (connection, instance) = self.start_connection(config, parts, ctx);
        let registration = RegisterServer {
            server: name.clone(),
            connection: connection.downgrade(),
            instance,
            state: state.clone(),
            call_timeout,
            max_waiting,
            per_caller: callers.is_some(),
        };
        self.registry.do_send(registration);
        connection.do_send(connection::Registered);
        self.directory.insert(&name, connection.downgrade(), callers.as_ref().map(|slot| slot.shared.clone()));
        self.servers.insert(name, Slot { connection, instance, state, config: kept, callers });
        Ok(())
    }

    /// Starts a connection to `config`'s server, numbered as a new instance,
    /// on the next connection thread, under a `Supervisor`; its process
    /// starts once it is sent `Registered` (after the registry knows it).
    fn start_connection(&mut self, config: ServerConfig, parts: ServerParts, ctx: &mut Context<Self>) -> (Addr<Connection>, Instance) {
        self.last_instance += 1;
        let instance = self.last_instance;
        let links = connection::Links {
            registry: connection::CatalogLink::of(&self.registry, instance),
            hub: ctx.address().recipient(),
            events: ctx.address().recipient(),
            handlers: self.parts.client_handlers.clone(),
            telemetry: self.parts.telemetry.clone(),
            server: parts,
        };
        let start = move |_: &mut Context<Connection>| Connection::new(config, links);
        let connection = match self.threads.pick() {
            Some(thread) => Supervisor::start_in_arbiter(&thread, start),
            None => Supervisor::start(start),
        };
        (connection, instance)
    }

    /// Takes a server out: unregisters it and returns its slot, whose
    /// shutdown the caller awaits (dropping the slot ends the actor).
    fn take_out(&mut self, name: &str) -> Option<Slot> {
        let slot = self.servers.remove(name)?;
        self.directory.remove(name);
        self.registry.do_send(UnregisterServer { server: name.to_string() });
        Some(slot)
    }

    fn remove(&mut self, name: String) -> Reply<Result<(), ManageError>> {
        let Some(slot) = self.take_out(&name) else { return Reply::Ready(Err(ManageError::UnknownServer(name))) };
        self.wake_ready_waiters();
        // Dropping `slot` after the shutdown drops the last strong address:
        // the supervisor then lets the actor end instead of restarting it.
        Reply::later(async move {
            join_all(slot.connections().map(|connection| connection.send(connection::Shutdown))).await;
            Ok(())
        })
    }

    fn slot(&mut self, name: &str) -> Result<&mut Slot, ManageError> {
        self.servers.get_mut(name).ok_or_else(|| ManageError::UnknownServer(name.to_string()))
    }

    fn publish(&mut self, event: Event) {
        self.listeners.publish(&event);
        self.subscribers.retain(|s| s.connected());
        for subscriber in &self.subscribers {
            subscriber.do_send(event.clone());
        }
    }

    fn settled(&self) -> bool {
        self.servers.values().all(|slot| slot.state.is_settled())
    }

    fn wake_ready_waiters(&mut self) {
        if self.settled() {
            for waiter in self.ready_waiters.drain(..) {
                let _ = waiter.send(());
            }
        }
    }
}

impl Actor for Hub {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        for config in std::mem::take(&mut self.initial) {
            let name = config.name.clone();
            if let Err(error) = self.add(config, ctx) {
                tracing::error!(server = %name, "{error}");
            }
        }
    }
}

impl Handler<AddServer> for Hub {
    type Result = Result<(), ManageError>;

    fn handle(&mut self, msg: AddServer, ctx: &mut Context<Self>) -> Self::Result {
        self.guarded("AddServer", ctx, |hub, ctx| hub.add(msg.0, ctx), |panic| Err(panic.into()))
    }
}

impl Handler<AddInProcess> for Hub {
    type Result = Result<(), ManageError>;

    fn handle(&mut self, msg: AddInProcess, ctx: &mut Context<Self>) -> Self::Result {
        let AddInProcess { config, handler } = msg;
        self.guarded(
            "AddInProcess",
            ctx,
            |hub, ctx| {
                // A running server of that name keeps its handler: refuse before replacing it.
                if hub.servers.contains_key(&config.name) {
                    return Err(ManageError::DuplicateServer(config.name));
                }
                hub.parts.in_process.insert(config.name.clone(), handler);
                hub.add(config, ctx)
            },
            |panic| Err(panic.into()),
        )
    }
}

impl Handler<RemoveServer> for Hub {
    type Result = Reply<Result<(), ManageError>>;

    fn handle(&mut self, msg: RemoveServer, ctx: &mut Context<Self>) -> Self::Result {
        self.guarded("RemoveServer", ctx, |hub, _| hub.remove(msg.0), |panic| Reply::Ready(Err(panic.into())))
    }
}

impl Handler<Toggle> for Hub {
    type Result = Result<(), ManageError>;

    fn handle(&mut self, msg: Toggle, ctx: &mut Context<Self>) -> Self::Result {
        let toggle = |hub: &mut Self, _: &mut Context<Self>| {
            let slot = hub.slot(&msg.server)?;
            slot.config.enabled = msg.enabled;
            slot.connection.do_send(connection::SetEnabled(msg.enabled));
            Ok(())
        };
        self.guarded("Toggle", ctx, toggle, |panic| Err(panic.into()))
    }
}

impl Handler<Reconnect> for Hub {
    type Result = Result<(), ManageError>;

    fn handle(&mut self, msg: Reconnect, ctx: &mut Context<Self>) -> Self::Result {
        let reconnect = |hub: &mut Self, _: &mut Context<Self>| {
            hub.slot(&msg.0)?.connection.do_send(connection::Reconnect);
            hub.end_callers(&msg.0);
            Ok(())
        };
        self.guarded("Reconnect", ctx, reconnect, |panic| Err(panic.into()))
    }
}

impl Handler<SetServers> for Hub {
    type Result = Reply<SetServersResult>;

    fn handle(&mut self, msg: SetServers, ctx: &mut Context<Self>) -> Self::Result {
        let names: Vec<String> = msg.0.iter().map(|config| config.name.clone()).collect();
        let failed = |panic: Panicked| {
            let errors = names.into_iter().map(|name| (name, panic.to_string())).collect();
            Reply::Ready(SetServersResult { errors, ..SetServersResult::default() })
        };
        self.guarded("SetServers", ctx, |hub, ctx| hub.set_servers(msg.0, ctx), failed)
    }
}

impl Hub {
    fn set_servers(&mut self, servers: Vec<ServerConfig>, ctx: &mut Context<Self>) -> Reply<SetServersResult> {
        let mut result = SetServersResult::default();
        let wanted: BTreeMap<String, ServerConfig> = servers.into_iter().map(|c| (c.name.clone(), c)).collect();
        let gone: Vec<String> = self.servers.keys().filter(|name| !wanted.contains_key(*name)).cloned().collect();
        let mut stopping: Vec<Slot> = gone.iter().filter_map(|name| self.take_out(name)).collect();
        result.removed = gone;
        for (name, config) in wanted {
            let changed = match self.servers.get(&name) {
                Some(slot) if slot.config == config => continue,
                Some(_) => true,
                None => false,
            };
            if let Err(error) = config.validate() {
                result.errors.push((name, error.to_string()));
                continue;
            }
            if changed {
                stopping.extend(self.take_out(&name));
            }
            match self.add(config, ctx) {
                Ok(()) if changed => result.changed.push(name),
                Ok(()) => result.added.push(name),
                Err(error) => result.errors.push((name, error.to_string())),
            }
        }
        self.wake_ready_waiters();
        Reply::later(async move {
            join_all(stopping.iter().flat_map(Slot::connections).map(|connection| connection.send(connection::Shutdown))).await;
            result
        })
    }
}

impl Handler<StateChanged> for Hub {
    type Result = ();

    fn handle(&mut self, msg: StateChanged, ctx: &mut Context<Self>) {
        let changed = |hub: &mut Self, _: &mut Context<Self>| {
            let Some(slot) = hub.servers.get_mut(&msg.server).filter(|slot| slot.instance == msg.instance) else { return };
            slot.state = msg.state.clone();
            hub.registry.do_send(ServerStateChanged { server: msg.server.clone(), state: msg.state.clone() });
            hub.publish(Event::ServerState { server: msg.server, state: msg.state });
            hub.wake_ready_waiters();
        };
        self.guarded("StateChanged", ctx, changed, drop)
    }
}

impl Handler<Status> for Hub {
    type Result = Reply<Vec<ServerStatus>>;

    fn handle(&mut self, _: Status, ctx: &mut Context<Self>) -> Self::Result {
        // A panic answers an empty table; its event says why.
        self.guarded("Status", ctx, |hub, _| hub.status(), |_| Reply::Ready(Vec::new()))
    }
}

impl Hub {
    fn status(&mut self) -> Reply<Vec<ServerStatus>> {
        let asks: Vec<_> = self.servers.values().map(|slot| slot.connection.send(GetStatus)).collect();
        let callers: Vec<_> =
            self.servers.iter().filter_map(|(name, slot)| Some((name.clone(), slot.callers.as_ref()?.shared.clone()))).collect();
        let warnings = self.registry.send(NamingWarnings);
        Reply::later(async move {
            let mut warnings = warnings.await.unwrap_or_default();
            let statuses = join_all(asks).await.into_iter().filter_map(Result::ok);
            let mut callers = counts_of(callers).await;
            let mut with_callers = |status: ServerStatus| ServerStatus { callers: callers.remove(&status.name), ..status };
            statuses.map(|status| with_naming_warnings(with_callers(status), &mut warnings)).collect()
        })
    }
}

impl Handler<ServerStatusOf> for Hub {
    type Result = Reply<Option<ServerStatus>>;

    fn handle(&mut self, msg: ServerStatusOf, ctx: &mut Context<Self>) -> Self::Result {
        let status_of = |hub: &mut Self, _: &mut Context<Self>| {
            let Some(slot) = hub.servers.get(&msg.0) else { return Reply::Ready(None) };
            let ask = slot.connection.send(GetStatus);
            let callers: Vec<_> = slot.callers.iter().map(|callers| (msg.0.clone(), callers.shared.clone())).collect();
            let warnings = hub.registry.send(NamingWarnings);
            Reply::later(async move {
                let mut warnings = warnings.await.unwrap_or_default();
                let callers = counts_of(callers).await.into_values().next();
                ask.await.ok().map(|status| with_naming_warnings(ServerStatus { callers, ..status }, &mut warnings))
            })
        };
        self.guarded("ServerStatusOf", ctx, status_of, |_| Reply::Ready(None))
    }
}

/// The counts of servers' callers, made off the Hub's thread: a server
/// whose callers log in themselves counts its stored logins by opening them.
async fn counts_of(callers: Vec<(String, std::sync::Arc<crate::callers::Callers>)>) -> BTreeMap<String, crate::pool::CallerCounts> {
    let count = move || callers.into_iter().map(|(name, callers)| (name, callers.counts())).collect();
    tokio::task::spawn_blocking(count).await.unwrap_or_default()
}

/// Adds the registry's warnings about the server's names to its status.
fn with_naming_warnings(mut status: ServerStatus, warnings: &mut BTreeMap<String, Vec<String>>) -> ServerStatus {
    status.warnings.extend(warnings.remove(&status.name).unwrap_or_default());
    status
}

impl Handler<WaitReady> for Hub {
    type Result = Reply<()>;

    fn handle(&mut self, _: WaitReady, ctx: &mut Context<Self>) -> Self::Result {
        let wait = |hub: &mut Self, _: &mut Context<Self>| {
            if hub.settled() {
                return Reply::Ready(());
            }
            let (tx, rx) = oneshot::channel();
            hub.ready_waiters.push(tx);
            Reply::later(async move {
                let _ = rx.await;
            })
        };
        self.guarded("WaitReady", ctx, wait, |_| Reply::Ready(()))
    }
}

impl Handler<GetRegistry> for Hub {
    type Result = MessageResult<GetRegistry>;

    fn handle(&mut self, _: GetRegistry, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.registry.clone())
    }
}

/// A connection's event: passed on to every subscriber.
impl Handler<Event> for Hub {
    type Result = ();

    fn handle(&mut self, event: Event, ctx: &mut Context<Self>) {
        self.guarded("Event", ctx, |hub, _| hub.publish(event), drop);
    }
}

impl Handler<Subscribe> for Hub {
    type Result = ();

    fn handle(&mut self, msg: Subscribe, ctx: &mut Context<Self>) {
        let subscribe = |hub: &mut Self, _: &mut Context<Self>| {
            // Subscribers that went away leave here too, not only at the next event.
            hub.subscribers.retain(|s| s.connected());
            hub.subscribers.push(msg.0);
        };
        self.guarded("Subscribe", ctx, subscribe, drop);
    }
}

impl Handler<Shutdown> for Hub {
    type Result = Reply<()>;

    fn handle(&mut self, _: Shutdown, ctx: &mut Context<Self>) -> Self::Result {
        // A panic part-way still leaves the Hub refusing new servers.
        self.guarded("Shutdown", ctx, |hub, _| hub.shutdown(), |_| Reply::Ready(()))
    }
}

impl Hub {
    fn shutdown(&mut self) -> Reply<()> {
        self.shut_down = true;
        self.registry.do_send(StopWaiting);
        let slots: Vec<Slot> = std::mem::take(&mut self.servers).into_values().collect();
        self.directory.clear();
        for waiter in self.ready_waiters.drain(..) {
            let _ = waiter.send(());
        }
        let end_orphans = self.end_orphans;
        let threads = self.threads.close();
        Reply::later(async move {
            join_all(slots.iter().flat_map(Slot::connections).map(|connection| connection.send(connection::Shutdown))).await;
            drop(slots);
            stop_and_join(threads, THREADS_STOP_WITHIN, "server connection").await;
            if end_orphans {
                let _ = tokio::task::spawn_blocking(crate::transport::stdio::end_orphans).await;
            }
        })
    }
}

#[cfg(feature = "fault-injection")]
impl Handler<InjectPanic> for Hub {
    type Result = bool;

    fn handle(&mut self, msg: InjectPanic, _: &mut Context<Self>) -> bool {
        self.servers.get(&msg.server).map(|slot| slot.connection.do_send(connection::InjectPanic(msg.during))).is_some()
    }
}

#[cfg(feature = "fault-injection")]
impl Handler<super::guard::PanicNext> for Hub {
    type Result = ();

    fn handle(&mut self, msg: super::guard::PanicNext, _: &mut Context<Self>) {
        self.panic_next.arm(msg.0);
    }
}

/// Whether the core can serve: the Hub answers, and so does its Registry
/// (`Err` says which cannot). `/healthz` asks it with a deadline.
/// Hidden: `serve --http`'s probe, not an embedder's message.
#[doc(hidden)]
#[derive(Message)]
#[rtype(result = "Result<(), String>")]
pub struct CoreHealth;

impl Handler<CoreHealth> for Hub {
    type Result = Reply<Result<(), String>>;

    fn handle(&mut self, _: CoreHealth, ctx: &mut Context<Self>) -> Self::Result {
        let ask = |hub: &mut Self, _: &mut Context<Self>| {
            if hub.shut_down {
                return Reply::Ready(Err("the runtime is shutting down".to_string()));
            }
            let probe = hub.registry.send(NamingWarnings);
            Reply::later(async move {
                probe.await.map(drop).map_err(|_| "the registry stopped (a panic escaped its guard); restart mcpvisor".to_string())
            })
        };
        self.guarded("CoreHealth", ctx, ask, |panic| Reply::Ready(Err(panic.to_string())))
    }
}

impl<M, T> Handler<ToServer<M>> for Hub
where
    M: Message<Result = Result<T, CallError>> + Send + 'static,
    T: Send + 'static,
    Connection: Handler<M>,
{
    type Result = Reply<Result<T, CallError>>;

    fn handle(&mut self, msg: ToServer<M>, ctx: &mut Context<Self>) -> Self::Result {
        let to_server = |hub: &mut Self, _: &mut Context<Self>| {
            let Some(slot) = hub.servers.get(&msg.server) else {
                return Reply::Ready(Err(CallError::UnknownServer { server: msg.server }));
            };
            let (ask, server) = (slot.connection.send(msg.message), msg.server);
            Reply::later(async move { ask.await.unwrap_or_else(|_| Err(CallError::Stopped { server, tool: String::new() })) })
        };
        self.guarded("ToServer", ctx, to_server, |panic| Reply::Ready(Err(CallError::Internal { tool: String::new(), panic })))
    }
}

/// Runs a closure on the runtime's thread (a `Handle` starting an actor there).
/// Hidden: how this crate's fronts reach the runtime's thread; an actix
/// program is on its own System's thread already.
#[doc(hidden)]
#[derive(Message)]
#[rtype(result = "()")]
pub struct Spawn(pub Box<dyn FnOnce() + Send>);

impl Handler<Spawn> for Hub {
    type Result = ();

    fn handle(&mut self, msg: Spawn, ctx: &mut Context<Self>) {
        self.guarded("Spawn", ctx, |_, _| (msg.0)(), drop);
    }
}
