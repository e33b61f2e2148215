//! What a gateway serves, shared by every session of one gateway.

use super::names::RoutesCache;
use super::roots::ClientRoots;
use crate::server::input::ParkedCalls;

/// What `serve` serves.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// `serve --server NAME`: only this server, its names unchanged
    /// (no `{server}__` prefix). `None`: every server, names prefixed.
    pub passthrough: Option<String>,
    /// Masks the servers' secret values in what the gateway itself writes
    /// from their output: the status resource (stderr tails) and the
    /// messages of failed calls.
    pub redactor: crate::config::Redactor,
    /// The routing tables, shared by every session of this gateway (an
    /// HTTP front serves each 2026-07-28 request with a session of its own,
    /// which must not list the pool afresh, nor forget the tools of a
    /// server that is restarting).
    pub routes: RoutesCache,
    /// The tasks of this gateway's sessions (`crate::server::tasks`), shared as the
    /// routing tables are.
    pub tasks: std::sync::Arc<crate::task_store::TaskStore>,
    /// 2026-07-28 calls waiting for their client's input, shared by every
    /// session of this gateway like the routing tables.
    pub parked: ParkedCalls,
    /// Whether the client's roots reach the servers, and which servers
    /// asked for them: the same record as the [`super::bridge::ClientBridge`]'s
    /// (sessions tell it when their client's roots arrive or change).
    pub client_roots: ClientRoots,
    /// The access policy (`[serve.policy]`) in force, replaced on SIGHUP;
    /// each request reads it once.
    pub policy: crate::policy::Current<crate::policy::Policy>,
    /// `[serve.caller_limits]`: each identity's own share of tool calls
    /// (none: callers share the servers' limits only).
    pub caller_limits: Option<std::sync::Arc<crate::rate_limit::PerCaller>>,
}
