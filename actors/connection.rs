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
use crate::codec::{peek_id, Frame, FrameError, JsonRpcCodec};
use crate::config::{Era as ConfiguredEra, Keyword, ServerConfig, Transport};
use crate::error::{CallError, ConnectError};
use crate::protocol::schema::ToolContract;
use crate::protocol::{self, error_codes, methods, Era, ErrorObject, Message as RpcMessage, RequestId, Session};
use crate::restart::{Decision, Ending, RestartTracker};
use crate::transport::stdio::{self, LogLines, ProcessGroup};
use crate::transport::{ExitInfo, ExitWatch};

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

    // ---- start-up ------------------------------------------------------

    fn start_process(&mut self, ctx: &mut Context<Self>) {
        if self.stopping || self.run.is_some() {
            return;
        }
        if self.config.transport != Transport::Stdio {
            let error = format!(
                "{}: {} transport: connecting to remote servers is not built yet (it comes with the remote-transports work); the entry is stored and listed only",
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

    // ---- eras ----------------------------------------------------------

    /// Starts the era negotiation of run `generation`: `initialize` for a
    /// legacy server; `server/discover` for a modern one, or as the probe
    /// of `era = auto` (any non-modern answer, or none within
    /// `timeouts.discover`, falls back to `initialize` on the same process).
    fn negotiate(&mut self, generation: u64, ctx: &mut Context<Self>) {
        match (self.config.era, self.detected_era) {
            (ConfiguredEra::Legacy, _) | (ConfiguredEra::Auto, Some(Era::Legacy)) => self.send_initialize(generation, ctx),
            (ConfiguredEra::Modern, _) | (ConfiguredEra::Auto, Some(Era::Modern)) => self.send_discover(generation, false, ctx),
            (ConfiguredEra::Auto, None) => self.send_discover(generation, true, ctx),
        }
    }

    fn send_initialize(&mut self, generation: u64, ctx: &mut Context<Self>) {
        self.session.agree(Era::Legacy, protocol::LATEST_LEGACY_VERSION);
        let params = serde_json::json!({
            "protocolVersion": protocol::LATEST_LEGACY_VERSION,
            "capabilities": self.session.capabilities(),
            "clientInfo": self.session.client_info(),
        });
        let answer = self.request(methods::INITIALIZE, &params, ctx);
        ctx.spawn(answer.into_actor(self).map(move |outcome, act, ctx| {
            if act.current_run(generation).is_some() {
                act.on_initialize(outcome, ctx);
            }
        }));
    }

    fn on_initialize(&mut self, outcome: Result<Outcome, oneshot::error::RecvError>, ctx: &mut Context<Self>) {
        let server = self.config.name.clone();
        let init = match flatten(outcome).and_then(|raw| parse::<serde_json::Value>(&raw).map_err(Failure::Internal)) {
            Ok(init) => init,
            Err(failure) => return self.abort_run(failure.into_connect_error(&server, methods::INITIALIZE), Ending::Failure),
        };
        let version = init.get("protocolVersion").and_then(|v| v.as_str()).unwrap_or_default().to_string();
        if !protocol::is_supported_legacy_version(&version) {
            let error =
                ConnectError::UnsupportedVersion { server, got: version, supported: protocol::SUPPORTED_LEGACY_VERSIONS.join(", ") };
            return self.abort_run(error, Ending::Failure);
        }
        tracing::debug!(server = %self.name(), version, "initialized");
        self.session.agree(Era::Legacy, version.clone());
        self.peer = Some(Peer::from_answer(Era::Legacy, version, &init));
        self.notify(methods::INITIALIZED, &serde_json::json!({}), ctx);
        self.on_negotiated(ctx);
    }

    fn send_discover(&mut self, generation: u64, probe: bool, ctx: &mut Context<Self>) {
        let version = self.session_version_to_try();
        self.session.agree(Era::Modern, version);
        let (id, answer) = self.request_with_id(methods::DISCOVER, &serde_json::json!({}), ctx);
        if let Some(run) = self.run.as_mut() {
            run.probing = Some(id.clone());
        }
        if probe {
            ctx.run_later(self.config.timeouts.discover, move |act, ctx| {
                if act.current_run(generation).is_some_and(|run| run.probing.as_ref() == Some(&id)) {
                    act.pending.remove(&id);
                    let after = act.config.timeouts.discover;
                    act.fall_back(generation, format!("no answer to server/discover within {after:?}"), ctx);
                }
            });
        }
        ctx.spawn(answer.into_actor(self).map(move |outcome, act, ctx| {
            if act.current_run(generation).is_some_and(|run| run.probing.is_some()) {
                act.on_discover(generation, flatten(outcome), probe, ctx);
            }
        }));
    }

    /// The modern version to offer: the one a server asked for in a -32022
    /// retry, else the newest this client speaks.
    fn session_version_to_try(&self) -> String {
        match self.session.era() {
            Era::Modern if protocol::is_modern_version(self.session.version()) => self.session.version().to_string(),
            _ => protocol::MODERN_VERSIONS[0].to_string(),
        }
    }

    fn on_discover(&mut self, generation: u64, outcome: Outcome, probe: bool, ctx: &mut Context<Self>) {
        let server = self.config.name.clone();
        let discovered = outcome.and_then(|raw| parse::<serde_json::Value>(&raw).map_err(Failure::Internal));
        let answer = match discovered {
            Ok(answer) => answer,
            Err(Failure::Rpc(error)) if error.code == error_codes::UNSUPPORTED_PROTOCOL_VERSION => {
                let supported = supported_versions(error.data.as_ref().and_then(|d| d.get("supported")));
                let tried = self.session.version().to_string();
                return match supported.iter().find(|v| protocol::is_modern_version(v) && **v != tried) {
                    Some(version) => {
                        self.session.agree(Era::Modern, version.clone());
                        self.send_discover(generation, probe, ctx);
                    }
                    None => self.not_modern(generation, probe, format!("it supports {}", supported.join(", ")), ctx),
                };
            }
            Err(Failure::Rpc(error)) => {
                return self.not_modern(generation, probe, format!("server/discover: error {}: {}", error.code, error.message), ctx)
            }
            Err(failure) => return self.abort_run(failure.into_connect_error(&server, methods::DISCOVER), Ending::Failure),
        };
        let supported = supported_versions(answer.get("supportedVersions"));
        let Some(version) = protocol::MODERN_VERSIONS.iter().find(|v| supported.iter().any(|s| s == *v)) else {
            return self.not_modern(generation, probe, format!("server/discover lists versions {}", supported.join(", ")), ctx);
        };
        if let Some(run) = self.run.as_mut() {
            run.probing = None;
        }
        tracing::debug!(server = %server, version, "discovered a modern server");
        self.session.agree(Era::Modern, *version);
        self.detected_era = Some(Era::Modern);
        self.peer = Some(Peer::from_answer(Era::Modern, version.to_string(), &answer));
        self.on_negotiated(ctx);
    }

    /// The server is not modern: a probe falls back to `initialize`; a
    /// server configured `era = modern` fails with the reason.
    fn not_modern(&mut self, generation: u64, probe: bool, reason: String, ctx: &mut Context<Self>) {
        if probe {
            return self.fall_back(generation, reason, ctx);
        }
        let error = ConnectError::UnsupportedVersion {
            server: self.config.name.clone(),
            got: reason,
            supported: format!(
                "{} (era = modern; set era = \"auto\" or \"legacy\" to use initialize)",
                protocol::MODERN_VERSIONS.join(", ")
            ),
        };
        self.abort_run(error, Ending::Failure);
    }

    fn fall_back(&mut self, generation: u64, reason: String, ctx: &mut Context<Self>) {
        tracing::debug!(server = %self.config.name, "not a modern server ({reason}); falling back to initialize");
        if let Some(run) = self.current_run(generation) {
            run.probing = None;
        }
        self.detected_era = Some(Era::Legacy);
        self.send_initialize(generation, ctx);
    }

    /// The era is agreed: restore the log level and subscriptions of
    /// earlier runs, list what the server offers, then serve.
    fn on_negotiated(&mut self, ctx: &mut Context<Self>) {
        if let Some(level) = self.log_level {
            self.apply_log_level(level, ctx);
        }
        match self.session.era() {
            Era::Legacy => {
                for uri in self.subscriptions.clone() {
                    // Nobody waits for the answer: a refusal is logged when it arrives unmatched.
                    drop(self.request(methods::RESOURCES_SUBSCRIBE, &serde_json::json!({ "uri": uri }), ctx));
                }
            }
            Era::Modern => self.listen(ctx),
        }
        let peer = self.peer.clone();
        for what in [Listing::Tools, Listing::Resources, Listing::Prompts] {
            let offered = what == Listing::Tools || peer.as_ref().is_some_and(|peer| peer.has(what.capability(), None));
            match offered {
                true => self.list(what, ctx),
                false => self.on_listed_count(what, Some(0), ctx),
            }
        }
    }

    /// Legacy: `logging/setLevel`; modern: the level rides on every request.
    fn apply_log_level(&mut self, level: LogLevel, ctx: &mut Context<Self>) -> Option<oneshot::Receiver<Outcome>> {
        self.log_level = Some(level);
        match self.session.era() {
            Era::Modern => {
                self.session.set_log_level(level.as_str());
                None
            }
            Era::Legacy => Some(self.request(methods::SET_LOG_LEVEL, &serde_json::json!({ "level": level.as_str() }), ctx)),
        }
    }

    /// Modern servers: (re)opens the `subscriptions/listen` stream for the
    /// list changes the server announces and the subscribed resources.
    fn listen(&mut self, ctx: &mut Context<Self>) {
        let Some(peer) = self.peer.clone() else { return };
        if let Some(old) = self.run.as_mut().and_then(|run| run.listen.take()) {
            self.pending.remove(&old);
            self.notify(methods::CANCELLED, &serde_json::json!({ "requestId": old, "reason": "subscriptions changed" }), ctx);
        }
        let mut filter = serde_json::Map::new();
        for (capability, key) in [("tools", "toolsListChanged"), ("prompts", "promptsListChanged"), ("resources", "resourcesListChanged")] {
            if peer.has(capability, Some("listChanged")) {
                filter.insert(key.into(), true.into());
            }
        }
        if !self.subscriptions.is_empty() {
            filter.insert("resourceSubscriptions".into(), self.subscriptions.iter().cloned().collect());
        }
        if filter.is_empty() {
            return;
        }
        let (id, answer) = self.request_with_id(methods::SUBSCRIPTIONS_LISTEN, &serde_json::json!({ "notifications": filter }), ctx);
        if let Some(run) = self.run.as_mut() {
            run.listen = Some(id);
        }
        let server = self.config.name.clone();
        actix_rt::spawn(async move {
            if let Ok(Err(failure)) = answer.await {
                tracing::debug!(server = %server, "the listen stream ended: {failure:?}");
            }
        });
    }

    /// Subscribes to or unsubscribes from a resource's updates.
    fn set_subscription(&mut self, uri: String, subscribe: bool, ctx: &mut Context<Self>) -> Reply<Result<(), CallError>> {
        let method = if subscribe { methods::RESOURCES_SUBSCRIBE } else { methods::RESOURCES_UNSUBSCRIBE };
        let (server, label) = (self.config.name.clone(), format!("{method} {uri}"));
        if self.peer.as_ref().is_some_and(|peer| !peer.has("resources", Some("subscribe"))) {
            return Reply::Ready(Err(CallError::Unsupported { server, tool: label, capability: "resource subscriptions".into() }));
        }
        let changed = if subscribe { self.subscriptions.insert(uri.clone()) } else { self.subscriptions.remove(&uri) };
        if self.session.era() == Era::Modern {
            if changed && self.run.as_ref().is_some_and(|run| run.ready) {
                self.listen(ctx);
            }
            return Reply::Ready(Ok(()));
        }
        let answer = self.caller_request(label, method, &serde_json::json!({ "uri": uri }), None, None, ctx);
        Reply::later(async move { answer.await.map(|_| ()) })
    }

    /// Lists every page of `what`, then takes the items in. One listing of
    /// each kind at a time; a `list_changed` during one triggers one more
    /// afterwards. Listings use uncounted internal requests, so they are
    /// sent before the server is ready and never take a caller's slot.
    fn list(&mut self, what: Listing, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_mut() else { return };
        let state = &mut run.listings[what as usize];
        if state.running {
            state.again = true;
            return;
        }
        state.running = true;
        let generation = run.generation;
        self.list_page(generation, what, None, Vec::new(), ctx);
    }

    fn list_page(
        &mut self,
        generation: u64,
        what: Listing,
        cursor: Option<String>,
        mut items: Vec<serde_json::Value>,
        ctx: &mut Context<Self>,
    ) {
        let params = match &cursor {
            Some(cursor) => serde_json::json!({ "cursor": cursor }),
            None => serde_json::json!({}),
        };
        let answer = self.request(what.method(), &params, ctx);
        ctx.spawn(answer.into_actor(self).map(move |outcome, act, ctx| {
            if act.current_run(generation).is_none() {
                return;
            }
            let server = act.config.name.clone();
            let page = flatten(outcome).and_then(|raw| parse::<serde_json::Value>(&raw).map_err(Failure::Internal));
            let page = page.and_then(|mut page| {
                let found = page.get_mut(what.field()).map(serde_json::Value::take);
                let found = found.and_then(|f| serde_json::from_value::<Vec<serde_json::Value>>(f).ok());
                let found = found.ok_or_else(|| Failure::Internal(format!("the answer has no `{}` list", what.field())))?;
                Ok((found, page.get("nextCursor").and_then(|c| c.as_str()).map(str::to_string)))
            });
            let (found, next) = match page {
                Ok(page) => page,
                Err(failure) => return act.on_listing_failed(what, failure.into_connect_error(&server, what.method()), ctx),
            };
            items.extend(found);
            match next {
                Some(next) if Some(&next) == cursor.as_ref() || items.len() > MAX_LIST_PAGES * 100 => {
                    let message = format!("pagination does not advance (cursor {next:?} repeats)");
                    act.on_listing_failed(what, ConnectError::Protocol { server, method: what.method().into(), message }, ctx);
                }
                Some(next) => act.list_page(generation, what, Some(next), items, ctx),
                None => act.on_listed(what, items, ctx),
            }
        }));
    }

    /// A tools listing that fails ends the run; resources and prompts are
    /// secondary: the server serves its tools and the count stays as it was.
    fn on_listing_failed(&mut self, what: Listing, error: ConnectError, ctx: &mut Context<Self>) {
        if what == Listing::Tools {
            return self.abort_run(error, Ending::Failure);
        }
        tracing::warn!(server = %self.config.name, "{error}");
        self.on_listed_count(what, None, ctx);
    }

    fn on_listed(&mut self, what: Listing, items: Vec<serde_json::Value>, ctx: &mut Context<Self>) {
        match what {
            Listing::Tools => {
                let server = self.config.name.clone();
                let tools = items.into_iter().filter_map(|tool| ListedTool::parse(&server, tool)).collect();
                self.on_tools_listed(tools);
                self.on_listed_count(what, None, ctx);
            }
            Listing::Resources | Listing::Prompts => self.on_listed_count(what, Some(items.len()), ctx),
        }
    }

    /// Records a finished listing; the first time every listing is done, the
    /// server is ready (`Connected`) and waiting calls go out.
    fn on_listed_count(&mut self, what: Listing, count: Option<usize>, ctx: &mut Context<Self>) {
        match (what, count) {
            (Listing::Resources, Some(n)) => self.counts.resources = n,
            (Listing::Prompts, Some(n)) => self.counts.prompts = n,
            _ => {}
        }
        let Some(run) = self.run.as_mut() else { return };
        let state = &mut run.listings[what as usize];
        state.running = false;
        state.done = true;
        let again = std::mem::take(&mut state.again);
        let first = !run.ready && run.listings.iter().all(|l| l.done);
        if first {
            run.ready = true;
            if let Some(timer) = run.startup_timer.take() {
                ctx.cancel_future(timer);
            }
            self.last_error = None;
            self.set_state(ServerState::Connected);
            self.pump(ctx);
            let generation = self.generation;
            self.schedule_health_ping(generation, ctx);
        }
        if again {
            self.list(what, ctx);
        }
    }

    fn on_tools_listed(&mut self, mut listed: Vec<ListedTool>) {
        listed.retain(|listed| self.config.tools.permits(&listed.tool.name));
        let server = self.config.name.clone();
        self.contracts = listed
            .iter()
            .map(|listed| (listed.tool.name.to_string(), Arc::new(ToolContract::of(&server, &listed.tool, listed.task_required))))
            .collect();
        let tools: Vec<Tool> = listed.into_iter().map(|listed| listed.tool).collect();
        tracing::info!(server = %self.config.name, tools = tools.len(), "tools listed");
        self.tools = tools.clone();
        if self.enabled && !self.stopping {
            self.registry.do_send(ToolsChanged { server: self.config.name.clone(), tools });
        }
    }

    /// With `timeouts.health_ping` set, pings the server every interval; a
    /// ping without an answer within the call time-out restarts the server
    /// (an error answer counts as alive).
    fn schedule_health_ping(&mut self, generation: u64, ctx: &mut Context<Self>) {
        let Some(every) = self.config.timeouts.health_ping else { return };
        ctx.run_later(every, move |act, ctx| {
            if act.current_run(generation).is_none() {
                return;
            }
            let limit = act.config.timeouts.call;
            let answer = act.request(methods::PING, &serde_json::json!({}), ctx);
            let ping = async move { tokio::time::timeout(limit, answer).await };
            ctx.spawn(ping.into_actor(act).map(move |outcome, act, ctx| {
                if act.current_run(generation).is_none() {
                    return;
                }
                match outcome {
                    Ok(Ok(Ok(_) | Err(Failure::Rpc(_)))) => act.schedule_health_ping(generation, ctx),
                    Ok(_) => {}
                    Err(_) => {
                        let message = format!("no answer to the health ping within {limit:?}; restarting it");
                        act.abort_run(
                            ConnectError::Protocol { server: act.config.name.clone(), method: methods::PING.into(), message },
                            Ending::Failure,
                        );
                    }
                }
            }));
        });
    }

    // ---- writing -------------------------------------------------------

    /// Sends an internal request (not counted against `max_in_flight`).
    fn request<P: Serialize>(&mut self, method: &str, params: &P, ctx: &mut Context<Self>) -> oneshot::Receiver<Outcome> {
        self.request_with_id(method, params, ctx).1
    }

    /// An internal request, framed for the agreed era; returns its id too.
    fn request_with_id<P: Serialize>(
        &mut self,
        method: &str,
        params: &P,
        ctx: &mut Context<Self>,
    ) -> (RequestId, oneshot::Receiver<Outcome>) {
        let id = self.next_request_id();
        let (reply, answer) = oneshot::channel();
        let frame = self.session.request_frame(&id, method, params, false);
        self.put_on_wire(id.clone(), frame, Pending { reply, counted: false, progress: None }, ctx);
        (id, answer)
    }

    fn notify<P: Serialize>(&mut self, method: &str, params: &P, ctx: &mut Context<Self>) {
        self.push_control(protocol::notification_frame(method, params), ctx);
    }

    fn put_on_wire(&mut self, id: RequestId, frame: Vec<u8>, pending: Pending, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_mut() else {
            let _ = pending.reply.send(Err(Failure::Stopped));
            return;
        };
        run.outbox.push_back(Outbound { request: Some(id.clone()), bytes: frame });
        let counted = pending.counted;
        self.pending.insert(id, pending);
        if counted {
            self.in_flight += 1;
        }
        self.flush(ctx);
    }

    fn push_control(&mut self, bytes: Vec<u8>, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_mut() else { return };
        if run.control_frames >= MAX_CONTROL_FRAMES {
            tracing::warn!(server = %self.config.name, "the server is not reading its input; a control message was dropped");
            return;
        }
        run.control_frames += 1;
        run.outbox.push_back(Outbound { request: None, bytes });
        self.flush(ctx);
    }

    /// Starts writing the outbox unless a write is already under way.
    fn flush(&mut self, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_mut() else { return };
        if run.outbox.is_empty() || run.stdin.is_none() {
            return;
        }
        let Some(mut stdin) = run.stdin.take() else { return };
        let batch = if run.outbox.len() == 1 {
            run.outbox.pop_front().map(|o| o.bytes).unwrap_or_default()
        } else {
            let mut batch = Vec::with_capacity(run.outbox.iter().map(|o| o.bytes.len()).sum());
            run.outbox.drain(..).for_each(|o| batch.extend_from_slice(&o.bytes));
            batch
        };
        run.control_frames = 0;
        let generation = run.generation;
        let write = async move {
            let result = stdin.write_all(&batch).await;
            (stdin, result)
        };
        ctx.spawn(write.into_actor(self).map(move |(stdin, result), act, ctx| {
            let name = act.config.name.clone();
            let Some(run) = act.current_run(generation) else { return };
            match result {
                Ok(()) if !run.close_stdin => {
                    run.stdin = Some(stdin);
                    act.flush(ctx);
                }
                Ok(()) => {}
                // The exit path reports what happened to the process.
                Err(e) => tracing::debug!(server = %name, "writing to the server failed: {e}"),
            }
        }));
    }

    /// Moves waiting calls onto the wire while there are free slots.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        while self.can_send_call() {
            let Some(call) = self.queue.pop_front() else { break };
            if call.reply.is_closed() {
                continue;
            }
            self.put_on_wire(call.id, call.frame, Pending { reply: call.reply, counted: true, progress: call.progress }, ctx);
        }
    }

    fn can_send_call(&self) -> bool {
        self.run.as_ref().is_some_and(|run| run.ready) && self.in_flight < self.config.limits.max_in_flight
    }

    // ---- calls ---------------------------------------------------------

    /// Admits a caller's request (see the module invariants): written now
    /// when a slot is free, else queued, else refused with `Overloaded`.
    fn admit<P: Serialize>(
        &mut self,
        label: &str,
        method: &str,
        params: &P,
        progress: Option<ProgressSink>,
        ctx: &mut Context<Self>,
    ) -> Result<Admitted, CallError> {
        let (server, tool) = (self.config.name.clone(), label.to_string());
        match &self.state {
            _ if self.stopping => return Err(CallError::Stopped { server, tool }),
            _ if !self.enabled => return Err(CallError::Disabled { server, tool }),
            ServerState::Failed { error, .. } => return Err(CallError::Failed { server, tool, error: error.clone() }),
            _ => {}
        }
        let send_now = self.queue.is_empty() && self.can_send_call();
        if !send_now && self.queue.len() >= self.config.limits.max_queued {
            return Err(CallError::Overloaded { server, tool, in_flight: self.in_flight, queued: self.queue.len() });
        }
        let id = self.next_request_id();
        let progress = progress.map(|sink| ProgressRoute { sink, clock: ProgressClock::new() });
        let frame = self.session.request_frame(&id, method, params, progress.is_some());
        let clock = progress.as_ref().map(|route| route.clock.clone());
        let (reply, answer) = oneshot::channel();
        if send_now {
            self.put_on_wire(id.clone(), frame, Pending { reply, counted: true, progress }, ctx);
        } else {
            self.queue.push_back(Queued { id: id.clone(), frame, reply, progress });
        }
        Ok(Admitted { id, answer, clock })
    }

    fn forget(&mut self, id: &RequestId, reason: &str, ctx: &mut Context<Self>) -> Whereabouts {
        if let Some(at) = self.queue.iter().position(|q| &q.id == id) {
            self.queue.remove(at);
            return match self.run.as_ref().is_some_and(|run| run.ready) {
                true => Whereabouts::Queued,
                false => Whereabouts::WaitingForServer(self.state.clone()),
            };
        }
        let Some(pending) = self.pending.remove(id) else { return Whereabouts::Gone };
        if pending.counted {
            self.in_flight -= 1;
        }
        if let Some(run) = self.run.as_mut() {
            let before = run.outbox.len();
            run.outbox.retain(|o| o.request.as_ref() != Some(id));
            if run.outbox.len() == before {
                let params = serde_json::json!({ "requestId": id, "reason": reason });
                self.notify(methods::CANCELLED, &params, ctx);
            }
        }
        self.pump(ctx);
        Whereabouts::OnTheWire
    }

    // ---- reading -------------------------------------------------------

    fn on_frame(&mut self, frame: Frame, ctx: &mut Context<Self>) {
        match frame {
            Ok(RpcMessage::Response { id: Some(id), outcome }) => self.on_response(id, outcome.map_err(Failure::Rpc), ctx),
            Ok(RpcMessage::Response { id: None, outcome }) => {
                tracing::warn!(server = %self.name(), "the server reported an error about a message it could not read: {outcome:?}");
            }
            Ok(RpcMessage::Request { id, method, params }) => self.on_server_request(id, method, params, ctx),
            Ok(RpcMessage::Notification { method, params }) => self.on_notification(&method, params, ctx),
            Err(FrameError::TooLarge { size, max, head }) => {
                tracing::warn!(server = %self.name(), "skipped a frame of {size}+ bytes on stdout (max_frame is {max})");
                if let Some(id) = peek_id(&head) {
                    self.on_response(id, Err(Failure::TooLarge { size, max }), ctx);
                }
            }
            Err(noise) if noise.is_noise() => tracing::trace!(server = %self.name(), "{noise}"),
            Err(bad) => tracing::warn!(server = %self.name(), "skipped a line on stdout: {bad}"),
        }
    }

    fn on_response(&mut self, id: RequestId, outcome: Outcome, ctx: &mut Context<Self>) {
        let Some(pending) = self.pending.remove(&id) else {
            tracing::debug!(server = %self.name(), %id, "ignored an answer to an unknown or abandoned request");
            return;
        };
        let _ = pending.reply.send(outcome);
        if pending.counted {
            self.in_flight -= 1;
            self.pump(ctx);
        }
    }

    /// Answers a request of the server: `ping` at once, the others through
    /// the embedder's handlers or their defaults (see [`Answerer`]).
    fn on_server_request(&mut self, id: RequestId, method: String, params: Option<Box<RawValue>>, ctx: &mut Context<Self>) {
        if method == methods::PING {
            return self.push_control(protocol::response_frame(&id, Ok(&serde_json::json!({}))), ctx);
        }
        let answerer = self.answerer.clone();
        let params = params.and_then(|raw| serde_json::from_str(raw.get()).ok());
        let generation = self.generation;
        let answer = async move { answerer.answer(&method, params).await };
        ctx.spawn(answer.into_actor(self).map(move |outcome, act, ctx| {
            if act.current_run(generation).is_none() {
                return;
            }
            let frame = match &outcome {
                Ok(result) => protocol::response_frame(&id, Ok(result)),
                Err(error) => protocol::response_frame::<()>(&id, Err(error)),
            };
            act.push_control(frame, ctx);
        }));
    }

    fn on_notification(&mut self, method: &str, params: Option<Box<RawValue>>, ctx: &mut Context<Self>) {
        let params: serde_json::Value = params.and_then(|raw| serde_json::from_str(raw.get()).ok()).unwrap_or_default();
        let server = self.config.name.clone();
        match method {
            methods::PROGRESS => self.on_progress(&params),
            methods::TOOLS_LIST_CHANGED => {
                if self.run.as_ref().is_some_and(|run| run.ready) {
                    self.list(Listing::Tools, ctx);
                }
            }
            methods::RESOURCES_LIST_CHANGED | methods::PROMPTS_LIST_CHANGED => {
                let what = if method == methods::RESOURCES_LIST_CHANGED { Listing::Resources } else { Listing::Prompts };
                if self.run.as_ref().is_some_and(|run| run.ready) {
                    self.list(what, ctx);
                }
                self.events.do_send(Event::ListChanged { server, list: what.capability().into() });
            }
            methods::RESOURCE_UPDATED => {
                let uri = params.get("uri").and_then(|u| u.as_str()).unwrap_or_default().to_string();
                self.events.do_send(Event::ResourceUpdated { server, uri });
            }
            methods::LOG_MESSAGE => {
                let level = params.get("level").and_then(|l| l.as_str()).unwrap_or("info").to_string();
                let logger = params.get("logger").and_then(|l| l.as_str()).map(str::to_string);
                let data = params.get("data").cloned().unwrap_or_default();
                log_server_message(&server, &level, logger.as_deref(), &data);
                self.events.do_send(Event::Log { server, level, logger, data });
            }
            methods::CANCELLED => tracing::debug!(server = %server, "the server cancelled one of its requests: {params}"),
            _ => tracing::debug!(server = %server, method, "notification ignored"),
        }
    }

    /// Routes a progress notification to its request's sink (token = request id).
    fn on_progress(&mut self, params: &serde_json::Value) {
        let token = params.get("progressToken").cloned().and_then(|t| serde_json::from_value::<RequestId>(t).ok());
        let Some(route) = token.and_then(|id| self.pending.get(&id)).and_then(|p| p.progress.as_ref()) else {
            tracing::debug!(server = %self.config.name, "progress for no running request: {params}");
            return;
        };
        route.clock.touch();
        route.sink.send(Progress {
            server: self.config.name.clone(),
            progress: params.get("progress").and_then(|p| p.as_f64()).unwrap_or_default(),
            total: params.get("total").and_then(|t| t.as_f64()),
            message: params.get("message").and_then(|m| m.as_str()).map(str::to_string),
        });
    }

    fn on_stderr_line(&mut self, line: String) {
        tracing::info!(target: "mcpvisor::server", server = %self.config.name, "{line}");
        if self.stderr_tail.len() == STDERR_TAIL_LINES {
            self.stderr_tail.pop_front();
        }
        self.stderr_tail.push_back(line);
    }

    // ---- going down ----------------------------------------------------

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

/// What a server told about itself at connect (`initialize` or `server/discover`).
#[derive(Debug, Clone)]
struct Peer {
    era: Era,
    version: String,
    /// "name version" from `serverInfo` (modern: also `_meta`).
    info: Option<String>,
    capabilities: serde_json::Value,
}

impl Peer {
    fn from_answer(era: Era, version: String, answer: &serde_json::Value) -> Peer {
        let info = answer
            .get("serverInfo")
            .or_else(|| answer.pointer("/_meta/io.modelcontextprotocol~1serverInfo"))
            .and_then(|info| {
                Some(format!("{} {}", info.get("name")?.as_str()?, info.get("version").and_then(|v| v.as_str()).unwrap_or("")))
            })
            .map(|info| info.trim_end().to_string());
        Peer { era, version, info, capabilities: answer.get("capabilities").cloned().unwrap_or_default() }
    }

    /// Whether the server announced `capability` (e.g. "resources"), or one
    /// of its flags (e.g. "resources", "subscribe").
    fn has(&self, capability: &str, flag: Option<&str>) -> bool {
        let Some(entry) = self.capabilities.get(capability).filter(|c| !c.is_null()) else { return false };
        flag.is_none_or(|flag| entry.get(flag).and_then(|f| f.as_bool()).unwrap_or(false))
    }
}

/// The versions named in a `supportedVersions` or error `data.supported` list.
fn supported_versions(list: Option<&serde_json::Value>) -> Vec<String> {
    let items = list.and_then(|l| l.as_array()).map(Vec::as_slice).unwrap_or_default();
    items.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()
}

/// Resources and prompts a server offers, counted at connect for the status.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    resources: usize,
    prompts: usize,
}

