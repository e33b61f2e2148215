//! The `[audit]` table of mcpvisor's TOML: where the audit log of tool
//! calls goes, as plain data; the telemetry writes the log these values describe.
//!
//! ```toml
//! [audit]
//! path = "audit/calls.jsonl"   # relative to the file's directory; "-" is stdout
//! max_size = "10MB"            # rotated before it would pass this (B, KB, MB, GB; or a number of bytes)
//! keep = 5                     # rotated files kept: calls.jsonl.1 … calls.jsonl.5
//! arguments = "digest"         # digest (SHA-256) | redacted (secrets masked)
//! ```
//!
//! The table says how to log; whether to log is the program's choice: a
//! gateway turns it on (with these settings, or its defaults), other
//! commands only when the user asks. A later file's table replaces an
//! earlier one's whole.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;
use toml_edit::Item;

use super::de::{from_node, Node};
use super::values::{scalar_type, Count, Scalar, TABLE_EXAMPLES};
use crate::error::ConfigError;

/// Where audit lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditTarget {
    Stdout,
    /// A file, created with its directory if needed, appended to.
    File(PathBuf),
}

/// What a line says of the arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuditArguments {
    /// Their SHA-256 only: proves what was sent without keeping it.
    #[default]
    Digest,
    /// The arguments, secrets masked.
    Redacted,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditConfig {
    pub target: AuditTarget,
    /// A file is rotated before it would pass this many bytes.
    pub max_size: u64,
    /// Rotated files kept (`FILE.1` … `FILE.{keep}`).
    pub keep: usize,
    pub arguments: AuditArguments,
    /// Lines waiting for the writer at most; more are dropped and counted.
    pub buffer: usize,
}

impl AuditConfig {
    /// A file with the defaults: 10 MB, 5 rotated files kept, digests.
    pub fn file(path: impl Into<PathBuf>) -> AuditConfig {
        AuditConfig {
            target: AuditTarget::File(path.into()),
            max_size: 10_000_000,
            keep: 5,
            arguments: AuditArguments::Digest,
            buffer: 4096,
        }
    }

    pub fn stdout() -> AuditConfig {
        AuditConfig { target: AuditTarget::Stdout, ..AuditConfig::file("") }
    }
}

/// `[audit]` as written.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuditFile {
    /// The log file, relative to this file's folder; `"-"` is stdout.
    path: Option<LogPath>,
    /// Rotated before it would pass this: `"10MB"` (B, KB, MB, GB) or a number of bytes.
    max_size: Option<LogSize>,
    /// Rotated files kept.
    keep: Option<Count<usize, 0>>,
    arguments: Option<Arguments>,
    /// Lines waiting for the writer at most.
    buffer: Option<Count<usize, 1>>,
}

scalar_type!(LogPath(String), "a file path, or \"-\" for stdout", { "type": "string", "minLength": 1 }, |value: Scalar| match value {
    Scalar::Str(text) if !text.is_empty() => Some(text),
    _ => None,
});

scalar_type!(
    LogSize(u64),
    "a size of at least 1KB, like \"10MB\" or a number of bytes",
    { "anyOf": [{ "type": "integer", "minimum": 1024 }, { "type": "string", "pattern": "^\\s*[0-9]+\\s*[A-Za-z]+\\s*$" }] },
    |value: Scalar| match value {
        Scalar::Int(n) => u64::try_from(n).ok(),
        Scalar::Str(text) => parse_size(&text),
        _ => None,
    }
    .filter(|n| *n >= 1024)
);

scalar_type!(
    /// `digest` (SHA-256) or `redacted` (secrets masked).
    Arguments(AuditArguments),
    "\"digest\" or \"redacted\"",
    { "type": "string", "enum": ["digest", "redacted"] },
    |value: Scalar| match value {
        Scalar::Str(word) if word == "digest" => Some(AuditArguments::Digest),
        Scalar::Str(word) if word == "redacted" => Some(AuditArguments::Redacted),
        _ => None,
    }
);

/// Reads `[audit]` of the file at `path`.
pub(crate) fn read(path: &Path, item: &Item) -> Result<AuditConfig, ConfigError> {
    if item.as_table_like().is_none() {
        let message = "must be a table: write [audit] with path = \"...\" below it".into();
        return Err(ConfigError::InvalidSetting { file: path.into(), field: "audit.".into(), message });
    }
    let table: AuditFile = from_node(Node::Item(item), "audit", TABLE_EXAMPLES).map_err(|error| error.into_setting_error(path))?;
    let mut config = AuditConfig::stdout();
    if let Some(LogPath(text)) = table.path {
        config.target = match text.as_str() {
            "-" => AuditTarget::Stdout,
            text => AuditTarget::File(path.parent().unwrap_or(Path::new("")).join(text)),
        };
    }
    config.max_size = table.max_size.map_or(config.max_size, |size| size.0);
    config.keep = table.keep.map_or(config.keep, |keep| keep.0);
    config.arguments = table.arguments.map_or(config.arguments, |arguments| arguments.0);
    config.buffer = table.buffer.map_or(config.buffer, |buffer| buffer.0);
    Ok(config)
}

/// `"10MB"`, `"512KB"`, `"1GB"`, `"2048B"` (decimal units).
fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.trim().parse().ok()?;
    let unit = match unit.trim().to_ascii_uppercase().as_str() {
        "B" => 1,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return None,
    };
    number.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn audit(text: &str) -> Result<AuditConfig, String> {
        let document: toml_edit::DocumentMut = text.parse().unwrap();
        read(Path::new("/etc/mcpvisor/servers.toml"), &document["audit"]).map_err(|e| e.to_string())
    }

    #[test]
    fn reads_every_key_and_resolves_the_path_against_the_file() {
        let config =
            audit("[audit]\npath = \"logs/calls.jsonl\"\nmax_size = \"2MB\"\nkeep = 2\narguments = \"redacted\"\nbuffer = 16\n").unwrap();
        assert_eq!(config.target, AuditTarget::File("/etc/mcpvisor/logs/calls.jsonl".into()));
        assert_eq!((config.max_size, config.keep, config.arguments, config.buffer), (2_000_000, 2, AuditArguments::Redacted, 16));
        assert_eq!(audit("[audit]\npath = \"-\"\n").unwrap(), AuditConfig::stdout());
    }

    #[test]
    fn errors_name_the_file_and_the_key() {
        for (body, expected) in [
            ("max_size = \"10 parsecs\"", "`audit.max_size` must be a size of at least 1KB"),
            ("arguments = \"all\"", "`audit.arguments` must be \"digest\" or \"redacted\""),
            ("keep = -1", "`audit.keep` must be a whole number"),
            ("file = \"x\"", "unknown key `audit.file`; the known keys are path, max_size"),
        ] {
            let message = audit(&format!("[audit]\n{body}\n")).unwrap_err();
            assert!(message.starts_with("/etc/mcpvisor/servers.toml: ") && message.contains(expected), "{message}");
        }
    }
}
