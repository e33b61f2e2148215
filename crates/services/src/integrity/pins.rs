//! Tool definitions pinned on first use (trust on first use, as mcp-scan
//! pins them): a server's tool whose definition changes later is withheld
//! until the user accepts the change.
//!
//! Invariants:
//! - a definition is the tool's name, title, description, input and
//!   output schemas and annotations; its digest is the SHA-256 of its JSON
//!   with sorted keys, so the order a server writes keys in is no change;
//! - pins are kept per server identity (its command and arguments, or its
//!   URL), not per configured name: a server renamed keeps its pins, and a
//!   name pointed at another program starts afresh;
//! - the first listing of an identity pins every tool; later, a tool never
//!   seen before is pinned as it comes (a server may add tools), while a
//!   tool whose digest differs, or that disappeared and came back, is
//!   pending: withheld until [`PinStore::accept`];
//! - the file is written whole (a temporary file renamed over it), 0600 in
//!   a 0700 directory, and only when a review or an acceptance changed it;
//!   one that cannot be read is set aside as
//!   `NAME.damaged` and pinning starts afresh, which stderr says.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a tool is withheld.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Its definition is not the one pinned.
    Changed,
    /// It disappeared from a listing and came back.
    Returned,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Changed => "its definition changed since it was pinned",
            Change::Returned => "it disappeared and came back",
        }
    }
}

/// A tool withheld from a server's listing, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Withheld {
    pub tool: String,
    pub change: Change,
}

