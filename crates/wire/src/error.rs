//! Typed errors, one enum per boundary.
//!
//! Every message names the server and, for calls, the tool, and says what to
//! do next. Enums are `#[non_exhaustive]` so variants can be added.
//! A tool result with `isError: true` is a normal result, never an error here.

use std::fmt;
use std::time::Duration;

/// Why a tool call did not produce a `CallToolResult`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    #[error("no tool named `{name}` is in the catalog; check the name against the listed tools and that its server is connected")]
    UnknownTool { name: String },

    #[error("no server named `{server}` is configured")]
    UnknownServer { server: String },

    #[error(
        "tool `{tool}` of server `{server}` is excluded by the server's tool allow/deny lists; change them in its configuration to call it"
    )]
    NotPermitted { server: String, tool: String },

    #[error("server `{server}` does not offer {capability}, so `{tool}` cannot work; it did not announce the capability")]
    Unsupported { server: String, tool: String, capability: String },

    #[error("server `{server}` is disabled; enable it to call `{tool}`")]
    Disabled { server: String, tool: String },

    #[error("server `{server}` was still restarting (attempt {attempt}) when the call to `{tool}` gave up after {after:?}; check the server's status and its stderr")]
    Restarting { server: String, tool: String, attempt: u32, after: Duration },

    #[error("server `{server}` exited ({exit}) while `{tool}` was in flight; the call was not resent because tools may have side effects{}", tail_suffix(.stderr_tail))]
    ServerExited { server: String, tool: String, exit: ExitInfo, stderr_tail: Vec<String> },

    #[error("`{tool}` on server `{server}` did not answer within {after:?}; it was cancelled. Raise the call's or the server's timeout if the tool is just slow")]
    Timeout { server: String, tool: String, after: Duration },

    #[error("`{tool}` on server `{server}` got no usable answer within {after:?}; it was cancelled. Meanwhile the server sent lines that could not be matched to a request: {}. {}", .unusable.join("; "), unusable_advice(.unusable))]
    NoUsableAnswer { server: String, tool: String, after: Duration, unusable: Vec<String> },

    #[error("server `{server}` is overloaded ({in_flight} calls in flight, {queued} queued); `{tool}` was refused at once. Retry later or raise max_in_flight/max_queued")]
    Overloaded { server: String, tool: String, in_flight: usize, queued: usize },

    #[error("`{tool}` on server `{server}` was refused by {limit}{}; {}", retry_suffix(.retry_after), rate_limit_advice(.limit))]
    RateLimited { server: String, tool: String, limit: String, retry_after: Option<Duration> },

    #[error("`{tool}` on server `{server}` failed with JSON-RPC error {code}: {message}")]
    Rpc { server: String, tool: String, code: i64, message: String, data: Option<serde_json::Value> },

    #[error("invalid arguments for `{tool}` on server `{server}`: {message}")]
    InvalidArguments { server: String, tool: String, message: String },

    #[error("server `{server}` needs authorisation before `{tool}` can be called")]
    NeedsAuth { server: String, tool: String },

    #[error("server `{server}` has failed ({error}); fix it and reconnect it to call `{tool}`")]
    Failed {
        server: String,
        tool: String,
        error: String,
        /// Why it failed, as the start-up said it, when the call waited through it.
        #[source]
        cause: Option<Cause>,
    },

    #[error("server `{server}` sent a malformed answer to `{tool}`: {message}")]
    Protocol { server: String, tool: String, message: String },

    #[error("transport to server `{server}` failed during `{tool}`: {message}")]
    Transport {
        server: String,
        tool: String,
        message: String,
        /// What broke (an HTTP client's error, a caught panic), when known.
        #[source]
        cause: Option<Cause>,
    },

    #[error("server `{server}` was stopped (removed, changed or shut down) before {} finished", what(.tool))]
    Stopped { server: String, tool: String },

    #[error("the runtime was shut down before {} finished", what(.tool))]
    RuntimeStopped { tool: String },

    #[error("`{tool}` failed: {panic}")]
    Internal { tool: String, panic: Panicked },

    #[error(
        "`{tool}` of server `{server}` is withheld: {change}. `mcpvisor tools --accept {server}/{tool}` shows what changed and accepts it"
    )]
    Withheld { server: String, tool: String, change: String },

    /// The scanner found `finding` in the tool's texts, at or above the
    /// server's `withhold` severity.
    #[error(
        "`{tool}` of server `{server}` is withheld: the scanner found {finding}. `mcpvisor scan --server {server}` shows every finding; to offer the tool anyway, lower `withhold` (the server's, or the file's [scan] withhold) or set it to \"off\""
    )]
    Flagged { server: String, tool: String, finding: String },

    /// A secret found in a call's arguments (the call was not sent) or in
    /// its result (withheld) by a server set to `secrets = "block"` that
    /// way; `kind` names the kind of secret ([`crate::secret::SecretKind`]), never the secret.
    #[error("{}", secret_blocked(server, tool, direction, kind))]
    SecretBlocked { server: String, tool: String, direction: crate::secret::Direction, kind: crate::secret::SecretKind },

    /// A server that acts as each caller (auth type `token_exchange`) could
    /// not act as this one: no caller token to exchange, the issuer refused
    /// the exchange, or the server has as many callers as it may.
    #[error("`{tool}` on server `{server}` was not sent: {message}")]
    AsCaller { server: String, tool: String, message: String },

    #[error("server `{server}` had not listed its tools yet when the call to `{tool}` gave up after {after:?}; wait until the server is connected or give the call a longer timeout")]
    NotListed { server: String, tool: String, after: Duration },
}

