//! Other clients' MCP configuration files, read as they are (never written).
//!
//! | format | file | servers under |
//! | --- | --- | --- |
//! | Claude Desktop | `claude_desktop_config.json` | `mcpServers` |
//! | Claude Code | `.mcp.json` | `mcpServers` |
//! | Cursor | `.cursor/mcp.json` | `mcpServers` |
//! | VS Code | `.vscode/mcp.json` | `servers` (and `inputs`) |
//! | OpenCode | `opencode.json`, `opencode.jsonc` | `mcp` or `mcp.servers` |
//! | Claude Code (user, local) | `~/.claude.json` | `mcpServers`; `projects["DIR"].mcpServers` |
//! | Gemini CLI | `.gemini/settings.json` | `mcpServers` (`httpUrl`; `url` is SSE) |
//! | Windsurf | `mcp_config.json` | `mcpServers` (`serverUrl`) |
//! | Zed | `.zed/settings.json`, `zed/settings.json` | `context_servers` |
//! | Codex | `.codex/config.toml` (TOML) | `[mcp_servers.NAME]` (`codex`) |
//!
//! The format comes from the file name, else from the shape of the file
//! (its top-level key; a TOML file with `mcp_servers` is Codex's).
//! Comments and trailing commas are accepted in every JSON format.
//! Fields of the other transport (a `url` on a stdio server) are ignored.
//!
//! Each tool's own settings map onto mcpvisor's where one exists: tool
//! allow/deny lists (`includeTools`/`excludeTools`, `disabledTools`,
//! `enabled_tools`/`disabled_tools`) become the tool filter, time-outs the
//! start-up or call time-out, `enabled`/`disabled` the same. Keys of an
//! entry that nothing reads are never dropped silently: they are returned
//! with the server ([`Found::unmapped`]) for commands to report.
//!
//! Transport: `type` says it (`stdio`, `http`, `streamable-http`, `sse`;
//! OpenCode: `local`, `remote`); without it a `command` means stdio and a
//! `url` means http, or sse when its path ends in `/sse`.
//!
//! Variables are turned into mcpvisor's syntax, so that they are expanded
//! when servers start, not now: Cursor's and VS Code's `${env:NAME}` becomes
//! `${NAME}` and `${userHome}` becomes `${HOME}`; `${workspaceFolder}` (and
//! `…Basename`) is the folder holding `.vscode`/`.cursor` (or the file);
//! `${input:ID}` takes the value the caller passes for `ID`, else it is an
//! error (VS Code prompts for inputs; mcpvisor cannot). OpenCode's
//! `{env:NAME}` becomes `${NAME}`. `${NAME}` stays a reference everywhere.
//! `envFile` (a `.env` file, relative to the workspace folder) is read now.
//!
//! OAuth clients of remote servers: Cursor's `auth` object (`CLIENT_ID`,
//! `CLIENT_SECRET`, `scopes` array; read in every `mcpServers` format) and
//! OpenCode's `oauth` object (`clientId`, `clientSecret`, `scope` string)
//! become `auth = { type = "oauth", ... }`. VS Code and Claude files have
//! no such shape: their remote servers log in with OAuth's defaults.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{Map, Value as Json};

use super::expand::{escape, Syntax};
use super::file::read_optional;
use super::{dotenv, jsonc, Auth, OAuthConfig, ServerConfig, Transport};
use crate::error::ConfigError;

/// A client whose MCP configuration mcpvisor reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    ClaudeDesktop,
    ClaudeCode,
    Cursor,
    VsCode,
    OpenCode,
    Gemini,
    Windsurf,
    Zed,
    Codex,
}

