//! The `[agent]` table of mcpvisor's TOML: which model the agent talks to,
//! its limits, and when it asks the user before a tool call.
//!
//! ```toml
//! [agent]
//! provider = "openai"            # openai | anthropic | scripted
//! model = "gpt-4o-mini"
//! base_url = "http://localhost:11434/v1"
//! confirm = "ask"                # always | never | ask (the default)
//! max_turns = 50                 # model round trips per prompt
//! context_tokens = 100000        # older turns are summarised as a request nears it
//! stream = true
//! system_prompt = "You are a careful assistant."
//! builtin_tools = true           # read/write/list files and run commands (server `builtin`)
//! directories = ["~/notes"]      # the workspace beyond the working directory
//! allow = ["run_command(git diff:*)", "mcp__time__*"]
//! deny = ["run_command(rm:*)", "mcp__github__delete_*"]
//! command_env = ["GOPATH"]       # variables run_command inherits beyond the safe set
//!
//! [agent.servers.time]
//! trust = true                   # never ask before this server's tools
//!
//! [agent.servers.github]
//! confirm = "always"
//! tools = { "get_*" = "never", delete_repo = "always" }
//! ```
//!
//! Rules ([`ToolRule`]) are `NAME` or `NAME(ARGUMENTS)`: `NAME` a glob on
//! the exposed name (`mcp__time__*`), or a built-in tool's own name
//! (`run_command`, `read_file`, `write_file`, `list_directory`), the only
//! tools whose arguments a rule may name: `run_command(git diff:*)` (the
//! command starts with these words), `run_command(make)` (exactly this
//! command), `read_file(~/notes/*)` (a glob on the real path). A `deny`
//! rule wins over everything; an `allow` rule over the rest.
//! `directories`, `allow`, `deny` and `command_env` of the user and
//! project files add up.
//!
//! Which rule decides a tool's confirmation, first match wins: the
//! server's `tools` (glob patterns on the server's own tool names, in file
//! order), the server's `confirm`, its `trust`, then the agent's `confirm`.
//! The project file's values win over the user file's key by key; a
//! server's override table is replaced whole.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;
use toml_edit::Item;

use super::de::{from_node, DeError, Kind, Node};
use super::filter::glob_match;
use super::sandbox::SandboxFile;
use super::values::{schema_as, Count, Ordered, Strings, Word, TABLE_EXAMPLES};
use super::Keyword;
use crate::error::ConfigError;

/// When the agent asks before calling a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfirmMode {
    /// Before every call.
    Always,
    /// Never.
    Never,
    /// Unless the tool says it is read-only and not destructive, or the
    /// user chose "allow always" for it in this session.
    #[default]
    Ask,
}

impl Keyword for ConfirmMode {
    const CHOICES: &'static [(&'static str, Self)] =
        &[("always", ConfirmMode::Always), ("never", ConfirmMode::Never), ("ask", ConfirmMode::Ask)];
}

/// The model providers a configuration may name.
pub const PROVIDERS: [&str; 3] = ["openai", "anthropic", "scripted"];

/// Confirmation overrides of one server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerConfirm {
    /// Never ask before this server's tools (unless `confirm` or `tools` say otherwise).
    pub trust: bool,
    pub confirm: Option<ConfirmMode>,
    /// Per tool: glob patterns on the server's own tool names, in file order.
    pub tools: Vec<(String, ConfirmMode)>,
}

impl ServerConfirm {
    /// The mode these overrides set for `tool`, if any.
    pub fn mode_for(&self, tool: &str) -> Option<ConfirmMode> {
        let by_tool = self.tools.iter().find(|(pattern, _)| glob_match(pattern, tool)).map(|(_, mode)| *mode);
        by_tool.or(self.confirm).or(self.trust.then_some(ConfirmMode::Never))
    }
}