/// What to do about a rate limit: a caller's own limit (`[serve.caller_limits]`,
/// described as `... of caller `key:alice` ...`) is the gateway operator's to
/// raise, a server's or a tool's is in the server's configuration.
fn rate_limit_advice(limit: &str) -> &'static str {
    if limit.contains(" of caller `") {
        "call less often; your own limit is set by the gateway's operator ([serve.caller_limits]), not by the server"
    } else {
        "call less often or raise the limit in the server's configuration"
    }
}

fn retry_suffix(retry_after: &Option<Duration>) -> String {
    retry_after.map(|after| format!(" (retry in {after:?})")).unwrap_or_default()
}

impl CallError {
    /// The variant's name in snake case (`timeout`, `rate_limited`, ...),
    /// stable, for logs, audit lines and metric labels.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::UnknownTool { .. } => "unknown_tool",
            CallError::UnknownServer { .. } => "unknown_server",
            CallError::NotPermitted { .. } => "not_permitted",
            CallError::Unsupported { .. } => "unsupported",
            CallError::Disabled { .. } => "disabled",
            CallError::Restarting { .. } => "restarting",
            CallError::ServerExited { .. } => "server_exited",
            CallError::Timeout { .. } => "timeout",
            CallError::NoUsableAnswer { .. } => "no_usable_answer",
            CallError::Overloaded { .. } => "overloaded",
            CallError::RateLimited { .. } => "rate_limited",
            CallError::Rpc { .. } => "rpc",
            CallError::InvalidArguments { .. } => "invalid_arguments",
            CallError::NeedsAuth { .. } => "needs_auth",
            CallError::Failed { .. } => "failed",
            CallError::Protocol { .. } => "protocol",
            CallError::Transport { .. } => "transport",
            CallError::Stopped { .. } => "stopped",
            CallError::RuntimeStopped { .. } => "runtime_stopped",
            CallError::NotListed { .. } => "not_listed",
            CallError::AsCaller { .. } => "as_caller",
            CallError::Withheld { .. } => "withheld",
            CallError::SecretBlocked { .. } => "secret_blocked",
            CallError::Flagged { .. } => "flagged",
            CallError::Internal { .. } => "internal",
        }
    }
}

/// The message of [`CallError::SecretBlocked`]: what was found, what was done, what to change.
fn secret_blocked(server: &str, tool: &str, direction: &crate::secret::Direction, kind: &crate::secret::SecretKind) -> String {
    let (held, done) = match direction {
        crate::secret::Direction::Arguments => ("the arguments of the call to", "the call was not sent"),
        crate::secret::Direction::Results => ("the result of", "the result was withheld"),
    };
    let direction = direction.as_str();
    format!(
        "{held} `{tool}` of server `{server}` held {}, and the server's setting is secrets = {{ {direction} = \"block\" }}: {done}. Leave the secret out, or set [servers.{server}] secrets = {{ {direction} = \"mask\" }} to pass the call with the secret masked",
        kind.described()
    )
}

/// "`tool`", or "the request" when no tool is concerned.
fn what(tool: &str) -> String {
    match tool {
        "" => "the request".to_string(),
        tool => format!("`{tool}`"),
    }
}

/// What to do about answers that could not be matched.
fn unusable_advice(unusable: &[String]) -> &'static str {
    match unusable.iter().any(|line| line.contains("max_frame")) {
        true => "Raise the server's max_frame if its answers are that large",
        false => "The server does not follow JSON-RPC; report this to its authors",
    }
}

fn tail_suffix(tail: &[String]) -> String {
    match tail.len() {
        0 => String::new(),
        n => {
            let shown = &tail[n.saturating_sub(5)..];
            format!(". Last stderr lines:\n  {}", shown.join("\n  "))
        }
    }
}

