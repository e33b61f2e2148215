//! [`GatewaySession`]: one downstream client session of the gateway, which
//! serves the Hub's whole pool as one MCP server.
//!
//! The seam between a session and its transport (the gateway fronts over
//! stdio and Streamable HTTP, in layer 4):
//! - the transport starts a session with [`GatewaySession::new`] from the
//!   pool (a [`Handle`]), the [`ServeOptions`] and the session's own
//!   `Outbox`, where frames that belong to no request go: list changes,
//!   log messages, `resources/updated`, and requests to the client made when
//!   no request of the client is open;
//! - it sends each message the client sent as one [`Inbound`], together
//!   with the outbox of that message's stream: the request's response, its
//!   progress notifications and the requests to the client made on its
//!   behalf go there (on stdio the same single outbox; over Streamable HTTP
//!   the POST's SSE stream);
//! - it sends [`Closed`] when the client is gone: every open request is
//!   cancelled (upstream calls too) and the session stops.
//!
//! Eras: each request is served in the era it declares
//! (`crate::server::era`, the one server side). A 2026-07-28 request is self-contained (its
//! `_meta` carries the version and the client's capabilities), so a session
//! answers it without `initialize`; a stateless HTTP front may use one
//! session for many such requests, or one per request.
//!
//! Bounds: at most [`MAX_OPEN_REQUESTS`] requests are open at once; the
//! answer to [`Inbound`] for a request resolves only once it is admitted,
//! so a transport that awaits it stops reading while the session is full.
//! Responses wait for room in their outbox (a client that stops reading
//! keeps its requests open, so it soon stops being read from); notifications
//! that find their outbox full are dropped (`Outbox::offer`). Memory does
//! not grow with a slow client.

mod access;
mod asks;
mod audience;
pub mod bridge;
mod events;
mod guarded;
mod logs;
pub mod names;
mod options;
pub mod roots;
mod serving;
mod traced;
mod work;

pub use asks::{AskClient, CallingServer};
pub use audience::heard_by;
pub use bridge::ClientBridge;
pub use options::ServeOptions;
pub use roots::ClientRoots;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use actix::prelude::*;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

use crate::codec::Frame as InboundFrame;
use crate::handle::Handle;
use crate::identity::Identity;
use crate::protocol::{error_codes, methods, ErrorObject, Message as RpcMessage, RequestId};
use crate::server::dispatch::{self, Dispatched, Request};
use crate::server::era::Served;
use crate::server::input::{self, Asked, Asking};
use crate::server::outbox::{Frame, Outbox};
use crate::server::request::{CallToolParams, ClientRequest};
use work::{Answered, Pool};

/// Requests of one session open at once; the next waits for one to end.
pub const MAX_OPEN_REQUESTS: usize = 64;

/// One message the client sent, with the outbox of its stream. Resolves
/// once the session took it: at once for notifications and responses,
/// when it was admitted for a request (see the module's bounds).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Inbound {
    /// The decoded frame, or why it could not be decoded (answered with
    /// the error JSON-RPC prescribes, never a panic).
    pub frame: InboundFrame,
    /// Where this message's answers go.
    pub stream: Outbox,
    /// The message's `params` as a tree, when the transport already built it
    /// (the HTTP front parses each body for its checks): the session then
    /// does not parse them again. `None`: the session parses them.
    pub params: Option<Value>,
}

/// The client is gone: cancels every open request and stops the session.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Closed;

/// Resolves once no request of the session is open (listen streams, which
/// never end by themselves, aside): a client that stopped writing may still
/// read the answers to what it asked.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct WhenIdle;

/// A request being served.
struct Open {
    work: SpawnHandle,
    /// The server it went to, set by the work once it knows (server
    /// requests go to its stream).
    server: Arc<OnceLock<String>>,
    stream: Outbox,
    /// A 2026-07-28 call that may ask its client (see [`crate::server::input`]):
    /// the client capabilities its request declared, and where the servers'
    /// requests during it go.
    asks: Option<(Value, mpsc::UnboundedSender<Asked>)>,
}