/// Everything `[agent]` says; unset values come from flags, the environment or defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentSettings {
    /// One of [`PROVIDERS`].
    pub provider: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub confirm: Option<ConfirmMode>,
    pub max_turns: Option<usize>,
    /// The model's context in tokens; older turns are summarised near it.
    pub context_tokens: Option<u64>,
    pub stream: Option<bool>,
    pub system_prompt: Option<String>,
    /// Offer the built-in tools (files, commands); on unless false.
    pub builtin_tools: Option<bool>,
    pub servers: BTreeMap<String, ServerConfirm>,
    /// The workspace beyond the working directory (absolute; `~/` expanded,
    /// relative ones against the file's directory).
    pub directories: Vec<PathBuf>,
    pub allow: Vec<ToolRule>,
    pub deny: Vec<ToolRule>,
    /// Variables `run_command` inherits beyond the safe set.
    pub command_env: Vec<String>,
    /// The sandbox of `run_command` (`[agent.sandbox]`).
    pub sandbox: Option<super::SandboxSpec>,
}

/// The built-in tools whose arguments a [`ToolRule`] may name (the names
/// of the built-in tools server's catalog; a test there keeps them equal).
pub const ARGUMENT_TOOLS: [&str; 4] = ["run_command", "read_file", "write_file", "list_directory"];

/// One entry of `[agent] allow` or `deny`: `NAME` or `NAME(ARGUMENTS)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRule {
    /// As written, to name it in events.
    pub text: String,
    /// A glob on the exposed name, or one of [`ARGUMENT_TOOLS`] (the built-in tool).
    pub tool: String,
    pub arguments: Option<String>,
}

impl ToolRule {
    /// Reads a rule; `Err` says what is wrong with it.
    pub fn parse(text: &str) -> Result<ToolRule, String> {
        let text = text.trim();
        let (tool, arguments) = match text.split_once('(') {
            None => (text, None),
            Some((tool, rest)) => {
                let arguments = rest.strip_suffix(')').ok_or("has an opening `(` without a closing `)` at its end")?;
                if arguments.trim().is_empty() {
                    return Err("has empty `()`; leave them out to match every call".into());
                }
                if !ARGUMENT_TOOLS.contains(&tool) {
                    return Err(format!("names arguments of `{tool}`; only {} take them", ARGUMENT_TOOLS.join(", ")));
                }
                (tool, Some(arguments.trim().to_string()))
            }
        };
        if tool.is_empty() || tool.contains(char::is_whitespace) {
            return Err("needs a tool name (a glob such as `mcp__time__*`, or `run_command`) with no spaces".into());
        }
        Ok(ToolRule { text: text.to_string(), tool: tool.to_string(), arguments })
    }
}

impl AgentSettings {
    /// Takes every value `over` sets.
    pub fn merge(&mut self, over: AgentSettings) {
        let AgentSettings {
            provider,
            model,
            base_url,
            confirm,
            max_turns,
            context_tokens,
            stream,
            system_prompt,
            builtin_tools,
            servers,
            directories,
            allow,
            deny,
            command_env,
            sandbox,
        } = over;
        self.directories.extend(directories);
        self.allow.extend(allow);
        self.deny.extend(deny);
        self.command_env.extend(command_env);
        self.sandbox = sandbox.or(self.sandbox.take());
        self.provider = provider.or(self.provider.take());
        self.model = model.or(self.model.take());
        self.base_url = base_url.or(self.base_url.take());
        self.confirm = confirm.or(self.confirm);
        self.max_turns = max_turns.or(self.max_turns);
        self.context_tokens = context_tokens.or(self.context_tokens);
        self.stream = stream.or(self.stream);
        self.builtin_tools = builtin_tools.or(self.builtin_tools);
        self.system_prompt = system_prompt.or(self.system_prompt.take());
        self.servers.extend(servers);
    }

    /// The mode the overrides set for `tool` of `server`, if any.
    pub fn confirm_override(&self, server: &str, tool: &str) -> Option<ConfirmMode> {
        self.servers.get(server).and_then(|overrides| overrides.mode_for(tool))
    }
}

