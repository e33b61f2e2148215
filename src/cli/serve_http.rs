//! `serve --http ADDR`: the pool served over Streamable HTTP (and legacy
//! HTTP+SSE) by [`crate::gateway::http`], until SIGTERM or SIGINT drains it.
//!
//! Decisions: a bare port means `127.0.0.1:PORT`; the token is read from
//! `MCPVISOR_SERVE_TOKEN`, else from the `[serve]` table's `token` (the
//! variable wins: it is set for one run, the file for all), never from a
//! flag, which `ps` shows; named keys (`[serve.keys]`) admit their
//! holders besides; a non-loopback bind without a token or a key is refused
//! before anything starts. The table's `allowed_origins` add to
//! `--allow-origin`. The servers without configured `roots` get an empty
//! list (they are shared by every client, whose `file://` roots name the
//! client's machine) unless `--client-roots` or the table's `client_roots`
//! pass one local client's through. Once
//! listening, one line on stderr says where (`serving MCP at
//! http://ADDR/mcp`, `https://` with TLS), with the port chosen when ADDR
//! asked for port 0.
//!
//! TLS: `--tls-cert`/`--tls-key` (both or neither; they win over the
//! table's `tls_cert`/`tls_key`), reloaded on SIGHUP. A non-loopback bind
//! without TLS is served, with a warning on stderr that points at the
//! TLS-terminating proxy setup in docs/gateway.md.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::output::Failure;
use super::parse_seconds;
use super::servers::env;
use crate::actors::gateway::bridge::ClientBridge;
use crate::actors::gateway::ServeOptions;
use crate::codec::DEFAULT_MAX_FRAME;
use crate::config::{check_token, ServeSettings};
use crate::gateway::http::auth::Authenticator;
use crate::gateway::http::keys::KeyRing;
use crate::gateway::http::limits::Limits;
use crate::gateway::http::pool::PoolGateway;
use crate::gateway::http::workers::{Workers, MAX_WORKERS};
use crate::gateway::http::{
    replica_name, warn_if_key_exposed, Certificates, ConnectionLimits, Guard, HttpOptions, MetricsRenderer, Server, DEFAULT_DRAIN,
    DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE,
};
use crate::Handle;

/// The environment variable the gateway's bearer token is read from.
pub const TOKEN_VAR: &str = "MCPVISOR_SERVE_TOKEN";

