//! [`Runtime`] and [`Handle`]: the runtime for programs that are not actix
//! programs.
//!
//! `Runtime::start` runs an actix System with a [`Hub`] on a thread of its
//! own and returns a [`Handle`], which is `Send + Sync + Clone` and speaks
//! only this crate's types. Dropping the last handle shuts every server
//! down (close stdin, SIGTERM, SIGKILL, reap) and joins the thread; that drop
//! blocks for as long as the servers take to stop (at most about twice
//! the servers' `shutdown_grace`). [`Handle::shutdown`] does the same
//! without blocking a thread.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use actix::Addr;
use rmcp::model::{CallToolResult, JsonObject};
use tokio::sync::oneshot;

use crate::actors::hub::{
    self, AddServer, GetRegistry, Hub, Reconnect, RemoveServer, ServerStatusOf, SetServers, SetServersResult, Status, Toggle, WaitReady,
};
use crate::actors::{CallTool, Event, ListTools, Registry, ServerStatus, ToolEntry};
use crate::config::{RuntimeConfig, ServerConfig};
use crate::error::{CallError, ManageError};

pub struct Runtime;

impl Runtime {
    /// Starts the runtime thread and the configured servers. Returns as soon
    /// as the hub is up; calls made before a server is connected wait for it.
    pub fn start(config: RuntimeConfig) -> std::io::Result<Handle> {
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new().name("mcpvisor-runtime".into()).spawn(move || {
            let system = actix::System::new();
            system.block_on(async move {
                let hub = Hub::start(config);
                let Ok(registry) = hub.send(GetRegistry).await else { return };
                if started_tx.send((hub.clone(), registry)).is_err() {
                    return;
                }
                let _ = stop_rx.await;
                let _ = hub.send(hub::Shutdown).await;
            });
        })?;
        let (hub, registry) = started_rx.recv().map_err(|_| std::io::Error::other("the mcpvisor runtime thread failed to start"))?;
        Ok(Handle { inner: Arc::new(Inner { hub, registry, stop: Mutex::new(Some(stop_tx)), thread: Mutex::new(Some(thread)) }) })
    }
}

/// A `Send + Sync + Clone` handle on a running runtime.
#[derive(Clone)]
pub struct Handle {
    inner: Arc<Inner>,
}

struct Inner {
    hub: Addr<Hub>,
    registry: Addr<Registry>,
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
    /// Calls a tool by its exposed name (`mcp__{server}__{tool}`).
    pub async fn call_tool(&self, name: &str, arguments: Option<JsonObject>) -> Result<CallToolResult, CallError> {
        self.call(CallTool { name: name.to_string(), arguments, timeout: None }).await
    }

    /// Calls a tool with every option of [`CallTool`].
    pub async fn call(&self, call: CallTool) -> Result<CallToolResult, CallError> {
        let tool = call.name.clone();
        self.inner.registry.send(call).await.unwrap_or(Err(CallError::Stopped { server: String::new(), tool }))
    }

    /// The catalog: every connected server's tools, sorted by exposed name.
    pub async fn list_tools(&self) -> Vec<ToolEntry> {
        self.inner.registry.send(ListTools).await.unwrap_or_default()
    }

    /// Every server's status, sorted by name.
    pub async fn status(&self) -> Vec<ServerStatus> {
        self.inner.hub.send(Status).await.unwrap_or_default()
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

    pub async fn remove_server(&self, name: &str) -> Result<(), ManageError> {
        self.inner.hub.send(RemoveServer(name.to_string())).await.unwrap_or(Err(ManageError::RuntimeStopped))
    }

    /// Enables or disables a server (a disabled server keeps its process; its tools leave the catalog).
    pub async fn set_enabled(&self, name: &str, enabled: bool) -> Result<(), ManageError> {
        self.inner.hub.send(Toggle { server: name.to_string(), enabled }).await.unwrap_or(Err(ManageError::RuntimeStopped))
    }

    /// Restarts a server now; revives a failed one.
    pub async fn reconnect(&self, name: &str) -> Result<(), ManageError> {
        self.inner.hub.send(Reconnect(name.to_string())).await.unwrap_or(Err(ManageError::RuntimeStopped))
    }

    /// Makes the running set equal to `servers`, leaving unchanged ones running.
    pub async fn set_servers(&self, servers: Vec<ServerConfig>) -> Result<SetServersResult, ManageError> {
        self.inner.hub.send(SetServers(servers)).await.map_err(|_| ManageError::RuntimeStopped)
    }

    /// Delivers server state changes and catalog changes to `events` until it is dropped.
    pub fn subscribe(&self) -> tokio::sync::mpsc::UnboundedReceiver<Event> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let forwarder = EventForwarder { tx };
        let hub = self.inner.hub.clone();
        let registry = self.inner.registry.clone();
        // The forwarder actor must live on the runtime's thread.
        self.inner.hub.do_send(hub::Spawn(Box::new(move || {
            use actix::Actor;
            let recipient = forwarder.start().recipient::<Event>();
            hub.do_send(crate::actors::Subscribe(recipient.clone()));
            registry.do_send(crate::actors::Subscribe(recipient));
        })));
        rx
    }

    /// The hub's address, for code running inside the runtime's actix System.
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

/// Bridges actix events to a tokio channel.
struct EventForwarder {
    tx: tokio::sync::mpsc::UnboundedSender<Event>,
}

impl actix::Actor for EventForwarder {
    type Context = actix::Context<Self>;
}

impl actix::Handler<Event> for EventForwarder {
    type Result = ();

    fn handle(&mut self, event: Event, ctx: &mut actix::Context<Self>) {
        if self.tx.send(event).is_err() {
            actix::ActorContext::stop(ctx);
        }
    }
}
