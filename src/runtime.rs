//! [`Runtime`]: the runtime for programs that are not actix programs.
//!
//! `Runtime::start` (or [`Runtime::builder`] with live parts) runs an actix
//! System with a [`Hub`] on a thread of its own and returns a [`Handle`]
//! (defined beside the actors, `actors::handle`, because the gateway's
//! session actor holds one too).

use std::sync::Arc;

use tokio::sync::oneshot;

use crate::actors::client_requests::ClientHandlers;
use crate::actors::directory::Directory;
use crate::actors::hub::{self, GetRegistry, Hub};
use crate::actors::listeners::Listeners;
use crate::actors::parts::Parts;
use crate::actors::Handle;
use crate::config::{RuntimeConfig, ServerConfig};
use crate::oauth::Authorizer;
use crate::telemetry::Telemetry;
use crate::transport::in_process::InProcessHandler;

pub struct Runtime;

impl Runtime {
    /// Starts the runtime thread and the configured servers, with the
    /// default live parts (see [`Runtime::builder`] to give them). Returns as
    /// soon as the hub is up; calls made before a server is connected wait for it.
    pub fn start(config: RuntimeConfig) -> std::io::Result<Handle> {
        Runtime::builder(config).start()
    }

    /// A runtime of `config` (plain data) to which the live parts are given
    /// before it starts:
    ///
    /// ```no_run
    /// # use mcpvisor::{config::RuntimeConfig, Runtime, ToolHandler};
    /// # fn run(config: RuntimeConfig, clock: impl ToolHandler) -> std::io::Result<()> {
    /// let handle = Runtime::builder(config).in_process("clock", clock).start()?;
    /// # Ok(()) }
    /// ```
    pub fn builder(config: RuntimeConfig) -> RuntimeBuilder {
        RuntimeBuilder { config, parts: Parts::default() }
    }
}

/// A runtime's configuration and the live parts it is given; [`RuntimeBuilder::start`] runs it.
#[derive(Debug)]
pub struct RuntimeBuilder {
    config: RuntimeConfig,
    parts: Parts,
}

impl RuntimeBuilder {
    /// The configuration, with the in-process servers added so far.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// Serves the server named `name` with `handler`, inside this process.
    /// Without a server of that name in the configuration, one is added
    /// ([`ServerConfig::in_process`], every setting at its default); with
    /// one, it should have `transport` in-process.
    ///
    /// ```
    /// use futures::future::BoxFuture;
    /// use mcpvisor::config::RuntimeConfig;
    /// use mcpvisor::protocol::ErrorObject;
    /// use mcpvisor::{CallToolResult, ContentBlock, JsonObject, Runtime, Tool, ToolHandler};
    ///
    /// struct Clock;
    ///
    /// impl ToolHandler for Clock {
    ///     fn tools(&self) -> Vec<Tool> {
    ///         let schema = serde_json::json!({"type": "object", "properties": {}});
    ///         vec![Tool::new("now", "The current Unix time in seconds", schema.as_object().cloned().unwrap_or_default())]
    ///     }
    ///
    ///     fn call<'a>(&'a self, _name: &'a str, _arguments: JsonObject) -> BoxFuture<'a, Result<CallToolResult, ErrorObject>> {
    ///         Box::pin(async move {
    ///             let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    ///             Ok(CallToolResult::success(vec![ContentBlock::text(now.as_secs().to_string())]))
    ///         })
    ///     }
    /// }
    ///
    /// // The server `clock` (its tool: mcp__clock__now), served by `Clock`:
    /// let runtime = Runtime::builder(RuntimeConfig::default()).in_process("clock", Clock);
    /// assert_eq!(runtime.config().servers[0].name, "clock");
    /// ```
    pub fn in_process(mut self, name: impl Into<String>, handler: impl Into<InProcessHandler>) -> Self {
        let name = name.into();
        if !self.config.servers.iter().any(|server| server.name == name) {
            self.config.servers.push(ServerConfig::in_process(name.clone()));
        }
        self.parts.in_process.insert(name, handler.into());
        self
    }

    /// Answerers of the requests servers send (roots, sampling, elicitation).
    pub fn client_handlers(mut self, handlers: ClientHandlers) -> Self {
        self.parts.client_handlers = handlers;
        self
    }

    /// Where tool calls are counted and audited (default: counted only).
    pub fn telemetry(mut self, telemetry: Telemetry) -> Self {
        self.parts.telemetry = telemetry;
        self
    }

    /// Who follows the authorization URL when server `server` needs an
    /// OAuth login while connecting (default: nobody; the login is left to
    /// the user, and the server is `needs_auth`).
    pub fn authorizer(mut self, server: impl Into<String>, authorizer: impl Authorizer) -> Self {
        self.parts.authorizers.insert(server.into(), Arc::new(authorizer));
        self
    }

    /// Where a gateway's front keeps each caller's latest access token, for
    /// the servers that act as each caller (auth type `token_exchange`).
    #[doc(hidden)] // the gateway's, not an embedder's
    pub fn caller_tokens(mut self, book: mcpvisor_wire::caller_token::CallerTokens) -> Self {
        self.parts.caller_tokens = book;
        self
    }

    /// The gateway's login desk, for the servers whose callers log in
    /// themselves (`auth = { type = "oauth", per_caller = true }`).
    #[doc(hidden)] // the gateway's, not an embedder's
    pub fn caller_logins(mut self, desk: Arc<crate::oauth::LoginDesk>) -> Self {
        self.parts.caller_logins = Some(desk);
        self
    }

    /// Pins every server's tool definitions on first use, in the file
    /// `path` (0600 in a 0700 directory): a tool whose definition changes
    /// later, or that disappears and comes back, is left out of the
    /// catalog and refused (`CallError::Withheld`) until the change is
    /// accepted (`mcpvisor tools --accept`). Default: nothing is pinned.
    pub fn pin_tools(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.parts.pins = Some(Arc::new(crate::integrity::pins::PinStore::open(path.into())));
        self
    }

    /// Starts the runtime thread and the configured servers. Returns as soon
    /// as the hub is up; calls made before a server is connected wait for it.
    pub fn start(self) -> std::io::Result<Handle> {
        let RuntimeBuilder { config, parts } = self;
        // Every server's secrets are known before any connection serves a
        // call (each connection adds its own too, for servers added later).
        parts.secrets.learn(&config.servers);
        let telemetry = parts.telemetry.clone();
        // The hub keeps it equal to its servers; the handle reads it (one table, shared).
        let directory = Directory::default();
        let hub_directory = directory.clone();
        // Held by the hub and its registry only: the handle's side is weak, so they close with the runtime.
        let listeners = Listeners::default();
        let adder = listeners.adder();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new().name("mcpvisor-runtime".into()).spawn(move || {
            let system = actix::System::new();
            system.block_on(async move {
                let hub = Hub::start_sharing(config, parts, hub_directory, listeners);
                let Ok(registry) = hub.send(GetRegistry).await else { return };
                if started_tx.send((hub.clone(), registry)).is_err() {
                    return;
                }
                let _ = stop_rx.await;
                let _ = hub.send(hub::Shutdown).await;
            });
        })?;
        let (hub, registry) = started_rx.recv().map_err(|_| std::io::Error::other("the mcpvisor runtime thread failed to start"))?;
        Ok(Handle::running(hub, directory, adder, registry, telemetry, stop_tx, thread))
    }
}
