//! The gateway's HTTP front (`serve --http ADDR`), on axum and hyper.
//!
//! | path | what |
//! | --- | --- |
//! | `/mcp` | Streamable HTTP, both eras (`streamable`) |
//! | `/sse`, `/message` | the legacy HTTP+SSE transport of 2024-11-05 (`legacy_sse`) |
//! | `/healthz` | 200 with `{"status": "serving", "sessions": N, "in_flight": N}` while serving, 503 while draining or while the core (Hub, Registry) cannot serve (`"status": "core_down"`, `"error"`) |
//! | `/.well-known/oauth-protected-resource`, `…/mcp` | the protected resource metadata (RFC 9728) with `[serve.auth]` (`auth`), else 404 |
//! | `/admin/status`, `/admin/calls`, `/admin/servers/{name}/{action}` | the pool's state, last calls, restart/enable/disable (`admin`), for `mcpvisor top --url` |
//! | `/login/{link}`, `/login/identity`, `/login/callback`, `/admin/logins…` | per-caller logins to third-party servers: the link, the browser's login as the link's caller, the redirect, a caller's and an admin's revocations (`login`) |
//! | `/metrics` | Prometheus text (calls by server/tool/outcome, latency, in-flight, queued, restarts, states; the front's connections, sessions, open requests, buffered bytes and refusals by bound), when given a renderer; for the callers `/admin` is for (it names every server and tool) |
//!
//! The front knows HTTP only: each downstream session is a [`Port`] made
//! by a [`Gateway`], which takes JSON-RPC messages each with the
//! `Outbox` its answers and related messages go to.
//!
//! Invariants:
//! - connections are let in, timed out and (with TLS) decrypted by
//!   `accept` before any request is read: HTTP/1.1 only, as before;
//! - every request passes the `guard` first (Origin, Host, token);
//! - bodies over the codec's `max_frame` are refused with 413 before they are read whole;
//! - sessions, open requests and resumption buffers are bounded per client
//!   and in total ([`limits`]): past a bound, 503 with `Retry-After`;
//! - shutdown ([`Server::run`]'s signal) ends the GET and legacy streams,
//!   waits for the requests in flight (at most `drain`), then stops
//!   accepting and ends every session. While it drains, connections are
//!   still accepted (one request each): `/healthz` answers 503 `draining`,
//!   a client's POST to its session (its answers to the gateway's requests,
//!   its cancellations) is served, and anything else gets 503 with
//!   `Retry-After`, so a load balancer sends it to another replica.

mod accept;
pub mod admin;
pub mod auth;
mod event_log;
mod guard;
mod introspected;
mod jwks;
pub mod keys;
mod legacy_sse;
pub mod limits;
pub mod login;
mod modern;
pub mod pool;
mod rejection;
mod sessions;
mod streamable;
mod tls;
pub mod workers;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::identity::Identity;
use tokio_util::sync::CancellationToken;

pub use accept::{
    ConnectionLimits, DEFAULT_HEADER_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
    MAX_LINGERING,
};
pub use guard::{Caller, Guard};
pub use tls::{warn_if_key_exposed, Certificates};

use crate::protocol::{error_codes, supported_versions, ErrorObject, Message};
use crate::server::outbox::Outbox;
use crate::telemetry::metrics::FrontGauges;
use limits::{Limits, Refusals, Requests};
use sessions::Sessions;

/// The path of Streamable HTTP.
pub const MCP_PATH: &str = "/mcp";
/// The path legacy HTTP+SSE clients open their stream at.
pub const SSE_PATH: &str = "/sse";
/// The path legacy HTTP+SSE clients post their messages to.
pub const MESSAGE_PATH: &str = "/message";
/// The health path (readiness and liveness).
pub const HEALTH_PATH: &str = "/healthz";
/// The Prometheus path.
pub const METRICS_PATH: &str = "/metrics";