/// Why a server could not be started or brought to the point of serving calls.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    #[error("server `{server}`: cannot start `{command}`: {reason} (PATH={path})")]
    Spawn {
        server: String,
        command: String,
        reason: String,
        path: String,
        /// The operating system's error (an [`std::io::Error`]), when it said one.
        #[source]
        cause: Option<Cause>,
    },

    #[error("server `{server}`: its sandbox cannot be set up: {reason}")]
    Sandbox { server: String, reason: String },

    #[error("server `{server}`: cannot start `{command}`: working directory `{cwd}` {problem}; create it or change the server's `cwd`")]
    WorkingDirectory { server: String, command: String, cwd: String, problem: String },

    #[error(
        "server `{server}` answered initialize with protocol version {got:?}; mcpvisor speaks {supported}. Upgrade the server or mcpvisor"
    )]
    UnsupportedVersion { server: String, got: String, supported: String },

    #[error(
        "server `{server}` did not answer {method} within {after:?}; is it an MCP server speaking newline-delimited JSON-RPC on stdout?"
    )]
    HandshakeTimeout { server: String, method: String, after: Duration },

    #[error(
        "server `{server}` completed the handshake but did not finish start-up within {after:?}: {step} was still unanswered. If the server is just slow to list, raise its start-up time-out"
    )]
    StartupTimeout { server: String, step: String, after: Duration },

    #[error("server `{server}` refused {method}: JSON-RPC error {code}: {message}")]
    Rpc { server: String, method: String, code: i64, message: String },

    #[error("server `{server}` sent a malformed answer to {method}: {message}")]
    Protocol { server: String, method: String, message: String },

    #[error("server `{server}`: {message}")]
    Listing { server: String, message: String },

    #[error("server `{server}` answered {method} with something that is not a handshake: {message}")]
    MalformedHandshake { server: String, method: String, message: String },

    #[error("server `{server}` exited during start-up ({exit}){}", tail_suffix(.stderr_tail))]
    Exited { server: String, exit: ExitInfo, stderr_tail: Vec<String> },

    #[error(
        "server `{server}` is an in-process server, but the runtime was given no handler for it; give one with `Runtime::builder(config).in_process(\"{server}\", handler)` or add the server with `Handle::add_in_process`"
    )]
    NoHandler { server: String },
}

impl ConnectError {
    /// Errors a restart cannot cure: restarting would repeat them exactly.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            ConnectError::UnsupportedVersion { .. }
                | ConnectError::MalformedHandshake { .. }
                | ConnectError::Sandbox { .. }
                | ConnectError::NoHandler { .. }
        )
    }
}

/// Errors of the management API (adding and removing servers).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ManageError {
    #[error("a server named `{0}` already exists; remove it first or choose another name")]
    DuplicateServer(String),
    #[error("no server named `{0}` is configured")]
    UnknownServer(String),
    #[error("invalid configuration for server `{server}`: {message}")]
    InvalidConfig { server: String, message: String },
    #[error("the runtime has shut down")]
    RuntimeStopped,
    #[error(transparent)]
    Internal(#[from] Panicked),
}

/// A panic caught at an actor's boundary (see `actors::guard`): the
/// message that panicked is answered with it; the actor serves on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("internal error in mcpvisor's {actor} while handling {during} (panic: {message}); this is a bug in mcpvisor: please report it, then retry")]
pub struct Panicked {
    /// `hub`, `registry`, `server "fs"`'s connection, `agent`, `gateway session`, `ACP connection`.
    pub actor: String,
    /// The message or step that panicked.
    pub during: String,
    pub message: String,
}

