//! `mcpvisor serve`: every configured server served as one MCP server on
//! stdin/stdout ([`crate::gateway`]); `serve --server NAME` serves one
//! server with its own names (a supervising, restarting wrapper).
//!
//! A gateway never starts itself: its own entry in the configuration is
//! left out, and chains are cut at [`nesting::MAX_DEPTH`] ([`nesting`]).
//!
//! stdout carries only protocol frames; logs go to stderr. The audit log
//! of tool calls is on ([`super::serve_audit`]); OpenTelemetry is on when
//! `[telemetry]` or the `OTEL_EXPORTER_OTLP_*` variables name a collector
//! ([`crate::telemetry::otel`]), flushed at exit within the grace period. `SIGHUP`
//! reads the configuration again and applies it with `SetServers`: new
//! servers start, removed ones stop, changed ones restart, unchanged ones
//! keep running; the `[serve]` table's access policy and named keys are
//! read again too ([`super::serve_access`]), and a change of them is
//! announced as changed lists. Exit code 0 when the client closes stdin,
//! once what it asked is answered (see [`crate::gateway::stdio::DRAIN`]).

use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::nesting;
use super::output::{warn, Failure};
use super::serve_access::Access;
use super::servers::{env, Servers};
use super::session::{prepare, Session};
use super::{interrupted, Cli, EXIT_INTERRUPTED};
use crate::actors::gateway::bridge::ClientBridge;
use crate::actors::gateway::roots::ClientRoots;
use crate::actors::gateway::ServeOptions;
use crate::caller_token::CallerTokens;
use crate::config::{Auth, RuntimeConfig, ServerConfig};
use crate::rate_limit::PerCaller;
use crate::Handle;

/// The fewest cores on which `serve --http` gives its connections threads
/// of their own. Below, the clients, the servers and the gateway share so
/// few cores that the crossings only add work: on 2 cores a connection
/// thread cost 15 to 19 % more CPU per call and 19 % of the K=32 calls/s
/// (docs/benchmarks.md, 2026-11-29).
const SPREAD_FROM_CORES: usize = 4;

/// How many connection threads `serve --http` asks for on `cores` cores.
fn spread_over_http(cores: usize) -> usize {
    if cores >= SPREAD_FROM_CORES {
        cores
    } else {
        0
    }
}

/// Time for the servers to stop after stdin closed or a signal.
const STOP_GRACE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Serve only this server, its tools and prompts under their own names.
    #[arg(long, value_name = "NAME")]
    pub server: Option<String>,
    #[command(flatten)]
    pub http: super::serve_http::HttpArgs,
    #[command(flatten)]
    pub audit: super::serve_audit::AuditArgs,
}

