//! Which servers a command sees, and where each is defined.
//!
//! Without `--config`, the user's file and the project's files (the current
//! directory) combined by precedence ([`crate::config::discover`]). With
//! `--config FILE`, only that file: mcpvisor's TOML when it ends in
//! `.toml`, else an editor's JSON, its format told by its name or shape.
//!
//! A file the user named (`--config`, or `MCPVISOR_CONFIG` when it exists)
//! is read strictly: a server that cannot be used is an error naming the
//! file, the server and the field, and a file without servers is an error
//! saying so. Editors' files found in the project are other programs'
//! business: their unusable servers are skipped with a warning.
//! Only when no server is defined anywhere (none loaded, none skipped, no
//! untrusted project file, no file named) is one built-in server `demo`
//! (this binary's `demo-server`) there, so every command can be tried at once.
//!
//! Project files are used only once their folder is trusted, as they were
//! then (`mcpvisor trust`, [`crate::config::trust`]); the others are in
//! [`Servers::untrusted`], and every command but `list` (which shows them
//! in place) says so in one line on stderr ([`super::untrusted::notice`]).
//! A file the user names with `--config` is trusted for that run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::discover::{self, Origin};
use crate::config::foreign;
use crate::config::trust::TrustedFolders;
use crate::config::{native, AgentSettings, Definition, LoadedConfig, LoadedServer, Locations, Scope, ServerConfig, UntrustedFile};
use crate::error::ConfigError;

use super::output::{warn, Failure};
use super::Cli;

/// The name of the server that is there when none is configured.
pub const BUILT_IN: &str = "demo";

/// How many servers one command starts at most, unless told otherwise.
pub const DEFAULT_MAX_SERVERS: usize = 200;

/// Where a server is defined.
#[derive(Debug, Clone, PartialEq)]
pub enum DefinedIn {
    File {
        /// Shared by the servers of one file.
        path: Arc<Path>,
        origin: Origin,
        /// Files whose definition of the same name this one replaced.
        overrides: Vec<PathBuf>,
    },
    /// The built-in `demo` server.
    BuiltIn,
}

impl DefinedIn {
    /// `mcpvisor`, the editor's name, or `built-in`.
    pub fn origin_name(&self) -> &'static str {
        match self {
            DefinedIn::File { origin: Origin::Native, .. } => "mcpvisor",
            DefinedIn::File { origin: Origin::Foreign(format), .. } => format.name(),
            DefinedIn::BuiltIn => "built-in",
        }
    }

    pub fn path(&self) -> Option<&Path> {
        match self {
            DefinedIn::File { path, .. } => Some(path),
            DefinedIn::BuiltIn => None,
        }
    }
}

/// One server as configured (unexpanded: `${VAR}` references are kept).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Kept as little as it can be: an editor's entry as its text ([`Definition`]).
    pub definition: Definition,
    pub defined_in: DefinedIn,
    /// Keys of another tool's entry that mean nothing to mcpvisor (`status` reports them).
    pub unmapped: Vec<String>,
}

impl Entry {
    pub fn name(&self) -> &str {
        self.definition.name()
    }

    pub fn enabled(&self) -> bool {
        self.definition.enabled()
    }

    /// The server, parsed (again, for an editor's entry).
    pub fn config(&self) -> Result<ServerConfig, Failure> {
        Ok(self.definition.config()?)
    }
}

/// The servers a command sees.
#[derive(Debug, Clone)]
pub struct Servers {
    pub entries: Vec<Entry>,
    /// The files read, lowest precedence first.
    pub files: Vec<PathBuf>,
    /// How many servers one command may start.
    pub max_started: usize,
    /// The `[agent]` settings of mcpvisor's files.
    pub agent: AgentSettings,
    /// The `[audit]` table of mcpvisor's files (`serve` opens the log).
    pub audit: Option<crate::telemetry::AuditConfig>,
    /// The `[serve]` table of mcpvisor's files.
    pub serve: Option<crate::config::ServeSettings>,
    /// The `[telemetry]` table of mcpvisor's files (where OpenTelemetry goes).
    pub telemetry: Option<crate::config::OtlpSettings>,
    /// Configured servers that are left out, each with why (see [`super::nesting`]).
    pub left_out: Vec<LeftOut>,
    /// Project files not used because they are not trusted, with their servers.
    pub untrusted: Vec<UntrustedFile>,
}

/// A configured server that no command starts.
#[derive(Debug, Clone, PartialEq)]
pub struct LeftOut {
    pub name: String,
    pub source: PathBuf,
    pub reason: String,
}