pub struct GatewaySession {
    pool: Pool,
    /// Frames that belong to no request.
    outbox: Outbox,
    /// What `initialize` agreed: `None` before it.
    client: Option<ClientInfo>,
    /// `notifications/initialized` arrived: notifications may go out.
    ready: bool,
    permits: Arc<Semaphore>,
    open: HashMap<RequestId, Open>,
    /// Requests to the client awaiting its response, by our id.
    asked: HashMap<RequestId, oneshot::Sender<Result<Value, ErrorObject>>>,
    next_ask: u64,
    /// Notifications dropped because the outbox was full.
    dropped: u64,
    /// List changes waiting to be announced together ([`events`]).
    coalescing: Vec<crate::server::listen::Change>,
    /// [`WhenIdle`] askers, answered once no request is open.
    idle_waiters: Vec<oneshot::Sender<()>>,
    /// Whether the pool's events reach this session: from the start in the
    /// handshake era; a stateless session subscribes when a listen opens.
    hears_events: bool,
    /// Which servers' events reach the caller ([`audience`]).
    audience: audience::Audience,
}

/// The client as `initialize` described it.
#[derive(Debug, Clone)]
struct ClientInfo {
    capabilities: Value,
}

impl GatewaySession {
    /// A session serving `handle`'s pool; `outbox` takes the frames that
    /// belong to no request; `caller` labels its tool calls (the audit
    /// log's `caller`: `stdio` for the stdio front, an HTTP session
    /// id). Start it on the pool's actix System (e.g. with
    /// [`crate::hub::Spawn`]).
    pub fn new(handle: Handle, options: ServeOptions, outbox: Outbox, caller: &str) -> GatewaySession {
        GatewaySession { hears_events: true, ..GatewaySession::stateless(handle, options, outbox, caller) }
    }

    /// A session for 2026-07-28 requests only, which hears the pool's
    /// events only once it serves a `subscriptions/listen` (a stateless
    /// front starts one per request: most never need them).
    /// The same session, serving `identity` (who authenticated the
    /// requests, if the front asks for credentials).
    pub fn with_identity(mut self, identity: Option<Arc<Identity>>) -> GatewaySession {
        self.pool.identity = identity;
        self
    }

    pub fn stateless(handle: Handle, options: ServeOptions, outbox: Outbox, caller: &str) -> GatewaySession {
        GatewaySession {
            pool: Pool {
                handle,
                caller: caller.into(),
                routes: options.routes.clone(),
                options: Arc::new(options),
                subscriptions: Arc::default(),
                notices: outbox.clone(),
                log_level: Default::default(),
                identity: None,
            },
            outbox,
            client: None,
            ready: false,
            permits: Arc::new(Semaphore::new(MAX_OPEN_REQUESTS)),
            open: HashMap::new(),
            asked: HashMap::new(),
            next_ask: 0,
            dropped: 0,
            coalescing: Vec::new(),
            idle_waiters: Vec::new(),
            hears_events: false,
            audience: Default::default(),
        }
    }

    fn is_idle(&self) -> bool {
        self.open.keys().all(|id| self.pool.subscriptions.is_listening(id))
    }

    fn wake_if_idle(&mut self) {
        if self.is_idle() {
            for waiter in self.idle_waiters.drain(..) {
                let _ = waiter.send(());
            }
        }
    }

    /// Sends a notification that belongs to no request (dropped, and
    /// counted, when the client is not reading).
    fn notify(&mut self, method: &str, params: Value) {
        if !self.ready {
            return;
        }
        if !self.outbox.offer(Frame::notification(method, &params)) {
            self.dropped += 1;
            if self.dropped.is_power_of_two() {
                tracing::warn!(dropped = self.dropped, "the gateway's client is not reading; notifications were dropped");
            }
        }
    }