const SESSION_ID: &str = "mcp-session-id";
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
const LAST_EVENT_ID: &str = "last-event-id";

/// One downstream client session, as the HTTP front sees it.
pub trait Port: Send + Sync + 'static {
    /// Delivers one message from the client (parsed once, by the front that
    /// checked it), with its `params` as a tree when the front built one
    /// (the session then does not parse them again); answers and the
    /// messages about it go to `outbox`. Resolves once the session admitted
    /// it (back-pressure), `false` when the session is gone.
    fn deliver(&self, message: Message, params: Option<Value>, outbox: Outbox) -> BoxFuture<'static, bool>;
    /// Ends the session: its calls are cancelled.
    fn close(&self);
    /// Whether the session still serves (false once it stopped, e.g.
    /// closed by its guard after a panic).
    fn is_open(&self) -> bool;
}

/// Makes the sessions the HTTP front serves.
pub trait Gateway: Send + Sync + 'static {
    /// A session of the `initialize` era whose calls are labelled
    /// `caller` (a session number, never the `Mcp-Session-Id`, which is a
    /// capability and must stay out of logs); messages that belong to no
    /// request go to `standalone`; `identity` is who opened it (the
    /// session's every request comes from the same caller). `None` when
    /// the gateway is stopping.
    fn open(&self, caller: &str, identity: Option<Arc<Identity>>, standalone: Outbox) -> BoxFuture<'static, Option<Arc<dyn Port>>>;
    /// A session for one request of the stateless 2026-07-28 era (closed
    /// once it is answered, or when its client goes), from `identity`.
    fn stateless(&self, identity: Option<Arc<Identity>>) -> BoxFuture<'static, Option<Arc<dyn Port>>>;
    /// Whether the core behind the sessions can serve (`Err` says why not);
    /// `/healthz` answers 503 while it cannot. Resolves within [`CORE_PROBE`].
    fn core(&self) -> BoxFuture<'static, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
    /// The pool `/admin` shows and acts on; `None`: `/admin` answers 404.
    fn admin(&self) -> Option<Arc<dyn admin::Admin>> {
        None
    }
    /// The names of the pool's servers.
    fn servers(&self) -> BoxFuture<'static, Vec<String>> {
        Box::pin(async { Vec::new() })
    }
    /// The servers of `servers` whose news `identity` may have (the access
    /// policy's verdict of the lists): what `/admin` shows it.
    fn heard_by(&self, identity: Option<Arc<Identity>>, servers: Vec<String>) -> BoxFuture<'static, Vec<String>> {
        let _ = identity;
        Box::pin(async { servers })
    }
}

/// Where the front runs each accepted connection's task (the connection
/// served whole there); `None`: on the accepting thread (`tokio::spawn`).
pub type Spawner = Arc<dyn Fn(BoxFuture<'static, ()>) + Send + Sync>;

/// How long `/healthz` waits for the core to answer before it reports it down.
pub const CORE_PROBE: Duration = Duration::from_secs(2);

/// Renders `/metrics` (Prometheus text format).
pub type MetricsRenderer = Arc<dyn Fn() -> BoxFuture<'static, String> + Send + Sync>;

/// How the HTTP front serves.
#[derive(Clone)]
pub struct HttpOptions {
    pub guard: Guard,
    /// Largest request body, in bytes (the codec's `max_frame`).
    pub max_body: usize,
    /// Most `initialize`-era sessions at once (legacy SSE ones included).
    pub max_sessions: usize,
    /// A session unused this long is ended (its id then answers 404).
    pub session_idle: Duration,
    /// The per-client bounds, the bound on open requests and on bytes kept for resumption.
    pub limits: Limits,
    /// How long shutdown waits for requests in flight.
    pub drain: Duration,
    pub metrics: Option<MetricsRenderer>,
    /// Time-outs and caps on connections.
    pub connections: ConnectionLimits,
    /// Serve HTTPS with these, else plain HTTP.
    pub tls: Option<Certificates>,
    /// This replica's name (checked by [`replica_name`]): every session id
    /// begins with `NAME.`, which an ingress routes on (docs/deploy.md).
    pub replica: Option<String>,
    /// Where connections are served ([`workers::Workers::spawner`]).
    pub spawner: Option<Spawner>,
    /// The login desk of servers whose callers log in themselves.
    pub logins: Option<Arc<crate::oauth::LoginDesk>>,
    /// Who opens a login link given to an issuer's caller (`[serve.auth] login`).
    pub link_check: Option<Arc<crate::oauth::LinkCheck>>,
}

/// Longest replica name: a Kubernetes pod name fits.
pub const MAX_REPLICA_NAME: usize = 63;

/// `name` if it can begin a session id and a regular expression of an
/// ingress matches it literally: 1 to [`MAX_REPLICA_NAME`] lowercase
/// letters, digits and `-`; else what is wrong with it.
pub fn replica_name(name: &str) -> Result<&str, String> {
    let fits = !name.is_empty() && name.len() <= MAX_REPLICA_NAME;
    if fits && name.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-') {
        Ok(name)
    } else {
        Err(format!(
            "--replica {name:?}: a replica's name is 1 to {MAX_REPLICA_NAME} lowercase letters, digits and `-` (a pod's name fits)"
        ))
    }
}

