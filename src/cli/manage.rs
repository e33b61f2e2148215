//! `add`, `remove`, `enable`, `disable`: edits of mcpvisor's own TOML
//! files (comments and layout kept). Other tools' files are never
//! written: a server defined only there is imported first ([`super::import`]).
//!
//! Target file: `--config FILE` if given (it must be `*.toml`); else
//! `--scope user` (the default: `$MCPVISOR_CONFIG`, else
//! `$XDG_CONFIG_HOME/mcpvisor/servers.toml`, else
//! `~/.config/mcpvisor/servers.toml`) or `--scope project`
//! (`./.mcpvisor.toml`). `remove`, `enable` and `disable` without either
//! change the file that defines the server in effect.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::output::{warn, Failure, Out};
use super::servers::{native_file, DefinedIn, Servers};
use super::Cli;
use crate::config::discover::Origin;
use crate::config::{native, Auth, Scope, ServerConfig, Transport};
use crate::restart::RestartPolicy;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ScopeArg {
    /// The user's file: applies in every directory.
    User,
    /// `./.mcpvisor.toml`: this project only; wins over the user's file and editors' files.
    Project,
}

impl From<ScopeArg> for Scope {
    fn from(scope: ScopeArg) -> Scope {
        match scope {
            ScopeArg::User => Scope::User,
            ScopeArg::Project => Scope::Project,
        }
    }
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum RestartArg {
    Never,
    OnFailure,
    Always,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum RemoteTransport {
    Http,
    Sse,
}

#[derive(Debug, clap::Args)]
pub struct AddArgs {
    pub name: String,
    /// Which file to add to (default: user).
    #[arg(long, value_enum)]
    pub scope: Option<ScopeArg>,
    /// An environment variable of the server (stdio); repeatable. `${VAR}` references are kept and expanded at start.
    #[arg(long = "env", value_name = "K=V", conflicts_with = "url")]
    pub env: Vec<String>,
    /// The server's working directory (stdio).
    #[arg(long, value_name = "DIR", conflicts_with = "url")]
    pub cwd: Option<PathBuf>,
    /// Default time-out of a tool call, in seconds.
    #[arg(long, value_name = "SECS", value_parser = super::parse_seconds)]
    pub timeout: Option<std::time::Duration>,
    /// When the server is restarted after it exits (default: always).
    #[arg(long, value_enum)]
    pub restart: Option<RestartArg>,
    /// Add it disabled (it is listed but not started).
    #[arg(long)]
    pub disabled: bool,
    /// A remote server's URL (instead of a command).
    #[arg(long, conflicts_with = "command")]
    pub url: Option<String>,
    /// The remote transport (default: http, or sse when the URL's path ends in /sse).
    #[arg(long, value_enum, requires = "url")]
    pub transport: Option<RemoteTransport>,
    /// An HTTP header 'K: V' of a remote server; repeatable.
    #[arg(long = "header", value_name = "K: V", requires = "url")]
    pub headers: Vec<String>,
    /// A bearer token for a remote server; write '${VAR}' to keep it out of the file.
    #[arg(long, value_name = "TOKEN", requires = "url")]
    pub bearer: Option<String>,
    /// The command of a stdio server and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct NameArgs {
    pub name: String,
    /// Change this scope's file (default: the file that defines the server in effect).
    #[arg(long, value_enum)]
    pub scope: Option<ScopeArg>,
}

pub fn add(cli: &Cli, out: &Out, args: &AddArgs) -> Result<u8, Failure> {
    let config = config_of(args)?;
    config.validate()?;
    let file = native_file(cli, args.scope.map(Scope::from))?;
    if native::load(&file)?.iter().any(|existing| existing.name == args.name) {
        return Err(Failure::usage(format!(
            "{}: a server named `{}` is already there; remove it first (`mcpvisor remove {}`) or choose another name",
            file.display(),
            args.name,
            args.name
        )));
    }
    let before = std::fs::read(&file).ok();
    native::upsert(&file, &config)?;
    super::trust::after_own_write(&file, before.as_deref());
    warn_if_shadowed(cli, &args.name, &file);
    out.json(&json!({"added": args.name, "file": file}));
    out.line(format!("Added `{}` to {}", args.name, file.display()));
    Ok(0)
}

/// The configuration `add` writes.
fn config_of(args: &AddArgs) -> Result<ServerConfig, Failure> {
    let mut config = match (&args.url, args.command.split_first()) {
        (Some(url), _) => remote_config(args, url)?,
        (None, Some((command, rest))) => {
            let mut config = ServerConfig::stdio(&args.name, command, rest.iter().cloned());
            for pair in &args.env {
                let (key, value) = pair
                    .split_once('=')
                    .filter(|(key, _)| !key.is_empty())
                    .ok_or_else(|| Failure::usage(format!("--env `{pair}` is not K=V; write e.g. --env LOG_LEVEL=debug")))?;
                config.env.insert(key.into(), value.into());
            }
            config.cwd = args.cwd.clone();
            config
        }
        (None, None) => {
            return Err(Failure::usage(format!(
                "say how to reach `{}`: `mcpvisor add {} -- COMMAND [ARGS...]` or `mcpvisor add {} --url URL`",
                args.name, args.name, args.name
            )))
        }
    };
    if let Some(timeout) = args.timeout {
        config.timeouts.call = timeout;
    }
    config.restart = match args.restart {
        None => config.restart,
        Some(RestartArg::Never) => RestartPolicy::Never,
        Some(RestartArg::OnFailure) => RestartPolicy::OnFailure { max_restarts: native::DEFAULT_MAX_RESTARTS },
        Some(RestartArg::Always) => RestartPolicy::Always,
    };
    config.enabled = !args.disabled;
    Ok(config)
}

fn remote_config(args: &AddArgs, url: &str) -> Result<ServerConfig, Failure> {
    let transport = match args.transport {
        Some(RemoteTransport::Http) => Transport::Http,
        Some(RemoteTransport::Sse) => Transport::Sse,
        None if url.split(['?', '#']).next().unwrap_or(url).trim_end_matches('/').ends_with("/sse") => Transport::Sse,
        None => Transport::Http,
    };
    let mut config = ServerConfig::remote(&args.name, transport, url);
    for header in &args.headers {
        let (key, value) = header
            .split_once(':')
            .filter(|(key, _)| !key.trim().is_empty())
            .ok_or_else(|| Failure::usage(format!("--header `{header}` is not 'K: V'; write e.g. --header 'X-Api-Key: ${{API_KEY}}'")))?;
        config.headers.insert(key.trim().into(), value.trim().into());
    }
    config.auth = args.bearer.clone().map(|token| Auth::Bearer { token });
    Ok(config)
}

/// A definition with higher precedence hides the one just written.
fn warn_if_shadowed(cli: &Cli, name: &str, written: &Path) {
    let Ok(servers) = Servers::load(cli) else { return };
    if let Some(DefinedIn::File { path, .. }) = servers.entries.iter().find(|e| e.name() == name).map(|e| &e.defined_in) {
        if **path != *written {
            warn(format_args!("`{name}` is also defined in {}, which takes precedence over {}", path.display(), written.display()));
        }
    }
}

pub fn remove(cli: &Cli, out: &Out, args: &NameArgs) -> Result<u8, Failure> {
    let file = editable_file(cli, args, "remove")?;
    let before = std::fs::read(&file).ok();
    native::remove(&file, &args.name)?;
    super::trust::after_own_write(&file, before.as_deref());
    out.json(&json!({"removed": args.name, "file": file}));
    out.line(format!("Removed `{}` from {}", args.name, file.display()));
    if let Ok(servers) = Servers::load(cli) {
        if let Some(path) = servers.entries.iter().find(|e| e.name() == args.name).and_then(|e| e.defined_in.path()) {
            warn(format_args!("`{}` is still defined in {}", args.name, path.display()));
        }
    }
    Ok(0)
}

pub fn set_enabled(cli: &Cli, out: &Out, args: &NameArgs, enabled: bool) -> Result<u8, Failure> {
    let verb = if enabled { "enable" } else { "disable" };
    let file = editable_file(cli, args, verb)?;
    let before = std::fs::read(&file).ok();
    native::set_enabled(&file, &args.name, enabled)?;
    super::trust::after_own_write(&file, before.as_deref());
    out.json(&json!({"server": args.name, "enabled": enabled, "file": file}));
    out.line(format!("{} `{}` in {}", if enabled { "Enabled" } else { "Disabled" }, args.name, file.display()));
    Ok(0)
}

/// The mcpvisor file to change for `verb` on a server: the one asked for,
/// else the one defining the server in effect, which must be mcpvisor's.
fn editable_file(cli: &Cli, args: &NameArgs, verb: &str) -> Result<PathBuf, Failure> {
    if args.scope.is_some() || cli.config.is_some() {
        return native_file(cli, args.scope.map(Scope::from));
    }
    let servers = Servers::load(cli)?;
    let name = &args.name;
    match &servers.get(name)?.defined_in {
        DefinedIn::File { path, origin: Origin::Native, .. } => Ok(path.to_path_buf()),
        DefinedIn::File { path, origin: Origin::Foreign(format), .. } => Err(Failure::usage(format!(
            "`{name}` is defined in {} ({}), which mcpvisor reads but never edits; change it there, or import it into the project's file \
             (which takes precedence) with `mcpvisor import {} --scope project` and then `mcpvisor {verb} {name}`",
            path.display(),
            format.name(),
            path.display()
        ))),
        DefinedIn::BuiltIn => Err(Failure::usage(format!(
            "`{name}` is the built-in demo server, offered only while no server is configured; there is nothing to {verb}. \
             Add your own with `mcpvisor add NAME -- COMMAND [ARGS...]`"
        ))),
    }
}
