//! Server configuration: the model, and the files it is read from and written to.
//!
//! One [`ServerConfig`] per server; defaults are DESIGN.md's numbers.
//! Embedders can build it in code:
//!
//! ```
//! use mcpvisor_wire::config::ServerConfig; // `mcpvisor::config::ServerConfig` to an embedder
//! let fs = ServerConfig::stdio("fs", "npx", ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"])
//!     .with_env("LOG_LEVEL", "info");
//! assert_eq!(fs.limits.max_in_flight, 64);
//! ```
//!
//! # Files
//!
//! - **mcpvisor's own TOML** ([`native`]): one `[servers.NAME]` table per
//!   server. Read strictly (unknown keys are errors) and edited in place:
//!   comments and the order of everything else are kept.
//! - **Other tools' files** ([`foreign`]), read as they are, never written:
//!   Claude Desktop, Claude Code (`.mcp.json`, `~/.claude.json`), Cursor,
//!   VS Code, OpenCode, Gemini CLI, Windsurf, Zed and Codex's TOML. Where
//!   each tool keeps them on this machine: [`sources`].
//!
//! # Precedence ([`discover`])
//!
//! The user file (`$MCPVISOR_CONFIG`, else
//! `$XDG_CONFIG_HOME/mcpvisor/servers.toml`, else
//! `~/.config/mcpvisor/servers.toml`) < other tools' files in the project
//! directory ([`discover::FOREIGN_PROJECT_FILES`], with Claude Code's local
//! scope after `.mcp.json`) < the project's `.mcpvisor.toml`. Project files
//! take part only once the user trusts their folder, as they are then
//! ([`trust`]): a cloned repository's files start nothing.
//! A server defined again under the same name is replaced whole. Errors in
//! mcpvisor's files fail the load; editors' files or servers that cannot be
//! read are skipped with a reason ([`LoadedConfig::skipped`]).
//!
//! # Variables
//!
//! `${VAR}` and `${VAR:-default}` (used when `VAR` is unset or empty) work
//! in `command`, `args`, `cwd`, `env` values, `url`, header values and auth
//! values; auth values also take `$VAR`. `$${` is a literal `${`. Files keep
//! the references: they are expanded only when a server starts
//! ([`ServerConfig::expanded`]), so writing a file back never bakes a
//! secret in. An unset variable without a default is an error naming the
//! server and the field.
//!
//! # Redaction
//!
//! Everything shown or logged goes through one model ([`redact`]):
//! [`ServerConfig::redacted`] for configurations, a [`Redactor`] for any
//! other text or JSON. Values that cannot be secrets (numbers, booleans,
//! common setting words, one `${VAR}` reference) are never masked.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::codec::DEFAULT_MAX_FRAME;
use crate::error::ManageError;
use crate::rate_limit::RateLimits;
use crate::restart::{RestartLimits, RestartPolicy};

pub mod agent;
mod audit;
#[doc(hidden)]
pub mod de;
pub mod definition;
pub mod discover;
mod dotenv;
pub mod duration;
mod expand;
#[doc(hidden)]
pub mod file;
mod filter;
#[doc(hidden)]
pub use filter::glob_match;
pub mod foreign;
mod jsonc;
pub mod native;
mod oauth;
mod otel;
pub mod per_caller;
pub mod redact;
pub mod sandbox;
mod scan;
mod secrets;
mod serve;
pub mod serve_auth;
mod serve_policy;
#[doc(hidden)] // where other tools keep their files: the command line's
pub mod sources;
pub mod token_exchange;
pub mod trust;
mod values;

pub use agent::{AgentSettings, ConfirmMode, ServerConfirm, ToolRule};
pub use audit::{AuditArguments, AuditConfig, AuditTarget};
pub use definition::Definition;
pub use discover::{load_all, LoadedConfig, LoadedServer, Locations, UntrustedFile};
pub use filter::ToolFilter;
pub use oauth::{Grant, IdentityProvider, OAuthConfig, PerCallerLogin, DEFAULT_MAX_LOGINS};
pub use otel::OtlpSettings;
pub use per_caller::PerCaller;
pub use redact::{Redactor, MASK};
pub use sandbox::{Network, SandboxSpec};
pub use scan::Severity;
pub use secrets::{Direction, SecretAction, SecretsMode, SecretsPolicy};
#[doc(hidden)] // for the policy tests of mcpvisor-services
#[doc(hidden)]
pub use serve::read as read_serve;
pub use serve::{check_token, AuthSettings, IntrospectionSettings, LoginClient, ServeSettings, MAX_WORKERS};
pub use serve_policy::{Effect, KeySettings, PolicySettings, RuleSettings};
pub use token_exchange::TokenExchangeConfig;
pub use trust::{ProjectTrust, Untrusted};