pub fn run(cli: &Cli, args: &ServeArgs) -> Result<u8, Failure> {
    nesting::check_depth(nesting::depth(env))?;
    let servers = Servers::load(cli)?;
    let configs = selected(&servers, args)?;
    let mut http = match &args.http.http {
        Some(addr) => {
            let addr = super::serve_http::parse_addr(addr)?;
            Some((addr, super::serve_http::options(&args.http, servers.serve.as_ref(), addr)?))
        }
        None => None,
    };
    let caller_tokens = as_each_caller(&configs, http.as_mut().map(|(_, http)| &mut http.guard));
    let logins = super::serve_logins::desk(&configs, servers.serve.as_ref(), http.is_some())?;
    if let Some((_, http)) = &mut http {
        http.logins = logins.clone();
        http.link_check = super::serve_logins::link_check(logins.as_deref(), servers.serve.as_ref())?;
    }
    warn_per_caller(&configs, http.as_ref().map(|(_, http)| &http.guard));
    let telemetry = super::serve_audit::telemetry(&args.audit, servers.audit.as_ref(), http.is_none())?;
    // Before the runtime: the exporters' threads are their own.
    let telemetry = super::otel::start(&servers, telemetry)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::connection(format!("cannot start a tokio runtime: {e}")))?;
    let outcome = runtime.block_on(async {
        // Before anything is served: a SIGHUP sent as soon as the first answer is out must find its handler, not end the gateway.
        let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        let passes_roots = http.is_none() || super::serve_http::passes_client_roots(&args.http, servers.serve.as_ref());
        let roots = ClientRoots::new(passes_roots);
        // Over HTTP, many clients: a server's request goes to the session whose call caused it, or nowhere.
        let bridge = if http.is_some() { ClientBridge::shared(roots) } else { ClientBridge::new(roots) };
        // No settling wait: a request made before a server is up waits for it.
        // Over HTTP on enough cores the connections leave the runtime's thread for threads of their
        // own; one stdio client's calls start on that thread, where a connection beside them is
        // reached without crossing to another (docs/operations.md, "Threads").
        let threads = if http.is_some() { spread_over_http(RuntimeConfig::per_core()) } else { 0 };
        let session = Session::launch_spread(configs, bridge.handlers(), telemetry, threads, (caller_tokens, logins))?;
        let parked = crate::server::input::ParkedCalls::from_env().map_err(Failure::usage)?;
        let keys = http.as_ref().map(|(_, http)| http.guard.keys.clone());
        let access = Access::start(servers.serve.as_ref(), keys)?;
        let options = ServeOptions {
            passthrough: args.server.clone(),
            redactor: super::secrets::redactor(),
            parked,
            client_roots: bridge.client_roots(),
            policy: access.policy.clone(),
            caller_limits: servers.serve.as_ref().and_then(|serve| serve.caller_limits).map(|limit| Arc::new(PerCaller::new(limit))),
            ..ServeOptions::default()
        };
        if let Some((addr, http)) = http {
            let stop = async {
                interrupted().await;
            };
            let workers = super::serve_http::workers(&args.http, servers.serve.as_ref());
            let served = super::serve_http::serve(session.handle.clone(), options, bridge, addr, http, workers, stop);
            let outcome = tokio::select! {
                outcome = served => outcome,
                () = reload_on_hangup(cli, args, &session.handle, &access, hangups) => Ok(0),
            };
            close(session).await;
            return outcome;
        }
        let served = crate::gateway::stdio::serve_stdio(session.handle.clone(), options, bridge);
        let outcome = tokio::select! {
            () = served => Ok(0),
            () = reload_on_hangup(cli, args, &session.handle, &access, hangups) => Ok(0),
            signal = interrupted() => Err(Failure { code: EXIT_INTERRUPTED, message: format!("interrupted by {signal}; the servers were stopped") }),
        };
        close(session).await;
        outcome
    });
    // A read of stdin may still be pending after a signal: do not wait for it.
    runtime.shutdown_timeout(STOP_GRACE);
    outcome
}

/// The book of callers' tokens the servers that act as each caller (auth
/// type `token_exchange`) exchange, kept by `guard`; warns of such a server
/// that no caller can reach as itself (no `[serve.auth]`, or not over HTTP).
fn as_each_caller(configs: &[ServerConfig], guard: Option<&mut crate::gateway::http::Guard>) -> CallerTokens {
    let book = CallerTokens::default();
    let exchanging: Vec<&str> =
        configs.iter().filter(|config| matches!(config.auth, Some(Auth::TokenExchange(_)))).map(|config| config.name.as_str()).collect();
    if exchanging.is_empty() {
        return book;
    }
    let names = exchanging.join("`, `");
    match guard {
        Some(guard) if guard.auth.is_some() => guard.caller_tokens = Some(book.clone()),
        Some(_) => eprintln!(
            "mcpvisor: warning: server `{names}` acts as each caller (auth type \"token_exchange\"), which needs callers with access \
             tokens of an issuer: set [serve.auth] (docs/gateway.md, \"Token exchange\"); until then its tools answer every call with \
             an error"
        ),
        None => eprintln!(
            "mcpvisor: warning: server `{names}` acts as each caller (auth type \"token_exchange\"), which only `serve --http` with \
             [serve.auth] can do; over stdio its tools answer every call with an error"
        ),
    }
    book
}

