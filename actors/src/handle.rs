//! [`Handle`]: a running runtime as seen from programs that are not actix
//! programs (and from the gateway's session actor).
//!
//! `Runtime::start` (the crate root) runs an actix System with a [`Hub`] on
//! a thread of its own and returns a [`Handle`], which is `Send + Sync + Clone` and speaks
//! only this crate's types. Dropping the last handle shuts every server
//! down (close stdin, SIGTERM, SIGKILL, reap) and joins the thread; that drop
//! blocks for as long as the servers take to stop (at most about twice
//! the servers' `shutdown_grace`). [`Handle::shutdown`] does the same
//! without blocking a thread.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use actix::Addr;
use rmcp::model::{
    ArgumentInfo, CallToolResult, CompletionInfo, GetPromptResult, JsonObject, Prompt, ReadResourceResult, Reference, Resource,
    ResourceTemplate,
};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{broadcast, oneshot};

use crate::agent_handle::AgentHandle;
use crate::config::ServerConfig;
use crate::directory::Directory;
use crate::error::{CallError, ManageError};
use crate::hub::{
    self, AddInProcess, AddServer, Hub, Reconnect, RemoveServer, ServerStatusOf, SetServers, SetServersResult, Status, Toggle, WaitReady,
};
use crate::identity::Identity;
use crate::listeners::ListenerAdder;
use crate::operation::{
    Complete, GetPrompt, ListPrompts, ListResourceTemplates, ListResources, LogLevel, Ping, ReadResource, RootsChanged, SetLogLevel,
    SubscribeResource, UnsubscribeResource,
};
use crate::protocol::methods;
use crate::skills::{GetSkill, ListSkills, LoadSkill, ReadSkillFile};
use crate::telemetry::{MetricsSnapshot, ServerGauges, Telemetry};
use crate::transport::in_process::InProcessHandler;
use crate::{CallTool, Event, IntoArguments, KeptTool, ListKeptTools, ListTools, Registry, ServerStatus, ToolEntry};
use mcpvisor_services::skills::{LoadedSkill, Skill, SkillError};

/// A `Send + Sync + Clone` handle on a running runtime.
#[derive(Clone)]
pub struct Handle {
    inner: Arc<Inner>,
}