#[derive(Debug, Clone, Default, Args)]
pub struct HttpArgs {
    /// Serve Streamable HTTP at http://ADDR/mcp (and legacy SSE at /sse)
    /// instead of stdio. ADDR is HOST:PORT, or a port on 127.0.0.1.
    /// Any non-loopback address needs a token: $MCPVISOR_SERVE_TOKEN, or
    /// `token` in the [serve] table, or an OAuth issuer in [serve.auth].
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// Allow this Origin besides the loopback ones (repeatable), e.g. https://app.example.com.
    // The comment is `--help` text, where a bare URL reads best.
    #[allow(rustdoc::bare_urls)]
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
    pub allow_origin: Vec<String>,
    /// Most initialize-era sessions at once (default 1024).
    #[arg(long, value_name = "N", requires = "http")]
    pub max_sessions: Option<usize>,
    /// Most initialize-era sessions of one client (its address) at once;
    /// at the bound its oldest idle session ends to make room (default 64).
    #[arg(long, value_name = "N", requires = "http")]
    pub max_sessions_per_client: Option<usize>,
    /// Most requests open at once, all clients together: answers awaited
    /// or streaming, listen and GET streams (default 1024).
    #[arg(long, value_name = "N", requires = "http")]
    pub max_requests: Option<usize>,
    /// Most requests one client (its address) has open at once (default 512).
    #[arg(long, value_name = "N", requires = "http")]
    pub max_requests_per_client: Option<usize>,
    /// MiB of events one session keeps for resumption (default 16).
    #[arg(long, value_name = "MIB", requires = "http")]
    pub buffer_per_session: Option<usize>,
    /// MiB of events all sessions keep for resumption together (default 256).
    #[arg(long, value_name = "MIB", requires = "http")]
    pub buffer_total: Option<usize>,
    /// End a session unused for this many seconds (default 1800).
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, requires = "http")]
    pub session_idle: Option<Duration>,
    /// On SIGTERM, wait this many seconds for calls in flight (default 20).
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, requires = "http")]
    pub drain: Option<Duration>,
    /// Pass the client's roots to the servers that have no `roots` of their
    /// own (one user on this machine; by default they get none over HTTP).
    #[arg(long, requires = "http")]
    pub client_roots: bool,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key; reloaded on SIGHUP).
    #[arg(long, value_name = "FILE", requires_all = ["http", "tls_key"])]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of --tls-cert (keep it mode 600).
    #[arg(long, value_name = "FILE", requires_all = ["http", "tls_cert"])]
    pub tls_key: Option<std::path::PathBuf>,
    /// Close a connection whose request head is not complete this many seconds after it began (default 10).
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, requires = "http")]
    pub header_timeout: Option<Duration>,
    /// Close a kept-alive connection that sends no request for this many seconds (default 60).
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, requires = "http")]
    pub idle_timeout: Option<Duration>,
    /// Most connections served at once; past it, 503 with Retry-After (default 1024).
    #[arg(long, value_name = "N", requires = "http")]
    pub max_connections: Option<usize>,
    /// Most connections from one address; behind a proxy, raise it to --max-connections (default 256).
    #[arg(long, value_name = "N", requires = "http")]
    pub max_connections_per_client: Option<usize>,
    /// Name this replica: every session id begins with `NAME.`, so an
    /// ingress routes a session to the replica that opened it (docs/deploy.md).
    #[arg(long, value_name = "NAME", requires = "http")]
    pub replica: Option<String>,
    /// Threads that serve the HTTP connections and their sessions (default:
    /// one per core; 1 serves all on the thread of the servers' connections).
    #[arg(long, value_name = "N", requires = "http", value_parser = clap::value_parser!(u16).range(1..=MAX_WORKERS as i64))]
    pub workers: Option<u16>,
}

/// How many threads serve: `--workers`, else the `[serve]` table's
/// `workers`, else one per core the process may run on.
pub fn workers(args: &HttpArgs, settings: Option<&ServeSettings>) -> usize {
    let configured = args.workers.map(usize::from).or_else(|| settings.and_then(|settings| settings.workers));
    configured.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// Whether the client's roots reach the servers over HTTP: `--client-roots`
/// or `client_roots = true` in the `[serve]` table (over stdio they always do).
pub fn passes_client_roots(args: &HttpArgs, settings: Option<&ServeSettings>) -> bool {
    args.client_roots || settings.is_some_and(|settings| settings.client_roots)
}

/// `ADDR` as a socket address.
pub fn parse_addr(text: &str) -> Result<SocketAddr, Failure> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    let normalized = text.replacen("localhost:", "127.0.0.1:", 1);
    normalized.parse().map_err(|_| Failure::usage(format!("--http {text}: not an address like 127.0.0.1:8080, [::1]:8080 or 8080")))
}

