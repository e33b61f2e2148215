//! One MCP server: its process, its framed stdio, its pending calls.
//!
//! Invariants:
//! - at most `max_in_flight` caller requests are on the wire at once and at
//!   most `max_queued` wait behind them (`book::CallBook` keeps the count);
//!   the next call is refused with `Overloaded` at once;
//! - nothing is written to the child except through `outbox`, which holds
//!   at most `max_in_flight` requests plus [`MAX_CONTROL_FRAMES`] control
//!   frames, so a child that stops reading makes callers wait, not memory grow;
//! - a call is answered exactly once: by the server, by its time-out (then
//!   `notifications/cancelled` is sent if the request was written), by the
//!   server going down (`ServerExited`, never resent), or by shutdown;
//! - a request id is never reused within a connection's life, so a late
//!   answer can only match nothing and is logged and dropped;
//! - every entry into the actor's code is guarded against panics
//!   (`guard`): the calls in flight get an error reply, the process is
//!   killed and the restart policy applies;
//! - the connection holds no strong address of itself; only the Hub does.
//!
//! The actor's code, by concern: this file (state, enabling, reconnecting,
//! status, shutdown), `run` (one run of the process: start, exit, restart
//! or give up), `process` (the seam to the child process), `negotiation`
//! (eras and what is restored after a restart), `listing` and `intake`
//! (tools, resources, prompts), `wire` (writing and reading frames),
//! `unmatched` (answers that cannot be used), `calls` (callers' requests and
//! tool calls), `book` (call bookkeeping) and `guard` (panic isolation).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::dev::MessageResponse;
use actix::prelude::*;
use actix::WeakAddr;
use rmcp::model::CallToolResult;
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::io::AsyncWriteExt;
use tokio::sync::oneshot;
use tokio_util::codec::FramedRead;

use super::client_requests::{Answerer, ClientHandlers};
#[cfg(feature = "fault-injection")]
pub use super::messages::InjectPanic;
pub use super::messages::{Forget, GetStatus, Reconnect, Registered, Request, Routed, SetEnabled, Shutdown, StateChanged, Whereabouts};
use super::messages::{LogLevel, RootsChanged, SetLogLevel, SubscribeResource, UnsubscribeResource};
use super::parts::ServerParts;
use super::progress::{Progress, ProgressClock, ProgressRoute, ProgressSink};
use super::reply::Reply;
use super::rounds;
use super::rounds::Requester;
use super::{CallTool, Event, Instance, ServerDown, ServerState, ServerStatus, ToolsChanged, ToolsStale};

mod book;
mod calls;
mod failure;
mod guard;
mod intake;
mod listing;
mod negotiation;
mod pinning;
mod process;
mod run;
mod unmatched;
mod wire;

use failure::{Failure, Outcome};

use crate::codec::{peek_id, Frame, FrameError, JsonRpcCodec};
use crate::config::{Era as ConfiguredEra, Keyword, Redactor, ServerConfig, Transport};
use crate::error::{CallError, Cause, ConnectError};
use crate::protocol::pagination::ListBounds;
use crate::protocol::schema::{SchemaCache, ToolContract};
use crate::protocol::{self, error_codes, methods, Era, ErrorObject, Message as RpcMessage, RequestId, Session};
use crate::rate_limit::Limiter;
use crate::restart::{Decision, Ending, RestartTracker};
use crate::telemetry::{CallStart, CallWatch, Telemetry, ToolStats};
use crate::transport::stdio::{self, LogLines, ProcessGroup};
use crate::transport::{ExitInfo, ExitWatch};
use book::{CallBook, Pending, Queued};
use listing::{Counts, Listing, ListingState};
use negotiation::Peer;
use process::Process;
use run::{Outbound, Run};

/// Lines of stderr kept for status and error messages.
pub const STDERR_TAIL_LINES: usize = 50;
/// Control frames (cancellations, answers to the server's requests) the
/// outbox holds at most; past that they are dropped with a warning.
pub const MAX_CONTROL_FRAMES: usize = 256;
/// After stdout closes, how long the process has to exit before it is killed.
const EXIT_AFTER_EOF: Duration = Duration::from_secs(2);
/// After the process exits, how long its last output may take to drain.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);