/// `[agent]` as written.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentFile {
    provider: Option<Provider>,
    model: Option<String>,
    /// An OpenAI-compatible endpoint, like "http://localhost:11434/v1".
    base_url: Option<String>,
    /// When the agent asks before a tool call (default: ask).
    confirm: Option<Word<ConfirmMode>>,
    /// Model round trips per prompt.
    max_turns: Option<Count<usize, 1>>,
    /// Older turns are summarised as a request nears it.
    context_tokens: Option<Count<u64, 1000>>,
    stream: Option<bool>,
    system_prompt: Option<String>,
    /// Read/write/list files and run commands (server `builtin`).
    builtin_tools: Option<bool>,
    /// The workspace beyond the working directory (`~/` expanded, relative to this file's folder).
    directories: Option<Strings>,
    /// Rules `NAME` or `NAME(ARGUMENTS)`, like "run_command(git diff:*)" or "mcp__time__*".
    allow: Option<Strings>,
    deny: Option<Strings>,
    /// Variables run_command inherits beyond the safe set.
    command_env: Option<Strings>,
    /// Confirmation overrides, by server name.
    servers: Option<Ordered<ServerConfirmFile>>,
    /// The sandbox of run_command.
    sandbox: Option<SandboxFile>,
}

/// `[agent.servers.NAME]`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ServerConfirmFile {
    /// Never ask before this server's tools (unless `confirm` or `tools` say otherwise).
    trust: Option<bool>,
    confirm: Option<Word<ConfirmMode>>,
    /// By glob pattern on the server's own tool names, first match wins.
    tools: Option<Ordered<Word<ConfirmMode>>>,
}

/// One of [`PROVIDERS`].
struct Provider(String);

schema_as!(Provider, { "type": "string", "enum": PROVIDERS });

impl<'de> Deserialize<'de> for Provider {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        match PROVIDERS.contains(&name.as_str()) {
            true => Ok(Provider(name)),
            false => Err(serde::de::Error::custom(format!("is {name:?}; write one of {}", PROVIDERS.join(" | ")))),
        }
    }
}

/// Reads the `[agent]` table of `file`.
pub(crate) fn read(file: &Path, item: &Item) -> Result<AgentSettings, ConfigError> {
    let error = |error: DeError| {
        let field = error.path();
        match &error.kind {
            Kind::Unknown { key, known } => {
                let message = format!("is not a known key; the known keys here are {}", known.join(", "));
                ConfigError::InvalidSetting { file: file.into(), field: key.clone(), message }
            }
            _ => ConfigError::InvalidSetting { file: file.into(), field, message: error.message() },
        }
    };
    let table: AgentFile = from_node(Node::Item(item), "agent", TABLE_EXAMPLES).map_err(error)?;
    table.into_settings(file).map_err(|e| error(e.under("agent")))
}

