//! The shape of mcpvisor's TOML: the keys of a server table, the keywords
//! only files spell, and the checks every reader and editor of a document
//! starts with (its JSON Schema is [`super::json_schema`]).

use std::path::Path;

use toml_edit::{DocumentMut, Item, TableLike};

use crate::config::Keyword;
use crate::error::ConfigError;

/// `max_restarts` when `restart = "on-failure"` does not say.
pub const DEFAULT_MAX_RESTARTS: u32 = 5;

/// The keys of a server table, in the order new keys are written.
pub const KEYS: [&str; 35] = [
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
    "secrets",
    "withhold",
    "max_in_flight",
    "max_queued",
    "max_frame",
    "max_list_pages",
    "max_list_items",
    "limits",
    "sandbox",
    "per_caller",
];

pub(super) const TOP_LEVEL_KEYS: [&str; 7] = ["servers", "agent", "audit", "serve", "sandbox", "scan", "telemetry"];
pub(super) fn parse_document(path: &Path, text: &str) -> Result<DocumentMut, ConfigError> {
    let document: DocumentMut = text.parse().map_err(|error: toml_edit::TomlError| ConfigError::syntax(path, "TOML", error))?;
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
        cause: None,
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
