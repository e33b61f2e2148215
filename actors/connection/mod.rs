//! One MCP server: its process, its framed stdio, its pending calls.
//!
//! Invariants:
//! - at most `max_in_flight` caller requests are in `pending` at once
//!   (`in_flight` counts them); at most `max_queued` wait in `queue`; the
//!   next call is refused with `Overloaded` at once;
//! - nothing is written to the child except through `outbox`, which holds
//!   at most `max_in_flight` requests plus [`MAX_CONTROL_FRAMES`] control
//!   frames, so a child that stops reading makes callers wait, not memory grow;
//! - a call is answered exactly once: by the server, by its time-out (then
//!   `notifications/cancelled` is sent if the request was written), by the
//!   server going down (`ServerExited`, never resent), or by shutdown;
//! - a request id is never reused within a connection's life, so a late
//!   answer can only match nothing and is logged and dropped;
//! - a panic in a handler is caught: the calls in flight get an error
//!   reply, the process is killed and the restart policy applies.
//!
//! The actor's code, by concern: this file (state, process lifecycle,
//! going down, status), `negotiation` (eras and what is restored after a
//! restart), `listing` (tools, resources, prompts), `wire` (writing and
//! reading frames) and `calls` (callers' requests and tool calls).

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::dev::{MessageResponse, OneshotSender};
use actix::prelude::*;
use rmcp::model::{CallToolResult, Tool};
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::oneshot;
use tokio_util::codec::FramedRead;

use super::client_requests::{Answerer, ClientHandlers};
use super::operation::{LogLevel, Requester, RootsChanged, SetLogLevel, SubscribeResource, UnsubscribeResource};
use super::progress::{Progress, ProgressClock, ProgressRoute, ProgressSink};
use super::registry::Registry;
use super::reply::Reply;
use super::rounds;
use super::{CallTool, Event, ServerDown, ServerState, ServerStatus, ToolsChanged};

mod calls;
mod listing;
mod negotiation;
mod wire;

use crate::codec::{peek_id, Frame, FrameError, JsonRpcCodec};
use crate::config::{Era as ConfiguredEra, Keyword, Redactor, ServerConfig, Transport};
use crate::error::{CallError, ConnectError};
use crate::protocol::schema::ToolContract;
use crate::protocol::{self, error_codes, methods, Era, ErrorObject, Message as RpcMessage, RequestId, Session};
use crate::restart::{Decision, Ending, RestartTracker};
use crate::transport::stdio::{self, LogLines, ProcessGroup};
use crate::transport::{ExitInfo, ExitWatch};
pub use calls::{Request, Routed};
use listing::{Counts, Listing, ListingState};
use negotiation::Peer;

/// Lines of stderr kept for status and error messages.
pub const STDERR_TAIL_LINES: usize = 50;
/// Control frames (cancellations, answers to the server's requests) the
/// outbox holds at most; past that they are dropped with a warning.
pub const MAX_CONTROL_FRAMES: usize = 256;
/// Pages of `tools/list` followed at most (a server looping its cursor).
const MAX_LIST_PAGES: usize = 10_000;
/// After stdout closes, how long the process has to exit before it is killed.
const EXIT_AFTER_EOF: Duration = Duration::from_secs(2);
/// After the process exits, how long its last output may take to drain.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);

/// How a request ended, before it is turned into a caller-facing error.
#[derive(Debug)]
enum Failure {
    Rpc(ErrorObject),
    Exited {
        exit: ExitInfo,
        stderr_tail: Vec<String>,
    },
    TooLarge {
        size: usize,
        max: usize,
    },
    Internal(String),
    /// The server has failed for good (restart policy or intensity).
    GaveUp(String),
    Disabled,
    Stopped,
}

type Outcome = Result<Box<RawValue>, Failure>;

