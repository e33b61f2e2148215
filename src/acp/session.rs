//! One ACP session: its agent, the MCP servers it added to the Hub, its
//! mode, and how it is opened (`session/new`, `session/load`) and closed.
//!
//! Invariants: the session's servers (the editor's `mcpServers` and the
//! built-in tools working in its `cwd`) are named `{name}_s{N}` with a
//! number of this connection, so they collide neither with the configured
//! servers nor with another session's; its agent sees only the configured
//! servers and its own ([`Scope`]); everything it added is removed when it
//! closes, or when opening fails half-way. The session's servers get its
//! `cwd` as their roots (the configured servers, shared by every session,
//! get their configured `roots`, else none).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_client_protocol_schema::{McpServer, SessionId};

use super::host::{EditorHost, EditorOffers};
use super::modes::Mode;
use super::peer::Peer;
use super::relay::Relay;
use super::room::Room;
use super::{permission, AcpOptions};
use crate::actors::agent::{default_system_prompt, is_read_only, AgentConfig, ToolFilter};
use crate::actors::outlet::Outlet;
use crate::actors::ServerState;
use crate::builtin_tools::{self, BuiltinSettings};
use crate::config::{ServerConfig, Transport};
use crate::llm::ChatMessage;
use crate::protocol::{error_codes, ErrorObject};
use crate::sessions::{NewSession, SessionId as SavedId, SessionWriter};
use crate::{AgentHandle, Handle};

/// How long a session's own servers may take to start before the session
/// answers anyway (a server still starting then comes up in the background,
/// and the editor is told). Shorter than a server's start-up time-out (30 s):
/// an editor waits for `session/new` with nothing on screen.
pub const SERVERS_SETTLE: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(20);

pub struct Session {
    pub agent: AgentHandle,
    pub room: Arc<Room>,
    pub relay: Relay,
    pub mode: Mode,
    pub scope: Scope,
    /// A prompt is running.
    pub prompting: bool,
    /// What to tell the user once the session is open: its servers that
    /// failed to start (and why) or are still starting.
    pub notes: Vec<String>,
}

/// Which servers' tools a session's agent sees.
#[derive(Clone)]
pub struct Scope {
    pub configured: Arc<HashSet<String>>,
    /// The servers this session added, by their names in the Hub.
    pub own: Vec<String>,
    pub builtin: String,
}

impl Scope {
    pub fn filter(&self, mode: Mode) -> ToolFilter {
        let scope = self.clone();
        Arc::new(move |entry| scope.sees(&entry.server) && (mode != Mode::ReadOnly || is_read_only(entry)))
    }

    pub fn sees(&self, server: &str) -> bool {
        self.configured.contains(server) || self.own.iter().any(|own| own == server)
    }
}

/// What a session is opened with.
pub struct Opening {
    pub cwd: PathBuf,
    pub servers: Vec<McpServer>,
    /// `session/load`: the saved conversation, its system prompt and its journal.
    pub saved: Option<(SavedId, Vec<ChatMessage>, Option<String>, SessionWriter)>,
    /// This connection's number for the session (names its servers).
    pub number: usize,
}

/// The connection's parts a session is opened with.
pub struct Context {
    pub handle: Handle,
    pub options: Arc<AcpOptions>,
    pub peer: Peer,
    pub offers: EditorOffers,
    pub configured: Arc<HashSet<String>>,
}