/// Defaults: 1024 sessions, 30 minutes idle, 20 s of draining (inside
/// Kubernetes' default 30 s grace period).
pub const DEFAULT_MAX_SESSIONS: usize = 1024;
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(30 * 60);
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(20);

/// What every handler shares.
struct Front {
    gateway: Arc<dyn Gateway>,
    sessions: Sessions,
    /// Cancelled when shutdown begins: long-lived streams end.
    draining: CancellationToken,
    /// Requests whose answer is still awaited.
    in_flight: watch::Sender<usize>,
    metrics: Option<MetricsRenderer>,
    connections: Arc<accept::Connections>,
    /// Requests open, in all and by client.
    requests: Arc<Requests>,
    refusals: Refusals,
    /// `[serve.auth]`'s checker, for the resource metadata.
    auth: Option<Arc<auth::Authenticator>>,
    admin: Option<Arc<dyn admin::Admin>>,
    /// `/admin` is served to callers without credentials: the gateway
    /// asks for none and listens on loopback only.
    admin_open: bool,
    /// The login desk of servers whose callers log in themselves.
    logins: Option<Arc<crate::oauth::LoginDesk>>,
    link_check: Option<Arc<crate::oauth::LinkCheck>>,
}

/// Counts one request in flight while it lives.
struct InFlight(Arc<Front>);

