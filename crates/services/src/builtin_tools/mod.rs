//! The agent's built-in tools, served as the in-process server `builtin`
//! ([`server`]), so they appear in the catalog, in status and in the
//! confirmation policy like any server's tools:
//!
//! | exposed name | does | annotations |
//! | --- | --- | --- |
//! | `mcp__builtin__read_file` | `{path, offset?, limit?}`: a UTF-8 text file, lines numbered | `readOnlyHint` |
//! | `mcp__builtin__write_file` | `{path, content}`: creates or replaces a file, atomically | `destructiveHint` |
//! | `mcp__builtin__list_directory` | `{path}`: the entries, sorted, directories marked `/` | `readOnlyHint` |
//! | `mcp__builtin__run_command` | `{command, cwd?, timeout_secs?}`: `sh -c`, output and exit code | `destructiveHint`, `openWorldHint` |
//!
//! Decisions:
//! - **Paths** ([`paths`]): relative paths (and a leading `~/`, the home
//!   directory) resolve against [`BuiltinSettings::cwd`]; absolute paths
//!   and `..` are taken, and the confirmation policy judges where they
//!   really lead: inside the [`Workspace`] `read_file` and
//!   `list_directory` run without asking, outside it they ask. mcpvisor's
//!   own stores (OAuth tokens, saved conversations, the audit log) are
//!   refused here, whatever the policy said.
//! - **Commands get a scrubbed environment** ([`BuiltinSettings::command_env`]):
//!   the safe inherited set of the servers' children and the variables
//!   `[agent] command_env` names, nothing else: no model key, no serve
//!   token, no configured secret.
//! - **Failures are tool results** with `isError` and a sentence naming
//!   the path and what to do, so the model can correct itself; never
//!   JSON-RPC errors, never panics. A command that exits non-zero is an
//!   error result holding its output and exit code.
//! - **Caps**: `read_file` reads [`BuiltinSettings::read_lines`] lines at
//!   most, cuts each after [`BuiltinSettings::max_line_bytes`] bytes and
//!   stops within [`BuiltinSettings::max_read_bytes`], naming the offset to
//!   read on from; `list_directory` shows [`BuiltinSettings::max_entries`];
//!   `run_command` keeps the head and tail of its output within
//!   [`BuiltinSettings::max_output_bytes`], saying how much was cut.
//! - **Commands** run in a process group of their own that never outlives
//!   the call: see [`command`]. The server's call time-out is raised above
//!   [`BuiltinSettings::max_command_timeout`], so a command's own time-out
//!   (which reports its output so far) always comes first.
//! - **The machine is behind a seam** ([`Host`]): [`Local`] by default, an
//!   editor's file system and terminals later ([`server_on`]).

mod catalog;
pub mod command;
mod host;
mod local;
pub mod paths;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use serde::de::DeserializeOwned;
use serde::Deserialize;

pub use catalog::{LIST_DIRECTORY, READ_FILE, RUN_COMMAND, WRITE_FILE};
pub use host::{CommandOutcome, CommandRequest, Entry, Host, HostError, Line, Lines, Written};
pub use local::Local;
pub use paths::Workspace;

use crate::config::ServerConfig;
use crate::protocol::ErrorObject;
use crate::transport::in_process::{InProcessHandler, InProcessServer, ToolHandler};

/// The server's name: its tools are `mcp__builtin__{tool}`.
pub const SERVER_NAME: &str = "builtin";

/// What the built-in tools may do, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltinSettings {
    /// Where relative paths start and commands run.
    pub cwd: PathBuf,
    /// Lines `read_file` returns at most (its default `limit`).
    pub read_lines: usize,
    /// Bytes of one line `read_file` shows; the rest is cut.
    pub max_line_bytes: usize,
    /// Bytes of text one `read_file` returns at most.
    pub max_read_bytes: usize,
    /// Entries `list_directory` shows at most.
    pub max_entries: usize,
    /// Bytes of a command's output kept (head and tail).
    pub max_output_bytes: usize,
    /// A command's time-out when the call sets none.
    pub command_timeout: Duration,
    /// The longest time-out a call may set.
    pub max_command_timeout: Duration,
    /// Where the file tools work; its protected stores are refused.
    pub workspace: Workspace,
    /// The whole environment of a command (nothing else is inherited).
    pub command_env: Vec<(OsString, OsString)>,
    /// The sandbox of `run_command` (`[agent.sandbox]`); `None`: none.
    pub command_sandbox: Option<crate::config::SandboxSpec>,
}

impl BuiltinSettings {
    /// The defaults, working in `cwd`.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        let cwd = cwd.into();
        BuiltinSettings {
            workspace: Workspace::new([cwd.clone()]),
            command_env: command_env(&[]),
            cwd,
            read_lines: 2000,
            max_line_bytes: 2000,
            max_read_bytes: 100_000,
            max_entries: 1000,
            max_output_bytes: 30_000,
            command_timeout: Duration::from_secs(120),
            max_command_timeout: Duration::from_secs(600),
            command_sandbox: None,
        }
    }
}

