//! `[servers.X.sandbox]`, `[sandbox] default` and `[agent.sandbox]`: what a
//! sandboxed process may touch, as plain values. Enforcing them is
//! the sandbox service's work, a layer above.

use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use toml_edit::Item;

use super::de::{from_node, DeError, Node};
use super::values::{scalar_type, strings, Scalar, TABLE_EXAMPLES};
use crate::error::ConfigError;

/// The keys of a sandbox table, in the order they are written.
pub const SANDBOX_KEYS: [&str; 9] = ["read", "write", "network", "memory", "processes", "cpu_seconds", "open_files", "required", "preset"];

/// The only preset: system directories, the command's install directory,
/// the working directory, a private temporary directory and the package
/// caches of `npx` and `uvx` (docs/security.md, "Sandboxes").
pub const STANDARD: &str = "standard";

/// Where a sandboxed process may connect.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Network {
    /// No restriction (the default: most servers call an API).
    #[default]
    Any,
    /// No network at all.
    None,
    /// A private loopback only (its own 127.0.0.1, not the host's).
    Loopback,
    /// TCP connections to these `host:port`s (the kernel enforces the ports only).
    Allow(Vec<String>),
}

impl Network {
    /// The ports of an allow-list.
    pub fn ports(&self) -> Vec<u16> {
        match self {
            Network::Allow(targets) => targets.iter().filter_map(|t| t.rsplit_once(':')?.1.parse().ok()).collect(),
            _ => Vec::new(),
        }
    }
}

/// One sandbox: the standard preset plus these paths, and these limits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SandboxSpec {
    /// Readable beyond the preset (`~` expanded when applied).
    pub read: Vec<PathBuf>,
    /// Readable and writable beyond the preset.
    pub write: Vec<PathBuf>,
    pub network: Network,
    /// Bytes: the cgroup's memory limit, else the address space.
    pub memory: Option<u64>,
    /// Processes and threads at once (pids cgroup; `RLIMIT_NPROC` too).
    pub processes: Option<u64>,
    pub cpu_seconds: Option<u64>,
    pub open_files: Option<u64>,
    /// Refuse to start when the kernel cannot enforce all of it.
    pub required: bool,
}

/// A sandbox table as written: `{ read = [...], network = "none", memory = "512MiB", ... }`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SandboxFile {
    /// Readable beyond the standard preset (`~` expanded when applied).
    read: Option<PathList>,
    /// Readable and writable beyond the preset.
    write: Option<PathList>,
    network: Option<NetworkFile>,
    /// Bytes, or a size with a unit: `"512MiB"`, `"2GiB"`, `"1GB"`.
    memory: Option<Size>,
    processes: Option<AboveZero>,
    cpu_seconds: Option<AboveZero>,
    open_files: Option<AboveZero>,
    /// Refuse to start when the kernel cannot enforce all of it.
    required: Option<bool>,
    /// The only preset, `"standard"`: a table with nothing else to say.
    #[serde(rename = "preset")]
    _preset: Option<Preset>,
}

impl SandboxFile {
    pub(crate) fn into_spec(self) -> Result<SandboxSpec, DeError> {
        let paths = |list: Option<PathList>| list.map_or_else(Vec::new, |list| list.0.into_iter().map(PathBuf::from).collect());
        Ok(SandboxSpec {
            read: paths(self.read),
            write: paths(self.write),
            network: self.network.map_or(Network::Any, |n| n.0),
            memory: self.memory.map(|s| s.0),
            processes: self.processes.map(|n| n.0),
            cpu_seconds: self.cpu_seconds.map(|n| n.0),
            open_files: self.open_files.map(|n| n.0),
            required: self.required.unwrap_or(false),
        })
    }
}

/// Reads a sandbox table at `field` (e.g. `sandbox`) of `server` (or
/// `agent`), naming the file, the owner and the key in every error.
pub fn read(file: &Path, owner: &str, field: &str, item: &Item) -> Result<SandboxSpec, ConfigError> {
    let table: SandboxFile = from_node(Node::Item(item), field, TABLE_EXAMPLES).map_err(|error| error.into_server_error(file, owner))?;
    table.into_spec().map_err(|error| error.under(field).into_server_error(file, owner))
}