    /// Takes one inbound frame: what is no request is handled here.
    fn took(&mut self, frame: InboundFrame, stream: Outbox, parsed: Option<Value>, ctx: &mut Context<Self>) -> Took {
        let message = match frame {
            Ok(message) => message,
            Err(error) => {
                return match error.refusal() {
                    Some((Some(id), error)) => Took::Refused(Frame::response::<()>(&id, Err(error)), stream),
                    Some((None, error)) => Took::Refused(Frame::unidentified(error), stream),
                    None => Took::Done,
                };
            }
        };
        match message {
            RpcMessage::Response { id, outcome } => {
                let waiter = id.and_then(|id| self.asked.remove(&id));
                if let Some(waiter) = waiter {
                    let outcome = outcome.map(|raw| serde_json::from_str(raw.get()).unwrap_or(Value::Null));
                    let _ = waiter.send(outcome);
                }
                Took::Done
            }
            RpcMessage::Notification { method, params } => {
                self.notified(&method, parsed.unwrap_or_else(|| params_value(params.as_deref())), ctx);
                Took::Done
            }
            RpcMessage::Request { id, method, params } => {
                Took::Request { id, method, params: parsed.unwrap_or_else(|| params_value(params.as_deref())), stream }
            }
        }
    }

    fn notified(&mut self, method: &str, params: Value, ctx: &mut Context<Self>) {
        match method {
            methods::INITIALIZED => {
                self.ready = true;
                if self.client.as_ref().is_some_and(|client| client.capabilities.get("roots").is_some()) {
                    // The client's roots arrived: the servers that asked before hear of them.
                    self.roots_changed(ctx);
                }
            }
            methods::CANCELLED => {
                let id = params.get("requestId").and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
                if let Some(id) = &id {
                    self.pool.subscriptions.end(id);
                }
                if let Some(open) = id.and_then(|id| self.open.remove(&id)) {
                    // Dropping the work drops its upstream call, which cancels it upstream.
                    ctx.cancel_future(open.work);
                }
            }
            methods::ROOTS_LIST_CHANGED => self.roots_changed(ctx),
            _ => {} // Unknown notifications are ignored, as JSON-RPC asks.
        }
    }

    /// Tells the servers that asked for the client's roots that they changed.
    fn roots_changed(&mut self, ctx: &mut Context<Self>) {
        let (roots, handle) = (self.pool.options.client_roots.clone(), self.pool.handle.clone());
        ctx.spawn(async move { roots.changed(&handle).await }.into_actor(self));
    }

    /// Serves a request that holds one of the session's slots, guarded.
    fn admitted(
        &mut self,
        id: RequestId,
        method: String,
        params: Value,
        stream: Outbox,
        permit: OwnedSemaphorePermit,
        ctx: &mut Context<Self>,
    ) {
        let answer_to = Some((id.clone(), stream.clone()));
        let during = format!("a `{method}` request");
        let _ = self.guarded(&during, answer_to, ctx, |session, ctx| session.serve(id, method, params, stream, permit, ctx));
    }