/// Why configuration could not be read, understood, expanded or written.
///
/// Every variant names the file (when there is one), the server and the
/// field, and its message says what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("{}: cannot {action}: {reason}", .file.display())]
    Io {
        file: std::path::PathBuf,
        action: &'static str,
        reason: String,
        /// The operating system's (or the encoder's) error, whole.
        #[source]
        cause: Option<Cause>,
    },

    #[error("{}: not valid {syntax}: {message}", .file.display())]
    Syntax {
        file: std::path::PathBuf,
        syntax: &'static str,
        message: String,
        /// The parser's error, whole (`toml_edit::TomlError`, `serde_json::Error`),
        /// when a parser found the fault; `None` for a rule of ours.
        #[source]
        cause: Option<Cause>,
    },

    #[error("{}: {}: unknown key `{key}`; the known keys are {}", .file.display(), server_or_top(.server), .known.join(", "))]
    UnknownKey { file: std::path::PathBuf, server: Option<String>, key: String, known: Vec<&'static str> },

    #[error("{}: server \"{server}\": `{field}` {message}", .file.display())]
    InvalidField { file: std::path::PathBuf, server: String, field: String, message: String },

    /// A value outside the server tables (`[agent]`).
    #[error("{}: `{field}` {message}", .file.display())]
    InvalidSetting { file: std::path::PathBuf, field: String, message: String },

    #[error("{}: {source}", .file.display())]
    Invalid { file: std::path::PathBuf, source: ManageError },

    #[error("server \"{server}\": {field} uses ${{{var}}}, which is not set; set it or write ${{{var}:-default}}")]
    UnsetVariable { server: String, field: String, var: String },

    #[error(
        "server \"{server}\": {field} has `{reference}`, which is not a variable reference; write ${{NAME}} or ${{NAME:-default}}, or $${{ for a literal `${{`"
    )]
    BadReference { server: String, field: String, reference: String },

    #[error(
        "{}: server \"{server}\": {field} uses ${{input:{id}}}, which VS Code prompts for and mcpvisor cannot; replace it with ${{ENV_VAR}} and set that variable, or pass the input's value",
        .file.display()
    )]
    PromptedInput { file: std::path::PathBuf, server: String, field: String, id: String },

    #[error("{}: no server named \"{server}\" in this file", .file.display())]
    UnknownServer { file: std::path::PathBuf, server: String },

    #[error("{}: not a known MCP configuration ({message}); mcpvisor reads the MCP files of Claude Code, Claude Desktop, Codex, Cursor, Gemini CLI, OpenCode, VS Code, Windsurf and Zed (`mcpvisor import` lists those on this machine)", .file.display())]
    UnknownFormat { file: std::path::PathBuf, message: String },
}

fn server_or_top(server: &Option<String>) -> String {
    match server {
        Some(name) => format!("server \"{name}\""),
        None => "top level".into(),
    }
}

/// How a server process ended: an exit code or a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl ConfigError {
    /// A file that could not be `action`ed (`read`, `write it`, ...), keeping the error.
    pub fn io(
        file: impl Into<std::path::PathBuf>,
        action: &'static str,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> ConfigError {
        ConfigError::Io { file: file.into(), action, reason: error.to_string(), cause: Some(Cause::new(error)) }
    }

    /// A file a parser refused as `syntax`, keeping the parser's error.
    pub fn syntax(
        file: impl Into<std::path::PathBuf>,
        syntax: &'static str,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> ConfigError {
        ConfigError::Syntax { file: file.into(), syntax, message: error.to_string(), cause: Some(Cause::new(error)) }
    }
}

impl ExitInfo {
    pub fn is_clean(&self) -> bool {
        self.code == Some(0)
    }

    pub fn from_status(status: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        ExitInfo { code: status.code(), signal: status.signal() }
    }
}

impl fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.code, self.signal) {
            (_, Some(sig)) => write!(f, "killed by signal {sig} ({})", signal_name(sig)),
            (Some(code), None) => write!(f, "exit code {code}"),
            (None, None) => f.write_str("exit status unknown"),
        }
    }
}

/// The error beneath another, kept whole so an embedder can reach it
/// (`cause.downcast_ref::<std::io::Error>()` for its `kind()`), and
/// cloneable as the errors that carry it must be.
///
/// Invariants: it shows as the error it holds, and its own
/// [`source`](std::error::Error::source) is that error's, so a chain
/// walked through it reads each cause once.
#[derive(Clone)]
pub struct Cause(std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>);

impl Cause {
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Cause {
        Cause(std::sync::Arc::new(error))
    }

    /// The error held, if it is a `T`.
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.0.downcast_ref::<T>()
    }

    /// The error held.
    pub fn get(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }

    /// The kind of the operating system's error, when one is held.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        self.downcast_ref::<std::io::Error>().map(std::io::Error::kind)
    }

    /// The first `T` in `error`'s chain of sources, seeing through the
    /// causes kept on the way: `Cause::find::<std::io::Error>(&call_error)`.
    pub fn find<'e, T: std::error::Error + 'static>(error: &'e (dyn std::error::Error + 'static)) -> Option<&'e T> {
        let mut next = Some(error);
        while let Some(error) = next {
            if let Some(found) = error.downcast_ref::<T>() {
                return Some(found);
            }
            match error.downcast_ref::<Cause>() {
                Some(cause) => next = Some(cause.get()),
                None => next = error.source(),
            }
        }
        None
    }
}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl Eq for Cause {}

impl PartialEq for Cause {
    /// The same error, or two that read the same.
    fn eq(&self, other: &Cause) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

/// An error and its causes on one line (`a: b: c`), a cause left out when
/// its words are already there (reqwest repeats hyper's, hyper rustls').
/// The one way a transport or a client's error is shown whole: the reason
/// a TLS handshake failed is in a cause, not in the error itself.
#[doc(hidden)]
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let words = cause.to_string();
        if !text.contains(&words) {
            text.push_str(": ");
            text.push_str(&words);
        }
        source = cause.source();
    }
    text
}

/// The conventional name of a Linux signal number.
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        _ => "other signal",
    }
}