impl Servers {
    /// Loads the configuration; editors' servers found in the project that
    /// cannot be used are skipped with a warning on stderr. Errors in
    /// mcpvisor's files and in a file the user named fail.
    pub fn load(cli: &Cli) -> Result<Servers, Failure> {
        let (loaded, named) = match &cli.config {
            Some(file) => {
                let file = absolute(file)?;
                let record = Locations::new(None, env).trust.record()?;
                (load_file(&file, &current_dir()?, record.as_ref())?, Some(file))
            }
            None => {
                let locations = Locations::new(Some(&current_dir()?), env);
                let named = env("MCPVISOR_CONFIG").filter(|v| !v.is_empty()).and(locations.user_file.clone());
                (locations.load()?, named)
            }
        };
        for skipped in &loaded.skipped {
            warn(format_args!("skipped: {skipped}"));
        }
        if !matches!(cli.command, super::Command::List) {
            super::untrusted::notice(&loaded.untrusted, cli.json);
        }
        let mut entries: Vec<Entry> = loaded.servers.into_iter().map(Entry::from).collect();
        let left_out = leave_out_this_gateway(&mut entries)?;
        for left in &left_out {
            warn(format_args!("`{}` ({}) left out: {}", left.name, left.source.display(), left.reason));
        }
        if entries.is_empty() && left_out.is_empty() && loaded.untrusted.is_empty() {
            if let Some(file) = named.filter(|file| loaded.files.contains(file)) {
                return Err(Failure::usage(format!(
                    "{} defines no server; add one with `mcpvisor add NAME -- COMMAND [ARGS...]`, or name another file",
                    file.display()
                )));
            }
            if !loaded.skipped.is_empty() {
                return Err(Failure::usage("no usable server: every configured server was skipped (the warnings above say why)"));
            }
            entries.push(built_in()?);
        }
        Ok(Servers {
            entries,
            files: loaded.files,
            max_started: max_servers(cli)?,
            agent: loaded.agent,
            audit: loaded.audit,
            serve: loaded.serve,
            telemetry: loaded.telemetry,
            left_out,
            untrusted: loaded.untrusted,
        })
    }

    /// The servers a command about one server (`only`) or all of them
    /// starts. Starting more enabled servers than [`Servers::max_started`]
    /// at once is refused: a file of thousands of servers must not start
    /// thousands of processes by surprise.
    pub fn to_start(&self, only: Option<&str>) -> Result<Vec<&Entry>, Failure> {
        if let Some(name) = only {
            return Ok(vec![self.get(name)?]);
        }
        self.within_limit(self.entries.iter().collect())
    }

    /// `entries`, unless they hold more enabled servers than [`Servers::max_started`].
    pub fn within_limit<'a>(&self, entries: Vec<&'a Entry>) -> Result<Vec<&'a Entry>, Failure> {
        let enabled = entries.iter().filter(|entry| entry.enabled()).count();
        if enabled > self.max_started {
            return Err(Failure::usage(format!(
                "this would start {enabled} servers, more than the limit of {}; name one (e.g. `--server NAME`, `mcpvisor call NAME ...`), \
                 disable some, or raise the limit with --max-servers {enabled} or MCPVISOR_MAX_SERVERS={enabled}",
                self.max_started
            )));
        }
        Ok(entries)
    }

    pub fn get(&self, name: &str) -> Result<&Entry, Failure> {
        if let Some(entry) = self.entries.iter().find(|entry| entry.name() == name) {
            return Ok(entry);
        }
        if let Some(file) = self.untrusted.iter().find(|file| file.servers.iter().any(|server| server.name() == name)) {
            return Err(Failure::usage(format!(
                "`{name}` is defined in {}, which is not trusted ({}); review it, then run `mcpvisor trust {}` to use it",
                file.path.display(),
                file.why.reason(),
                super::untrusted::project_root(file).display()
            )));
        }
        None.ok_or_else(|| {
            let known: Vec<&str> = self.entries.iter().map(Entry::name).collect();
            Failure::usage(format!("no server named `{name}`; the configured ones are: {}", known.join(", ")))
        })
    }
}

impl From<LoadedServer> for Entry {
    fn from(server: LoadedServer) -> Entry {
        Entry {
            definition: server.definition,
            defined_in: DefinedIn::File { path: server.source, origin: server.origin, overrides: server.overrides },
            unmapped: server.unmapped,
        }
    }
}

/// `--max-servers`, else `$MCPVISOR_MAX_SERVERS`, else [`DEFAULT_MAX_SERVERS`].
fn max_servers(cli: &Cli) -> Result<usize, Failure> {
    match (cli.max_servers, env("MCPVISOR_MAX_SERVERS").filter(|v| !v.is_empty())) {
        (Some(max), _) => Ok(max),
        (None, Some(text)) => text
            .trim()
            .parse()
            .map_err(|_| Failure::usage(format!("MCPVISOR_MAX_SERVERS is {text:?}; set it to a whole number such as 500"))),
        (None, None) => Ok(DEFAULT_MAX_SERVERS),
    }
}

/// The process environment, as configuration lookups want it.
pub fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

pub fn current_dir() -> Result<PathBuf, Failure> {
    std::env::current_dir().map_err(|e| Failure::usage(format!("cannot read the current directory: {e}")))
}