    /// Serves one admitted request: parsed once, then answered through the
    /// one dispatcher ([`serving`]), save what needs the session's state.
    fn serve(
        &mut self,
        id: RequestId,
        method: String,
        params: Value,
        stream: Outbox,
        permit: OwnedSemaphorePermit,
        ctx: &mut Context<Self>,
    ) {
        let reused = self.open.contains_key(&id).then(|| ErrorObject {
            code: error_codes::INVALID_REQUEST,
            message: format!("request id {id} is already in use by a request still open; use a new id"),
            data: None,
        });
        let served = Served::of(&method, &params);
        let parent = traced::parent(&self.pool, &params);
        // The server a tool call goes to, set by its work (unless it rides on `input_required`: see below).
        let server = Arc::new(OnceLock::new());
        let serving = serving::Serving { pool: &self.pool, stream: &stream, server: &server };
        let call = dispatch::parse(&serving, &method, params, served.as_ref().unwrap_or(&Served::Legacy));
        #[cfg(feature = "fault-injection")]
        if let Ok(ClientRequest::Other { method, params }) = &call {
            if method == super::guard::PANIC_METHOD {
                self.inject_panic(params);
            }
        }
        // A listen stream has no span (it never ends by itself); any other request has one, even a refused one.
        let trace = match &call {
            Ok(ClientRequest::Listen(_)) => None,
            call => traced::request_span(&self.pool, &id, &method, call.as_ref().ok().and_then(ClientRequest::target), parent),
        };
        let mut parsed = match (reused, served, call) {
            (Some(reused), _, _) => Err(reused),
            (None, Err(error), _) | (None, Ok(_), Err(error)) => Err(error),
            (None, Ok(served), Ok(call)) => Ok((served, call)),
        };
        match parsed {
            Ok((_, ClientRequest::Listen(filter))) => return self.listen(id, filter, stream, permit, ctx),
            Ok((_, ClientRequest::Initialize(ref client))) => {
                self.client = Some(ClientInfo { capabilities: client.capabilities.clone() });
            }
            _ => {}
        }
        let asking = match &mut parsed {
            Ok((Served::Modern { capabilities }, ClientRequest::CallTool(call))) => self.asking(call, capabilities, &stream, trace.clone()),
            _ => None,
        };
        // The capabilities move to the open request (finishing a result needs only the era).
        let (server, asks) = match (&asking, &mut parsed) {
            (Some(Ok(call)), Ok((Served::Modern { capabilities }, _))) => {
                (call.server.clone(), Some((std::mem::take(capabilities), call.sender())))
            }
            _ => (server, None),
        };
        let (era, serve) = match (parsed, asking) {
            (Err(error), _) => (Served::Legacy, Serve::Now(Err(error))),
            (Ok((served, _)), Some(asking)) => (served, Serve::Asking(asking)),
            (Ok((served, call)), None) => {
                let serving = serving::Serving { pool: &self.pool, stream: &stream, server: &server };
                let request_id = json!(id);
                match dispatch::dispatch(&serving, Request { id: &request_id, call, era: served.clone() }) {
                    Dispatched::Answer(answer) => (served, Serve::Now(answer.map(Answered::Json))),
                    Dispatched::Work(work) => (served, Serve::Work(work)),
                }
            }
        };
        let parked = self.pool.options.parked.clone();
        let (answer_to, key) = (stream.clone(), id.clone());
        let ending = trace.clone();
        let work = async move {
            let outcome = match serve {
                Serve::Now(outcome) => outcome,
                Serve::Work(work) => work.await,
                Serve::Asking(Ok(call)) => call.run(parked).await.map(Answered::Json),
                Serve::Asking(Err(refusal)) => Err(refusal),
            };
            let outcome = outcome.map(|answered| answered.finish(&era, &method));
            if let Some(trace) = &ending {
                traced::end(trace, &outcome);
            }
            // Responses wait for room: a client that does not read keeps its requests open.
            answer_to.send(Frame::response(&id, outcome)).await;
            drop(permit);
        };
        let work = crate::telemetry::otel::within(trace, work);
        let done = key.clone();
        if self.open.contains_key(&key) {
            // The answer to a reused id: the first request keeps its entry (and can still be cancelled).
            ctx.spawn(work.into_actor(self));
            return;
        }
        let handle = ctx.spawn(work.into_actor(self).map(move |(), session, _| {
            session.open.remove(&done);
            session.wake_if_idle();
        }));
        self.open.insert(key, Open { work: handle, server, stream, asks });
    }