impl Failure {
    fn into_call_error(self, server: &str, tool: &str) -> CallError {
        let (server, tool) = (server.to_string(), tool.to_string());
        match self {
            Failure::Rpc(e) if e.code == error_codes::INVALID_PARAMS => CallError::InvalidArguments { server, tool, message: e.message },
            Failure::Rpc(e) => CallError::Rpc { server, tool, code: e.code, message: e.message, data: e.data },
            Failure::Exited { exit, stderr_tail } => CallError::ServerExited { server, tool, exit, stderr_tail },
            Failure::TooLarge { size, max } => CallError::Protocol {
                server,
                tool,
                message: format!("the answer was {size} bytes or more, over this server's max_frame of {max} bytes; it was skipped. Raise max_frame to accept it"),
            },
            Failure::Internal(message) => CallError::Transport { server, tool, message },
            Failure::GaveUp(error) => CallError::Failed { server, tool, error },
            Failure::Disabled => CallError::Disabled { server, tool },
            Failure::Stopped => CallError::Stopped { server, tool },
        }
    }

    fn into_connect_error(self, server: &str, method: &str) -> ConnectError {
        let server = server.to_string();
        match self {
            Failure::Rpc(e) => ConnectError::Rpc { server, method: method.into(), code: e.code, message: e.message },
            Failure::Exited { exit, stderr_tail } => ConnectError::Exited { server, exit, stderr_tail },
            other => ConnectError::Protocol { server, method: method.into(), message: format!("{other:?}") },
        }
    }
}

/// A request on the wire.
struct Pending {
    reply: oneshot::Sender<Outcome>,
    /// A caller's call: it holds one of the `max_in_flight` slots.
    counted: bool,
    /// Where this request's progress notifications go (token = request id).
    progress: Option<ProgressRoute>,
}

/// A call admitted but not yet written.
struct Queued {
    id: RequestId,
    frame: Vec<u8>,
    reply: oneshot::Sender<Outcome>,
    progress: Option<ProgressRoute>,
}

struct Outbound {
    /// The request this frame carries, `None` for control frames.
    request: Option<RequestId>,
    bytes: Vec<u8>,
}

/// One run of the server process.
struct Run {
    generation: u64,
    pid: u32,
    group: ProcessGroup,
    exit_watch: ExitWatch,
    /// The open `subscriptions/listen` request of a modern server.
    listen: Option<RequestId>,
    /// `None` while a write is under way (the write owns it) or once closed.
    stdin: Option<ChildStdin>,
    close_stdin: bool,
    outbox: VecDeque<Outbound>,
    control_frames: usize,
    started_at: Instant,
    ready: bool,
    /// The start-up time-out, cancelled once ready: actix polls every
    /// future of a context on each wake-up, so none may linger.
    startup_timer: Option<SpawnHandle>,
    stdout_open: bool,
    stderr_open: bool,
    exit: Option<ExitInfo>,
    /// The state of each kind of listing, by [`Listing`].
    listings: [ListingState; 3],
    /// The id of the `server/discover` request while the era is being found.
    probing: Option<RequestId>,
}

/// Where a forgotten call was when its caller gave up on it.
#[derive(Debug, Clone, PartialEq)]
pub enum Whereabouts {
    /// Waiting for the server to come up.
    WaitingForServer(ServerState),
    /// Waiting behind other calls for a slot.
    Queued,
    /// Written (or about to be): the server was told to cancel it.
    OnTheWire,
    /// Already answered or failed.
    Gone,
}

/// Asks the connection to drop a call whose caller stopped waiting.
#[derive(Message)]
#[rtype(result = "Whereabouts")]
pub struct Forget {
    pub id: RequestId,
    pub reason: &'static str,
}

/// Reports this connection's status.
#[derive(Message)]
#[rtype(result = "ServerStatus")]
pub struct GetStatus;

/// Stops the server for good: no restarts; waiting calls fail with `Stopped`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown;

/// A state change, sent to the Hub.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct StateChanged {
    pub server: String,
    pub state: ServerState,
}

/// Enables or disables the server: a disabled server keeps its process,
/// its tools leave the catalog and calls to it fail with `Disabled`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetEnabled(pub bool);

/// Restarts the server now (and revives a failed one).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Reconnect;

/// Makes the next handler panic (tests of panic recovery).
#[cfg(feature = "fault-injection")]
#[derive(Message)]
#[rtype(result = "()")]
pub struct InjectPanic;