/// Back-pressure bounds of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Requests on the wire at once; more wait in the queue.
    pub max_in_flight: usize,
    /// Calls waiting behind them; the next one is refused with `Overloaded`.
    pub max_queued: usize,
    /// Largest accepted frame from the server, in bytes.
    pub max_frame: usize,
    /// Pages of one `*/list` followed at most; a server still handing out
    /// cursors after that is in error.
    pub max_list_pages: usize,
    /// Items of one `*/list` (all pages together) taken at most.
    pub max_list_items: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_in_flight: 64, max_queued: 1024, max_frame: DEFAULT_MAX_FRAME, max_list_pages: 1_000, max_list_items: 100_000 }
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
    /// Progress notifications push a call's deadline out, but never past this.
    pub max_call: Duration,
    /// How long `era = auto` waits for an answer to `server/discover`
    /// before falling back to `initialize`.
    pub discover: Duration,
    /// Pings the server this often when set; a ping that gets no answer
    /// within the call time-out restarts the server.
    pub health_ping: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            call: Duration::from_secs(60),
            startup: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(2),
            max_call: Duration::from_secs(600),
            discover: Duration::from_secs(3),
            health_ping: None,
        }
    }
}

/// How the runtime reaches a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    #[default]
    Stdio,
    /// Streamable HTTP at `url`.
    Http,
    /// The older HTTP + server-sent events transport at `url`.
    Sse,
    /// Tools written in Rust, served inside this process
    /// ([`ServerConfig::in_process`]); never read from or written to a file.
    /// The configuration only names the server: its handler is given to the
    /// runtime when it starts (or with the server, when one is added later).
    InProcess,
}

/// What a change to a server's pinned tool definitions does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pinning {
    /// `pin = true` (the default): the changed tool is withheld until the
    /// user accepts the change.
    #[default]
    Withhold,
    /// `pin = "notify"`, for a server the user trusts to change: the change
    /// is accepted at once (the new definition pinned), and said in a
    /// warning, an event and the server's status warnings.
    Notify,
    /// `pin = false`: nothing is pinned; unsafe, as a server may then
    /// change what its tools tell the model at any time, unnoticed.
    Off,
}

/// Which generation of the MCP protocol to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Era {
    /// Let the runtime find out when it connects.
    #[default]
    Auto,
    /// The `initialize` handshake era (protocol versions 2024-11-05 to 2025-11-25).
    Legacy,
    /// The protocol generation after it.
    Modern,
}

/// Where a server's definition came from; set by [`discover`], never written to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    /// The user's own file (or code): applies in every directory.
    #[default]
    User,
    /// A file of the project directory: `.mcpvisor.toml` or an editor's file.
    Project,
}

/// Credentials sent to a remote server. Values may hold `$VAR` / `${VAR}`
/// references, kept unexpanded until [`ServerConfig::expanded`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// `Authorization: Bearer {token}`.
    Bearer { token: String },
    /// `Authorization: Basic base64({username}:{password})`.
    Basic { username: String, password: String },
    /// `{header}: {value}`.
    ApiKey { header: String, value: String },
    /// OAuth 2.1 (see [`OAuthConfig`]); a remote server without `auth`
    /// that answers 401 gets the same with every setting at its default.
    OAuth(OAuthConfig),
    /// Behind the gateway, each caller's own token exchanged for one meant
    /// for this server (RFC 8693; see [`TokenExchangeConfig`]).
    TokenExchange(Box<TokenExchangeConfig>),
}

/// The spelling of a keyword in files, shared by the readers and the writer.
pub trait Keyword: Copy + PartialEq + 'static {
    const CHOICES: &'static [(&'static str, Self)];

    fn parse(word: &str) -> Option<Self> {
        Self::CHOICES.iter().find(|(name, _)| *name == word).map(|(_, value)| *value)
    }

    fn as_str(self) -> &'static str {
        Self::CHOICES.iter().find(|(_, value)| *value == self).map_or("", |(name, _)| name)
    }

    /// `a | b | c`, for error messages.
    fn choices() -> String {
        Self::CHOICES.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(" | ")
    }
}