impl Session {
    pub async fn open(cx: &Context, opening: Opening) -> Result<Session, ErrorObject> {
        if !opening.cwd.is_absolute() {
            return Err(invalid(format!("cwd must be an absolute path; {} is not", opening.cwd.display())));
        }
        let options = &cx.options;
        let Opening { cwd, servers, saved, number } = opening;
        let system = match &saved {
            Some((_, _, system, _)) => system.clone(),
            None => None,
        }
        .or_else(|| options.system_prompt.clone())
        .unwrap_or_else(|| default_system_prompt(&cwd));
        let (id, messages, journal) = match saved {
            Some((id, messages, _, journal)) => (id.to_string(), messages, Some(journal)),
            None => new_journal(options, &cwd, &system),
        };
        let room = Arc::new(Room::new(SessionId::new(id), cx.peer.clone(), cwd.clone()));
        let suffix = format!("_s{number}");
        let mut scope =
            Scope { configured: cx.configured.clone(), own: Vec::new(), builtin: format!("{}{suffix}", builtin_tools::SERVER_NAME) };
        let added = add_servers(cx, &cwd, &servers, &room, &suffix, &mut scope).await;
        if let Err(error) = added {
            remove_servers(&cx.handle, &scope.own).await;
            return Err(error);
        }
        let notes = settle(&cx.handle, &scope.own, &suffix).await;
        let mode = Mode::Ask;
        let (outlet, events) = Outlet::channel();
        let mut config = AgentConfig::new(options.model.clone());
        config.policy = options.policy.clone().with_workspace(&scope.builtin, cwd.clone());
        config.policy.mode = mode.confirm(options.policy.mode);
        config.limits = options.limits;
        config.conversation.system = Some(system);
        config.conversation.messages = messages;
        config.journal = journal;
        config.events = Some(outlet);
        let relay = Relay::start(room.clone(), cx.handle.clone(), scope.builtin.clone(), events);
        config.asker = Some(permission::asker(relay.clone()));
        config.tools = Some(scope.filter(mode));
        let Some(agent) = cx.handle.start_agent(config).await else {
            remove_servers(&cx.handle, &scope.own).await;
            return Err(internal("the runtime stopped before the session's agent started".into()));
        };
        Ok(Session { agent, room, relay, mode, scope, prompting: false, notes })
    }

    pub fn set_mode(&mut self, mode: Mode, configured: crate::config::ConfirmMode) {
        self.mode = mode;
        self.agent.set_confirm(mode.confirm(configured));
        self.agent.set_tools(Some(self.scope.filter(mode)));
    }

    /// Ends the running turn and removes the session's servers.
    pub async fn close(self, handle: &Handle) {
        self.agent.cancel();
        remove_servers(handle, &self.scope.own).await;
    }
}

/// A new saved conversation; unsaved (with a generated id) when the store cannot be used.
fn new_journal(options: &AcpOptions, cwd: &std::path::Path, system: &str) -> (String, Vec<ChatMessage>, Option<SessionWriter>) {
    let created = options.store.as_ref().map(|store| {
        let new = NewSession { model: options.model.label(), cwd: Some(cwd.display().to_string()), system: Some(system.to_string()) };
        store.create(new, options.redactor.clone())
    });
    match created {
        Some(Ok(journal)) => (journal.id().to_string(), Vec::new(), Some(journal)),
        failed => {
            if let Some(Err(error)) = failed {
                tracing::warn!("this session is not saved: {error}");
            }
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
            (SavedId::at(now, fastrand::u32(..)).to_string(), Vec::new(), None)
        }
    }
}

async fn add_servers(
    cx: &Context,
    cwd: &std::path::Path,
    servers: &[McpServer],
    room: &Arc<Room>,
    suffix: &str,
    scope: &mut Scope,
) -> Result<(), ErrorObject> {
    let mut configs = Vec::new();
    if cx.options.builtin_tools {
        let host = EditorHost { room: room.clone(), offers: cx.offers };
        let command_env = builtin_tools::command_env(&cx.options.command_env);
        let mut builtin = builtin_tools::server_on(BuiltinSettings { command_env, ..BuiltinSettings::new(cwd) }, host);
        builtin.config.name = scope.builtin.clone();
        configs.push((builtin.config, Some(builtin.handler)));
    }
    for server in servers {
        configs.push((server_config(server, suffix, cwd)?, None));
    }
    for (config, handler) in configs {
        let name = config.name.clone();
        config.validate().map_err(|e| invalid(e.to_string()))?;
        let added = match handler {
            Some(handler) => cx.handle.add_in_process(config, handler).await,
            None => cx.handle.add_server(config).await,
        };
        added.map_err(|e| invalid(format!("cannot add MCP server `{name}`: {e}")))?;
        scope.own.push(name);
    }
    Ok(())
}