fn too_large(size: usize, max: usize) -> String {
    format!(
        "the answer was {size} bytes or more, over this server's max_frame of {max} bytes; it was skipped. Raise max_frame to accept it"
    )
}

/// Where a connection tells what its server offers: the catalog (the
/// Registry), reached through these three messages only, so that the
/// connection does not depend on the Registry (which routes to it).
#[derive(Clone)]
pub struct CatalogLink {
    /// Stamped on every report (see [`Instance`]).
    instance: Instance,
    stale: Recipient<ToolsStale>,
    tools: Recipient<ToolsChanged>,
    down: Recipient<ServerDown>,
}

impl CatalogLink {
    pub fn of<A>(catalog: &Addr<A>, instance: Instance) -> CatalogLink
    where
        A: Actor + Handler<ToolsStale> + Handler<ToolsChanged> + Handler<ServerDown>,
        A::Context: actix::dev::ToEnvelope<A, ToolsStale> + actix::dev::ToEnvelope<A, ToolsChanged> + actix::dev::ToEnvelope<A, ServerDown>,
    {
        CatalogLink { instance, stale: catalog.clone().recipient(), tools: catalog.clone().recipient(), down: catalog.clone().recipient() }
    }

    fn do_send_stale(&self, server: String) {
        self.stale.do_send(ToolsStale { server, instance: self.instance });
    }

    fn do_send_tools(&self, server: String, tools: Vec<super::KeptTool>) {
        self.tools.do_send(ToolsChanged { server, instance: self.instance, tools });
    }

    fn do_send_down(&self, server: String) {
        self.down.do_send(ServerDown { server, instance: self.instance });
    }

    /// The instance its reports carry.
    pub fn instance(&self) -> Instance {
        self.instance
    }
}

/// Who a connection reports to and asks.
#[derive(Clone)]
pub struct Links {
    pub registry: CatalogLink,
    /// The Hub, told of every state change.
    pub hub: Recipient<StateChanged>,
    /// The Hub, which passes events on to its subscribers.
    pub events: Recipient<Event>,
    pub handlers: ClientHandlers,
    /// Where each tool call is counted and audited.
    pub telemetry: Telemetry,
    /// This server's own live parts (its in-process handler, its OAuth authorizer).
    pub server: ServerParts,
}

pub struct Connection {
    /// This actor's own address, weak, made once (each `ctx.address()` allocates).
    me: Option<WeakAddr<Connection>>,
    config: Arc<ServerConfig>,
    registry: CatalogLink,
    hub: Recipient<StateChanged>,
    events: Recipient<Event>,
    answerer: Arc<Answerer>,
    state: ServerState,
    restarts: RestartTracker,
    /// The server's and its tools' rate limits.
    limiter: Limiter,
    telemetry: Telemetry,
    /// Given at start, kept across restarts: each run starts from them.
    parts: ServerParts,
    /// Each called tool's counters, looked up once.
    tool_stats: HashMap<String, Arc<ToolStats>>,
    next_id: i64,
    generation: u64,
    /// Requests on the wire, calls waiting for a slot, unusable lines.
    calls: CallBook,
    run: Option<Run>,
    stderr_tail: VecDeque<String>,
    /// The sandbox of the last run, and the last limit a run hit.
    last_sandbox: Option<crate::sandbox::SandboxStatus>,
    sandbox_violation: Option<String>,
    /// Masks the secrets of `config` in each stderr line before it is logged or kept.
    redactor: Redactor,
    /// Screens the secrets in its calls' arguments and results ([`crate::integrity::secrets`]).
    screen: crate::integrity::secrets::SecretScreen,
    /// Tools of the last listing that went to the catalog (the Registry
    /// keeps the only copy of the tools themselves).
    tool_count: usize,
    /// Tools of the last listing left out or changed, one sentence each.
    tool_warnings: Vec<String>,
    /// Tools of the last listing withheld by their pins or the scanner ([`pinning`]).
    withheld: Vec<pinning::Held>,
    /// What calls to each tool are checked against.
    contracts: HashMap<String, Arc<ToolContract>>,
    /// The schemas of the tools called last, parsed (bounded: see [`SchemaCache`]).
    schemas: SchemaCache,
    /// What the server told about itself at connect.
    peer: Option<Peer>,
    session: Session,
    /// The era found by `era = auto`, kept across restarts.
    detected_era: Option<Era>,
    counts: Counts,
    /// Set with `SetLogLevel`; applied again after each restart.
    log_level: Option<LogLevel>,
    /// Resources subscribed to; subscribed again after each restart.
    subscriptions: std::collections::BTreeSet<String>,
    /// Why the current run is ending, when we know better than its exit status.
    run_error: Option<(ConnectError, Ending)>,
    last_error: Option<String>,
    /// When a server failed on its restart intensity is tried again.
    retry_at: Option<Instant>,
    /// Serving, reconnecting on purpose, or stopping for good.
    phase: Phase,
    /// Enabled servers list their tools and take calls; a disabled one keeps
    /// its process (if it has one) but its tools leave the catalog.
    enabled: bool,
    /// Arms the next guarded entry to panic (tests; see `guard`).
    panic_next: crate::guard::PanicSwitch,
    /// Set by [`Registered`]: no process starts before.
    registered: bool,
}

