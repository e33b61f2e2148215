//! The server configuration model.
//!
//! One [`ServerConfig`] per server; defaults are DESIGN.md's numbers.
//! File formats (TOML, `.mcp.json`, ...) are read into this model by the
//! configuration loaders; embedders can also build it in code:
//!
//! ```
//! use mcpvisor::config::ServerConfig;
//! let fs = ServerConfig::stdio("fs", "npx", ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"])
//!     .with_env("LOG_LEVEL", "info");
//! assert_eq!(fs.limits.max_in_flight, 64);
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::codec::DEFAULT_MAX_FRAME;
use crate::error::ManageError;
use crate::restart::{RestartLimits, RestartPolicy};

/// Back-pressure bounds of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Requests on the wire at once; more wait in the queue.
    pub max_in_flight: usize,
    /// Calls waiting behind them; the next one is refused with `Overloaded`.
    pub max_queued: usize,
    /// Largest accepted frame from the server, in bytes.
    pub max_frame: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_in_flight: 64, max_queued: 1024, max_frame: DEFAULT_MAX_FRAME }
    }
}

/// Time limits of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Default time limit of a tool call (a call may set its own).
    pub call: Duration,
    /// Time limit of the start-up: `initialize` and listing the tools.
    pub startup: Duration,
    /// On shutdown: how long to wait after closing stdin, then after SIGTERM.
    pub shutdown_grace: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { call: Duration::from_secs(60), startup: Duration::from_secs(30), shutdown_grace: Duration::from_secs(2) }
    }
}

/// One MCP server run as a child process over stdio.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Unique name; it prefixes the server's tools (`mcp__{name}__{tool}`).
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// Added to the child's environment (after the safe inherited set).
    pub env: BTreeMap<String, String>,
    /// Pass this process's whole environment instead of the safe set.
    pub inherit_env: bool,
    pub enabled: bool,
    pub timeouts: Timeouts,
    pub restart: RestartPolicy,
    pub restart_limits: RestartLimits,
    pub limits: Limits,
}

impl ServerConfig {
    pub fn stdio<I, S>(name: impl Into<String>, command: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ServerConfig {
            name: name.into(),
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            cwd: None,
            env: BTreeMap::new(),
            inherit_env: false,
            enabled: true,
            timeouts: Timeouts::default(),
            restart: RestartPolicy::default(),
            restart_limits: RestartLimits::default(),
            limits: Limits::default(),
        }
    }

    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Checks what cannot work whatever the server does.
    pub fn validate(&self) -> Result<(), ManageError> {
        let invalid = |message: &str| Err(ManageError::InvalidConfig { server: self.name.clone(), message: message.into() });
        if self.name.is_empty() {
            return invalid("the server name is empty");
        }
        if self.command.is_empty() {
            return invalid("`command` is empty");
        }
        if self.limits.max_in_flight == 0 {
            return invalid("`max_in_flight` must be at least 1");
        }
        if self.limits.max_frame < 1024 {
            return invalid("`max_frame` must be at least 1024 bytes");
        }
        if self.timeouts.call.is_zero() || self.timeouts.startup.is_zero() {
            return invalid("time-outs must be longer than zero");
        }
        Ok(())
    }
}

/// Everything a runtime starts with.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeConfig {
    pub servers: Vec<ServerConfig>,
    /// Make this process a child subreaper (Linux), so that the orphaned
    /// children of killed servers are reparented here and reaped, leaving no
    /// zombie even under an init that does not reap. On by default; an
    /// embedding program that reaps its own orphans may turn it off. Only
    /// processes of the servers' own groups are ever reaped by mcpvisor.
    pub subreaper: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig { servers: Vec::new(), subreaper: true }
    }
}

impl RuntimeConfig {
    pub fn new(servers: impl IntoIterator<Item = ServerConfig>) -> Self {
        RuntimeConfig { servers: servers.into_iter().collect(), ..RuntimeConfig::default() }
    }
}