impl Format {
    /// The format a file of this name has, if the name says.
    pub fn from_path(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_str()?;
        let folder = path.parent().and_then(Path::file_name).and_then(|folder| folder.to_str());
        match (folder, name) {
            (_, "claude_desktop_config.json") => Some(Format::ClaudeDesktop),
            (_, ".mcp.json" | ".claude.json") => Some(Format::ClaudeCode),
            (Some(".cursor"), "mcp.json") => Some(Format::Cursor),
            // VS Code's user file is `…/Code/User/mcp.json`.
            (Some(".vscode" | "User"), "mcp.json") => Some(Format::VsCode),
            (_, "opencode.json" | "opencode.jsonc") => Some(Format::OpenCode),
            (Some(".gemini"), "settings.json") => Some(Format::Gemini),
            (_, "mcp_config.json") => Some(Format::Windsurf),
            (Some(".zed" | "zed"), "settings.json") => Some(Format::Zed),
            (Some(".codex"), "config.toml") => Some(Format::Codex),
            _ => None,
        }
    }

    /// The format of a configuration by its top-level key; `mcpServers`
    /// (shared by Claude and Cursor) counts as Claude Code.
    pub fn detect(value: &Json) -> Option<Format> {
        let root = value.as_object()?;
        Format::from_keys(|key| root.contains_key(key))
    }

    /// [`Format::detect`] by the top-level keys a document has.
    fn from_keys(has: impl Fn(&str) -> bool) -> Option<Format> {
        [("mcpServers", Format::ClaudeCode), ("servers", Format::VsCode), ("mcp", Format::OpenCode), ("context_servers", Format::Zed)]
            .into_iter()
            .find(|(key, _)| has(key))
            .map(|(_, format)| format)
    }

    /// The client's name, for listings and messages.
    pub fn name(self) -> &'static str {
        match self {
            Format::ClaudeDesktop => "Claude Desktop",
            Format::ClaudeCode => "Claude Code",
            Format::Cursor => "Cursor",
            Format::VsCode => "VS Code",
            Format::OpenCode => "OpenCode",
            Format::Gemini => "Gemini CLI",
            Format::Windsurf => "Windsurf",
            Format::Zed => "Zed",
            Format::Codex => "Codex",
        }
    }
}

/// One server read from another tool's file.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub config: ServerConfig,
    /// Keys of its entry that mean nothing to mcpvisor (the tool's own
    /// settings), in order; reported, never dropped silently.
    pub unmapped: Vec<String>,
}

/// Which servers of a file are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section<'p> {
    /// The file's own list of servers (in `~/.claude.json`: the user scope).
    Servers,
    /// Claude Code's local scope of one project: `projects["DIR"].mcpServers`
    /// of `~/.claude.json`, where a plain `claude mcp add` writes.
    ClaudeLocal(&'p Path),
}

/// One server of a file, or why it cannot be used.
pub type ServerResult = Result<Found, ConfigError>;

/// The servers of a foreign file; `path` names it in errors and locates
/// `${workspaceFolder}` and `envFile`. `inputs` are values for VS Code's
/// `${input:ID}`. The first problem with any server fails the whole file.
pub fn parse(path: &Path, text: &str, inputs: &BTreeMap<String, String>) -> Result<(Format, Vec<ServerConfig>), ConfigError> {
    let (format, servers) = parse_each(path, text, inputs)?;
    Ok((format, servers.into_iter().map(|found| found.map(|found| found.config)).collect::<Result<_, _>>()?))
}

/// Like [`parse`], but a problem with one server is that server's own
/// result; only problems with the file as a whole fail it. Servers come in
/// the order of their names.
///
/// The document is not built as one JSON tree: its objects are read as
/// maps of raw (borrowed) values, and each server is parsed on its own, so
/// a file of many servers costs little more than its text.
pub fn parse_each(path: &Path, text: &str, inputs: &BTreeMap<String, String>) -> Result<(Format, Vec<ServerResult>), ConfigError> {
    let mut servers = Vec::new();
    let format = for_each_server(path, text, inputs, |_, server| servers.push(server))?;
    Ok((format, servers))
}

