//! What the scanner of tools' texts may do (`integrity::scan` reads the
//! texts): `[scan] withhold = "high"` withholds, from every server of the
//! file, a tool whose findings reach that severity, as a changed pinned
//! tool is withheld; a server's own `withhold` overrides the file's.
//! `"off"` (the default) withholds nothing: the scanner's rules are
//! heuristics, and `mcpvisor scan` reports them either way
//! (docs/security.md says why).

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toml_edit::Item;

use super::de::{from_node, Node};
use super::values::{Word, TABLE_EXAMPLES};
use super::Keyword;
use crate::error::ConfigError;

/// How much a scanner's finding matters; ordered, `high` the most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Low,
    Medium,
    High,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }
}

impl std::str::FromStr for Severity {
    type Err = String;

    fn from_str(text: &str) -> Result<Severity, String> {
        match text {
            "low" => Ok(Severity::Low),
            "medium" => Ok(Severity::Medium),
            "high" => Ok(Severity::High),
            other => Err(format!("`{other}` is not a severity: low, medium or high")),
        }
    }
}

/// `withhold`: the least severity that withholds a tool, or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Withhold(pub Option<Severity>);

impl Keyword for Withhold {
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("off", Withhold(None)),
        ("low", Withhold(Some(Severity::Low))),
        ("medium", Withhold(Some(Severity::Medium))),
        ("high", Withhold(Some(Severity::High))),
    ];
}

/// `[scan]` as written.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScanFile {
    /// Withhold the tools whose scan findings reach this severity: "low", "medium", "high", or "off" (the default).
    withhold: Option<Word<Withhold>>,
}

/// The `[scan] withhold` of a file (`None`: not set).
pub fn read(file: &Path, item: &Item) -> Result<Option<Option<Severity>>, ConfigError> {
    if item.as_table_like().is_none() {
        let message = "must sit in a [scan] table, like [scan] withhold = \"high\"".into();
        return Err(ConfigError::InvalidSetting { file: file.into(), field: "scan".into(), message });
    }
    let table: ScanFile = from_node(Node::Item(item), "scan", TABLE_EXAMPLES).map_err(|error| error.into_setting_error(file))?;
    Ok(table.withhold.map(|word| word.0 .0))
}
