//! Codex's `config.toml` (`~/.codex/config.toml`, a trusted project's
//! `.codex/config.toml`): one `[mcp_servers.NAME]` table per server.
//!
//! | Codex | mcpvisor |
//! | --- | --- |
//! | `command`, `args`, `env`, `cwd` | the same (a stdio server) |
//! | `url` | a Streamable HTTP server |
//! | `bearer_token_env_var = "VAR"` | `auth = bearer ${VAR}` |
//! | `bearer_token` | `auth = bearer` with that token |
//! | `http_headers`; `env_http_headers = { H = "VAR" }` | `headers`; `H = ${VAR}` |
//! | `enabled` | `enabled` |
//! | `startup_timeout_sec` (or `_ms`), `tool_timeout_sec` | start-up and call time-outs |
//! | `enabled_tools`, `disabled_tools` | the tool filter's allow and deny lists |
//!
//! Codex reads values as they are, so a `$` in them stays a `$`. Other keys
//! (`env_vars`, `scopes`, ...) are reported as unmapped.

use std::path::Path;

use serde_json::{Map, Value as Json};
use toml_edit::{DocumentMut, Item, Value};

use super::{Context, Entry, Format, ServerResult};
use crate::config::expand::{escape, Syntax};
use crate::config::{Auth, ServerConfig, Transport};
use crate::error::ConfigError;

/// Whether a file is Codex's: TOML with `mcp_servers` and without mcpvisor's `servers`.
pub fn is_codex(path: &Path, text: &str) -> bool {
    let toml = path.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("toml"));
    toml && text.parse::<DocumentMut>().is_ok_and(|doc| doc.contains_key("mcp_servers") && !doc.contains_key("servers"))
}

/// Every `[mcp_servers.NAME]` of the file, in the order of their names.
pub(super) fn for_each_server(path: &Path, text: &str, mut each: impl FnMut(Format, ServerResult)) -> Result<Format, ConfigError> {
    let syntax_error = |message: String| ConfigError::Syntax { file: path.into(), syntax: "TOML", message, cause: None };
    let document = text.parse::<DocumentMut>().map_err(|error| ConfigError::syntax(path, "TOML", error))?;
    let Some(servers) = document.get("mcp_servers") else { return Ok(Format::Codex) };
    let servers = servers.as_table_like().ok_or_else(|| syntax_error("`mcp_servers` must be a table with one table per server".into()))?;
    let inputs = Default::default();
    let context = Context { file: path, format: Format::Codex, workspace: super::workspace_of(path), inputs: &inputs };
    let mut entries: Vec<(&str, &Item)> = servers.iter().collect();
    entries.sort_by_key(|(name, _)| *name);
    for (name, item) in entries {
        each(Format::Codex, context.server(name, &json_of_item(item)));
    }
    Ok(Format::Codex)
}

/// A TOML item as JSON (dates become their text).
fn json_of_item(item: &Item) -> Json {
    match item {
        Item::Value(value) => json_of_value(value),
        Item::Table(table) => Json::Object(table.iter().map(|(key, item)| (key.to_string(), json_of_item(item))).collect()),
        Item::ArrayOfTables(tables) => Json::Array(tables.iter().map(|table| json_of_item(&Item::Table(table.clone()))).collect()),
        Item::None => Json::Null,
    }
}

fn json_of_value(value: &Value) -> Json {
    match value {
        Value::String(text) => Json::String(text.value().clone()),
        Value::Integer(number) => Json::from(*number.value()),
        Value::Float(number) => serde_json::Number::from_f64(*number.value()).map_or(Json::Null, Json::Number),
        Value::Boolean(flag) => Json::Bool(*flag.value()),
        Value::Datetime(date) => Json::String(date.value().to_string()),
        Value::Array(array) => Json::Array(array.iter().map(json_of_value).collect()),
        Value::InlineTable(table) => {
            Json::Object(table.iter().map(|(key, value)| (key.to_string(), json_of_value(value))).collect::<Map<_, _>>())
        }
    }
}

impl Entry<'_> {
    pub(super) fn codex(&self) -> Result<ServerConfig, ConfigError> {
        let mut config = match (self.text("command")?, self.text("url")?) {
            (Some(command), _) => {
                let mut config = ServerConfig::stdio(self.server, command, self.strings("args")?.unwrap_or_default());
                config.env = self.map("env")?;
                config.cwd = self.text("cwd")?.map(Into::into);
                config
            }
            (None, Some(url)) => {
                let mut config = ServerConfig::remote(self.server, Transport::Http, url);
                config.headers = self.map("http_headers")?;
                for (header, variable) in self.map("env_http_headers")? {
                    config.headers.insert(header, format!("${{{variable}}}"));
                }
                config.auth = match (self.raw_text("bearer_token_env_var")?, self.raw_text("bearer_token")?) {
                    (Some(variable), _) => Some(Auth::Bearer { token: format!("${{{variable}}}") }),
                    (None, Some(token)) => Some(Auth::Bearer { token: escape(&token, Syntax::BracedOrBare) }),
                    (None, None) => None,
                };
                config
            }
            (None, None) => return Err(self.invalid("", "has neither `command` (a local server) nor `url` (a remote one)")),
        };
        config.enabled = self.bool("enabled")?.unwrap_or(true);
        if let Some(startup) = self.seconds("startup_timeout_sec")?.or(self.milliseconds("startup_timeout_ms")?) {
            config.timeouts.startup = startup;
        }
        if let Some(call) = self.seconds("tool_timeout_sec")? {
            config.timeouts.call = call;
        }
        config.tools.allow = self.strings("enabled_tools")?.unwrap_or_default();
        config.tools.deny = self.strings("disabled_tools")?.unwrap_or_default();
        Ok(config)
    }
}