impl Keyword for Transport {
    /// What a file may say: an in-process server is made in code only.
    const CHOICES: &'static [(&'static str, Self)] = &[("stdio", Transport::Stdio), ("http", Transport::Http), ("sse", Transport::Sse)];

    fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
            Transport::Sse => "sse",
            Transport::InProcess => "in-process",
        }
    }
}

impl Keyword for Era {
    const CHOICES: &'static [(&'static str, Self)] = &[("auto", Era::Auto), ("legacy", Era::Legacy), ("modern", Era::Modern)];
}

/// One MCP server: a child process over stdio, a remote server over
/// HTTP/SSE, or tools of this program served in-process.
///
/// Text fields hold what the file says, `${VAR}` references included, so
/// that writing a configuration back never bakes secrets in; the runtime
/// starts servers from [`ServerConfig::expanded`], and listings show
/// [`ServerConfig::redacted`].
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Unique name; it prefixes the server's tools (`mcp__{name}__{tool}`).
    pub name: String,
    pub transport: Transport,
    /// Program of a stdio server; empty for remote servers.
    pub command: String,
    pub args: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// Added to the child's environment (after the safe inherited set).
    pub env: BTreeMap<String, String>,
    /// Pass this process's whole environment instead of the safe set.
    pub inherit_env: bool,
    /// Endpoint of an HTTP/SSE server; `None` for stdio servers.
    pub url: Option<String>,
    /// Extra HTTP headers of a remote server.
    pub headers: BTreeMap<String, String>,
    pub auth: Option<Auth>,
    pub enabled: bool,
    pub era: Era,
    /// Roots (directories or URIs) offered to the server.
    pub roots: Vec<String>,
    /// Which of the server's tools are exposed.
    pub tools: ToolFilter,
    /// Whether its tool definitions are pinned on first use, and what a
    /// change does (`pin = true | "notify" | false`; see [`Pinning`]).
    pub pin: Pinning,
    /// What its tool calls may carry past mcpvisor: secrets in the
    /// arguments sent to it and in the results it returns.
    pub secrets: SecretsPolicy,
    /// Withhold its tools whose scan findings reach this severity
    /// (`withhold`, or the file's `[scan] withhold`); `None`: never.
    pub withhold: Option<Severity>,
    pub scope: Scope,
    pub timeouts: Timeouts,
    pub restart: RestartPolicy,
    pub restart_limits: RestartLimits,
    pub limits: Limits,
    /// Calls per second and at once, for the server and for each tool.
    pub rate_limits: RateLimits,
    /// The sandbox of a stdio server (`[servers.X.sandbox]`, or the file's
    /// `[sandbox] default`); `None`: none.
    pub sandbox: Option<SandboxSpec>,
    /// One process per caller of the gateway (a stdio server; `None`: one
    /// process for all), with `${caller.…}` in `env` filled per caller.
    pub per_caller: Option<PerCaller>,
}

impl ServerConfig {
    /// A stdio server with every other field at its default.
    pub fn stdio<I, S>(name: impl Into<String>, command: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ServerConfig {
            name: name.into(),
            transport: Transport::Stdio,
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            cwd: None,
            env: BTreeMap::new(),
            inherit_env: false,
            url: None,
            headers: BTreeMap::new(),
            auth: None,
            enabled: true,
            era: Era::Auto,
            roots: Vec::new(),
            tools: ToolFilter::default(),
            scope: Scope::User,
            timeouts: Timeouts::default(),
            restart: RestartPolicy::default(),
            restart_limits: RestartLimits::default(),
            limits: Limits::default(),
            rate_limits: RateLimits::default(),
            sandbox: None,
            per_caller: None,
            pin: Pinning::Withhold,
            secrets: SecretsPolicy::default(),
            withhold: None,
        }
    }

    /// A remote server (`transport` should be `Http` or `Sse`) with every other field at its default.
    pub fn remote(name: impl Into<String>, transport: Transport, url: impl Into<String>) -> Self {
        ServerConfig { transport, url: Some(url.into()), ..ServerConfig::stdio(name, "", Vec::<String>::new()) }
    }