/// Where a connection is in its life. Whether it is enabled is kept apart
/// (`Connection::enabled`): the user's toggle holds in every phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Running its server, or restarting it as the policy says.
    Serving,
    /// A deliberate reconnect is under way: the next exit restarts at once,
    /// and what was in flight fails with `Stopped`.
    Reconnecting,
    /// Stopped for good (`Shutdown`): no restarts, and nobody is told of
    /// state changes (the server is no longer theirs).
    Stopping,
}

/// Connection values alive in this process (tests of ownership: removing a
/// server must end its actor whatever is still outstanding).
#[cfg(feature = "fault-injection")]
static LIVE_CONNECTIONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[cfg(feature = "fault-injection")]
pub fn live_connections() -> usize {
    LIVE_CONNECTIONS.load(std::sync::atomic::Ordering::SeqCst)
}

#[cfg(feature = "fault-injection")]
impl Drop for Connection {
    fn drop(&mut self) {
        LIVE_CONNECTIONS.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Connection {
    pub fn new(config: ServerConfig, links: Links) -> Self {
        #[cfg(feature = "fault-injection")]
        LIVE_CONNECTIONS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let Links { registry, hub, events, handlers, telemetry, server: parts } = links;
        let capabilities = handlers.capabilities();
        let answerer = Arc::new(Answerer::new(&config.name, handlers, &config.roots).for_caller(parts.caller.clone()));
        let restarts = RestartTracker::new(config.restart, config.restart_limits);
        let limiter = Limiter::new(&config.name, &config.rate_limits);
        let config_enabled = config.enabled;
        let redactor = Redactor::from_configs([&config]);
        parts.secrets.learn([&config]);
        let screen = crate::integrity::secrets::SecretScreen::new(&config, parts.secrets.clone());
        let state = if config.enabled { ServerState::Pending } else { ServerState::Disabled };
        Connection {
            me: None,
            config: Arc::new(config),
            registry,
            hub,
            events,
            answerer,
            state,
            restarts,
            limiter,
            telemetry,
            parts,
            tool_stats: HashMap::new(),
            next_id: 0,
            generation: 0,
            calls: CallBook::default(),
            run: None,
            stderr_tail: VecDeque::with_capacity(STDERR_TAIL_LINES),
            last_sandbox: None,
            sandbox_violation: None,
            redactor,
            screen,
            tool_count: 0,
            withheld: Vec::new(),
            tool_warnings: Vec::new(),
            contracts: HashMap::new(),
            schemas: SchemaCache::default(),
            peer: None,
            detected_era: None,
            counts: Counts::default(),
            log_level: None,
            subscriptions: Default::default(),
            session: Session::new(Era::Legacy, protocol::LATEST_LEGACY_VERSION, capabilities),
            run_error: None,
            last_error: None,
            retry_at: None,
            phase: Phase::Serving,
            enabled: config_enabled,
            panic_next: Default::default(),
            registered: false,
        }
    }

    fn name(&self) -> &str {
        &self.config.name
    }

    /// Talks to this connection on a caller's behalf (for multi-request operations).
    pub(crate) fn requester(&mut self, ctx: &mut Context<Self>) -> Requester {
        self.requester_parts(ctx).requester()
    }

    /// What a [`Requester`] is made of, without its allocations: for a
    /// call that makes one only if its answer needs more rounds.
    pub(super) fn requester_parts(&mut self, ctx: &mut Context<Self>) -> RequesterParts {
        RequesterParts {
            connection: self.me(ctx),
            config: self.config.clone(),
            answerer: self.answerer.clone(),
            bounds: self.list_bounds(),
        }
    }

    /// This connection's own address, weak.
    pub(super) fn me(&mut self, ctx: &mut Context<Self>) -> WeakAddr<Self> {
        self.me.get_or_insert_with(|| ctx.address().downgrade()).clone()
    }

    /// The state others see: `Disabled` overrides the lifecycle state.
    fn reported_state(&self) -> ServerState {
        if self.enabled {
            self.state.clone()
        } else {
            ServerState::Disabled
        }
    }

    /// How long until the cool-down's retry, from now.
    fn retry_in(&self) -> Option<Duration> {
        self.retry_at.map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// Changes the lifecycle state and tells the Hub when what it sees
    /// changes. A connection being stopped tells nobody: it is no longer theirs.
    fn set_state(&mut self, state: ServerState) {
        let before = self.reported_state();
        self.state = state;
        self.report_if_changed(before);
    }

    fn report_if_changed(&self, before: ServerState) {
        let after = self.reported_state();
        if after != before && self.phase != Phase::Stopping {
            let instance = self.registry.instance();
            self.hub.do_send(StateChanged { server: self.config.name.clone(), instance, state: after });
        }
    }

    fn stderr_tail(&self) -> Vec<String> {
        self.stderr_tail.iter().cloned().collect()
    }

    fn next_request_id(&mut self) -> RequestId {
        self.next_id += 1;
        RequestId::Number(self.next_id)
    }

    /// Enables or disables the server (see [`SetEnabled`]).
    fn set_enabled(&mut self, enabled: bool, ctx: &mut Context<Self>) {
        if self.enabled == enabled {
            return;
        }
        let before = self.reported_state();
        self.enabled = enabled;
        let server = self.config.name.clone();
        if !enabled {
            self.registry.do_send_down(server);
            self.calls.fail_queued(|| Failure::Disabled);
        } else if self.state == ServerState::Disabled {
            self.state = ServerState::Pending;
            self.start_process(ctx);
        } else if self.run.as_ref().is_some_and(|run| run.ready) {
            // The catalog left this server's tools out while it was disabled,
            // and the connection keeps no copy: list them afresh, and report
            // the server connected once they are back in the catalog.
            self.state = ServerState::Pending;
            self.list(Listing::Tools, ctx);
        }
        self.report_if_changed(before);
    }

    /// Starts the server afresh: a running one is stopped politely first
    /// (its calls in flight fail with `Stopped`); a failed one gets a new
    /// restart budget. A deliberate reconnect is not counted as a crash.
    fn reconnect(&mut self, ctx: &mut Context<Self>) {
        if self.phase == Phase::Stopping {
            return;
        }
        self.restarts.forgive();
        self.retry_at = None;
        match self.run.as_mut() {
            Some(run) => {
                self.phase = Phase::Reconnecting;
                actix_rt::spawn(run.process.stop(self.config.timeouts.shutdown_grace));
            }
            None if self.enabled => {
                self.last_error = None;
                self.set_state(ServerState::Pending);
                self.start_process(ctx);
            }
            None => {}
        }
    }

    fn status(&self) -> ServerStatus {
        let run = self.run.as_ref();
        let mut state = self.reported_state();
        if let ServerState::Failed { retry_in, .. } = &mut state {
            *retry_in = self.retry_in();
        }
        ServerStatus {
            name: self.config.name.clone(),
            state,
            pid: run.and_then(|r| r.process.pid()),
            era: self.peer.as_ref().map(|p| p.era.as_str().to_string()),
            protocol_version: self.peer.as_ref().map(|p| p.version.clone()),
            server_info: self.peer.as_ref().and_then(|p| p.info.clone()),
            resources: self.counts.resources,
            prompts: self.counts.prompts,
            tools: self.tool_count,
            in_flight: self.calls.in_flight(),
            queued: self.calls.queued(),
            restarts: self.restarts.total_restarts(),
            uptime: run.filter(|r| r.ready).map(|r| r.started_at.elapsed()),
            last_error: self.last_error.clone(),
            stderr_tail: self.stderr_tail(),
            warnings: self.tool_warnings.iter().cloned().chain(self.withheld_warnings()).collect(),
            withheld: self.withheld.iter().map(|withheld| withheld.tool().to_string()).collect(),
            remote: run.and_then(|r| r.process.remote_status()),
            sandbox: run
                .and_then(|r| r.process.sandbox())
                .or_else(|| self.last_sandbox.clone())
                .map(|sandbox| crate::sandbox::SandboxStatus { violation: self.sandbox_violation.clone(), ..sandbox }),
            callers: None,
        }
    }
}

fn flatten(outcome: Result<Outcome, oneshot::error::RecvError>) -> Outcome {
    outcome.unwrap_or(Err(Failure::Stopped))
}

fn parse<T: serde::de::DeserializeOwned>(raw: &RawValue) -> Result<T, String> {
    serde_json::from_str(raw.get()).map_err(|e| e.to_string())
}

/// See [`Connection::requester_parts`].
pub(super) struct RequesterParts {
    connection: WeakAddr<Connection>,
    config: Arc<ServerConfig>,
    answerer: Arc<Answerer>,
    bounds: ListBounds,
}

impl RequesterParts {
    pub(super) fn requester(self) -> Requester {
        Requester::new(self.connection.recipient(), self.config.name.clone(), self.answerer, self.bounds)
    }
}

impl Actor for Connection {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        match self.state {
            ServerState::Pending => {
                let _ = self.guarded("a start", ctx, |act, ctx| act.start_process(ctx));
            }
            // Never synchronously: a crash loop must not starve the thread.
            ServerState::Restarting { next_in, .. } => {
                self.later(next_in, "a restart", ctx, |act, ctx| act.start_process(ctx));
            }
            _ => {}
        }
    }
}

impl Supervised for Connection {
    fn restarting(&mut self, _: &mut Context<Self>) {
        tracing::debug!(server = %self.config.name, "connection actor restarting");
    }
}

impl Handler<SetEnabled> for Connection {
    type Result = ();

    fn handle(&mut self, msg: SetEnabled, ctx: &mut Context<Self>) {
        let _ = self.guarded("enabling or disabling", ctx, |act, ctx| act.set_enabled(msg.0, ctx));
    }
}

impl Handler<Registered> for Connection {
    type Result = ();

    fn handle(&mut self, _: Registered, ctx: &mut Context<Self>) {
        self.registered = true;
        if self.state == ServerState::Pending {
            let _ = self.guarded("a start", ctx, |act, ctx| act.start_process(ctx));
        }
    }
}

impl Handler<Reconnect> for Connection {
    type Result = ();

    fn handle(&mut self, _: Reconnect, ctx: &mut Context<Self>) {
        let _ = self.guarded("a reconnect", ctx, |act, ctx| act.reconnect(ctx));
    }
}

impl Handler<GetStatus> for Connection {
    type Result = MessageResult<GetStatus>;

    fn handle(&mut self, _: GetStatus, ctx: &mut Context<Self>) -> Self::Result {
        let status = self.guarded("a status request", ctx, |act, _| act.status());
        // After a caught panic the second look shows the restart under way.
        MessageResult(status.unwrap_or_else(|_| self.status()))
    }
}

impl Handler<Shutdown> for Connection {
    type Result = Reply<()>;

    fn handle(&mut self, _: Shutdown, ctx: &mut Context<Self>) -> Self::Result {
        self.guarded("a shutdown", ctx, |act, _| act.shut_down()).unwrap_or(Reply::Ready(()))
    }
}

impl Connection {
    /// Stops the server for good (see [`Shutdown`]).
    fn shut_down(&mut self) -> Reply<()> {
        self.phase = Phase::Stopping;
        self.calls.fail_queued(|| Failure::Stopped);
        let Some(run) = self.run.as_mut() else { return Reply::Ready(()) };
        // Closing stdin is the polite request to exit (MCP's stdio shutdown).
        let stopped = run.process.stop(self.config.timeouts.shutdown_grace);
        let name = self.config.name.clone();
        Reply::later(async move {
            let exit = stopped.await;
            tracing::info!(server = %name, "stopped ({exit})");
        })
    }
}

#[cfg(feature = "fault-injection")]
impl Handler<InjectPanic> for Connection {
    type Result = ();

    fn handle(&mut self, msg: InjectPanic, _: &mut Context<Self>) {
        self.panic_next.arm(msg.0);
    }
}
