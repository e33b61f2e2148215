//! The shape of mcpvisor's TOML: the keys of a server table, the keywords
//! only files spell, the checks every reader and editor of a document
//! starts with, and the JSON Schema of the whole file ([`json_schema`]),
//! derived from the same types serde reads it into.

use std::collections::BTreeMap;
use std::path::Path;

use schemars::JsonSchema;
use toml_edit::{DocumentMut, Item, TableLike};

use super::read::ServerFile;
use crate::config::agent::AgentFile;
use crate::config::audit::AuditFile;
use crate::config::otel::TelemetryFile;
use crate::config::sandbox::SandboxDefaultFile;
use crate::config::serve::ServeFile;
use crate::config::Keyword;
use crate::error::ConfigError;

/// mcpvisor's configuration file (`servers.toml`, `.mcpvisor.toml`). Only
/// described: each table is read on its own ([`super::parse_with_agent`] and the others).
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields, title = "mcpvisor configuration")]
#[allow(dead_code)]
struct ConfigFile {
    /// One table per server: `[servers.NAME]`.
    servers: Option<BTreeMap<String, ServerFile>>,
    /// The agent: its model, limits and confirmations (docs/agent.md).
    agent: Option<AgentFile>,
    /// The audit log of tool calls (docs/operations.md).
    audit: Option<AuditFile>,
    /// How `mcpvisor serve` guards itself: tokens, keys, policies (docs/gateway.md).
    serve: Option<ServeFile>,
    sandbox: Option<SandboxDefaultFile>,
    /// OpenTelemetry export (docs/operations.md).
    telemetry: Option<TelemetryFile>,
}

/// An unset key is left out, as TOML has no null: the `null` that serde
/// allows for an `Option` is taken out of the schema.
fn without_null(schema: &mut schemars::Schema) {
    let Some(object) = schema.as_object_mut() else { return };
    if let Some(serde_json::Value::Array(words)) = object.get_mut("enum") {
        words.retain(|word| !word.is_null());
    }
    if let Some(serde_json::Value::Array(types)) = object.get_mut("type") {
        types.retain(|kind| kind != "null");
        if let [single] = types.as_slice() {
            let single = single.clone();
            object.insert("type".into(), single);
        }
    }
    let Some(serde_json::Value::Array(choices)) = object.get_mut("anyOf") else { return };
    choices.retain(|choice| choice.get("type").is_none_or(|kind| kind != "null"));
    if let [single] = choices.as_slice() {
        let Some(single) = single.as_object().cloned() else { return };
        object.remove("anyOf");
        object.extend(single);
    }
}

/// The JSON Schema (draft 2020-12) of mcpvisor's TOML, as `mcpvisor config schema` prints it.
pub(crate) fn json_schema() -> serde_json::Value {
    let settings = schemars::generate::SchemaSettings::draft2020_12().for_deserialize();
    let generator = settings.with_transform(schemars::transform::RecursiveTransform(without_null)).into_generator();
    generator.into_root_schema_for::<ConfigFile>().to_value()
}

/// `max_restarts` when `restart = "on-failure"` does not say.
pub const DEFAULT_MAX_RESTARTS: u32 = 5;

/// The keys of a server table, in the order new keys are written.
pub const KEYS: [&str; 32] = [
    "transport",
    "command",
    "args",
    "env",
    "cwd",
    "inherit_env",
    "url",
    "headers",
    "auth",
    "enabled",
    "timeout",
    "startup_timeout",
    "shutdown_grace",
    "max_timeout",
    "health_ping",
    "restart",
    "max_restarts",
    "intensity",
    "period",
    "backoff",
    "cooldown",
    "era",
    "roots",
    "tools",
    "pin",
    "max_in_flight",
    "max_queued",
    "max_frame",
    "max_list_pages",
    "max_list_items",
    "limits",
    "sandbox",
];

pub(super) const TOP_LEVEL_KEYS: [&str; 6] = ["servers", "agent", "audit", "serve", "sandbox", "telemetry"];
pub(super) fn parse_document(path: &Path, text: &str) -> Result<DocumentMut, ConfigError> {
    let document: DocumentMut = text.parse().map_err(|error: toml_edit::TomlError| ConfigError::Syntax {
        file: path.into(),
        syntax: "TOML",
        message: error.to_string(),
    })?;
    if let Some((key, _)) = document.iter().find(|(key, _)| !TOP_LEVEL_KEYS.contains(key)) {
        return Err(ConfigError::UnknownKey { file: path.into(), server: None, key: key.into(), known: TOP_LEVEL_KEYS.to_vec() });
    }
    Ok(document)
}

pub(super) fn not_a_servers_table(path: &Path) -> ConfigError {
    ConfigError::Syntax {
        file: path.into(),
        syntax: "mcpvisor configuration",
        message: "`servers` must be a table: write one [servers.NAME] table per server".into(),
    }
}

pub(super) fn servers_table<'d>(path: &Path, item: &'d Item) -> Result<&'d dyn TableLike, ConfigError> {
    item.as_table_like().ok_or_else(|| not_a_servers_table(path))
}

pub(super) fn servers_table_mut<'d>(path: &Path, document: &'d mut DocumentMut) -> Result<&'d mut dyn TableLike, ConfigError> {
    document.get_mut("servers").and_then(Item::as_table_like_mut).ok_or_else(|| not_a_servers_table(path))
}

pub(super) fn not_a_server_table(path: &Path, name: &str) -> ConfigError {
    ConfigError::InvalidField {
        file: path.into(),
        server: name.into(),
        field: format!("servers.{name}"),
        message: format!("must be a table: write [servers.{name}] with the server's keys below it"),
    }
}

/// The spelling of [`RestartPolicy`] without its count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Restart {
    Never,
    OnFailure,
    Always,
}

impl Keyword for Restart {
    const CHOICES: &'static [(&'static str, Self)] =
        &[("never", Restart::Never), ("on-failure", Restart::OnFailure), ("always", Restart::Always)];
}