    /// A server whose tools are served inside this process by a handler
    /// the runtime is given under the same name, with every other field at
    /// its default. It speaks the `initialize` era: there is nothing to probe.
    pub fn in_process(name: impl Into<String>) -> Self {
        ServerConfig { transport: Transport::InProcess, era: Era::Legacy, ..ServerConfig::stdio(name, "", Vec::<String>::new()) }
    }

    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    pub fn with_header(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(key.into(), value.into());
        self
    }

    /// Checks what cannot work whatever the server does.
    ///
    /// A `url` that starts with a `$` reference cannot be checked before
    /// expansion; it is checked again on the expanded configuration.
    pub fn validate(&self) -> Result<(), ManageError> {
        let invalid = |message: &str| Err(ManageError::InvalidConfig { server: self.name.clone(), message: message.into() });
        if self.name.is_empty() {
            return invalid("the server name is empty");
        }
        match self.transport {
            Transport::Stdio => {
                if self.command.is_empty() {
                    return invalid("`command` is empty");
                }
                if self.url.is_some() || !self.headers.is_empty() || self.auth.is_some() {
                    return invalid("`url`, `headers` and `auth` are for http/sse servers; remove them or set `transport` to http or sse");
                }
            }
            Transport::Http | Transport::Sse => {
                let url = self.url.as_deref().unwrap_or("");
                if !(is_http_url(url) || url.starts_with('$')) {
                    return invalid("`url` must be an http:// or https:// URL for an http/sse server");
                }
                if !self.command.is_empty() {
                    return invalid("`command` is set on an http/sse server; remove it or set `transport` to stdio");
                }
                if self.transport == Transport::Sse && matches!(self.auth, Some(Auth::TokenExchange(_))) {
                    return invalid("auth type \"token_exchange\" is for http servers (a session per caller); set `transport` to http");
                }
                if self.transport == Transport::Sse && matches!(&self.auth, Some(Auth::OAuth(oauth)) if oauth.per_caller.is_some()) {
                    return invalid("auth.per_caller is for http servers (a session per caller); set `transport` to http");
                }
            }
            Transport::InProcess => {
                if !self.command.is_empty() || self.url.is_some() || !self.headers.is_empty() || self.auth.is_some() {
                    return invalid("an in-process server has no `command`, `url`, `headers` or `auth`; remove them");
                }
            }
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
        self.validate_per_caller().map_or(Ok(()), |message| invalid(&message))
    }

    /// What is wrong with `per_caller` and the `${caller.…}` references.
    fn validate_per_caller(&self) -> Option<String> {
        if let Some(per_caller) = &self.per_caller {
            if self.transport != Transport::Stdio {
                return Some(
                    "`per_caller` is for stdio servers (a process per caller); a remote server acts as each caller \
                             with auth = { type = \"token_exchange\" }"
                        .into(),
                );
            }
            if per_caller.max_callers == 0 || per_caller.caller_idle.is_zero() {
                return Some("`per_caller.max_callers` must be at least 1 and `per_caller.caller_idle` longer than zero".into());
            }
        }
        let mut problem = None;
        let mut config = self.clone();
        let _ = config.visit_texts(|field, text| {
            if !per_caller::mentions_caller(text) || problem.is_some() {
                return Ok::<(), ()>(());
            }
            let path = field.path();
            problem = match (&self.per_caller, field, per_caller::malformed(text)) {
                (None, _, _) => {
                    Some(format!("`{path}` holds a ${{caller.…}} reference, which only a server with `per_caller = true` fills in"))
                }
                (Some(_), expand::TextField::Env(_), None) => None,
                (Some(_), expand::TextField::Env(_), Some((reference, why))) => Some(format!("`{path}` holds {reference}: {why}")),
                (Some(_), _, _) => Some(format!("`{path}` holds a ${{caller.…}} reference; only `env` values may hold one")),
            };
            Ok(())
        });
        problem
    }
}

fn is_http_url(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    (lower.starts_with("http://") && url.len() > 7) || (lower.starts_with("https://") && url.len() > 8)
}

/// Everything a runtime starts with that a file can say: plain values,
/// compared and printed. The live parts (in-process handlers, answerers of
/// server requests, the telemetry, OAuth authorizers) are given to the
/// runtime beside it when it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeConfig {
    pub servers: Vec<ServerConfig>,
    /// Make this process a child subreaper (Linux), so that the orphaned
    /// children of killed servers are reparented here and reaped, leaving no
    /// zombie even under an init that does not reap. On by default; an
    /// embedding program that reaps its own orphans may turn it off. Only
    /// processes of the servers' own groups are ever reaped by mcpvisor.
    pub subreaper: bool,
    /// On shutdown, end (SIGKILL) and reap every process reparented to this
    /// one, such as a server's descendant that left its group with `setsid`.
    /// Only for a process that runs mcpvisor and nothing else (the CLI),
    /// where every orphan is a server's descendant; needs `subreaper`. Off
    /// by default: an embedding program's own orphans would be ended too.
    pub end_orphans: bool,
    /// At most how many threads the servers' connections run on, spread
    /// round robin (each connection whole on one: its actor, its pipes,
    /// its codec). 0 (the default) keeps them on the thread that runs the
    /// hub, where a call from an actor of that thread crosses none: right
    /// for a client of a few servers. A gateway serving many callers
    /// spreads them, one per core ([`RuntimeConfig::per_core`]).
    pub connection_threads: usize,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig { servers: Vec::new(), subreaper: true, end_orphans: false, connection_threads: 0 }
    }
}

