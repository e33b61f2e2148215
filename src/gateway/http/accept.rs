//! The HTTP front's accept loop: which connections are let in, and how
//! long one may sit without a request.
//!
//! Invariants:
//! - at most `max_connections` connections are served at once, and at
//!   most `max_per_client` from one peer address (IPv4-mapped IPv6
//!   addresses count as their IPv4 one); past either, a plain-text
//!   connection's request head is read, answered with a fixed `503` with
//!   `Retry-After`, and the connection closed, all within [`LINGER`]; a
//!   TLS one is closed at once (answering would cost a handshake);
//! - at most [`MAX_LINGERING`] refused connections are answered at once,
//!   the others are closed at once;
//! - a connection waiting for a request head (a new one, or one that has
//!   sent part of its next head) is closed `header_timeout` after it
//!   began waiting (new) or after the head's first byte (kept alive);
//!   a kept-alive connection that sends nothing is closed after
//!   `idle_timeout`; a TLS handshake must also end within `header_timeout`;
//! - while a request is served (its answer being written, streams
//!   included) no time-out of this module applies: the request's own
//!   bounds do;
//! - `accept` failing for want of descriptors (EMFILE, ENFILE) pauses the
//!   loop briefly instead of spinning.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::tls::Certificates;

/// How long a refused connection may take to send its head, be answered and closed.
pub const LINGER: Duration = Duration::from_secs(1);
/// Most refused connections lingering at once.
pub const MAX_LINGERING: usize = 64;
/// The `Retry-After` of a refusal, in seconds.
const RETRY_AFTER_SECS: u64 = 5;

/// Defaults: 10 s for a request head, 60 s idle between requests, 1024
/// connections in total and 256 from one address.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
pub const DEFAULT_MAX_CONNECTIONS_PER_CLIENT: usize = 256;

/// The bounds on connections (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
    pub max_per_client: usize,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_per_client: DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
        }
    }
}

/// Why a connection was refused or closed early (a metrics label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    Total,
    PerClient,
}

/// The connections open now, per peer address, and what was refused or
/// timed out (for `/metrics`).
pub struct Connections {
    limits: ConnectionLimits,
    open: watch::Sender<usize>,
    per_client: Mutex<HashMap<IpAddr, usize>>,
    refused_total: AtomicU64,
    refused_per_client: AtomicU64,
    header_timeouts: AtomicU64,
    idle_timeouts: AtomicU64,
    lingering: Arc<Semaphore>,
}

/// One admitted connection: its place is given back when dropped.
struct Slot {
    connections: Arc<Connections>,
    peer: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut per_client = self.connections.per_client.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = per_client.get_mut(&self.peer) {
            *count -= 1;
            if *count == 0 {
                per_client.remove(&self.peer);
            }
        }
        drop(per_client);
        self.connections.open.send_modify(|open| *open = open.saturating_sub(1));
    }
}

impl Connections {
    pub fn new(limits: ConnectionLimits) -> Arc<Connections> {
        Arc::new(Connections {
            limits: ConnectionLimits {
                max_connections: limits.max_connections.max(1),
                max_per_client: limits.max_per_client.max(1),
                ..limits
            },
            open: watch::channel(0).0,
            per_client: Mutex::new(HashMap::new()),
            refused_total: AtomicU64::new(0),
            refused_per_client: AtomicU64::new(0),
            header_timeouts: AtomicU64::new(0),
            idle_timeouts: AtomicU64::new(0),
            lingering: Arc::new(Semaphore::new(MAX_LINGERING)),
        })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        *self.open.borrow()
    }

    /// Waits (at most `limit`) for every connection to close.
    pub async fn closed(&self, limit: Duration) {
        let mut open = self.open.subscribe();
        let _ = tokio::time::timeout(limit, open.wait_for(|open| *open == 0)).await;
    }