/// Who a connection reports to and asks.
#[derive(Clone)]
pub struct Links {
    pub registry: Addr<Registry>,
    /// The Hub, told of every state change.
    pub hub: Recipient<StateChanged>,
    /// The Hub, which passes events on to its subscribers.
    pub events: Recipient<Event>,
    pub handlers: ClientHandlers,
}

pub struct Connection {
    config: Arc<ServerConfig>,
    registry: Addr<Registry>,
    hub: Recipient<StateChanged>,
    events: Recipient<Event>,
    answerer: Arc<Answerer>,
    state: ServerState,
    restarts: RestartTracker,
    next_id: i64,
    generation: u64,
    pending: HashMap<RequestId, Pending>,
    in_flight: usize,
    queue: VecDeque<Queued>,
    run: Option<Run>,
    stderr_tail: VecDeque<String>,
    /// Masks the secrets of `config` in each stderr line before it is logged or kept.
    redactor: Redactor,
    tools: Vec<Tool>,
    /// What calls to each tool are checked against.
    contracts: HashMap<String, Arc<ToolContract>>,
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
    stopping: bool,
    /// Enabled servers list their tools and take calls; a disabled one keeps
    /// its process (if it has one) but its tools leave the catalog.
    enabled: bool,
    /// A deliberate reconnect is under way: the next exit restarts at once.
    reconnecting: bool,
    #[cfg(feature = "fault-injection")]
    panic_next: bool,
}

impl Connection {
    pub fn new(config: ServerConfig, links: Links) -> Self {
        let Links { registry, hub, events, handlers } = links;
        let capabilities = handlers.capabilities();
        let answerer = Arc::new(Answerer::new(&config.name, handlers, &config.roots, config.cwd.as_deref()));
        let restarts = RestartTracker::new(config.restart, config.restart_limits);
        let config_enabled = config.enabled;
        let redactor = Redactor::from_configs([&config]);
        let state = if config.enabled { ServerState::Pending } else { ServerState::Disabled };
        Connection {
            config: Arc::new(config),
            registry,
            hub,
            events,
            answerer,
            state,
            restarts,
            next_id: 0,
            generation: 0,
            pending: HashMap::new(),
            in_flight: 0,
            queue: VecDeque::new(),
            run: None,
            stderr_tail: VecDeque::with_capacity(STDERR_TAIL_LINES),
            redactor,
            tools: Vec::new(),
            contracts: HashMap::new(),
            peer: None,
            detected_era: None,
            counts: Counts::default(),
            log_level: None,
            subscriptions: Default::default(),
            session: Session::new(Era::Legacy, protocol::LATEST_LEGACY_VERSION, capabilities),
            run_error: None,
            last_error: None,
            stopping: false,
            enabled: config_enabled,
            reconnecting: false,
            #[cfg(feature = "fault-injection")]
            panic_next: false,
        }
    }

    fn name(&self) -> &str {
        &self.config.name
    }

    /// Talks to this connection on a caller's behalf (for multi-request operations).
    pub(crate) fn requester(&self, ctx: &mut Context<Self>) -> Requester {
        Requester::new(ctx.address(), self.config.name.clone(), self.answerer.clone())
    }

    /// The state others see: `Disabled` overrides the lifecycle state.
    fn reported_state(&self) -> ServerState {
        if self.enabled {
            self.state.clone()
        } else {
            ServerState::Disabled
        }
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
        if after != before && !self.stopping {
            self.hub.do_send(StateChanged { server: self.config.name.clone(), state: after });
        }
    }

    fn stderr_tail(&self) -> Vec<String> {
        self.stderr_tail.iter().cloned().collect()
    }

    fn next_request_id(&mut self) -> RequestId {
        self.next_id += 1;
        RequestId::Number(self.next_id)
    }

    fn current_run(&mut self, generation: u64) -> Option<&mut Run> {
        self.run.as_mut().filter(|run| run.generation == generation)
    }