/// The native file of a scope, or the `--config` file.
pub fn native_file(cli: &Cli, scope: Option<Scope>) -> Result<PathBuf, Failure> {
    if let Some(file) = &cli.config {
        if scope.is_some() {
            return Err(Failure::usage("--scope and --config cannot be used together: --config names the file to change"));
        }
        if !is_native(file) || std::fs::read_to_string(file).is_ok_and(|text| foreign::is_codex(file, &text)) {
            return Err(Failure::usage(format!(
                "{}: mcpvisor edits only its own TOML files (*.toml) and never an editor's; use `mcpvisor import {}` to copy its servers",
                file.display(),
                file.display()
            )));
        }
        return Ok(file.clone());
    }
    let scope = scope.unwrap_or(Scope::User);
    Locations::new(Some(&current_dir()?), env).native_file(scope).ok_or_else(|| {
        Failure::usage("no user configuration file: set MCPVISOR_CONFIG, XDG_CONFIG_HOME or HOME, or use --scope project or --config FILE")
    })
}

/// `file` from the root: editors' `${workspaceFolder}` is the folder
/// holding the file, and the value must not depend on where mcpvisor runs.
pub fn absolute(file: &Path) -> Result<PathBuf, Failure> {
    std::path::absolute(file).map_err(|e| Failure::usage(format!("{}: cannot locate: {e}", file.display())))
}

/// Whether a file is mcpvisor's own TOML (by its extension).
pub fn is_native(file: &Path) -> bool {
    file.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("toml"))
}

/// Only `file`: mcpvisor's TOML, or another tool's file, every server
/// usable. Claude Code's `~/.claude.json` is read as Claude Code reads it
/// in `project`: user < project (`.mcp.json`, if `record` trusts it) <
/// local scope.
pub fn load_file(file: &Path, project: &Path, record: Option<&TrustedFolders>) -> Result<LoadedConfig, ConfigError> {
    let text = std::fs::read_to_string(file).map_err(|e| ConfigError::io(file, "read", e))?;
    if !is_native(file) || foreign::is_codex(file, &text) {
        drop(text);
        let mut loaded = if file.file_name().is_some_and(|name| name == ".claude.json") {
            discover::claude_code_scopes(file, project, record)
        } else {
            discover::editor_file(file)
        };
        let first_problem = loaded.skipped.drain(..).next();
        return first_problem.map_or(Ok(loaded), Err);
    }
    let mut loaded = LoadedConfig { files: vec![file.into()], ..LoadedConfig::default() };
    let (servers, agent) = native::parse_with_agent(file, &text)?;
    let source: Arc<Path> = file.into();
    for config in servers {
        let definition = Definition::parsed(config);
        loaded.servers.push(LoadedServer {
            definition,
            source: Arc::clone(&source),
            origin: Origin::Native,
            overrides: Vec::new(),
            unmapped: Vec::new(),
        });
    }
    loaded.agent = agent;
    loaded.audit = native::parse_audit(file, &text)?;
    loaded.serve = native::parse_serve(file, &text)?;
    loaded.telemetry = native::parse_telemetry(file, &text)?;
    Ok(loaded)
}

/// Takes the entries that run this gateway itself out of `entries` (in
/// place: a file may hold thousands), and says why for each.
fn leave_out_this_gateway(entries: &mut Vec<Entry>) -> Result<Vec<LeftOut>, Failure> {
    let mut left_out = Vec::new();
    let mut nested = Vec::new();
    // This executable and the current directory, looked up at the first server that could be it.
    let mut here: Option<(PathBuf, PathBuf)> = None;
    for (at, entry) in entries.iter().enumerate() {
        let config = entry.config()?;
        if !config.args.iter().any(|arg| arg.contains("serve")) {
            continue;
        }
        let (own_exe, base) = match &here {
            Some(here) => here,
            None => here.insert((
                std::env::current_exe().map_err(|e| Failure::usage(format!("cannot find this executable: {e}")))?,
                current_dir()?,
            )),
        };
        if !super::nesting::runs_this_gateway(&config, own_exe, base, env) {
            continue;
        }
        nested.push(at);
        left_out.push(LeftOut {
            name: config.name.clone(),
            source: entry.defined_in.path().map(Path::to_path_buf).unwrap_or_default(),
            reason: format!(
                "it runs this gateway itself (`{} serve`), which would start itself again without end; \
                 clients start `mcpvisor serve` on their own, so it needs no entry among its servers",
                config.command
            ),
        });
    }
    let mut at = 0;
    entries.retain(|_| {
        at += 1;
        !nested.contains(&(at - 1))
    });
    Ok(left_out)
}

fn built_in() -> Result<Entry, Failure> {
    let exe = std::env::current_exe()
        .map_err(|e| Failure::usage(format!("cannot find this executable to offer the built-in demo server: {e}")))?;
    let config = ServerConfig::stdio(BUILT_IN, exe.to_string_lossy(), ["demo-server"]);
    Ok(Entry { definition: Definition::parsed(config), defined_in: DefinedIn::BuiltIn, unmapped: Vec::new() })
}