    fn admit(self: &Arc<Connections>, peer: IpAddr) -> Result<Slot, Reason> {
        let mut per_client = self.per_client.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if self.open() >= self.limits.max_connections {
            self.refused_total.fetch_add(1, Ordering::Relaxed);
            return Err(Reason::Total);
        }
        let count = per_client.entry(peer).or_insert(0);
        if *count >= self.limits.max_per_client {
            self.refused_per_client.fetch_add(1, Ordering::Relaxed);
            return Err(Reason::PerClient);
        }
        *count += 1;
        self.open.send_modify(|open| *open += 1);
        Ok(Slot { connections: self.clone(), peer })
    }

    /// The Prometheus text of the connection counts.
    pub fn to_prometheus(&self) -> String {
        let refused_total = self.refused_total.load(Ordering::Relaxed);
        let refused_per_client = self.refused_per_client.load(Ordering::Relaxed);
        let header = self.header_timeouts.load(Ordering::Relaxed);
        let idle = self.idle_timeouts.load(Ordering::Relaxed);
        format!(
            "# HELP mcpvisor_http_connections_open HTTP connections open now.\n\
             # TYPE mcpvisor_http_connections_open gauge\n\
             mcpvisor_http_connections_open {}\n\
             # HELP mcpvisor_http_connections_refused_total HTTP connections refused by a connection bound.\n\
             # TYPE mcpvisor_http_connections_refused_total counter\n\
             mcpvisor_http_connections_refused_total{{bound=\"total\"}} {refused_total}\n\
             mcpvisor_http_connections_refused_total{{bound=\"per_client\"}} {refused_per_client}\n\
             # HELP mcpvisor_http_connections_timed_out_total HTTP connections closed waiting for a request.\n\
             # TYPE mcpvisor_http_connections_timed_out_total counter\n\
             mcpvisor_http_connections_timed_out_total{{timeout=\"header\"}} {header}\n\
             mcpvisor_http_connections_timed_out_total{{timeout=\"idle\"}} {idle}\n",
            self.open()
        )
    }

    /// Answers a refused plain-text connection (see the module docs).
    fn refuse(&self, mut stream: TcpStream, reason: Reason) {
        let why = match reason {
            Reason::Total => format!("the gateway serves {} connections at most", self.limits.max_connections),
            Reason::PerClient => format!("{} connections at most are served from one address", self.limits.max_per_client),
        };
        let body = format!("Service Unavailable: {why}; close idle connections or retry after {RETRY_AFTER_SECS} s\n");
        let answer = format!(
            "HTTP/1.1 503 Service Unavailable\r\nRetry-After: {RETRY_AFTER_SECS}\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let Ok(permit) = self.lingering.clone().try_acquire_owned() else { return };
        tokio::spawn(async move {
            let _permit = permit;
            let deadline = Instant::now() + LINGER;
            // An HTTP client takes an answer sent before its request for a broken connection: read the head first.
            let mut head = Vec::with_capacity(1024);
            let mut chunk = [0u8; 2048];
            while head.len() < 16 * 1024 && memchr::memmem::find(&head, b"\r\n\r\n").is_none() {
                match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
                    Ok(Ok(n)) if n > 0 => head.extend_from_slice(&chunk[..n]),
                    _ => return,
                }
            }
            if tokio::time::timeout_at(deadline, stream.write_all(answer.as_bytes())).await.is_err() {
                return;
            }
            let _ = stream.shutdown().await;
            // Read what is left of the request, so that closing does not reset the answer away.
            while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
                if n == 0 {
                    break;
                }
            }
        });
    }
}

/// What one connection is doing, for its time-outs.
struct Activity {
    state: Mutex<Phase>,
    /// Told when the deadline may have come nearer.
    changed: Notify,
}

struct Phase {
    /// Requests read whose answers are not yet fully written.
    serving: usize,
    /// Since when the connection waits for a request head.
    waiting_since: Instant,
    /// When the first byte of the awaited head arrived.
    head_started: Option<Instant>,
    /// No request was read yet.
    fresh: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    Header,
    Idle,
}