    fn start_process(&mut self, ctx: &mut Context<Self>) {
        if self.stopping || self.run.is_some() {
            return;
        }
        if self.config.transport != Transport::Stdio {
            let error = format!(
                "server `{}`: {} transport: connecting to remote servers is not built yet (it comes with the remote-transports work); the entry is stored and listed only",
                self.config.name,
                self.config.transport.as_str()
            );
            return self.give_up(error, ctx);
        }
        let process = match stdio::spawn(&self.config) {
            Ok(process) => process,
            Err(error) => {
                // A missing command does not appear by restarting: fail now.
                tracing::error!(server = %self.name(), "{error}");
                self.give_up(error.to_string(), ctx);
                return;
            }
        };
        self.generation += 1;
        let generation = self.generation;
        tracing::info!(server = %self.name(), pid = process.pid, "started {}", self.config.command);
        self.run = Some(Run {
            generation,
            pid: process.pid,
            group: process.group,
            exit_watch: process.exit.clone(),
            stdin: Some(process.stdin),
            close_stdin: false,
            outbox: VecDeque::new(),
            control_frames: 0,
            started_at: Instant::now(),
            ready: false,
            startup_timer: None,
            stdout_open: true,
            stderr_open: true,
            exit: None,
            listings: Default::default(),
            probing: None,
            listen: None,
        });
        self.run_error = None;
        ctx.add_stream(FramedRead::new(process.stdout, JsonRpcCodec::new(self.config.limits.max_frame)));
        ctx.add_stream(FramedRead::new(process.stderr, LogLines::default()));
        // The exit is awaited off the context (see `startup_timer`) and reported as a message.
        let me = ctx.address().downgrade();
        actix_rt::spawn(async move {
            let exit = process.exit.wait().await;
            if let Some(me) = me.upgrade() {
                me.do_send(Exited { generation, exit });
            }
        });
        let startup_timer = ctx.run_later(self.config.timeouts.startup, move |act, _| {
            let timed_out = act.current_run(generation).is_some_and(|run| !run.ready);
            if timed_out {
                let error = ConnectError::HandshakeTimeout { server: act.config.name.clone(), after: act.config.timeouts.startup };
                act.abort_run(error, Ending::Failure);
            }
        });
        if let Some(run) = self.run.as_mut() {
            run.startup_timer = Some(startup_timer);
        }
        self.negotiate(generation, ctx);
    }

    /// Ends the current run because of `error`: the process group is killed
    /// and the exit path decides what comes next.
    fn abort_run(&mut self, error: ConnectError, ending: Ending) {
        tracing::warn!(server = %self.config.name, "{error}");
        if let Some(run) = self.run.as_ref() {
            run.group.signal(libc::SIGKILL);
        }
        self.run_error = Some((error, ending));
    }

    fn on_exit(&mut self, generation: u64, exit: ExitInfo, ctx: &mut Context<Self>) {
        let Some(run) = self.current_run(generation) else { return };
        run.exit = Some(exit);
        ctx.run_later(DRAIN_AFTER_EXIT, move |act, ctx| act.finish_run(generation, ctx));
        self.finish_run_if_drained(generation, ctx);
    }

    fn on_stdout_closed(&mut self, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_mut() else { return };
        run.stdout_open = false;
        let generation = run.generation;
        if run.exit.is_none() {
            ctx.run_later(EXIT_AFTER_EOF, move |act, _| {
                let name = act.config.name.clone();
                if let Some(run) = act.current_run(generation).filter(|run| run.exit.is_none()) {
                    tracing::warn!(server = %name, "closed stdout but did not exit; killing it");
                    run.group.signal(libc::SIGKILL);
                }
            });
        }
        self.finish_run_if_drained(generation, ctx);
    }

    fn finish_run_if_drained(&mut self, generation: u64, ctx: &mut Context<Self>) {
        if self.current_run(generation).is_some_and(|run| run.exit.is_some() && !run.stdout_open && !run.stderr_open) {
            self.finish_run(generation, ctx);
        }
    }