/// Logs a server's `notifications/message` at the matching `tracing` level.
fn log_server_message(server: &str, level: &str, logger: Option<&str>, data: &serde_json::Value) {
    let logger = logger.unwrap_or("-");
    match level {
        "debug" => tracing::debug!(target: "mcpvisor::server", server, logger, "{data}"),
        "info" | "notice" => tracing::info!(target: "mcpvisor::server", server, logger, "{data}"),
        "warning" => tracing::warn!(target: "mcpvisor::server", server, logger, "{data}"),
        _ => tracing::error!(target: "mcpvisor::server", server, logger, level, "{data}"),
    }
}

/// What a connection lists from its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    Tools = 0,
    Resources = 1,
    Prompts = 2,
}

impl Listing {
    fn method(self) -> &'static str {
        match self {
            Listing::Tools => methods::TOOLS_LIST,
            Listing::Resources => methods::RESOURCES_LIST,
            Listing::Prompts => methods::PROMPTS_LIST,
        }
    }

    /// The result's list field, which is also the capability's name.
    fn field(self) -> &'static str {
        self.capability()
    }

    fn capability(self) -> &'static str {
        match self {
            Listing::Tools => "tools",
            Listing::Resources => "resources",
            Listing::Prompts => "prompts",
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct ListingState {
    running: bool,
    /// A `list_changed` came during the listing: list again after it.
    again: bool,
    /// Listed at least once in this run.
    done: bool,
}

/// A listed tool, with what `rmcp::model::Tool` does not keep.
struct ListedTool {
    tool: Tool,
    /// `execution.taskSupport = "required"` (2025-11-25 tasks).
    task_required: bool,
}

impl ListedTool {
    /// A tool that is not valid is left out with a warning: one bad tool
    /// must not take its server's other tools down.
    fn parse(server: &str, value: serde_json::Value) -> Option<ListedTool> {
        let task_required = value.pointer("/execution/taskSupport").and_then(|t| t.as_str()) == Some("required");
        match serde_json::from_value::<Tool>(value) {
            Ok(tool) => Some(ListedTool { tool, task_required }),
            Err(error) => {
                tracing::warn!(server, "a tool in tools/list is not valid and is left out: {error}");
                None
            }
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

impl Connection {
    /// Admits a caller's request and returns its eventual raw answer; the
    /// future enforces the time-out (pushed out by progress) and cancels
    /// the request when it times out or is dropped.
    fn caller_request<P: Serialize>(
        &mut self,
        label: String,
        method: &str,
        params: &P,
        timeout: Option<Duration>,
        progress: Option<ProgressSink>,
        ctx: &mut Context<Self>,
    ) -> Answer {
        let server = self.config.name.clone();
        let admitted = self.guarded(method, ctx, |act, ctx| act.admit(&label, method, params, progress, ctx));
        let Admitted { id, answer, clock } = match admitted {
            Ok(Ok(admitted)) => admitted,
            Ok(Err(error)) => return Box::pin(std::future::ready(Err(error))),
            Err(panic) => return Box::pin(std::future::ready(Err(Failure::Internal(panic).into_call_error(&server, &label)))),
        };
        let timeout = timeout.unwrap_or(self.config.timeouts.call);
        let max = self.config.timeouts.max_call;
        let mut guard = ForgetOnDrop { connection: Some(ctx.address()), id };
        Box::pin(async move {
            tokio::pin!(answer);
            let started = tokio::time::Instant::now();
            let outcome = loop {
                let deadline = clock.as_ref().map_or(started + timeout, |clock| clock.deadline(timeout, max));
                match tokio::time::timeout_at(deadline, &mut answer).await {
                    Ok(outcome) => {
                        guard.disarm();
                        break flatten(outcome);
                    }
                    // Progress arrived since the deadline was set: wait on.
                    Err(_) if clock.as_ref().is_some_and(|clock| clock.deadline(timeout, max) > deadline) => continue,
                    Err(_) => {
                        // The limit the caller set: the silence that ended the call.
                        let after = timeout;
                        let (server, tool) = (server, label);
                        return Err(match guard.forget("timed out").await {
                            Whereabouts::WaitingForServer(ServerState::Restarting { attempt, .. }) => {
                                CallError::Restarting { server, tool, attempt, after }
                            }
                            _ => CallError::Timeout { server, tool, after },
                        });
                    }
                }
            };
            outcome.map_err(|failure| failure.into_call_error(&server, &label))
        })
    }

    /// A tool call: checked against the tool's filter and `inputSchema`,
    /// sent (as a task when the tool requires it), finished when the answer
    /// needs more rounds, and its `structuredContent` checked against the
    /// tool's `outputSchema`.
    fn call(&mut self, mut call: CallTool, ctx: &mut Context<Self>) -> Reply<Result<CallToolResult, CallError>> {
        let (server, tool) = (self.config.name.clone(), call.name.clone());
        if !self.config.tools.permits(&call.name) {
            return Reply::Ready(Err(CallError::NotPermitted { server, tool }));
        }
        let contract = self.contracts.get(&call.name).cloned();
        if let Some(contract) = &contract {
            let arguments = serde_json::Value::Object(call.arguments.take().unwrap_or_default());
            if let Err(message) = contract.check_arguments(&arguments) {
                return Reply::Ready(Err(CallError::InvalidArguments { server, tool, message }));
            }
            if let serde_json::Value::Object(arguments) = arguments {
                call.arguments = Some(arguments);
            }
        }
        let timeout = call.timeout.unwrap_or(self.config.timeouts.call);
        let as_task = contract
            .as_ref()
            .is_some_and(|c| c.task_required)
            .then(|| TaskParams { ttl: self.config.timeouts.max_call.as_millis() as u64 });
        let params = CallParams { name: &call.name, arguments: &call.arguments, task: as_task };
        let answer = self.caller_request(call.name.clone(), methods::TOOLS_CALL, &params, call.timeout, call.progress, ctx);
        let (requester, max) = (self.requester(ctx), self.config.timeouts.max_call);
        let arguments = call.arguments;
        Reply::later(async move {
            let mut raw = answer.await?;
            if rounds::may_need_rounds(&raw) {
                let params = serde_json::to_value(CallParams { name: &tool, arguments: &arguments, task: as_task }).unwrap_or_default();
                let more = rounds::finish(&requester, methods::TOOLS_CALL, params, &tool, raw);
                raw = match tokio::time::timeout(max.max(timeout), more).await {
                    Ok(finished) => finished?,
                    Err(_) => return Err(CallError::Timeout { server, tool, after: max.max(timeout) }),
                };
            }
            let result = parse::<CallToolResult>(&raw).map_err(|message| CallError::Protocol {
                server: server.clone(),
                tool: tool.clone(),
                message,
            })?;
            if let Some(contract) = contract {
                let structured = result.structured_content.as_ref();
                if let Err(problem) = contract.check_output(structured, result.is_error.unwrap_or(false)) {
                    let message = format!("its structuredContent does not match the tool's outputSchema: {problem}");
                    return Err(CallError::Protocol { server, tool, message });
                }
            }
            Ok(result)
        })
    }
}

/// The params of `tools/call`.
#[derive(Serialize)]
struct CallParams<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: &'a Option<rmcp::model::JsonObject>,
    /// Asks for a task (2025-11-25) instead of waiting on the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    task: Option<TaskParams>,
}

#[derive(Serialize, Clone, Copy)]
struct TaskParams {
    /// How long the server keeps the task, in milliseconds.
    ttl: u64,
}

/// A caller's request, admitted: its id, its answer to come, and the
/// clock its progress notifications touch.
struct Admitted {
    id: RequestId,
    answer: oneshot::Receiver<Outcome>,
    clock: Option<Arc<ProgressClock>>,
}

/// The raw answer to a caller's request, still to come.
pub(crate) type Answer = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Box<RawValue>, CallError>>>>;

/// Sends any request to the server on a caller's behalf and answers with
/// the raw result. It takes one of the `max_in_flight` slots like a tool
/// call, has the same time-out and cancellation, and fails the same way.
#[derive(Message, Debug)]
#[rtype(result = "Result<Box<RawValue>, CallError>")]
pub struct Request {
    pub method: String,
    /// A JSON object, or `Value::Null` for none.
    pub params: serde_json::Value,
    /// Names the request in errors: a tool name, `resources/read URI`, ...
    pub label: String,
    pub timeout: Option<Duration>,
    pub progress: Option<ProgressSink>,
}

impl Handler<Request> for Connection {
    type Result = Reply<Result<Box<RawValue>, CallError>>;

    fn handle(&mut self, request: Request, ctx: &mut Context<Self>) -> Self::Result {
        let params = match &request.params {
            serde_json::Value::Null => None,
            params => Some(params),
        };
        Reply::Later(self.caller_request(request.label, &request.method, &params, request.timeout, request.progress, ctx))
    }
}

impl Handler<CallTool> for Connection {
    type Result = Reply<Result<CallToolResult, CallError>>;

    fn handle(&mut self, call: CallTool, ctx: &mut Context<Self>) -> Self::Result {
        self.call(call, ctx)
    }
}

/// A call routed here by the Registry together with its caller's reply
/// channel, so the answer goes straight back to the caller (no relay task).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Routed {
    pub call: CallTool,
    pub reply: Option<OneshotSender<Result<CallToolResult, CallError>>>,
}

impl Handler<Routed> for Connection {
    type Result = ();

    fn handle(&mut self, routed: Routed, ctx: &mut Context<Self>) {
        let reply = self.call(routed.call, ctx);
        <Reply<_> as MessageResponse<Self, CallTool>>::handle(reply, ctx, routed.reply);
    }
}

/// Tells the connection to forget a call when its caller's future is
/// dropped before the answer came (the caller went away).
struct ForgetOnDrop {
    connection: Option<Addr<Connection>>,
    id: RequestId,
}

impl ForgetOnDrop {
    fn disarm(&mut self) {
        self.connection = None;
    }

    async fn forget(&mut self, reason: &'static str) -> Whereabouts {
        match self.connection.take() {
            Some(connection) => connection.send(Forget { id: self.id.clone(), reason }).await.unwrap_or(Whereabouts::Gone),
            None => Whereabouts::Gone,
        }
    }
}

impl Drop for ForgetOnDrop {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.take() {
            connection.do_send(Forget { id: self.id.clone(), reason: "the caller went away" });
        }
    }
}

impl Handler<Forget> for Connection {
    type Result = MessageResult<Forget>;

    fn handle(&mut self, msg: Forget, ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.guarded("a cancellation", ctx, |act, ctx| act.forget(&msg.id, msg.reason, ctx)).unwrap_or(Whereabouts::Gone))
    }
}