impl Activity {
    fn new() -> Arc<Activity> {
        let phase = Phase { serving: 0, waiting_since: Instant::now(), head_started: None, fresh: true };
        Arc::new(Activity { state: Mutex::new(phase), changed: Notify::new() })
    }

    fn phase(&self) -> std::sync::MutexGuard<'_, Phase> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn read_bytes(&self) {
        let mut phase = self.phase();
        if phase.serving == 0 && phase.head_started.is_none() {
            phase.head_started = Some(Instant::now());
            self.changed.notify_one();
        }
    }

    fn begin(self: &Arc<Activity>) -> Serving {
        let mut phase = self.phase();
        phase.serving += 1;
        phase.head_started = None;
        phase.fresh = false;
        self.changed.notify_one();
        Serving(self.clone())
    }

    /// When, and why, the connection expires if nothing changes; `None`
    /// while a request is served.
    fn deadline(&self, limits: &ConnectionLimits) -> Option<(Instant, Expiry)> {
        let phase = self.phase();
        if phase.serving > 0 {
            return None;
        }
        Some(match (phase.head_started, phase.fresh) {
            (Some(started), _) => (started + limits.header_timeout, Expiry::Header),
            (None, true) => (phase.waiting_since + limits.header_timeout, Expiry::Header),
            (None, false) => (phase.waiting_since + limits.idle_timeout, Expiry::Idle),
        })
    }
}

/// One request being served; the connection waits again when dropped
/// (with the response's body, once written).
struct Serving(Arc<Activity>);

impl Drop for Serving {
    fn drop(&mut self) {
        let mut phase = self.0.phase();
        phase.serving = phase.serving.saturating_sub(1);
        if phase.serving == 0 {
            phase.waiting_since = Instant::now();
            phase.head_started = None;
            self.0.changed.notify_one();
        }
    }
}

/// A response body that keeps its request [`Serving`] until it is written.
struct ServedBody {
    body: Body,
    _serving: Serving,
}