/// [`parse_each`], handing each server's result to `each` as it is read
/// instead of collecting them. Problems with the file as a whole come
/// before any server.
pub fn for_each_server(
    path: &Path,
    text: &str,
    inputs: &BTreeMap<String, String>,
    each: impl FnMut(Format, ServerResult),
) -> Result<Format, ConfigError> {
    for_each_server_in(path, text, inputs, Section::Servers, each)
}

/// [`for_each_server`] for one [`Section`] of the file.
pub fn for_each_server_in(
    path: &Path,
    text: &str,
    inputs: &BTreeMap<String, String>,
    section: Section,
    mut each: impl FnMut(Format, ServerResult),
) -> Result<Format, ConfigError> {
    for_each_entry_in(path, text, inputs, section, |_, _| {}, |format, server, _| each(format, server))
}

/// [`for_each_server_in`], also handing `each` the JSON text of the
/// server's entry (`None` in Codex's TOML), so that a caller can keep the
/// text instead of the parsed server and parse it again with
/// [`parse_entry`]. Before the first entry, `servers` is handed the text
/// of the object holding them and how many there are (not in Codex's
/// TOML); when `text` has no comments, it and the entries are slices of `text`.
pub fn for_each_entry_in(
    path: &Path,
    text: &str,
    inputs: &BTreeMap<String, String>,
    section: Section,
    servers: impl FnOnce(&str, usize),
    mut each: impl FnMut(Format, ServerResult, Option<&str>),
) -> Result<Format, ConfigError> {
    if is_toml(path, text) {
        return codex::for_each_server(path, text, |format, server| each(format, server, None));
    }
    let syntax_error = |message: String| ConfigError::Syntax { file: path.into(), syntax: "JSON", message, cause: None };
    let text = jsonc::strip(text);
    serde_json::from_str::<&RawValue>(&text).map_err(|error| ConfigError::syntax(path, "JSON", error))?;
    let root = object(&text).ok_or_else(|| syntax_error("the top level must be an object".into()))?;
    let format = Format::from_path(path).or_else(|| Format::from_keys(|key| root.contains_key(key))).ok_or_else(|| {
        let message = "it has none of the keys mcpServers, servers, mcp or context_servers".into();
        ConfigError::UnknownFormat { file: path.into(), message }
    })?;
    let context = Context { file: path, format, workspace: workspace_of(path), inputs };
    let (key, entries) = match section {
        Section::Servers => server_entries(format, &root),
        Section::ClaudeLocal(project) => claude_local_entries(&root, project),
    };
    let Some(entries) = entries else { return Ok(format) };
    let object_text = entries.get();
    let entries = object(object_text).ok_or_else(|| {
        let message = format!("`{key}` must be an object with one entry per server");
        ConfigError::Syntax { file: path.into(), syntax: format.name(), message, cause: None }
    })?;
    servers(object_text, entries.len());
    for (name, raw) in entries {
        let entry = serde_json::from_str::<Json>(raw.get()).map_err(|error| ConfigError::syntax(path, "JSON", error));
        each(format, entry.and_then(|entry| context.server(&name, &entry)), Some(raw.get()));
    }
    Ok(format)
}

/// `text` as [`for_each_entry_in`] reads it: JSON without its comments
/// (so that the entries it hands out are slices of the result), Codex's TOML as it is.
pub fn plain_text(path: &Path, text: String) -> String {
    if is_toml(path, &text) {
        return text;
    }
    match jsonc::strip(&text) {
        std::borrow::Cow::Owned(plain) => plain,
        std::borrow::Cow::Borrowed(_) => text,
    }
}

/// Whether a file is Codex's TOML rather than JSON.
fn is_toml(path: &Path, text: &str) -> bool {
    Format::from_path(path) == Some(Format::Codex) || codex::is_codex(path, text)
}