    /// The process is gone and its output read: fail what was in flight,
    /// then restart (through the Supervisor) or give up.
    fn finish_run(&mut self, generation: u64, ctx: &mut Context<Self>) {
        if self.current_run(generation).is_none() {
            return;
        }
        let Some(run) = self.run.take() else { return };
        let exit = run.exit.unwrap_or(ExitInfo { code: None, signal: None });
        let stderr_tail = self.stderr_tail();
        for (_, pending) in self.pending.drain() {
            let failure = match self.stopping || self.reconnecting {
                true => Failure::Stopped,
                false => Failure::Exited { exit, stderr_tail: stderr_tail.clone() },
            };
            let _ = pending.reply.send(Err(failure));
        }
        self.in_flight = 0;
        if run.ready && !self.stopping {
            self.registry.do_send(ServerDown { server: self.config.name.clone() });
        }
        tracing::warn!(server = %self.config.name, pid = run.pid, "server process ended: {exit}");
        if self.stopping {
            return;
        }
        if std::mem::take(&mut self.reconnecting) {
            self.set_state(ServerState::Pending);
            ctx.stop();
            return;
        }
        let (error, ending) = match self.run_error.take() {
            Some((error, _)) if error.is_permanent() => return self.give_up(error.to_string(), ctx),
            Some((error, ending)) => (error.to_string(), ending),
            None if !run.ready => {
                (ConnectError::Exited { server: self.config.name.clone(), exit, stderr_tail: Vec::new() }.to_string(), Ending::Failure)
            }
            None => (format!("server exited ({exit})"), if exit.is_clean() { Ending::Clean } else { Ending::Failure }),
        };
        self.last_error = Some(error.clone());
        match self.restarts.on_down(Instant::now(), run.started_at.elapsed(), ending) {
            Decision::Restart { attempt, after } => {
                tracing::info!(server = %self.config.name, attempt, "restarting in {after:?}");
                self.set_state(ServerState::Restarting { attempt, next_in: after });
                // The Supervisor restarts the actor; `started` schedules the spawn.
                ctx.stop();
            }
            Decision::GiveUp { reason } => self.give_up(format!("{error}; {reason}"), ctx),
        }
    }

    /// Marks the server failed: no more restarts, waiting calls fail.
    fn give_up(&mut self, error: String, _ctx: &mut Context<Self>) {
        tracing::error!(server = %self.config.name, "failed: {error}");
        self.last_error = Some(error.clone());
        for call in self.queue.drain(..) {
            let _ = call.reply.send(Err(Failure::GaveUp(error.clone())));
        }
        self.set_state(ServerState::Failed { error, stderr_tail: self.stderr_tail.iter().cloned().collect() });
    }

    /// Turns a caught panic into error replies and a restart; returns the
    /// explanation given to the callers.
    fn on_panic(&mut self, during: &str, payload: Box<dyn Any + Send>) -> String {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let text = format!("internal error in mcpvisor while handling {during} (panic: {message}); the connection is being restarted");
        tracing::error!(server = %self.config.name, "{text}");
        for (_, pending) in self.pending.drain() {
            let _ = pending.reply.send(Err(Failure::Internal(text.clone())));
        }
        self.in_flight = 0;
        let error = ConnectError::Protocol { server: self.config.name.clone(), method: during.into(), message: text.clone() };
        self.abort_run(error, Ending::Failure);
        text
    }