/// Warns of each server run once per caller (`per_caller`) that no caller
/// can reach as itself (no `[serve.auth]` nor named keys, or not over
/// HTTP), or whose callers' processes share what they write (no sandbox,
/// or writable paths beyond each process's private temporary directory).
fn warn_per_caller(configs: &[ServerConfig], guard: Option<&crate::gateway::http::Guard>) {
    for config in configs.iter().filter(|config| config.per_caller.is_some()) {
        let name = &config.name;
        match guard {
            Some(guard) if guard.auth.is_some() || !guard.keys.get().is_empty() => {}
            Some(_) => warn(format!(
                "server `{name}` runs a process per caller (per_caller), which needs callers that prove who they are: set \
                 [serve.auth] or [serve.keys] (docs/gateway.md, \"A process per caller\"); until then its tools answer every call \
                 with an error"
            )),
            None => warn(format!(
                "server `{name}` runs a process per caller (per_caller), which only `serve --http` with [serve.auth] or [serve.keys] \
                 can do; over stdio its tools answer every call with an error"
            )),
        }
        match &config.sandbox {
            None => warn(format!(
                "server `{name}` runs a process per caller without a sandbox: each caller's process may read what another's \
                 wrote, anywhere the user may; give it a sandbox (docs/security.md, \"Sandboxes\")"
            )),
            Some(sandbox) if !sandbox.write.is_empty() => warn(format!(
                "server `{name}` runs a process per caller, and its sandbox's `write` paths are shared by every caller's process"
            )),
            Some(_) => {}
        }
    }
}

/// Stops the servers, then waits for the audit log to be written out
/// and OpenTelemetry's last spans and metrics to be sent.
async fn close(session: Session) {
    let telemetry = session.handle.telemetry().clone();
    let audit = telemetry.audit().cloned();
    session.close().await;
    super::otel::flush(&telemetry, STOP_GRACE).await;
    if let Some(audit) = audit {
        if !tokio::task::spawn_blocking(move || audit.flush(STOP_GRACE)).await.unwrap_or(false) {
            warn("the audit log could not be written out in time; its last lines may be missing");
        }
    }
}

/// The servers to start: all, or the one named (which must exist), each
/// marked one gateway deeper than this one ([`nesting`]).
fn selected(servers: &Servers, args: &ServeArgs) -> Result<Vec<ServerConfig>, Failure> {
    let depth = nesting::depth(env);
    prepare(servers.to_start(args.server.as_deref())?, |config| nesting::mark_child(config, depth))
}

/// Applies the configuration again on every `SIGHUP` `hangups` hears;
/// never returns (pending for ever when SIGHUP cannot be watched).
async fn reload_on_hangup(cli: &Cli, args: &ServeArgs, handle: &Handle, access: &Access, hangups: Option<tokio::signal::unix::Signal>) {
    let Some(mut hangups) = hangups else { return std::future::pending().await };
    while hangups.recv().await.is_some() {
        let servers = Servers::load(cli);
        if servers.as_ref().is_ok_and(|servers| access.reload(servers.serve.as_ref())) {
            super::serve_access::announce_lists(handle).await;
        }
        let configs = match servers.and_then(|servers| selected(&servers, args)) {
            Ok(configs) => configs,
            Err(failure) => {
                warn(format_args!("SIGHUP: the configuration was not applied: {}", failure.message));
                continue;
            }
        };
        match handle.set_servers(configs).await {
            Ok(done) => {
                tracing::info!(added = ?done.added, removed = ?done.removed, changed = ?done.changed, "SIGHUP: configuration applied");
                for (server, error) in done.errors {
                    warn(format_args!("SIGHUP: server `{server}` was not applied: {error}"));
                }
            }
            Err(error) => warn(format_args!("SIGHUP: the configuration was not applied: {error}")),
        }
    }
    std::future::pending().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_http_the_connections_get_threads_from_four_cores_one_per_core() {
        assert_eq!(spread_over_http(1), 0);
        assert_eq!(spread_over_http(2), 0);
        assert_eq!(spread_over_http(3), 0);
        assert_eq!(spread_over_http(4), 4);
        assert_eq!(spread_over_http(64), 64);
    }
}