    /// A 2026-07-28 `tools/call` that rides on `input_required`: a retry
    /// (it carries a `requestState`) resumes its parked call, a call whose
    /// client declared something it may be asked starts one, taking
    /// `call` (left empty). `None`: a plain call, `call` untouched.
    /// The call runs on its own task, with `trace` (the first request's span) current:
    /// a retry resumes it, so its upstream span stays that request's child.
    fn asking(
        &self,
        call: &mut CallToolParams,
        capabilities: &Value,
        stream: &Outbox,
        trace: Option<opentelemetry::Context>,
    ) -> Option<Result<Asking, ErrorObject>> {
        if call.params.get("requestState").is_some() {
            return Some(self.pool.options.parked.resume(&call.params));
        }
        if !input::may_ask(capabilities) {
            return None;
        }
        let (pool, server, call) = (self.pool.clone(), Arc::new(OnceLock::new()), std::mem::take(call));
        let (tool, target) = (call.name.clone(), server.clone());
        // Progress goes to the first request's stream only (lossy, like all progress).
        let progress = stream.clone();
        let call =
            crate::telemetry::otel::within(trace, async move { pool.call(call, &progress, &target).await.map(Answered::into_value) });
        Some(Ok(Asking::start(tool, server, call)))
    }

    /// The stream of an open request to `server`, if any.
    fn calling(&self, server: &str) -> Option<Outbox> {
        self.open
            .values()
            .find(|open| open.server.get().map(String::as_str) == Some(server) && !open.stream.is_closed())
            .map(|open| open.stream.clone())
    }
}

/// What became of an inbound frame.
enum Took {
    Done,
    /// A line that is no usable message, and the error response it gets.
    Refused(Frame, Outbox),
    Request {
        id: RequestId,
        method: String,
        params: Value,
        stream: Outbox,
    },
}

fn params_value(params: Option<&serde_json::value::RawValue>) -> Value {
    params.and_then(|raw| serde_json::from_str(raw.get()).ok()).unwrap_or(Value::Null)
}

/// What serving one request comes to.
enum Serve {
    /// The answer, now.
    Now(Result<Answered, ErrorObject>),
    /// The pool's work past the dispatcher.
    Work(serving::Work),
    /// A 2026-07-28 call riding on `input_required`, or why it cannot.
    Asking(Result<Asking, ErrorObject>),
}

impl Actor for GatewaySession {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.pool.routes.watch(&self.pool.handle);
        if std::mem::take(&mut self.hears_events) {
            self.hear_events(ctx);
        }
    }
}

impl Handler<Inbound> for GatewaySession {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, inbound: Inbound, ctx: &mut Context<Self>) -> Self::Result {
        let answer_to = match &inbound.frame {
            Ok(RpcMessage::Request { id, .. }) => Some((id.clone(), inbound.stream.clone())),
            _ => None,
        };
        let Inbound { frame, stream, params } = inbound;
        let took = self.guarded("a client message", answer_to, ctx, |session, ctx| session.took(frame, stream, params, ctx));
        let Ok(took) = took else { return Box::pin(fut::ready(())) };
        let (id, method, params, stream) = match took {
            Took::Done => return Box::pin(fut::ready(())),
            // An error response, like any, waits for room.
            Took::Refused(frame, stream) => {
                return Box::pin(
                    async move {
                        stream.send(frame).await;
                    }
                    .into_actor(self),
                )
            }
            Took::Request { id, method, params, stream } => (id, method, params, stream),
        };
        // Room now (the usual case): served in this step, with no future to wait on.
        if let Ok(permit) = self.permits.clone().try_acquire_owned() {
            self.admitted(id, method, params, stream, permit, ctx);
            return Box::pin(fut::ready(()));
        }
        let permits = self.permits.clone();
        Box::pin(async move { permits.acquire_owned().await }.into_actor(self).map(move |permit, session, ctx| {
            // The semaphore is never closed, so a permit always comes.
            if let Ok(permit) = permit {
                session.admitted(id, method, params, stream, permit, ctx);
            }
        }))
    }
}

impl Handler<WhenIdle> for GatewaySession {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: WhenIdle, _: &mut Context<Self>) -> Self::Result {
        let (waiter, idle) = oneshot::channel();
        self.idle_waiters.push(waiter);
        self.wake_if_idle();
        Box::pin(async move {
            let _ = idle.await;
        })
    }
}

impl Handler<Closed> for GatewaySession {
    type Result = ();

    fn handle(&mut self, _: Closed, ctx: &mut Context<Self>) {
        self.close(ctx);
    }
}