    /// Runs a handler body, catching a panic (see [`Connection::on_panic`]).
    fn guarded<R>(
        &mut self,
        during: &str,
        ctx: &mut Context<Self>,
        body: impl FnOnce(&mut Self, &mut Context<Self>) -> R,
    ) -> Result<R, String> {
        #[cfg(feature = "fault-injection")]
        let body = {
            let panic_now = std::mem::take(&mut self.panic_next);
            move |act: &mut Self, ctx: &mut Context<Self>| {
                assert!(!panic_now, "injected fault");
                body(act, ctx)
            }
        };
        std::panic::catch_unwind(AssertUnwindSafe(|| body(self, ctx))).map_err(|payload| self.on_panic(during, payload))
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
            self.registry.do_send(ServerDown { server });
            for call in self.queue.drain(..) {
                let _ = call.reply.send(Err(Failure::Disabled));
            }
        } else if self.state == ServerState::Disabled {
            self.state = ServerState::Pending;
            self.start_process(ctx);
        } else if self.run.as_ref().is_some_and(|run| run.ready) {
            self.registry.do_send(ToolsChanged { server, tools: self.tools.clone() });
        }
        self.report_if_changed(before);
    }

    /// Starts the server afresh: a running one is stopped politely first
    /// (its calls in flight fail with `Stopped`); a failed one gets a new
    /// restart budget. A deliberate reconnect is not counted as a crash.
    fn reconnect(&mut self, ctx: &mut Context<Self>) {
        if self.stopping {
            return;
        }
        self.restarts.forgive();
        match self.run.as_mut() {
            Some(run) => {
                self.reconnecting = true;
                run.close_stdin = true;
                run.stdin = None;
                actix_rt::spawn(stdio::shutdown(run.group, run.exit_watch.clone(), self.config.timeouts.shutdown_grace));
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
        ServerStatus {
            name: self.config.name.clone(),
            state: self.reported_state(),
            pid: run.map(|r| r.pid),
            era: self.peer.as_ref().map(|p| p.era.as_str().to_string()),
            protocol_version: self.peer.as_ref().map(|p| p.version.clone()),
            server_info: self.peer.as_ref().and_then(|p| p.info.clone()),
            resources: self.counts.resources,
            prompts: self.counts.prompts,
            tools: self.tools.len(),
            in_flight: self.in_flight,
            queued: self.queue.len(),
            restarts: self.restarts.total_restarts(),
            uptime: run.filter(|r| r.ready).map(|r| r.started_at.elapsed()),
            last_error: self.last_error.clone(),
            stderr_tail: self.stderr_tail(),
        }
    }
}

fn flatten(outcome: Result<Outcome, oneshot::error::RecvError>) -> Outcome {
    outcome.unwrap_or(Err(Failure::Stopped))
}

fn parse<T: serde::de::DeserializeOwned>(raw: &RawValue) -> Result<T, String> {
    serde_json::from_str(raw.get()).map_err(|e| e.to_string())
}

impl Actor for Connection {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        match self.state {
            ServerState::Pending => self.start_process(ctx),
            // Never synchronously: a crash loop must not starve the thread.
            ServerState::Restarting { next_in, .. } => {
                ctx.run_later(next_in, |act, ctx| act.start_process(ctx));
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

/// The server process of run `generation` has exited and been reaped.
#[derive(Message)]
#[rtype(result = "()")]
struct Exited {
    generation: u64,
    exit: ExitInfo,
}

impl Handler<Exited> for Connection {
    type Result = ();

    fn handle(&mut self, msg: Exited, ctx: &mut Context<Self>) {
        self.on_exit(msg.generation, msg.exit, ctx);
    }
}

impl Handler<SetEnabled> for Connection {
    type Result = ();

    fn handle(&mut self, msg: SetEnabled, ctx: &mut Context<Self>) {
        let _ = self.guarded("enabling or disabling", ctx, |act, ctx| act.set_enabled(msg.0, ctx));
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

    fn handle(&mut self, _: GetStatus, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.status())
    }
}

impl Handler<Shutdown> for Connection {
    type Result = Reply<()>;

    fn handle(&mut self, _: Shutdown, _: &mut Context<Self>) -> Self::Result {
        self.stopping = true;
        for call in self.queue.drain(..) {
            let _ = call.reply.send(Err(Failure::Stopped));
        }
        let Some(run) = self.run.as_mut() else { return Reply::Ready(()) };
        // Closing stdin is the polite request to exit (MCP's stdio shutdown).
        run.close_stdin = true;
        run.stdin = None;
        let (group, exit, grace) = (run.group, run.exit_watch.clone(), self.config.timeouts.shutdown_grace);
        let name = self.config.name.clone();
        Reply::later(async move {
            let exit = stdio::shutdown(group, exit, grace).await;
            tracing::info!(server = %name, "stopped ({exit})");
        })
    }
}

#[cfg(feature = "fault-injection")]
impl Handler<InjectPanic> for Connection {
    type Result = ();

    fn handle(&mut self, _: InjectPanic, _: &mut Context<Self>) {
        self.panic_next = true;
    }
}