/// One server of a file in `format` from its entry's JSON text, as
/// [`for_each_entry_in`] handed it out (with no VS Code inputs): the same
/// text gives the same server, except that `envFile` is read again.
pub fn parse_entry(path: &Path, format: Format, name: &str, entry: &str) -> ServerResult {
    let context = Context { file: path, format, workspace: workspace_of(path), inputs: &BTreeMap::new() };
    context.server(name, &serde_json::from_str::<Json>(entry).map_err(|error| ConfigError::syntax(path, "JSON", error))?)
}

/// A JSON object's members, their values unparsed; `None` if `json` is not an object.
fn object(json: &str) -> Option<BTreeMap<String, &RawValue>> {
    serde_json::from_str(json).ok()
}

/// Claude Code's local scope of `project` in `~/.claude.json`.
fn claude_local_entries<'t>(root: &BTreeMap<String, &'t RawValue>, project: &Path) -> (String, Option<&'t RawValue>) {
    let dir = project.to_string_lossy();
    let key = format!("projects[{dir:?}].mcpServers");
    let projects = root.get("projects").and_then(|projects| object(projects.get()));
    let servers = projects.and_then(|projects| projects.get(dir.as_ref()).and_then(|p| object(p.get()))?.get("mcpServers").copied());
    (key, servers)
}

/// Where the servers are, as a key path for messages and the value there.
fn server_entries<'t>(format: Format, root: &BTreeMap<String, &'t RawValue>) -> (String, Option<&'t RawValue>) {
    let member = |key: &str| root.get(key).copied();
    let (key, value) = match format {
        Format::ClaudeDesktop | Format::ClaudeCode | Format::Cursor | Format::Gemini | Format::Windsurf => {
            ("mcpServers", member("mcpServers"))
        }
        Format::Zed => ("context_servers", member("context_servers")),
        Format::Codex => ("mcp_servers", None),
        Format::VsCode => ("servers", member("servers")),
        Format::OpenCode => {
            let mcp = member("mcp");
            // Newer files nest servers under `mcp.servers`; in older ones a
            // server named "servers" would have a `type` string.
            let nested = mcp.and_then(|mcp| object(mcp.get())).and_then(|mcp| mcp.get("servers").copied());
            let is_old_server = |servers: &RawValue| object(servers.get()).and_then(|s| s.get("type").map(|t| t.get().starts_with('"')));
            match nested {
                Some(servers) if object(servers.get()).is_some() && is_old_server(servers) != Some(true) => ("mcp.servers", Some(servers)),
                _ => ("mcp", mcp),
            }
        }
    };
    (key.into(), value)
}

/// The folder `${workspaceFolder}` names: the one holding `.vscode`/`.cursor`, else the file's.
fn workspace_of(path: &Path) -> PathBuf {
    let folder = path.parent().filter(|folder| !folder.as_os_str().is_empty()).unwrap_or(Path::new("."));
    match folder.file_name().and_then(|name| name.to_str()) {
        Some(".vscode" | ".cursor") => folder.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf(),
        _ => folder.to_path_buf(),
    }
}

struct Context<'a> {
    file: &'a Path,
    format: Format,
    workspace: PathBuf,
    inputs: &'a BTreeMap<String, String>,
}

impl Context<'_> {
    fn server(&self, name: &str, entry: &Json) -> ServerResult {
        let Some(object) = entry.as_object() else {
            return Err(self.invalid(name, name, "must be an object with the server's settings"));
        };
        let entry = Entry::new(self, name, object);
        let config = match self.format {
            Format::OpenCode => entry.opencode()?,
            Format::Zed => entry.zed()?,
            Format::Codex => entry.codex()?,
            _ => entry.mcp_servers()?,
        };
        config.validate().map_err(|source| ConfigError::Invalid { file: self.file.into(), source })?;
        let used = entry.used.into_inner();
        Ok(Found { config, unmapped: object.keys().filter(|key| !used.contains(*key)).cloned().collect() })
    }

    fn invalid(&self, server: &str, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::InvalidField { file: self.file.into(), server: server.into(), field: field.into(), message: message.into() }
    }
}