impl RuntimeConfig {
    pub fn new(servers: impl IntoIterator<Item = ServerConfig>) -> Self {
        RuntimeConfig { servers: servers.into_iter().collect(), ..RuntimeConfig::default() }
    }

    /// One per core the process may run on (`available_parallelism`, which
    /// follows `taskset` and cgroup quotas): the connection threads of a gateway.
    pub fn per_core() -> usize {
        std::thread::available_parallelism().map_or(1, |cores| cores.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(config: &ServerConfig) -> String {
        config.validate().unwrap_err().to_string()
    }

    #[test]
    fn constructors_set_defaults() {
        let stdio = ServerConfig::stdio("s", "cmd", ["a"]);
        assert_eq!((stdio.transport, stdio.era, stdio.scope, stdio.url.as_deref()), (Transport::Stdio, Era::Auto, Scope::User, None));
        assert!(stdio.enabled && stdio.tools.is_empty() && stdio.headers.is_empty() && stdio.auth.is_none());
        let remote = ServerConfig::remote("r", Transport::Sse, "https://x/sse");
        assert_eq!((remote.transport, remote.url.as_deref(), remote.command.as_str()), (Transport::Sse, Some("https://x/sse"), ""));
        assert_eq!(remote.limits, stdio.limits);
        assert!(stdio.validate().is_ok() && remote.validate().is_ok());
    }

    #[test]
    fn validate_checks_the_transport() {
        assert!(invalid(&ServerConfig::stdio("s", "", Vec::<String>::new())).contains("`command` is empty"));
        let with_url = ServerConfig { url: Some("https://x".into()), ..ServerConfig::stdio("s", "c", Vec::<String>::new()) };
        assert!(invalid(&with_url).contains("`url`, `headers` and `auth` are for http/sse servers"));
        let with_header = ServerConfig::stdio("s", "c", Vec::<String>::new()).with_header("A", "b");
        assert!(invalid(&with_header).contains("are for http/sse servers"));
        for url in ["", "example.com/mcp", "ftp://x", "http://", "wss://x"] {
            let config = ServerConfig::remote("r", Transport::Http, url);
            assert!(invalid(&config).contains("`url` must be an http:// or https:// URL"), "{url}");
        }
        let no_url = ServerConfig { url: None, ..ServerConfig::remote("r", Transport::Http, "") };
        assert!(invalid(&no_url).contains("`url` must be"));
        for url in ["http://localhost:3000/mcp", "HTTPS://X", "${BASE}/mcp"] {
            assert!(ServerConfig::remote("r", Transport::Http, url).validate().is_ok(), "{url}");
        }
        let with_command = ServerConfig { command: "c".into(), ..ServerConfig::remote("r", Transport::Http, "https://x") };
        assert!(invalid(&with_command).contains("`command` is set on an http/sse server"));
    }

    #[test]
    fn keywords_round_trip() {
        for transport in [Transport::Stdio, Transport::Http, Transport::Sse] {
            assert_eq!(Transport::parse(transport.as_str()), Some(transport));
        }
        for era in [Era::Auto, Era::Legacy, Era::Modern] {
            assert_eq!(Era::parse(era.as_str()), Some(era));
        }
        assert_eq!(Era::parse("Auto"), None, "keywords are lower case");
        assert_eq!(Transport::choices(), "stdio | http | sse");
    }
}