impl AgentFile {
    fn into_settings(self, file: &Path) -> Result<AgentSettings, DeError> {
        let rules = |field: &str, list: Option<Strings>| {
            let parse = |rule: String| ToolRule::parse(&rule).map_err(|why| DeError::field(field, format!("rule {rule:?} {why}")));
            list.map_or_else(Vec::new, |list| list.0).into_iter().map(parse).collect::<Result<Vec<_>, _>>()
        };
        let base = file.parent().unwrap_or(Path::new("/"));
        let directories = self.directories.map_or_else(Vec::new, |list| list.0);
        let servers = self.servers.unwrap_or_default().0.into_iter().map(|(name, overrides)| {
            let tools = overrides.tools.unwrap_or_default().0.into_iter().map(|(pattern, mode)| (pattern, mode.0)).collect();
            (name, ServerConfirm { trust: overrides.trust.unwrap_or(false), confirm: overrides.confirm.map(|w| w.0), tools })
        });
        Ok(AgentSettings {
            provider: self.provider.map(|p| p.0),
            model: self.model,
            base_url: self.base_url,
            confirm: self.confirm.map(|w| w.0),
            max_turns: self.max_turns.map(|c| c.0),
            context_tokens: self.context_tokens.map(|c| c.0),
            stream: self.stream,
            system_prompt: self.system_prompt,
            builtin_tools: self.builtin_tools,
            servers: servers.collect(),
            directories: directories.iter().map(|directory| crate::user_dirs::expand_home(base, directory)).collect(),
            allow: rules("allow", self.allow)?,
            deny: rules("deny", self.deny)?,
            command_env: self.command_env.map_or_else(Vec::new, |list| list.0),
            sandbox: self.sandbox.map(SandboxFile::into_spec).transpose().map_err(|error| error.under("sandbox"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<AgentSettings, String> {
        let document: toml_edit::DocumentMut = text.parse().unwrap();
        read(Path::new("servers.toml"), &document["agent"]).map_err(|e| e.to_string())
    }

    #[test]
    fn reads_every_key_and_the_overrides_in_order() {
        let settings = parse(
            "[agent]\nprovider = \"anthropic\"\nmodel = \"m\"\nconfirm = \"always\"\nmax_turns = 7\nstream = false\n\
             [agent.servers.gh]\ntrust = true\ntools = { \"get_*\" = \"never\", delete_repo = \"always\", \"*\" = \"ask\" }\n",
        )
        .unwrap();
        assert_eq!(settings.provider.as_deref(), Some("anthropic"));
        assert_eq!((settings.confirm, settings.max_turns, settings.stream), (Some(ConfirmMode::Always), Some(7), Some(false)));
        assert_eq!(settings.confirm_override("gh", "get_issue"), Some(ConfirmMode::Never));
        assert_eq!(settings.confirm_override("gh", "delete_repo"), Some(ConfirmMode::Always));
        assert_eq!(settings.confirm_override("gh", "create_issue"), Some(ConfirmMode::Ask), "the catch-all pattern comes before trust");
        assert_eq!(settings.confirm_override("other", "x"), None);
        let trusted = parse("[agent.servers.time]\ntrust = true\n").unwrap();
        assert_eq!(trusted.confirm_override("time", "now"), Some(ConfirmMode::Never));
    }

    #[test]
    fn errors_name_the_file_the_key_and_what_to_write() {
        let error = parse("[agent]\nconfirm = \"sometimes\"\n").unwrap_err();
        assert_eq!(error, "servers.toml: `agent.confirm` is \"sometimes\"; write one of always | never | ask");
        assert!(parse("[agent]\nprovider = \"gemini\"\n").unwrap_err().contains("openai | anthropic | scripted"));
        assert!(parse("[agent]\nmax_turns = 0\n").unwrap_err().contains("at least 1"));
        assert!(parse("[agent]\nmodle = \"x\"\n").unwrap_err().contains("`agent.modle` is not a known key"));
        assert!(parse("[agent.servers.gh]\ntrusted = true\n").unwrap_err().contains("`agent.servers.gh.trusted` is not a known key"));
    }

    #[test]
    fn rules_directories_and_command_env_are_read_and_checked() {
        let settings = parse(
            "[agent]\nallow = [\"run_command(git diff:*)\", \"mcp__time__*\"]\ndeny = [\"run_command(rm:*)\"]\n\
             directories = [\"/abs\", \"rel\"]\ncommand_env = [\"GOPATH\"]\n",
        )
        .unwrap();
        assert_eq!(
            settings.allow[0],
            ToolRule { text: "run_command(git diff:*)".into(), tool: "run_command".into(), arguments: Some("git diff:*".into()) }
        );
        assert_eq!((settings.allow[1].tool.as_str(), settings.allow[1].arguments.as_deref()), ("mcp__time__*", None));
        assert_eq!(settings.deny.len(), 1);
        assert_eq!(settings.directories, vec![PathBuf::from("/abs"), PathBuf::from("rel")], "relative to the file's directory");
        assert_eq!(settings.command_env, vec!["GOPATH".to_string()]);
        assert!(parse("[agent]\nallow = [\"mcp__gh__x(a)\"]\n").unwrap_err().contains("only run_command, read_file"));
        assert!(parse("[agent]\ndeny = [\"run_command(rm:*\"]\n").unwrap_err().contains("without a closing"));
        assert!(parse("[agent]\ndeny = \"rm\"\n").unwrap_err().contains("must be a list of strings"));
    }

    #[test]
    fn merging_keeps_what_the_later_file_does_not_set() {
        let mut user = parse("[agent]\nmodel = \"a\"\nconfirm = \"never\"\n[agent.servers.x]\ntrust = true\n").unwrap();
        user.merge(parse("[agent]\nmodel = \"b\"\n[agent.servers.x]\nconfirm = \"always\"\n").unwrap());
        assert_eq!((user.model.as_deref(), user.confirm), (Some("b"), Some(ConfirmMode::Never)));
        assert_eq!(user.servers["x"], ServerConfirm { trust: false, confirm: Some(ConfirmMode::Always), tools: vec![] });
    }
}