/// The Hub's configuration of one of the editor's MCP servers, the
/// session's `cwd` as its roots.
fn server_config(server: &McpServer, suffix: &str, cwd: &std::path::Path) -> Result<ServerConfig, ErrorObject> {
    let remote = |transport, name: &str, url: &str, headers: Vec<(String, String)>| {
        let mut config = ServerConfig::remote(format!("{name}{suffix}"), transport, url);
        config.headers.extend(headers);
        config
    };
    let mut config = match server {
        McpServer::Stdio(stdio) => {
            let mut config =
                ServerConfig::stdio(format!("{}{suffix}", stdio.name), stdio.command.display().to_string(), stdio.args.clone());
            config.env.extend(stdio.env.iter().map(|var| (var.name.clone(), var.value.clone())));
            config.cwd = Some(cwd.to_path_buf());
            config
        }
        McpServer::Http(http) => {
            remote(Transport::Http, &http.name, &http.url, http.headers.iter().map(|h| (h.name.clone(), h.value.clone())).collect())
        }
        McpServer::Sse(sse) => {
            remote(Transport::Sse, &sse.name, &sse.url, sse.headers.iter().map(|h| (h.name.clone(), h.value.clone())).collect())
        }
        _ => return Err(invalid("an MCP server of a transport this agent does not support (stdio, http and sse are)".into())),
    };
    config.roots = vec![cwd.display().to_string()];
    Ok(config)
}

/// Waits until the session's servers are out of `pending`, at most
/// [`SERVERS_SETTLE`]; returns a note for each that is not connected then,
/// under the editor's name for it (without `suffix`).
async fn settle(handle: &Handle, names: &[String], suffix: &str) -> Vec<String> {
    let deadline = Instant::now() + SERVERS_SETTLE;
    let mut notes = Vec::new();
    for name in names {
        let mut status = handle.server_status(name).await;
        while Instant::now() < deadline && status.as_ref().is_some_and(|status| status.state == ServerState::Pending) {
            tokio::time::sleep(POLL).await;
            status = handle.server_status(name).await;
        }
        let shown = name.strip_suffix(suffix).unwrap_or(name);
        notes.extend(status.and_then(|status| startup_note(shown, &status)));
    }
    notes
}

/// What the user is told about a session's server that is not up.
fn startup_note(shown: &str, status: &crate::actors::ServerStatus) -> Option<String> {
    let why = match &status.state {
        ServerState::Connected | ServerState::Disabled => return None,
        ServerState::Pending => {
            let wait = SERVERS_SETTLE.as_secs();
            return Some(format!("MCP server `{shown}` is still starting after {wait} s; its tools appear once it is up"));
        }
        ServerState::NeedsAuth => "it needs authorization (run `mcpvisor login` for it)".to_string(),
        ServerState::Failed { error, .. } => error.clone(),
        ServerState::Restarting { .. } => status.last_error.clone().unwrap_or_else(|| "it exited".into()),
    };
    let stderr = status.stderr_tail.last().map(|line| format!(" (its last stderr line: {line})")).unwrap_or_default();
    Some(format!("MCP server `{shown}` failed to start: {why}{stderr}; its tools are missing from this session"))
}

pub async fn remove_servers(handle: &Handle, names: &[String]) {
    for name in names {
        let _ = handle.remove_server(name).await;
    }
}

pub fn invalid(message: String) -> ErrorObject {
    ErrorObject { code: error_codes::INVALID_PARAMS, message, data: None }
}

pub fn internal(message: String) -> ErrorObject {
    ErrorObject { code: error_codes::INTERNAL_ERROR, message, data: None }
}