/// A pending change as `tools --accept` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingChange {
    pub tool: String,
    pub change: Change,
    /// The pinned definition (none if the tool had none pinned).
    pub pinned: Option<Value>,
    pub offered: Value,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct PinFile {
    servers: BTreeMap<String, ServerPins>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct ServerPins {
    /// The configured name it was last seen under, for people reading the file.
    name: String,
    tools: BTreeMap<String, Pin>,
    #[serde(default)]
    pending: BTreeMap<String, Pending>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pin {
    digest: String,
    definition: Value,
    /// Missing from the last listing.
    #[serde(default)]
    absent: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pending {
    digest: String,
    definition: Value,
    change: Change,
}

/// The pins of every server, shared by the connections of one runtime.
#[derive(Debug)]
pub struct PinStore {
    /// Where they are kept; `None`: in memory only.
    path: Option<PathBuf>,
    file: Mutex<PinFile>,
}

impl PinStore {
    /// Pins kept in `path` (read now if it exists).
    pub fn open(path: PathBuf) -> PinStore {
        let file = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|error| {
                let aside = path.with_extension("damaged");
                let _ = std::fs::rename(&path, &aside);
                eprintln!(
                    "mcpvisor: warning: {} could not be read ({error}); set aside as {}, tools are pinned afresh",
                    path.display(),
                    aside.display()
                );
                PinFile::default()
            }),
            Err(_) => PinFile::default(),
        };
        PinStore { path: Some(path), file: Mutex::new(file) }
    }

    /// Pins kept in memory only (an embedder's choice, and tests').
    pub fn in_memory() -> PinStore {
        PinStore { path: None, file: Mutex::default() }
    }

    /// Reviews a listing of the server `identity` (configured as `name`):
    /// pins what is first seen, and answers what is withheld.
    pub fn review(&self, identity: &str, name: &str, listed: &[(String, Value)]) -> Vec<Withheld> {
        let mut file = self.file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let known = file.servers.contains_key(identity);
        let pins = file.servers.entry(identity.to_string()).or_default();
        let mut changed = !known || pins.name != name;
        pins.name = name.to_string();
        let mut withheld = Vec::new();
        for (tool, definition) in listed {
            let digest = digest(definition);
            match pins.tools.get_mut(tool) {
                Some(pin) if pin.digest == digest && !pin.absent => {
                    changed |= pins.pending.remove(tool).is_some();
                }
                Some(pin) => {
                    let change = if pin.absent { Change::Returned } else { Change::Changed };
                    changed |= pins.pending.get(tool).is_none_or(|pending| pending.digest != digest || pending.change != change);
                    pins.pending.insert(tool.clone(), Pending { digest, definition: definition.clone(), change });
                    withheld.push(Withheld { tool: tool.clone(), change });
                }
                None => {
                    // A new tool: pinned as it comes (on the first listing, every tool is).
                    pins.tools.insert(tool.clone(), Pin { digest, definition: definition.clone(), absent: false });
                    changed = true;
                }
            }
        }
        for (tool, pin) in pins.tools.iter_mut() {
            if !pin.absent && !listed.iter().any(|(name, _)| name == tool) {
                pin.absent = true;
                pins.pending.remove(tool);
                changed = true;
            }
        }
        if changed {
            self.save(&file);
        }
        withheld
    }

    /// The changes of `identity` waiting to be accepted.
    pub fn pending(&self, identity: &str) -> Vec<PendingChange> {
        let file = self.file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(pins) = file.servers.get(identity) else { return Vec::new() };
        pins.pending
            .iter()
            .map(|(tool, pending)| PendingChange {
                tool: tool.clone(),
                change: pending.change,
                pinned: pins.tools.get(tool).map(|pin| pin.definition.clone()),
                offered: pending.definition.clone(),
            })
            .collect()
    }

    /// Accepts the pending changes of `identity` (of one `tool`, or all):
    /// the offered definitions become the pinned ones. Answers what was accepted.
    pub fn accept(&self, identity: &str, tool: Option<&str>) -> Vec<String> {
        let mut file = self.file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(pins) = file.servers.get_mut(identity) else { return Vec::new() };
        let names: Vec<String> = pins.pending.keys().filter(|name| tool.is_none_or(|tool| tool == name.as_str())).cloned().collect();
        for name in &names {
            if let Some(pending) = pins.pending.remove(name) {
                pins.tools.insert(name.clone(), Pin { digest: pending.digest, definition: pending.definition, absent: false });
            }
        }
        if !names.is_empty() {
            self.save(&file);
        }
        names
    }

    fn save(&self, file: &PinFile) {
        let Some(path) = &self.path else { return };
        if let Err(error) = write_private(path, file) {
            tracing::warn!("cannot write the tool pins to {}: {error}", path.display());
        }
    }
}

/// The file pins are kept in: `$XDG_STATE_HOME/mcpvisor/tool-pins.json`
/// (else under `~/.local/state`); `None` when not even `HOME` is set.
pub fn pins_file(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    crate::user_dirs::state_dir(env).map(|dir| dir.join("tool-pins.json"))
}

/// The identity pins are kept under: `stdio:` and the command line, or `url:` and the URL;
/// `None` for an in-process server, the embedding program's own code, with no
/// command line to be known by: nothing of it is pinned.
pub fn identity(config: &crate::config::ServerConfig) -> Option<String> {
    if config.transport == crate::config::Transport::InProcess {
        return None;
    }
    Some(match &config.url {
        Some(url) => format!("url:{url}"),
        None => format!(
            "stdio:{}",
            std::iter::once(config.command.as_str()).chain(config.args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ")
        ),
    })
}

/// The definition of `tool` that is pinned: the fields the model reads.
pub fn definition(tool: &rmcp::model::Tool) -> Value {
    let whole = serde_json::to_value(tool).unwrap_or(Value::Null);
    let keep = ["name", "title", "description", "inputSchema", "outputSchema", "annotations"];
    Value::Object(
        whole
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(key, _)| keep.contains(&key.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

/// `sha256:` and the hex digest of `definition`'s JSON (keys sorted: serde_json's maps are ordered).
fn digest(definition: &Value) -> String {
    crate::config::trust::digest(serde_json::to_string(definition).unwrap_or_default().as_bytes())
}

/// Writes `file` to `path` whole, 0600 in a 0700 directory.
fn write_private(path: &Path, file: &PinFile) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        crate::user_dirs::ensure_private(dir).map_err(|error| error.to_string())?;
    }
    let text = serde_json::to_string_pretty(file).map_err(|error| error.to_string())?;
    crate::config::file::write_atomically(path, &text).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests;