/// The keys of an editor's OAuth client object.
#[derive(Clone, Copy)]
struct OAuthKeys {
    client_id: &'static str,
    client_secret: &'static str,
    scopes: &'static str,
    /// An array of scopes, else one space-separated string.
    scopes_as_list: bool,
}

impl OAuthKeys {
    const CURSOR: OAuthKeys = OAuthKeys { client_id: "CLIENT_ID", client_secret: "CLIENT_SECRET", scopes: "scopes", scopes_as_list: true };
    const OPENCODE: OAuthKeys = OAuthKeys { client_id: "clientId", client_secret: "clientSecret", scopes: "scope", scopes_as_list: false };
}

/// One server's entry; every error names the file, the server and the key.
struct Entry<'a> {
    context: &'a Context<'a>,
    server: &'a str,
    object: &'a Map<String, Json>,
    /// The keys read so far: the others are reported as unmapped.
    used: RefCell<BTreeSet<String>>,
}

impl<'a> Entry<'a> {
    fn new(context: &'a Context<'a>, server: &'a str, object: &'a Map<String, Json>) -> Entry<'a> {
        Entry { context, server, object, used: RefCell::default() }
    }

    /// Keys that change nothing in mcpvisor and need no report (descriptions, markers).
    fn meaningless(&self, keys: &[&str]) {
        self.used.borrow_mut().extend(keys.iter().map(|key| key.to_string()));
    }

    /// `field` empty: the server's entry as a whole.
    fn invalid(&self, field: &str, message: impl Into<String>) -> ConfigError {
        self.context.invalid(self.server, if field.is_empty() { self.server } else { field }, message)
    }

    fn get(&self, key: &str) -> Option<&'a Json> {
        self.used.borrow_mut().insert(key.into());
        self.object.get(key).filter(|value| !value.is_null())
    }

    /// A string as written (for keywords such as `type`).
    fn raw_text(&self, key: &str) -> Result<Option<String>, ConfigError> {
        self.get(key).map(|value| value.as_str().map(str::to_owned).ok_or_else(|| self.invalid(key, "must be a string"))).transpose()
    }

    /// A string with its variables turned into mcpvisor's syntax.
    fn text(&self, key: &str) -> Result<Option<String>, ConfigError> {
        self.raw_text(key)?.map(|text| self.translate(key, &text)).transpose()
    }

    fn strings(&self, key: &str) -> Result<Option<Vec<String>>, ConfigError> {
        let Some(value) = self.get(key) else { return Ok(None) };
        let array = value.as_array().ok_or_else(|| self.invalid(key, "must be an array of strings"))?;
        let item = |(i, value): (usize, &Json)| {
            let field = format!("{key}[{i}]");
            let text = value.as_str().ok_or_else(|| self.invalid(&field, "must be a string"))?;
            self.translate(&field, text)
        };
        array.iter().enumerate().map(item).collect::<Result<_, _>>().map(Some)
    }

    /// An object of strings; numbers and booleans are taken as their text.
    fn map(&self, key: &str) -> Result<BTreeMap<String, String>, ConfigError> {
        let Some(value) = self.get(key) else { return Ok(BTreeMap::new()) };
        let object = value.as_object().ok_or_else(|| self.invalid(key, "must be an object of strings"))?;
        let pair = |(name, value): (&String, &Json)| {
            let field = format!("{key}.{name}");
            let text = match value {
                Json::String(text) => text.clone(),
                Json::Number(_) | Json::Bool(_) => value.to_string(),
                _ => return Err(self.invalid(&field, "must be a string")),
            };
            Ok((name.clone(), self.translate(&field, &text)?))
        };
        object.iter().map(pair).collect()
    }

    fn bool(&self, key: &str) -> Result<Option<bool>, ConfigError> {
        self.get(key).map(|value| value.as_bool().ok_or_else(|| self.invalid(key, "must be true or false"))).transpose()
    }

    /// Claude, Cursor, VS Code, Gemini CLI and Windsurf entries. Gemini's
    /// `httpUrl` is Streamable HTTP and its `url` SSE; Windsurf's `serverUrl`
    /// is a `url`.
    fn mcp_servers(&self) -> Result<ServerConfig, ConfigError> {
        let command = self.text("command")?;
        let http_url = self.text("httpUrl")?;
        let url = http_url.clone().or(self.text("serverUrl")?).or(self.text("url")?);
        let transport = match self.raw_text("type")?.as_deref() {
            Some("stdio") => Transport::Stdio,
            Some("http" | "streamable-http" | "streamableHttp") => Transport::Http,
            Some("sse") => Transport::Sse,
            Some(other) => return Err(self.invalid("type", format!("is {other:?}; expected \"stdio\", \"http\" or \"sse\""))),
            None if command.is_none() && http_url.is_some() => Transport::Http,
            None if command.is_none() && url.is_some() && self.context.format == Format::Gemini => Transport::Sse,
            None => self.inferred_transport(command.is_some(), url.as_deref())?,
        };
        let mut config = match transport {
            Transport::Stdio => {
                let mut config = ServerConfig::stdio(self.server, command.unwrap_or_default(), self.strings("args")?.unwrap_or_default());
                config.env = self.env_file()?;
                config.env.extend(self.map("env")?);
                config.cwd = self.text("cwd")?.map(PathBuf::from);
                config
            }
            _ => {
                let mut config = ServerConfig::remote(self.server, transport, url.unwrap_or_default());
                config.headers = self.map("headers")?;
                config.auth = self.oauth("auth", OAuthKeys::CURSOR)?;
                config
            }
        };
        config.enabled = !self.bool("disabled")?.unwrap_or(false);
        config.tools.allow = split_commas(self.strings("includeTools")?.unwrap_or_default());
        config.tools.deny =
            split_commas([self.strings("excludeTools")?, self.strings("disabledTools")?].into_iter().flatten().flatten().collect());
        if let Some(timeout) = self.milliseconds("timeout")? {
            config.timeouts.call = timeout;
        }
        self.meaningless(&["description"]);
        Ok(config)
    }

    /// A positive number of milliseconds.
    fn milliseconds(&self, key: &str) -> Result<Option<Duration>, ConfigError> {
        let Some(value) = self.get(key) else { return Ok(None) };
        let millis =
            value.as_u64().filter(|ms| *ms > 0).ok_or_else(|| self.invalid(key, "must be a number of milliseconds greater than zero"))?;
        Ok(Some(Duration::from_millis(millis)))
    }

    /// A positive number of seconds, fractions allowed.
    fn seconds(&self, key: &str) -> Result<Option<Duration>, ConfigError> {
        let Some(value) = self.get(key) else { return Ok(None) };
        let seconds = value
            .as_f64()
            .filter(|s| *s > 0.0 && *s < 1e9)
            .ok_or_else(|| self.invalid(key, "must be a number of seconds greater than zero"))?;
        Ok(Some(Duration::from_secs_f64(seconds)))
    }

    /// OpenCode entries: `command` is an array, `environment` the env, `timeout` in milliseconds.
    fn opencode(&self) -> Result<ServerConfig, ConfigError> {
        let command = self.strings("command")?;
        let url = self.text("url")?;
        let transport = match self.raw_text("type")?.as_deref() {
            Some("local") => Transport::Stdio,
            Some("remote") => Transport::Http,
            Some(other) => return Err(self.invalid("type", format!("is {other:?}; expected \"local\" or \"remote\""))),
            None => self.inferred_transport(command.is_some(), url.as_deref())?,
        };
        let mut config = match transport {
            Transport::Stdio => {
                let Some((program, args)) = command.as_deref().and_then(<[String]>::split_first) else {
                    return Err(self.invalid("command", "must be a non-empty array: the program, then its arguments"));
                };
                let mut config = ServerConfig::stdio(self.server, program.clone(), args.iter().cloned());
                config.env = self.map("environment")?;
                config
            }
            _ => {
                let mut config = ServerConfig::remote(self.server, transport, url.unwrap_or_default());
                config.headers = self.map("headers")?;
                config.auth = self.oauth("oauth", OAuthKeys::OPENCODE)?;
                config
            }
        };
        config.enabled = self.bool("enabled")?.unwrap_or(true) && !self.bool("disabled")?.unwrap_or(false);
        if let Some(timeout) = self.milliseconds("timeout")? {
            config.timeouts.startup = timeout;
        }
        Ok(config)
    }

    /// An editor's OAuth client of a remote server: Cursor's `auth` object,
    /// OpenCode's `oauth` object (its `oauth: false` is ignored: a server
    /// that asks for a login is logged in to).
    fn oauth(&self, key: &str, keys: OAuthKeys) -> Result<Option<Auth>, ConfigError> {
        let Some(value) = self.get(key) else { return Ok(None) };
        let Some(object) = value.as_object() else {
            return if value.is_boolean() { Ok(None) } else { Err(self.invalid(key, "must be an object")) };
        };
        let nested = Entry::new(self.context, self.server, object);
        let under = |error: ConfigError| match error {
            ConfigError::InvalidField { file, server, field, message } => {
                ConfigError::InvalidField { file, server, field: format!("{key}.{field}"), message }
            }
            other => other,
        };
        let scopes = match keys.scopes_as_list {
            true => nested.strings(keys.scopes).map_err(under)?.unwrap_or_default(),
            false => {
                nested.text(keys.scopes).map_err(under)?.map(|s| s.split_whitespace().map(str::to_owned).collect()).unwrap_or_default()
            }
        };
        let oauth = OAuthConfig {
            client_id: nested.text(keys.client_id).map_err(under)?,
            client_secret: nested.text(keys.client_secret).map_err(under)?,
            scopes,
            ..OAuthConfig::default()
        };
        if oauth.client_secret.is_some() && oauth.client_id.is_none() {
            return Err(self.invalid(&format!("{key}.{}", keys.client_id), "is missing; a client secret belongs to a registered client"));
        }
        Ok(Some(Auth::OAuth(oauth)))
    }

    fn inferred_transport(&self, has_command: bool, url: Option<&str>) -> Result<Transport, ConfigError> {
        match (has_command, url) {
            (true, _) => Ok(Transport::Stdio),
            (false, Some(url)) => {
                let path = url.split(['?', '#']).next().unwrap_or(url);
                Ok(if path.trim_end_matches('/').ends_with("/sse") { Transport::Sse } else { Transport::Http })
            }
            (false, None) => Err(self.invalid("", "has neither `command` (a local server) nor `url` (a remote one)")),
        }
    }

    /// The variables of `envFile`, read now; relative paths start at the workspace folder.
    fn env_file(&self) -> Result<BTreeMap<String, String>, ConfigError> {
        let Some(name) = self.text("envFile")? else { return Ok(BTreeMap::new()) };
        let path = self.context.workspace.join(&name);
        let text = read_optional(&path)?.ok_or_else(|| {
            self.invalid("envFile", format!("names {}, which does not exist; create it or remove envFile", path.display()))
        })?;
        let vars = dotenv::parse(&text)
            .map_err(|line| self.invalid("envFile", format!("{} line {line} is not NAME=value; fix that line", path.display())))?;
        Ok(vars.into_iter().map(|(name, value)| (name, escape(&value, Syntax::Braced))).collect())
    }
}

mod codex;
mod variables;
pub use codex::is_codex;
mod zed;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tools_tests;

/// Tool names from a list whose entries may each hold several: `gemini mcp
/// add --include-tools a,b` writes `["a,b"]` (Gemini CLI 0.61), and a tool
/// name has no comma.
fn split_commas(entries: Vec<String>) -> Vec<String> {
    entries.iter().flat_map(|entry| entry.split(',')).map(str::trim).filter(|name| !name.is_empty()).map(str::to_owned).collect()
}