/// `[sandbox]`: the file's default sandbox.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SandboxDefaultFile {
    /// The sandbox of stdio servers without a `sandbox` table of their own.
    default: Option<DefaultSandbox>,
}

scalar_type!(
    /// `"standard"` (the preset) or `"none"`.
    DefaultSandbox(bool),
    "\"standard\" or \"none\"",
    { "type": "string", "enum": [STANDARD, "none"] },
    |value: Scalar| match value {
        Scalar::Str(word) if word == STANDARD => Some(true),
        Scalar::Str(word) if word == "none" => Some(false),
        _ => None,
    }
);

/// `[sandbox] default = "standard" | "none"`: the sandbox of servers without
/// a table of their own (`None`: no sandbox).
pub fn read_default(file: &Path, item: &Item) -> Result<Option<SandboxSpec>, ConfigError> {
    if item.as_table_like().is_none() {
        let message = "must sit in a [sandbox] table".into();
        return Err(ConfigError::InvalidSetting { file: file.into(), field: "sandbox.default".into(), message });
    }
    let table: SandboxDefaultFile =
        from_node(Node::Item(item), "sandbox", TABLE_EXAMPLES).map_err(|error| error.into_setting_error(file))?;
    Ok(table.default.is_some_and(|d| d.0).then(SandboxSpec::default))
}

/// The table as written back to a file (an inline table; defaults left out).
pub fn to_value(spec: &SandboxSpec) -> toml_edit::Value {
    let mut table = toml_edit::InlineTable::new();
    let paths = |paths: &[PathBuf]| paths.iter().map(|p| p.to_string_lossy().into_owned()).collect::<toml_edit::Array>();
    if !spec.read.is_empty() {
        table.insert("read", paths(&spec.read).into());
    }
    if !spec.write.is_empty() {
        table.insert("write", paths(&spec.write).into());
    }
    match &spec.network {
        Network::Any => {}
        Network::None => _ = table.insert("network", "none".into()),
        Network::Loopback => _ = table.insert("network", "loopback".into()),
        Network::Allow(targets) => _ = table.insert("network", targets.iter().collect::<toml_edit::Array>().into()),
    }
    let counts =
        [("memory", spec.memory), ("processes", spec.processes), ("cpu_seconds", spec.cpu_seconds), ("open_files", spec.open_files)];
    for (key, value) in counts {
        if let Some(n) = value.and_then(|n| i64::try_from(n).ok()) {
            table.insert(key, n.into());
        }
    }
    if spec.required {
        table.insert("required", true.into());
    }
    if table.is_empty() {
        table.insert("preset", STANDARD.into());
    }
    toml_edit::Value::InlineTable(table)
}

pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(unit).filter(|b| *b > 0)
}

const PATHS: &str = "an array of paths, like [\"~/.config/gh\"]";
const NETWORK: &str = "\"none\", \"loopback\", \"any\" or a list of \"host:port\", like [\"api.github.com:443\"]";
const SIZE: &str = "a size, like \"512MiB\", \"2GiB\" or a number of bytes";

/// `["~/.config/gh"]`.
#[derive(JsonSchema)]
#[schemars(transparent)]
struct PathList(Vec<String>);

impl<'de> Deserialize<'de> for PathList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        strings(deserializer, PATHS).map(PathList)
    }
}

/// `"none"`, `"loopback"`, `"any"` or `["host:port", ...]`.
struct NetworkFile(Network);