// Only the drain waits on the count, for zero: the receivers are told when
// it gets there, not at every request (waking the watchers of a `watch`
// takes the locks of all its waiter lists).
impl InFlight {
    fn new(front: &Arc<Front>) -> InFlight {
        front.in_flight.send_if_modified(|n| {
            *n += 1;
            false
        });
        InFlight(front.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.send_if_modified(|n| {
            *n = n.saturating_sub(1);
            *n == 0
        });
    }
}

/// A bound HTTP front, ready to run.
pub struct Server {
    listener: tokio::net::TcpListener,
    front: Arc<Front>,
    router: Router,
    drain: Duration,
    tls: Option<Certificates>,
    spawner: Option<Spawner>,
}

impl Server {
    /// Binds `addr`. A non-loopback address needs a token (the caller checks
    /// it: this only reports what it bound).
    pub async fn bind(addr: SocketAddr, gateway: Arc<dyn Gateway>, options: HttpOptions) -> std::io::Result<Server> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let admin = gateway.admin();
        let front = Arc::new(Front {
            gateway,
            sessions: Sessions::new(options.max_sessions.max(1), options.session_idle, options.limits, options.replica.as_deref()),
            draining: CancellationToken::new(),
            in_flight: watch::channel(0).0,
            metrics: options.metrics.clone(),
            connections: accept::Connections::new(options.connections),
            requests: Requests::new(&options.limits),
            refusals: Refusals::default(),
            auth: options.guard.auth.clone(),
            admin,
            admin_open: options.guard.loopback_bind,
            logins: options.logins.clone(),
            link_check: options.link_check.clone(),
        });
        let guard = Arc::new(options.guard.clone());
        let router = Router::new()
            .route(MCP_PATH, get(streamable::get).post(streamable::post).delete(streamable::delete))
            .route(SSE_PATH, get(legacy_sse::open))
            .route(MESSAGE_PATH, axum::routing::post(legacy_sse::post))
            .route(HEALTH_PATH, get(health))
            .route(METRICS_PATH, get(metrics))
            .route(auth::METADATA_PATH, get(resource_metadata))
            .route(&format!("{}{MCP_PATH}", auth::METADATA_PATH), get(resource_metadata))
            .route(admin::STATUS_PATH, get(admin::status))
            .route(admin::CALLS_PATH, get(admin::calls))
            .route(admin::ACTION_PATH, axum::routing::post(admin::act))
            .route(crate::oauth::LOGIN_CALLBACK_PATH, get(login::callback))
            .route(crate::oauth::LOGIN_IDENTITY_PATH, get(login::identity))
            .route(login::LINK_PATH, get(login::open_link).delete(login::revoke_own))
            .route(login::ADMIN_LOGINS_PATH, get(login::list))
            .route(login::ADMIN_LOGIN_PATH, axum::routing::delete(login::admin_revoke))
            .layer(DefaultBodyLimit::max(options.max_body))
            .layer(axum::middleware::from_fn_with_state(front.clone(), while_draining))
            .layer(axum::middleware::from_fn_with_state(guard, guard::check))
            .with_state(front.clone());
        Ok(Server { listener, front, router, drain: options.drain, tls: options.tls, spawner: options.spawner })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` resolves, then drains (see the module docs).
    pub async fn run(self, stop: impl std::future::Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
        let Server { listener, front, router, drain, tls, spawner } = self;
        let sweeper = tokio::spawn({
            let front = front.clone();
            async move {
                let mut every = tokio::time::interval(front.sessions.sweep_every());
                loop {
                    every.tick().await;
                    front.sessions.expire();
                }
            }
        });
        let draining = front.draining.clone();
        let stopped = {
            let draining = draining.clone();
            async move {
                stop.await;
                tracing::info!("shutting down: no new connections; draining the requests in flight");
                draining.cancel();
            }
        };
        let stopping = tokio::spawn(stopped);
        let closing = CancellationToken::new();
        let accepting = accept::accept_loop(listener, router, front.connections.clone(), tls, spawner, draining.clone(), closing.clone());
        let drained = async {
            draining.cancelled().await;
            let mut in_flight = front.in_flight.subscribe();
            let drained = tokio::time::timeout(drain, in_flight.wait_for(|n| *n == 0)).await.is_ok();
            if !drained {
                tracing::warn!("{} requests still in flight after {drain:?}: they are cancelled", *front.in_flight.borrow());
            }
            closing.cancel();
        };
        tokio::join!(accepting, drained);
        stopping.abort();
        sweeper.abort();
        front.sessions.end_all();
        // The connections left are streams that just ended; give them a moment to flush, no more.
        front.connections.closed(Duration::from_secs(2)).await;
        Ok(())
    }
}

async fn health(State(front): State<Arc<Front>>) -> Response {
    let draining = front.draining.is_cancelled();
    let core = match tokio::time::timeout(CORE_PROBE, front.gateway.core()).await {
        Ok(core) => core,
        Err(_) => Err(format!("the core did not answer within {CORE_PROBE:?}")),
    };
    let mut body = json!({
        "status": if draining { "draining" } else if core.is_err() { "core_down" } else { "serving" },
        "sessions": front.sessions.len(),
        "in_flight": *front.in_flight.borrow(),
    });
    if let Err(why) = &core {
        body["error"] = json!(why);
    }
    let status = if draining || core.is_err() { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::OK };
    (status, axum::Json(body)).into_response()
}

/// While the front drains (see the module): `/healthz` and a session's
/// POSTs pass, the rest gets 503.
async fn while_draining(State(front): State<Arc<Front>>, request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let passes = !front.draining.is_cancelled()
        || request.uri().path() == HEALTH_PATH
        || (request.method() == axum::http::Method::POST
            && (request.headers().contains_key(SESSION_ID) || request.uri().path() == MESSAGE_PATH));
    if passes {
        return next.run(request).await;
    }
    let message = "Service Unavailable: this gateway is shutting down; retry (another replica serves)";
    (StatusCode::SERVICE_UNAVAILABLE, [(header::RETRY_AFTER, "1")], message).into_response()
}

async fn metrics(State(front): State<Arc<Front>>, Caller(caller): Caller) -> Response {
    if let Err(refusal) = admin::authorised(&front, caller.as_deref(), METRICS_PATH) {
        return *refusal;
    }
    match &front.metrics {
        Some(render) => {
            let (requests, listen_streams) = front.requests.counts();
            let gauges = FrontGauges {
                sessions: front.sessions.len(),
                requests,
                listen_streams,
                buffered_bytes: front.sessions.buffered(),
                refusals: front.refusals.snapshot(),
            };
            let text = render().await + &gauges.to_prometheus() + &front.connections.to_prometheus();
            ([(header::CONTENT_TYPE, crate::telemetry::prometheus::CONTENT_TYPE)], text).into_response()
        }
        None => (StatusCode::NOT_FOUND, "Not Found: this gateway has no metrics").into_response(),
    }
}

/// The protected resource metadata (RFC 9728), or 404 without `[serve.auth]`.
async fn resource_metadata(State(front): State<Arc<Front>>) -> Response {
    match &front.auth {
        Some(auth) => axum::Json(auth.metadata()).into_response(),
        None => (StatusCode::NOT_FOUND, "Not Found: this gateway takes no OAuth access tokens ([serve.auth] is not set)").into_response(),
    }
}

/// A header's value as text, `None` when absent or not visible ASCII.
fn header_text<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name)?.to_str().ok()
}

/// A POSTed message must say it is JSON (`application/json`, parameters
/// allowed): the 415 answer otherwise. A form or text POST is what a page can send
/// without a preflight, so this closes one path of cross-site requests
/// beside the Origin rules.
fn require_json(headers: &HeaderMap) -> Option<Response> {
    let content_type = header_text(headers, "content-type").unwrap_or_default();
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    if essence.eq_ignore_ascii_case("application/json") {
        return None;
    }
    let message = format!(
        "Unsupported Media Type: a POST must have Content-Type: application/json (it had {})",
        if content_type.is_empty() { "none".to_string() } else { format!("{content_type:?}") }
    );
    Some(rpc_refusal(StatusCode::UNSUPPORTED_MEDIA_TYPE, None, error_codes::INVALID_REQUEST, message))
}

/// The error for a protocol version this gateway does not serve.
fn unsupported_version(requested: &str) -> ErrorObject {
    crate::server::era::unsupported_version(supported_versions(), Some(&json!(requested)))
}

/// A JSON-RPC error answer as an HTTP response with `status`.
fn rpc_error(status: StatusCode, id: Option<&Value>, error: ErrorObject) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id.cloned().unwrap_or(Value::Null), "error": error});
    (status, axum::Json(body)).into_response()
}

/// A plain JSON-RPC error with a message.
fn rpc_refusal(status: StatusCode, id: Option<&Value>, code: i64, message: impl Into<String>) -> Response {
    rpc_error(status, id, ErrorObject { code, message: message.into(), data: None })
}