/// The environment of `run_command`: this process's variables of the safe
/// inherited set ([`crate::transport::stdio::SAFE_ENV`]) and of `names`.
/// A model key, the serve token or a configured secret passes only when
/// the user names its variable.
pub fn command_env(names: &[String]) -> Vec<(OsString, OsString)> {
    let safe = crate::transport::stdio::SAFE_ENV.iter().map(|name| name.to_string());
    let mut names: Vec<String> = safe.chain(names.iter().cloned()).collect();
    names.sort();
    names.dedup();
    names.into_iter().filter_map(|name| std::env::var_os(&name).map(|value| (OsString::from(name), value))).collect()
}

/// The `builtin` server on this machine.
pub fn server(settings: BuiltinSettings) -> InProcessServer {
    server_on(settings, Local)
}

/// The `builtin` server reaching files and commands through `host`.
pub fn server_on(settings: BuiltinSettings, host: impl Host) -> InProcessServer {
    // The call time-out must not cut the longest command short: the
    // command's own time-out (and its SIGTERM grace) answers first.
    let longest = settings.max_command_timeout + command::TERM_GRACE + Duration::from_secs(5);
    let mut config = ServerConfig::in_process(SERVER_NAME);
    config.timeouts.call = config.timeouts.call.max(longest);
    config.timeouts.max_call = config.timeouts.max_call.max(longest);
    InProcessServer { config, handler: InProcessHandler::new(Builtin { settings, host }) }
}

struct Builtin<H> {
    settings: BuiltinSettings,
    host: H,
}

/// A tool's answer: `Err` is a result with `isError`.
type Answer = Result<String, String>;

impl<H: Host> ToolHandler for Builtin<H> {
    fn tools(&self) -> Vec<Tool> {
        catalog::tools(&self.settings)
    }

    fn call<'a>(&'a self, name: &'a str, arguments: JsonObject) -> BoxFuture<'a, Result<CallToolResult, ErrorObject>> {
        Box::pin(async move {
            let answer = match name {
                READ_FILE => self.read_file(arguments).await,
                WRITE_FILE => self.write_file(arguments).await,
                LIST_DIRECTORY => self.list_directory(arguments).await,
                RUN_COMMAND => self.run_command(arguments).await,
                other => Err(format!(
                    "there is no built-in tool `{other}`; the tools are {READ_FILE}, {WRITE_FILE}, {LIST_DIRECTORY} and {RUN_COMMAND}"
                )),
            };
            Ok(match answer {
                Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
                Err(text) => CallToolResult::error(vec![ContentBlock::text(text)]),
            })
        })
    }
}

#[derive(Deserialize)]
struct ReadFile {
    path: String,
    offset: Option<usize>,
    limit: Option<usize>,
}

#[derive(Deserialize)]
struct WriteFile {
    path: String,
    content: String,
}

#[derive(Deserialize)]
struct ListDirectory {
    path: String,
}

#[derive(Deserialize)]
struct RunCommand {
    command: String,
    cwd: Option<String>,
    timeout_secs: Option<u64>,
}

fn arguments<T: DeserializeOwned>(tool: &str, arguments: JsonObject) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::Object(arguments))
        .map_err(|e| format!("the arguments of {tool} do not fit its input schema ({e}); call it again with arguments that do"))
}

impl<H: Host> Builtin<H> {
    /// `path` as the host takes it ([`paths::expand`]); refused inside
    /// mcpvisor's own stores, wherever a symlink or `..` leads.
    fn resolve(&self, path: &str) -> Result<PathBuf, String> {
        let path = paths::expand(&self.settings.cwd, path);
        match self.settings.workspace.protected(&paths::real(&path)) {
            Some(store) => Err(format!(
                "{} is in {}, mcpvisor's own store of credentials, conversations or audit records: the built-in tools never touch it; \
                 work on other files",
                path.display(),
                store.display()
            )),
            None => Ok(path),
        }
    }

    async fn read_file(&self, args: JsonObject) -> Answer {
        let ReadFile { path, offset, limit } = arguments(READ_FILE, args)?;
        let path = self.resolve(&path)?;
        let first = offset.unwrap_or(1).max(1);
        let count = limit.unwrap_or(self.settings.read_lines).clamp(1, self.settings.read_lines);
        let read = self.host.read_lines(&path, first, count, self.settings.max_line_bytes).await;
        let read = read.map_err(|e| self.explain("read", &path, e))?;
        if let Some(lines) = read.past_end {
            return Err(format!("{} has {lines} lines, so there is no line {first}; call read_file with a smaller offset", path.display()));
        }
        if read.lines.is_empty() {
            return Ok(format!("{} is empty.", path.display()));
        }
        let mut text = String::new();
        let mut next = first;
        for line in &read.lines {
            if !text.is_empty() && text.len() + line.text.len() > self.settings.max_read_bytes {
                let cap = self.settings.max_read_bytes;
                text.push_str(&format!(
                    "[stopped before line {next} to stay within {cap} bytes; call read_file with offset {next} to read on]\n"
                ));
                return Ok(text);
            }
            text.push_str(&format!("{next:>6}\t{}", line.text));
            if line.cut > 0 {
                text.push_str(&format!(" [… line cut: {} more bytes]", line.cut));
            }
            text.push('\n');
            next += 1;
        }
        if read.more {
            text.push_str(&format!("[the file goes on after line {}; call read_file with offset {next} to read on]\n", next - 1));
        }
        Ok(text)
    }