impl StreamHandler<Result<Frame, std::io::Error>> for Connection {
    fn handle(&mut self, item: Result<Frame, std::io::Error>, ctx: &mut Context<Self>) {
        match item {
            Ok(frame) => {
                let _ = self.guarded("a message from the server", ctx, |act, ctx| act.on_frame(frame, ctx));
            }
            Err(e) => tracing::warn!(server = %self.config.name, "reading stdout failed: {e}"),
        }
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        self.on_stdout_closed(ctx);
    }
}

impl StreamHandler<Result<String, std::io::Error>> for Connection {
    fn handle(&mut self, item: Result<String, std::io::Error>, _: &mut Context<Self>) {
        if let Ok(line) = item {
            self.on_stderr_line(line);
        }
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_mut() else { return };
        run.stderr_open = false;
        let generation = run.generation;
        self.finish_run_if_drained(generation, ctx);
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

impl Handler<SubscribeResource> for Connection {
    type Result = Reply<Result<(), CallError>>;

    fn handle(&mut self, msg: SubscribeResource, ctx: &mut Context<Self>) -> Self::Result {
        self.set_subscription(msg.uri, true, ctx)
    }
}

impl Handler<UnsubscribeResource> for Connection {
    type Result = Reply<Result<(), CallError>>;

    fn handle(&mut self, msg: UnsubscribeResource, ctx: &mut Context<Self>) -> Self::Result {
        self.set_subscription(msg.uri, false, ctx)
    }
}

impl Handler<RootsChanged> for Connection {
    type Result = Result<(), CallError>;

    fn handle(&mut self, _: RootsChanged, ctx: &mut Context<Self>) -> Self::Result {
        if !self.run.as_ref().is_some_and(|run| run.ready) {
            // A server that is not up yet asks for the roots when it needs them.
            return Ok(());
        }
        self.notify(methods::ROOTS_LIST_CHANGED, &serde_json::json!({}), ctx);
        Ok(())
    }
}

impl Handler<SetLogLevel> for Connection {
    type Result = Reply<Result<(), CallError>>;

    fn handle(&mut self, SetLogLevel(level): SetLogLevel, ctx: &mut Context<Self>) -> Self::Result {
        let server = self.config.name.clone();
        if self.peer.as_ref().is_some_and(|peer| !peer.has("logging", None)) {
            let tool = methods::SET_LOG_LEVEL.to_string();
            return Reply::Ready(Err(CallError::Unsupported { server, tool, capability: "logging".into() }));
        }
        if !self.run.as_ref().is_some_and(|run| run.ready) {
            // Applied once the server is up (see `on_negotiated`).
            self.log_level = Some(level);
            return Reply::Ready(Ok(()));
        }
        let Some(answer) = self.apply_log_level(level, ctx) else { return Reply::Ready(Ok(())) };
        Reply::later(async move {
            flatten(answer.await).map(|_| ()).map_err(|failure| failure.into_call_error(&server, methods::SET_LOG_LEVEL))
        })
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