/// What the HTTP front is configured with (`settings`: the `[serve]`
/// table); refuses a non-loopback bind without a token.
pub fn options(args: &HttpArgs, settings: Option<&ServeSettings>, addr: SocketAddr) -> Result<HttpOptions, Failure> {
    let token = match std::env::var(TOKEN_VAR).ok().map(|token| token.trim().to_string()).filter(|token| !token.is_empty()) {
        Some(token) => Some((token, TOKEN_VAR.to_string())),
        None => match settings {
            Some(settings) => settings.token(env)?.map(|token| (token, format!("`token` of [serve] in {}", settings.file.display()))),
            None => None,
        },
    };
    if let Some((token, source)) = &token {
        check_token(token, source).map_err(Failure::usage)?;
    }
    let token = token.map(|(token, _)| token);
    let keys = super::serve_access::named_keys(settings).map_err(|why| Failure::usage(format!("cannot serve: {why}")))?;
    let auth = authenticator(settings)?;
    let loopback = addr.ip().is_loopback();
    if !loopback && token.is_none() && keys.is_empty() && auth.is_none() {
        return Err(Failure::usage(format!(
            "--http {addr} listens beyond this machine: set {TOKEN_VAR}, or `token = \"${{VAR}}\"` in the [serve] table, \
             to a secret token clients send as `Authorization: Bearer TOKEN`, or name an OAuth issuer in [serve.auth] \
             (docs/gateway.md, \"Identities\"), or listen on 127.0.0.1"
        )));
    }
    let tls = certificates(args, settings)?;
    if !loopback && tls.is_none() {
        eprintln!(
            "mcpvisor: warning: --http {addr} serves plain HTTP beyond this machine: the token and every message cross the \
             network readable; set tls_cert and tls_key in the [serve] table (or --tls-cert/--tls-key), or listen on 127.0.0.1 \
             behind a proxy that terminates TLS (nginx or Caddy: see docs/gateway.md, \"TLS\")"
        );
    }
    let defaults = ConnectionLimits::default();
    let connections = ConnectionLimits {
        header_timeout: args.header_timeout.unwrap_or(defaults.header_timeout),
        idle_timeout: args.idle_timeout.unwrap_or(defaults.idle_timeout),
        max_connections: args.max_connections.unwrap_or(defaults.max_connections),
        max_per_client: args.max_connections_per_client.unwrap_or(defaults.max_per_client),
    };
    let mut allowed_origins = args.allow_origin.clone();
    allowed_origins.extend(settings.into_iter().flat_map(|settings| settings.allowed_origins.iter().cloned()));
    Ok(HttpOptions {
        guard: Guard {
            allowed_origins,
            loopback_origins: true,
            loopback_bind: loopback,
            token,
            keys: KeyRing::new(keys),
            auth,
            caller_tokens: None,
        },
        max_body: DEFAULT_MAX_FRAME,
        max_sessions: args.max_sessions.unwrap_or(DEFAULT_MAX_SESSIONS),
        session_idle: args.session_idle.unwrap_or(DEFAULT_SESSION_IDLE),
        limits: limits(args),
        drain: args.drain.unwrap_or(DEFAULT_DRAIN),
        metrics: None,
        connections,
        tls,
        replica: args.replica.as_deref().map(replica_name).transpose().map_err(Failure::usage)?.map(str::to_string),
        spawner: None,
        logins: None,
        link_check: None,
    })
}

/// The checker of `[serve.auth]`'s access tokens, if the table is set.
fn authenticator(settings: Option<&ServeSettings>) -> Result<Option<Arc<Authenticator>>, Failure> {
    let Some((settings, auth)) = settings.and_then(|settings| Some((settings, settings.auth.clone()?))) else { return Ok(None) };
    let client = settings.introspection_client(env)?;
    let authenticator =
        Authenticator::new(auth, client).map_err(|why| Failure::usage(format!("[serve.auth] in {}: {why}", settings.file.display())))?;
    Ok(Some(Arc::new(authenticator)))
}

/// The TLS pair from the flags, else from the `[serve]` table; loaded now,
/// so a bad pair stops `serve` before it listens.
fn certificates(args: &HttpArgs, settings: Option<&ServeSettings>) -> Result<Option<Certificates>, Failure> {
    let pair = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
        _ => settings.and_then(|settings| settings.tls_cert.clone().zip(settings.tls_key.clone())),
    };
    let Some((cert, key)) = pair else { return Ok(None) };
    let certificates = Certificates::load(&cert, &key).map_err(|why| Failure::usage(format!("cannot serve TLS: {why}")))?;
    warn_if_key_exposed(&key);
    Ok(Some(certificates))
}