impl<'de> Deserialize<'de> for NetworkFile {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> Visitor<'de> for Either {
            type Value = Network;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(NETWORK)
            }
            fn visit_str<E: de::Error>(self, word: &str) -> Result<Network, E> {
                match word {
                    "any" => Ok(Network::Any),
                    "none" => Ok(Network::None),
                    "loopback" => Ok(Network::Loopback),
                    _ => Err(E::custom(format!("must be {NETWORK}"))),
                }
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Network, A::Error> {
                let mut targets = Vec::new();
                while let Some(target) = seq.next_element::<String>()? {
                    let port =
                        target.rsplit_once(':').and_then(|(host, port)| port.parse::<u16>().ok().filter(|p| *p > 0 && !host.is_empty()));
                    if port.is_none() {
                        return Err(de::Error::custom(format!("has {target:?}, which is not \"host:port\" with a port from 1 to 65535")));
                    }
                    targets.push(target);
                }
                Ok(Network::Allow(targets))
            }
        }
        deserializer.deserialize_any(Either).map(NetworkFile)
    }
}

impl JsonSchema for NetworkFile {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "Network".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "anyOf": [
                { "type": "string", "enum": ["any", "none", "loopback"] },
                { "type": "array", "items": { "type": "string", "pattern": "^.+:[0-9]+$" } }
            ]
        })
    }
}

scalar_type!(
    /// Bytes, or a size with a unit.
    Size(u64),
    SIZE,
    {
        "description": SIZE,
        "anyOf": [{ "type": "integer", "minimum": 1 }, { "type": "string", "pattern": "^\\s*[0-9]+\\s*(B|K|KiB|M|MiB|G|GiB|KB|MB|GB)?\\s*$" }]
    },
    |value: Scalar| match value {
        Scalar::Int(bytes) => u64::try_from(bytes).ok().filter(|b| *b > 0),
        Scalar::Str(text) => parse_size(&text),
        _ => None,
    }
);

scalar_type!(
    /// A whole number above zero.
    AboveZero(u64),
    "a whole number above zero",
    { "type": "integer", "minimum": 1 },
    |value: Scalar| match value {
        Scalar::Int(n) => u64::try_from(n).ok().filter(|n| *n > 0),
        _ => None,
    }
);

scalar_type!(
    /// `preset = "standard"`.
    Preset(()),
    "\"standard\" (the only preset)",
    { "const": STANDARD },
    |value: Scalar| matches!(value, Scalar::Str(word) if word == STANDARD).then_some(())
);

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SandboxSpec, String> {
        let document: toml_edit::DocumentMut = text.parse().unwrap();
        read(Path::new("servers.toml"), "gh", "sandbox", &document["sandbox"]).map_err(|e| e.to_string())
    }

    #[test]
    fn a_full_table_reads_and_mistakes_are_named() {
        let spec = parse(
            "[sandbox]\nread = [\"~/.config/gh\"]\nnetwork = [\"api.github.com:443\", \"127.0.0.1:8080\"]\nmemory = \"512MiB\"\nprocesses = 64\nrequired = true\n",
        )
        .unwrap();
        assert_eq!(spec.read, vec![PathBuf::from("~/.config/gh")]);
        assert_eq!(spec.network.ports(), vec![443, 8080]);
        assert_eq!(spec.memory, Some(512 << 20));
        assert_eq!(spec.processes, Some(64));
        assert!(spec.required);
        assert!(parse("[sandbox]\nnetwork = \"lan\"\n").unwrap_err().contains("sandbox.network"));
        assert!(parse("[sandbox]\nnetwork = [\"example.com\"]\n").unwrap_err().contains("host:port"));
        assert!(parse("[sandbox]\nmemory = \"lots\"\n").unwrap_err().contains("512MiB"));
        assert!(parse("[sandbox]\nprocesses = 0\n").unwrap_err().contains("above zero"));
        assert!(parse("[sandbox]\nwrtie = []\n").unwrap_err().contains("wrtie"));
        let written = format!("sandbox = {}\n", to_value(&spec));
        let document: toml_edit::DocumentMut = written.parse().unwrap();
        assert_eq!(read(Path::new("f"), "gh", "sandbox", &document["sandbox"]).unwrap(), spec);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512MiB"), Some(512 << 20));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("1GB"), Some(1_000_000_000));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("0MiB"), None);
        assert_eq!(parse_size("99999999999999999999GiB"), None);
    }
}