struct Inner {
    hub: Addr<Hub>,
    /// The Hub's servers' connections: an operation by server name goes straight there.
    directory: Directory,
    /// Where [`Handle::subscribe`] puts its channels.
    listeners: ListenerAdder,
    registry: Addr<Registry>,
    telemetry: Telemetry,
    stop: Mutex<Option<oneshot::Sender<()>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Inner {
    /// Asks the runtime to stop; returns the thread to join, if not yet joined.
    fn begin_stop(&self) -> Option<JoinHandle<()>> {
        if let Some(stop) = self.stop.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = stop.send(());
        }
        self.thread.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(thread) = self.begin_stop() {
            // Joining from the runtime thread itself would wait forever.
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

impl Handle {
    /// The handle of a runtime whose System runs on `thread` and stops when
    /// `stop` fires (see `Runtime::start`, its only caller).
    #[doc(hidden)]
    pub fn running(
        hub: Addr<Hub>,
        directory: Directory,
        listeners: ListenerAdder,
        registry: Addr<Registry>,
        telemetry: Telemetry,
        stop: oneshot::Sender<()>,
        thread: JoinHandle<()>,
    ) -> Handle {
        let (stop, thread) = (Mutex::new(Some(stop)), Mutex::new(Some(thread)));
        Handle { inner: Arc::new(Inner { hub, directory, listeners, registry, telemetry, stop, thread }) }
    }
}

impl Handle {
    /// Calls a tool by its exposed name (`mcp__{server}__{tool}`).
    ///
    /// `arguments` is what [`CallTool::new`] takes (see [`IntoArguments`]):
    /// a JSON object, or null/`None` for none; anything else fails with
    /// `CallError::InvalidArguments` before reaching the server.
    ///
    /// A call made before the server that owns the name has listed its
    /// tools (just after `Runtime::start` or [`Handle::add_server`])
    /// waits for that listing, within the call's time-out.
    pub async fn call_tool(&self, name: &str, arguments: impl IntoArguments) -> Result<CallToolResult, CallError> {
        self.call(CallTool::new(name, arguments)).await
    }

    /// Calls a tool with every option of [`CallTool`].
    pub async fn call(&self, call: CallTool) -> Result<CallToolResult, CallError> {
        let tool = call.name.clone();
        self.inner.registry.send(call).await.unwrap_or(Err(CallError::RuntimeStopped { tool }))
    }

    /// Calls a tool by its server's name and the server's own tool name.
    ///
    /// A server that acts as each caller (token exchange) takes it on the
    /// connection of the call's identity ([`crate::callers`]).
    pub async fn call_on(&self, server: &str, call: CallTool) -> Result<CallToolResult, CallError> {
        if let Some(callers) = self.inner.directory.callers(server) {
            return callers.call(call).await;
        }
        self.to_server(server, call).await
    }

    /// Ends `caller`'s (`Identity::caller_key`) own connection to `server`,
    /// a server whose callers log in themselves, after its login was made
    /// or revoked: its next call starts a new one. Nothing for other servers.
    #[doc(hidden)] // the gateway's login routes'
    pub async fn end_caller(&self, server: &str, caller: &str) {
        let end = crate::callers::EndCaller { server: server.to_owned(), caller: caller.to_owned() };
        let _ = self.inner.hub.send(end).await;
    }

    /// Every resource of `server`.
    pub async fn list_resources(&self, server: &str) -> Result<Vec<Resource>, CallError> {
        self.to_server(server, ListResources).await
    }

    /// Every resource template of `server` (none when it has no templates).
    pub async fn list_resource_templates(&self, server: &str) -> Result<Vec<ResourceTemplate>, CallError> {
        self.to_server(server, ListResourceTemplates).await
    }

    /// A server that acts as each caller answers only a caller's request
    /// (through the gateway), as with [`Handle::call_on`].
    pub async fn read_resource(&self, server: &str, uri: &str) -> Result<ReadResourceResult, CallError> {
        self.as_caller(server, None, uri, ReadResource { uri: uri.to_string() }).await
    }

    /// Asks for [`Event::ResourceUpdated`] of `uri` (see [`Handle::subscribe`]).
    pub async fn subscribe_resource(&self, server: &str, uri: &str) -> Result<(), CallError> {
        self.to_server(server, SubscribeResource { uri: uri.to_string() }).await
    }

    pub async fn unsubscribe_resource(&self, server: &str, uri: &str) -> Result<(), CallError> {
        self.to_server(server, UnsubscribeResource { uri: uri.to_string() }).await
    }

    pub async fn list_prompts(&self, server: &str) -> Result<Vec<Prompt>, CallError> {
        self.to_server(server, ListPrompts).await
    }

    pub async fn get_prompt(&self, server: &str, name: &str, arguments: Option<JsonObject>) -> Result<GetPromptResult, CallError> {
        self.as_caller(server, None, name, GetPrompt { name: name.to_string(), arguments }).await
    }

    /// Completions of a prompt's or resource template's argument.
    pub async fn complete(&self, server: &str, reference: Reference, argument: ArgumentInfo) -> Result<CompletionInfo, CallError> {
        self.as_caller(server, None, methods::COMPLETE, Complete { reference, argument, context: None }).await
    }

    /// Sets the lowest level of log messages `server` sends (kept across restarts).
    pub async fn set_log_level(&self, server: &str, level: LogLevel) -> Result<(), CallError> {
        self.to_server(server, SetLogLevel(level)).await
    }

    /// Tells `server` that the roots changed, so it asks for them again.
    pub async fn roots_changed(&self, server: &str) -> Result<(), CallError> {
        self.to_server(server, RootsChanged).await
    }

    /// The skills `server` lists (SEP-2640): their entries only, no file
    /// is read. `CallError::Unsupported` when the server does not offer the
    /// skills extension.
    pub async fn list_skills(&self, server: &str) -> Result<Vec<Skill>, CallError> {
        self.to_server(server, ListSkills).await
    }

    /// One skill's current entry, by the URI of its `SKILL.md`.
    pub async fn get_skill(&self, server: &str, uri: &str) -> Result<Skill, CallError> {
        self.to_server(server, GetSkill { uri: uri.to_string() }).await
    }

    /// Loads `skill` of `server`: reads its `SKILL.md` and uses it only when
    /// its size, digest and frontmatter are the entry's.
    pub async fn load_skill(&self, server: &str, skill: &Skill) -> Result<LoadedSkill, SkillError> {
        self.to_server(server, LoadSkill { skill: skill.clone() }).await?
    }

    /// Reads a file of a loaded skill (`path` relative to its root, or a
    /// URI), verified against the entry it was loaded with.
    pub async fn read_skill_file(&self, loaded: &LoadedSkill, path: &str) -> Result<Vec<u8>, SkillError> {
        self.to_server(&loaded.server, ReadSkillFile { skill: loaded.skill.clone(), uri: path.to_string() }).await?
    }

    /// Pings `server`; answers the round trip.
    pub async fn ping(&self, server: &str) -> Result<Duration, CallError> {
        self.to_server(server, Ping).await
    }

    /// A caller's request that reads what the server holds (a resource, a
    /// prompt, a completion): on the caller's own connection when the
    /// server acts as each caller ([`crate::callers`]; refused without an
    /// `identity` it can exchange), else as [`Handle::to_server`].
    pub(crate) async fn as_caller<M, T>(
        &self,
        server: &str,
        identity: Option<&Arc<Identity>>,
        label: &str,
        message: M,
    ) -> Result<T, CallError>
    where
        M: actix::Message<Result = Result<T, CallError>> + Send + 'static,
        T: Send + 'static,
        crate::Connection: actix::Handler<M>,
    {
        match self.inner.directory.callers(server) {
            Some(callers) => callers.operate(identity, label, message).await,
            None => self.to_server(server, message).await,
        }
    }

    async fn to_server<M, T>(&self, server: &str, message: M) -> Result<T, CallError>
    where
        M: actix::Message<Result = Result<T, CallError>> + Send + 'static,
        T: Send + 'static,
        crate::Connection: actix::Handler<M>,
    {
        // Straight to the connection; the Hub answers only for servers it does not have (or once stopped).
        if let Some(connection) = self.inner.directory.connection(server) {
            let ask = connection.send(message);
            // Dropped before the wait: an outstanding operation must not keep a removed server's actor alive.
            drop(connection);
            return ask.await.unwrap_or_else(|_| Err(CallError::Stopped { server: server.to_string(), tool: String::new() }));
        }
        let routed = self.inner.hub.send(hub::ToServer { server: server.to_string(), message }).await;
        routed.unwrap_or_else(|_| Err(CallError::RuntimeStopped { tool: String::new() }))
    }

    /// The catalog: every connected server's tools, sorted by exposed name.
    pub async fn list_tools(&self) -> Vec<ToolEntry> {
        self.inner.registry.send(ListTools).await.unwrap_or_default()
    }

    /// The catalog as [`Handle::list_tools`] lists it, each tool as the
    /// registry keeps it: schemas as text, shared with the registry's (a
    /// small fraction of the parsed tools' memory with large schemas).
    pub async fn list_kept_tools(&self) -> Vec<ToolEntry<KeptTool>> {
        self.inner.registry.send(ListKeptTools).await.unwrap_or_default()
    }

    /// Every server's status, sorted by name.
    pub async fn status(&self) -> Vec<ServerStatus> {
        self.inner.hub.send(Status).await.unwrap_or_default()
    }

    /// Every number of the runtime now: calls by server, tool and outcome,
    /// their latency, and each server's in-flight, queued, restarts and
    /// state. [`MetricsSnapshot::to_prometheus`] renders it for `/metrics`.
    pub async fn metrics(&self) -> MetricsSnapshot {
        let servers = self.status().await;
        let telemetry = &self.inner.telemetry;
        MetricsSnapshot {
            tools: telemetry.metrics().calls(),
            servers: servers
                .iter()
                .map(|s| ServerGauges {
                    server: s.name.clone(),
                    state: s.state.label(),
                    in_flight: s.in_flight,
                    queued: s.queued,
                    restarts: s.restarts,
                })
                .collect(),
            audit_dropped: telemetry.audit().map_or(0, |audit| audit.dropped()),
            otel_export_failures: telemetry.otel().map_or(0, |otel| otel.export_failures()),
        }
    }

    /// The runtime's metrics and audit log (to flush the audit log, say).
    pub fn telemetry(&self) -> &Telemetry {
        &self.inner.telemetry
    }

    pub async fn server_status(&self, name: &str) -> Option<ServerStatus> {
        self.inner.hub.send(ServerStatusOf(name.to_string())).await.ok().flatten()
    }

    /// Waits until every server is connected, failed or disabled, or `limit` passes.
    /// Returns whether everything settled in time.
    pub async fn wait_ready(&self, limit: Duration) -> bool {
        tokio::time::timeout(limit, self.inner.hub.send(WaitReady)).await.is_ok_and(|r| r.is_ok())
    }

    pub async fn add_server(&self, config: ServerConfig) -> Result<(), ManageError> {
        self.inner.hub.send(AddServer(config)).await.unwrap_or(Err(ManageError::RuntimeStopped))
    }

    /// Adds an in-process server (`config` names it, [`ServerConfig::in_process`])
    /// served by `handler`; the runtime keeps the handler under that name.
    pub async fn add_in_process(&self, config: ServerConfig, handler: impl Into<InProcessHandler>) -> Result<(), ManageError> {
        let add = AddInProcess { config, handler: handler.into() };
        self.inner.hub.send(add).await.unwrap_or(Err(ManageError::RuntimeStopped))
    }

    pub async fn remove_server(&self, name: &str) -> Result<(), ManageError> {
        self.inner.hub.send(RemoveServer(name.to_string())).await.unwrap_or(Err(ManageError::RuntimeStopped))
    }

    /// Enables or disables a server (a disabled server keeps its process; its tools leave the catalog).
    pub async fn set_enabled(&self, name: &str, enabled: bool) -> Result<(), ManageError> {
        self.inner.hub.send(Toggle { server: name.to_string(), enabled }).await.unwrap_or(Err(ManageError::RuntimeStopped))
    }

    /// Restarts a server now; revives a failed one. A server that acts as
    /// each caller also ends every caller's connection (each caller's next
    /// call starts a new one, with credentials or values made again).
    pub async fn reconnect(&self, name: &str) -> Result<(), ManageError> {
        self.inner.hub.send(Reconnect(name.to_string())).await.unwrap_or(Err(ManageError::RuntimeStopped))
    }

    /// Makes the running set equal to `servers`, leaving unchanged ones running.
    pub async fn set_servers(&self, servers: Vec<ServerConfig>) -> Result<SetServersResult, ManageError> {
        self.inner.hub.send(SetServers(servers)).await.map_err(|_| ManageError::RuntimeStopped)
    }

    /// Delivers server states, catalog changes, log messages and resource
    /// updates until the returned [`Events`] is dropped. At most
    /// [`EVENT_BUFFER`] events wait unread; past that the oldest are dropped
    /// and counted (see [`Events::missed`]), so a slow reader costs no memory.
    ///
    /// An operation started after this returns is heard: its events (a
    /// server's log messages during a call, its progress) come after the
    /// subscription is in place.
    pub fn subscribe(&self) -> Events {
        Events { rx: self.inner.listeners.add(EVENT_BUFFER), missed: 0 }
    }

    /// Starts an [`Agent`](crate::agent::Agent) on the runtime's
    /// thread, calling tools through this runtime's registry; `None` when
    /// the runtime has stopped. The agent stops when the last
    /// [`AgentHandle`] on it is dropped.
    pub async fn start_agent(&self, config: crate::agent::AgentConfig) -> Option<AgentHandle> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (registry, otel) = (self.inner.registry.clone(), self.telemetry().otel_shared());
        self.inner.hub.do_send(hub::Spawn(Box::new(move || {
            let _ = tx.send(crate::agent::Agent::start_traced(registry, config, otel));
        })));
        rx.await.ok().map(AgentHandle::new)
    }

    /// The hub's address, for this crate's fronts (actix code that holds a
    /// `Handle`); outside the crate, [`hub_of`] on the actix side.
    #[doc(hidden)]
    pub fn hub(&self) -> &Addr<Hub> {
        &self.inner.hub
    }

    /// Stops every server and the runtime thread, without blocking a thread.
    /// Other clones of this handle stop working.
    pub async fn shutdown(self) {
        if let Some(thread) = self.inner.begin_stop() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

/// Events a subscriber may leave unread before the oldest are dropped.
pub const EVENT_BUFFER: usize = 1024;

/// A subscription's events (see [`Handle::subscribe`]).
pub struct Events {
    rx: broadcast::Receiver<Event>,
    missed: u64,
}

impl Events {
    /// The next event; `None` once the runtime has stopped. Events dropped
    /// because this reader fell [`EVENT_BUFFER`] behind are skipped, counted
    /// in [`Events::missed`] and logged.
    pub async fn recv(&mut self) -> Option<Event> {
        loop {
            match self.rx.recv().await {
                Ok(event) => return Some(event),
                Err(broadcast::error::RecvError::Lagged(count)) => self.lagged(count),
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// The next event if one is waiting.
    pub fn try_recv(&mut self) -> Result<Event, TryRecvError> {
        loop {
            match self.rx.try_recv() {
                Ok(event) => return Ok(event),
                Err(broadcast::error::TryRecvError::Lagged(count)) => self.lagged(count),
                Err(broadcast::error::TryRecvError::Empty) => return Err(TryRecvError::Empty),
                Err(broadcast::error::TryRecvError::Closed) => return Err(TryRecvError::Disconnected),
            }
        }
    }

    /// How many events were dropped, in total, because this reader fell behind.
    pub fn missed(&self) -> u64 {
        self.missed
    }

    fn lagged(&mut self, count: u64) {
        self.missed += count;
        tracing::warn!(
            missed = count,
            total = self.missed,
            "an event subscriber fell {EVENT_BUFFER} events behind; the oldest were dropped"
        );
    }
}

/// The actix address of the [`Hub`] behind `handle`: for actix code that
/// holds a [`Handle`] and needs the Hub's own messages (the fault-injection
/// tests send it test-only ones). A `Handle`'s methods speak only this
/// crate's types; this function is the actix side's door to the same Hub.
pub fn hub_of(handle: &Handle) -> &Addr<Hub> {
    handle.hub()
}