/// The bounds of the flags, the defaults for the others.
fn limits(args: &HttpArgs) -> Limits {
    let defaults = Limits::default();
    let mib = |value: Option<usize>, default: usize| value.map_or(default, |mib| mib.saturating_mul(1024 * 1024));
    Limits {
        sessions_per_client: args.max_sessions_per_client.unwrap_or(defaults.sessions_per_client),
        requests: args.max_requests.unwrap_or(defaults.requests),
        requests_per_client: args.max_requests_per_client.unwrap_or(defaults.requests_per_client),
        buffer_per_session: mib(args.buffer_per_session, defaults.buffer_per_session),
        buffer_total: mib(args.buffer_total, defaults.buffer_total),
    }
}

/// Serves `handle`'s pool over HTTP on `workers` threads until `stop`
/// resolves, then drains and stops the workers.
pub async fn serve(
    handle: Handle,
    serve: ServeOptions,
    bridge: ClientBridge,
    addr: SocketAddr,
    options: HttpOptions,
    workers: usize,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<u8, Failure> {
    let metrics_handle = handle.clone();
    let render: MetricsRenderer = Arc::new(move || {
        let handle = metrics_handle.clone();
        Box::pin(async move { handle.metrics().await.to_prometheus() })
    });
    let tls = options.tls.clone();
    let options = HttpOptions { metrics: Some(render), ..options };
    let gateway = Arc::new(PoolGateway { handle: handle.clone(), options: serve, bridge });
    // The front accepts on the pool's own thread, beside the servers'
    // connections; each connection, and the sessions it opens, is served on
    // one of the workers (with one, that same thread: a request crosses none).
    let (stop_front, stopped) = tokio::sync::oneshot::channel::<()>();
    let (done, finished) = tokio::sync::oneshot::channel();
    handle.hub().do_send(crate::actors::hub::Spawn(Box::new(move || {
        let workers = match Workers::start_here(workers) {
            Ok(workers) => Arc::new(workers),
            Err(error) => {
                let _ = done.send(Err(Failure::connection(format!("cannot start {workers} gateway worker threads: {error}"))));
                return;
            }
        };
        actix_rt::spawn(async move {
            let options = HttpOptions { spawner: workers.spawner(), ..options };
            let served = bind_and_run(addr, gateway, options, stopped).await;
            workers.stop(WORKERS_STOP).await;
            let _ = done.send(served);
        });
    })));
    let outcome = async { finished.await.unwrap_or_else(|_| Err(Failure::connection("the runtime stopped before the HTTP front"))) };
    tokio::pin!(outcome);
    let reload = async {
        match &tls {
            Some(tls) => tls.reload_on_hangup().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        result = &mut outcome => return result,
        () = stop => {}
        () = reload => {}
    }
    let _ = stop_front.send(());
    outcome.await
}

/// How long the workers' threads are waited for once the front has drained
/// (their sessions already ended: only their last wake-ups are left).
const WORKERS_STOP: Duration = Duration::from_secs(2);

/// Binds `addr` and serves until `stopped` resolves (or its sender is gone).
async fn bind_and_run(
    addr: SocketAddr,
    gateway: Arc<PoolGateway>,
    options: HttpOptions,
    stopped: tokio::sync::oneshot::Receiver<()>,
) -> Result<u8, Failure> {
    let options_tls = options.tls.is_some();
    let server = Server::bind(addr, gateway, options).await.map_err(|e| Failure::connection(format!("cannot listen on {addr}: {e}")))?;
    let bound = server.local_addr().unwrap_or(addr);
    let scheme = if options_tls { "https" } else { "http" };
    eprintln!("mcpvisor: serving MCP at {scheme}://{bound}/mcp");
    let stop = async {
        let _ = stopped.await;
    };
    server.run(stop).await.map_err(|e| Failure::connection(format!("the HTTP server on {bound} failed: {e}")))?;
    Ok(0)
}