impl HttpBody for ServedBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// A connection's byte stream, noting when bytes arrive.
struct Watched<I> {
    io: I,
    activity: Arc<Activity>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.read_bytes();
        }
        polled
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[std::io::IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// Accepts connections on `listener` until `draining` is cancelled; each
/// is served by `router` on its own task, given to `spawner` when set.
pub async fn accept_loop(
    listener: TcpListener,
    router: Router,
    connections: Arc<Connections>,
    tls: Option<Certificates>,
    spawner: Option<super::Spawner>,
    draining: CancellationToken,
    closing: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            () = closing.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // EMFILE/ENFILE and the like: the next accept would fail alike at once.
                tracing::warn!("accepting an HTTP connection failed: {error}; pausing accepts for 100 ms");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let slot = match connections.admit(peer.ip().to_canonical()) {
            Ok(slot) => slot,
            Err(reason) => {
                tracing::debug!(?reason, "an HTTP connection was refused: too many connections");
                if tls.is_none() {
                    connections.refuse(stream, reason);
                }
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        // A connection accepted while draining serves one request (a health probe's 503, say) and closes;
        // the end of the drain ends it.
        let ends = match draining.is_cancelled() {
            true => Ends::AfterOneRequest { closing: closing.clone() },
            false => Ends::Draining { draining: draining.clone(), closing: closing.clone() },
        };
        let (router, connections, tls) = (router.clone(), connections.clone(), tls.clone());
        let task = async move {
            let _slot = slot;
            let limits = connections.limits;
            let activity = Activity::new();
            match tls {
                None => serve(Watched { io: stream, activity: activity.clone() }, peer, router, &connections, activity, ends).await,
                Some(tls) => {
                    let io = Watched { io: stream, activity: activity.clone() };
                    match tokio::time::timeout(limits.header_timeout, tls.acceptor().accept(io)).await {
                        Ok(Ok(io)) => serve(io, peer, router, &connections, activity, ends).await,
                        Ok(Err(error)) => tracing::debug!("a TLS handshake from {peer} failed: {error}"),
                        Err(_) => {
                            connections.header_timeouts.fetch_add(1, Ordering::Relaxed);
                            tracing::debug!("a TLS handshake from {peer} took over {:?}: closed", limits.header_timeout)
                        }
                    }
                }
            }
        };
        match &spawner {
            Some(spawn) => spawn(Box::pin(task)),
            None => drop(tokio::spawn(task)),
        }
    }
}

/// How a connection ends besides closing or expiring.
enum Ends {
    /// Once `draining` is cancelled: after its request in flight, or, when
    /// it has read none yet (accepted just before), after its first one.
    Draining { draining: CancellationToken, closing: CancellationToken },
    /// After its first request (no keep-alive).
    AfterOneRequest { closing: CancellationToken },
}
// Either way, once `closing` is cancelled (the drain is over), a connection
// serving nothing ends at once.

/// Serves HTTP/1.1 on one connection until it closes, expires or `ends`.
async fn serve<I>(io: I, peer: SocketAddr, router: Router, connections: &Connections, activity: Arc<Activity>, ends: Ends)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let limits = connections.limits;
    let tower = TowerToHyperService::new(router);
    let watched = activity.clone();
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        let serving = watched.begin();
        request.extensions_mut().insert(ConnectInfo(peer));
        let answer = hyper::service::Service::call(&tower, request);
        async move {
            let response = answer.await?;
            Ok::<_, Infallible>(response.map(|body| Body::new(ServedBody { body, _serving: serving })))
        }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    // Our own clock bounds the head (see `Activity`); hyper's would also close kept-alive connections.
    http.timer(TokioTimer::new()).header_read_timeout(None);
    let (draining, closing, one_request) = match ends {
        Ends::Draining { draining, closing } => (draining, closing, false),
        // Never cancelled: keep-alive is off already.
        Ends::AfterOneRequest { closing } => (CancellationToken::new(), closing, true),
    };
    http.keep_alive(!one_request);
    let connection = http.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    // `shutdown_after_first`: the drain began before this connection's first request was read; shutting it down
    // then would close it under a request on its way (hyper closes an idle connection at once).
    let (mut shutting_down, mut shutdown_after_first) = (false, false);
    // Made once, not at each turn of the loop (a request turns it two or three
    // times): the waits on the tokens stay registered, and the one timer is
    // moved when the deadline moves. While a request is served there is no
    // deadline and the timer is not polled: its end (`Serving`) tells `changed`.
    let (drain_begun, drain_over) = (draining.cancelled(), closing.cancelled());
    let timer = tokio::time::sleep_until(Instant::now() + limits.header_timeout);
    tokio::pin!(drain_begun, drain_over, timer);
    loop {
        if shutdown_after_first && !shutting_down && activity.phase().serving > 0 {
            connection.as_mut().graceful_shutdown();
            shutting_down = true;
        }
        let deadline = activity.deadline(&limits);
        if let Some((at, _)) = deadline {
            if timer.deadline() != at {
                timer.as_mut().reset(at);
            }
        }
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!("the HTTP connection from {peer} ended: {error}");
                }
                return;
            }
            () = &mut drain_begun, if !shutting_down && !shutdown_after_first => {
                let fresh = { let phase = activity.phase(); phase.fresh && phase.serving == 0 };
                if fresh {
                    shutdown_after_first = true;
                } else {
                    connection.as_mut().graceful_shutdown();
                    shutting_down = true;
                }
            }
            () = &mut drain_over, if !shutting_down => {
                if activity.phase().serving == 0 {
                    return;
                }
                connection.as_mut().graceful_shutdown();
                shutting_down = true;
            }
            () = activity.changed.notified() => {}
            () = &mut timer, if deadline.is_some() => {
                let Some((at, expiry)) = activity.deadline(&limits) else { continue };
                if at > Instant::now() {
                    continue;
                }
                let counter = match expiry {
                    Expiry::Header => &connections.header_timeouts,
                    Expiry::Idle => &connections.idle_timeouts,
                };
                counter.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(?expiry, "the HTTP connection from {peer} waited too long for a request: closed");
                return;
            }
        }
    }
}
