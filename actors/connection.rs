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
use rmcp::model::{CallToolResult, InitializeResult, ListToolsResult, Tool};
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::oneshot;
use tokio_util::codec::FramedRead;

use super::registry::Registry;
use super::reply::Reply;
use super::{CallTool, ServerDown, ServerState, ServerStatus, ToolsChanged};
use crate::codec::{peek_id, Frame, FrameError, JsonRpcCodec};
use crate::config::ServerConfig;
use crate::error::{CallError, ConnectError};
use crate::protocol::{self, error_codes, methods, ErrorObject, Message as RpcMessage, RequestId};
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
}

/// A call admitted but not yet written.
struct Queued {
    id: RequestId,
    frame: Vec<u8>,
    reply: oneshot::Sender<Outcome>,
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
    listing: bool,
    relist: bool,
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

pub struct Connection {
    config: Arc<ServerConfig>,
    registry: Addr<Registry>,
    hub: Recipient<StateChanged>,
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
    init: Option<InitializeResult>,
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
    pub fn new(config: ServerConfig, registry: Addr<Registry>, hub: Recipient<StateChanged>) -> Self {
        let restarts = RestartTracker::new(config.restart, config.restart_limits);
        let config_enabled = config.enabled;
        let state = if config.enabled { ServerState::Pending } else { ServerState::Disabled };
        Connection {
            config: Arc::new(config),
            registry,
            hub,
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
            init: None,
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
            listing: false,
            relist: false,
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
        let params = serde_json::json!({
            "protocolVersion": protocol::LATEST_LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": { "name": "mcpvisor", "version": env!("CARGO_PKG_VERSION") },
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
        let init = match flatten(outcome).and_then(|raw| parse::<InitializeResult>(&raw).map_err(Failure::Internal)) {
            Ok(init) => init,
            Err(failure) => return self.abort_run(failure.into_connect_error(&server, methods::INITIALIZE), Ending::Failure),
        };
        let version = init.protocol_version.to_string();
        if !protocol::is_supported_legacy_version(&version) {
            let error =
                ConnectError::UnsupportedVersion { server, got: version, supported: protocol::SUPPORTED_LEGACY_VERSIONS.join(", ") };
            return self.abort_run(error, Ending::Failure);
        }
        tracing::debug!(server = %self.name(), version, "initialized");
        self.init = Some(init);
        self.notify(methods::INITIALIZED, &serde_json::json!({}), ctx);
        self.list_tools(ctx);
    }

    /// Lists every page of tools, then reports them. One listing at a time;
    /// a `list_changed` during a listing triggers one more afterwards.
    fn list_tools(&mut self, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_mut() else { return };
        if run.listing {
            run.relist = true;
            return;
        }
        run.listing = true;
        let generation = run.generation;
        self.list_page(generation, None, Vec::new(), ctx);
    }

    fn list_page(&mut self, generation: u64, cursor: Option<String>, mut tools: Vec<Tool>, ctx: &mut Context<Self>) {
        let params = match &cursor {
            Some(cursor) => serde_json::json!({ "cursor": cursor }),
            None => serde_json::json!({}),
        };
        let answer = self.request(methods::TOOLS_LIST, &params, ctx);
        ctx.spawn(answer.into_actor(self).map(move |outcome, act, ctx| {
            if act.current_run(generation).is_none() {
                return;
            }
            let server = act.config.name.clone();
            let page = match flatten(outcome).and_then(|raw| parse::<ListToolsResult>(&raw).map_err(Failure::Internal)) {
                Ok(page) => page,
                Err(failure) => return act.abort_run(failure.into_connect_error(&server, methods::TOOLS_LIST), Ending::Failure),
            };
            tools.extend(page.tools);
            match page.next_cursor {
                Some(next) if Some(&next) == cursor.as_ref() || tools.len() > MAX_LIST_PAGES * 100 => {
                    let error = ConnectError::Protocol {
                        server,
                        method: methods::TOOLS_LIST.into(),
                        message: format!("pagination does not advance (cursor {next:?} repeats)"),
                    };
                    act.abort_run(error, Ending::Failure);
                }
                Some(next) => act.list_page(generation, Some(next), tools, ctx),
                None => act.on_tools_listed(tools, ctx),
            }
        }));
    }

    fn on_tools_listed(&mut self, tools: Vec<Tool>, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_mut() else { return };
        run.listing = false;
        let relist = std::mem::take(&mut run.relist);
        let first = !run.ready;
        run.ready = true;
        if let Some(timer) = run.startup_timer.take() {
            ctx.cancel_future(timer);
        }
        tracing::info!(server = %self.config.name, tools = tools.len(), "tools listed");
        self.tools = tools.clone();
        if self.enabled && !self.stopping {
            self.registry.do_send(ToolsChanged { server: self.config.name.clone(), tools });
        }
        if first {
            self.last_error = None;
            self.set_state(ServerState::Connected);
            self.pump(ctx);
        }
        if relist {
            self.list_tools(ctx);
        }
    }

    // ---- writing -------------------------------------------------------

    /// Sends an internal request (not counted against `max_in_flight`).
    fn request<P: Serialize>(&mut self, method: &str, params: &P, ctx: &mut Context<Self>) -> oneshot::Receiver<Outcome> {
        let id = self.next_request_id();
        let (tx, rx) = oneshot::channel();
        let frame = protocol::request_frame(&id, method, params);
        self.put_on_wire(id, frame, tx, false, ctx);
        rx
    }

    fn notify<P: Serialize>(&mut self, method: &str, params: &P, ctx: &mut Context<Self>) {
        self.push_control(protocol::notification_frame(method, params), ctx);
    }

    fn put_on_wire(&mut self, id: RequestId, frame: Vec<u8>, reply: oneshot::Sender<Outcome>, counted: bool, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_mut() else {
            let _ = reply.send(Err(Failure::Stopped));
            return;
        };
        run.outbox.push_back(Outbound { request: Some(id.clone()), bytes: frame });
        self.pending.insert(id, Pending { reply, counted });
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
            self.put_on_wire(call.id, call.frame, call.reply, true, ctx);
        }
    }

    fn can_send_call(&self) -> bool {
        self.run.as_ref().is_some_and(|run| run.ready) && self.in_flight < self.config.limits.max_in_flight
    }

    // ---- calls ---------------------------------------------------------

    fn admit_call(&mut self, call: &CallTool, ctx: &mut Context<Self>) -> Result<(RequestId, oneshot::Receiver<Outcome>), CallError> {
        let (server, tool) = (self.config.name.clone(), call.name.clone());
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
        #[derive(Serialize)]
        struct Params<'a> {
            name: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            arguments: &'a Option<rmcp::model::JsonObject>,
        }
        let id = self.next_request_id();
        let frame = protocol::request_frame(&id, methods::TOOLS_CALL, &Params { name: &call.name, arguments: &call.arguments });
        let (tx, rx) = oneshot::channel();
        if send_now {
            self.put_on_wire(id.clone(), frame, tx, true, ctx);
        } else {
            self.queue.push_back(Queued { id: id.clone(), frame, reply: tx });
        }
        Ok((id, rx))
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
            Ok(RpcMessage::Request { id, method, .. }) => self.on_server_request(id, &method, ctx),
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

    fn on_server_request(&mut self, id: RequestId, method: &str, ctx: &mut Context<Self>) {
        let frame = match method {
            methods::PING => protocol::response_frame(&id, Ok(&serde_json::json!({}))),
            _ => {
                let error =
                    ErrorObject { code: error_codes::METHOD_NOT_FOUND, message: format!("mcpvisor does not handle {method}"), data: None };
                protocol::response_frame::<()>(&id, Err(&error))
            }
        };
        self.push_control(frame, ctx);
    }

    fn on_notification(&mut self, method: &str, params: Option<Box<RawValue>>, ctx: &mut Context<Self>) {
        match method {
            methods::TOOLS_LIST_CHANGED => {
                if self.run.as_ref().is_some_and(|run| run.ready) {
                    self.list_tools(ctx);
                }
            }
            methods::LOG_MESSAGE => {
                let text = params.as_ref().map(|p| p.get()).unwrap_or("{}");
                tracing::info!(target: "mcpvisor::server", server = %self.name(), "log: {text}");
            }
            _ => tracing::debug!(server = %self.name(), method, "notification ignored"),
        }
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
            protocol_version: self.init.as_ref().map(|i| i.protocol_version.to_string()),
            server_info: self.init.as_ref().map(|i| format!("{} {}", i.server_info.name, i.server_info.version)),
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

impl Connection {
    /// Admits a call and returns its eventual answer (see the module invariants).
    fn call(&mut self, call: CallTool, ctx: &mut Context<Self>) -> Reply<Result<CallToolResult, CallError>> {
        let (server, tool) = (self.config.name.clone(), call.name.clone());
        let admitted = self.guarded("a tool call", ctx, |act, ctx| act.admit_call(&call, ctx));
        let (id, answer) = match admitted {
            Ok(Ok(admitted)) => admitted,
            Ok(Err(error)) => return Reply::Ready(Err(error)),
            Err(panic) => return Reply::Ready(Err(Failure::Internal(panic).into_call_error(&server, &tool))),
        };
        let timeout = call.timeout.unwrap_or(self.config.timeouts.call);
        let mut guard = ForgetOnDrop { connection: Some(ctx.address()), id };
        Reply::later(async move {
            let outcome = match tokio::time::timeout(timeout, answer).await {
                Ok(outcome) => {
                    guard.disarm();
                    flatten(outcome)
                }
                Err(_) => {
                    let whereabouts = guard.forget("timed out").await;
                    return Err(match whereabouts {
                        Whereabouts::WaitingForServer(ServerState::Restarting { attempt, .. }) => {
                            CallError::Restarting { server, tool, attempt, after: timeout }
                        }
                        _ => CallError::Timeout { server, tool, after: timeout },
                    });
                }
            };
            match outcome {
                Ok(raw) => parse::<CallToolResult>(&raw).map_err(|message| CallError::Protocol { server, tool, message }),
                Err(failure) => Err(failure.into_call_error(&server, &tool)),
            }
        })
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