    async fn write_file(&self, args: JsonObject) -> Answer {
        let WriteFile { path, content } = arguments(WRITE_FILE, args)?;
        let path = self.resolve(&path)?;
        let written = self.host.write(&path, &content).await.map_err(|e| self.explain("write", &path, e))?;
        let size = format!("{} bytes, {} lines", content.len(), content.lines().count());
        Ok(match written.replaced {
            None => format!("Created {} ({size}).", path.display()),
            Some(old) => format!("Replaced {} (it had {old} bytes): now {size}.", path.display()),
        })
    }

    async fn list_directory(&self, args: JsonObject) -> Answer {
        let ListDirectory { path } = arguments(LIST_DIRECTORY, args)?;
        let path = self.resolve(&path)?;
        let mut entries = self.host.list(&path).await.map_err(|e| self.explain("list", &path, e))?;
        if entries.is_empty() {
            return Ok(format!("{} is empty.", path.display()));
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let total = entries.len();
        let mut text = format!("{} ({total} entries):\n", path.display());
        for entry in entries.iter().take(self.settings.max_entries) {
            text.push_str(&entry.name);
            text.push_str(if entry.is_dir { "/\n" } else { "\n" });
        }
        if total > self.settings.max_entries {
            text.push_str(&format!(
                "[… {} more entries not shown; list a subdirectory, or use run_command with `find` or `ls` and a pattern]\n",
                total - self.settings.max_entries
            ));
        }
        Ok(text)
    }

    async fn run_command(&self, args: JsonObject) -> Answer {
        let RunCommand { command, cwd, timeout_secs } = arguments(RUN_COMMAND, args)?;
        let cwd = cwd.map_or_else(|| self.settings.cwd.clone(), |cwd| paths::expand(&self.settings.cwd, &cwd));
        let timeout = timeout_secs
            .map_or(self.settings.command_timeout, Duration::from_secs)
            .clamp(Duration::from_secs(1), self.settings.max_command_timeout);
        let request = CommandRequest {
            command,
            cwd,
            timeout,
            output_limit: self.settings.max_output_bytes,
            env: self.settings.command_env.clone(),
            sandbox: self.settings.command_sandbox.clone(),
        };
        let outcome = self.host.run(&request).await.map_err(|e| {
            format!(
                "could not start the command in {}: {e}; check that this directory exists and that `sh` can be run",
                request.cwd.display()
            )
        })?;
        let mut text = outcome.output;
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        if outcome.cut > 0 {
            text.push_str(&format!(
                "[{} bytes of output were cut from the middle to stay within {} bytes]\n",
                outcome.cut, request.output_limit
            ));
        }
        let exit = crate::transport::ExitInfo { code: outcome.code, signal: outcome.signal };
        if outcome.timed_out {
            let after = request.timeout.as_secs();
            text.push_str(&format!("[timed out after {after} s: the command and every process it started were ended ({exit}); give it a longer timeout_secs if it needs more time]"));
            return Err(text);
        }
        text.push_str(&format!("[{exit}]"));
        match exit.code {
            Some(0) => Ok(text),
            _ => Err(text),
        }
    }

    /// Why `action` on `path` failed, and what to do, as the model reads it.
    fn explain(&self, action: &str, path: &Path, error: HostError) -> String {
        let path = path.display();
        let cwd = self.settings.cwd.display();
        let io = match error {
            HostError::Binary => {
                return format!("cannot read {path}: it holds NUL bytes, so it looks like a binary file; read_file reads text only (run_command with `file` or `xxd` can inspect it)")
            }
            HostError::NotUtf8 { line } => {
                return format!("cannot read {path}: line {line} is not valid UTF-8 text; read_file reads UTF-8 only (run_command with `iconv` can convert it)")
            }
            HostError::Io(io) => io,
        };
        let advice = match (io.kind(), action) {
            (std::io::ErrorKind::NotFound, _) => {
                format!("it does not exist (relative paths start at {cwd}); check the path, or list the directory it should be in")
            }
            (std::io::ErrorKind::PermissionDenied, _) => format!("permission denied; choose a path you may {action}"),
            (std::io::ErrorKind::IsADirectory, "read") => "it is a directory; use list_directory to see what it holds".into(),
            (std::io::ErrorKind::IsADirectory, _) => "it is a directory; write to a file path, such as one inside it".into(),
            (std::io::ErrorKind::NotADirectory, "list") => "it is a file, not a directory; use read_file to read it".into(),
            (std::io::ErrorKind::NotADirectory, _) => "a part of the path is a file, not a directory; check the path".into(),
            (_, _) => format!("{io}"),
        };
        format!("cannot {action} {path}: {advice}")
    }
}
