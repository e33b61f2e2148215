//! `[servers.X.sandbox]`, `[sandbox] default` and `[agent.sandbox]`: what a
//! sandboxed process may touch, as plain values. Enforcing them is
//! the sandbox service's work, a layer above.

use std::path::{Path, PathBuf};

use toml_edit::Item;

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

/// Reads a sandbox table at `field` (e.g. `sandbox`) of `server` (or
/// `agent`), naming the file, the owner and the key in every error.
pub fn read(file: &Path, owner: &str, field: &str, item: &Item) -> Result<SandboxSpec, ConfigError> {
    let invalid = |key: &str, message: String| ConfigError::InvalidField {
        file: file.into(),
        server: owner.into(),
        field: format!("{field}.{key}"),
        message,
    };
    let table = item.as_table_like().ok_or_else(|| ConfigError::InvalidField {
        file: file.into(),
        server: owner.into(),
        field: field.into(),
        message: format!("must be a table, like {{ network = \"none\", memory = \"512MiB\" }}, not {}", item.type_name()),
    })?;
    let mut spec = SandboxSpec::default();
    for (key, value) in table.iter() {
        let count = |value: &Item| {
            value.as_integer().filter(|n| *n > 0).map(|n| n as u64).ok_or_else(|| invalid(key, "must be a whole number above zero".into()))
        };
        match key {
            "read" | "write" => {
                let paths = strings(value).ok_or_else(|| invalid(key, "must be an array of paths, like [\"~/.config/gh\"]".into()))?;
                let paths = paths.into_iter().map(PathBuf::from);
                if key == "read" {
                    spec.read.extend(paths)
                } else {
                    spec.write.extend(paths)
                }
            }
            "network" => spec.network = network(value).map_err(|message| invalid(key, message))?,
            "memory" => {
                spec.memory =
                    Some(size(value).ok_or_else(|| invalid(key, "must be a size, like \"512MiB\", \"2GiB\" or a number of bytes".into()))?)
            }
            "processes" => spec.processes = Some(count(value)?),
            "cpu_seconds" => spec.cpu_seconds = Some(count(value)?),
            "open_files" => spec.open_files = Some(count(value)?),
            "required" => spec.required = value.as_bool().ok_or_else(|| invalid(key, "must be true or false".into()))?,
            "preset" => {
                if value.as_str() != Some(STANDARD) {
                    return Err(invalid(key, format!("must be \"{STANDARD}\" (the only preset)")));
                }
            }
            _ => {
                return Err(ConfigError::UnknownKey {
                    file: file.into(),
                    server: Some(owner.into()),
                    key: format!("{field}.{key}"),
                    known: SANDBOX_KEYS.to_vec(),
                })
            }
        }
    }
    Ok(spec)
}

/// `[sandbox] default = "standard" | "none"`: the sandbox of servers without
/// a table of their own (`None`: no sandbox).
pub fn read_default(file: &Path, item: &Item) -> Result<Option<SandboxSpec>, ConfigError> {
    let wrong = |message: String| ConfigError::InvalidSetting { file: file.into(), field: "sandbox.default".into(), message };
    let table = item.as_table_like().ok_or_else(|| wrong("must sit in a [sandbox] table".into()))?;
    if let Some((key, _)) = table.iter().find(|(key, _)| *key != "default") {
        return Err(ConfigError::UnknownKey { file: file.into(), server: None, key: format!("sandbox.{key}"), known: vec!["default"] });
    }
    match table.get("default").map(|item| item.as_str()) {
        None | Some(Some("none")) => Ok(None),
        Some(Some(STANDARD)) => Ok(Some(SandboxSpec::default())),
        _ => Err(wrong(format!("must be \"{STANDARD}\" or \"none\""))),
    }
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

fn strings(item: &Item) -> Option<Vec<String>> {
    item.as_array()?.iter().map(|v| v.as_str().map(str::to_owned)).collect()
}

fn network(item: &Item) -> Result<Network, String> {
    let wrong = || "must be \"none\", \"loopback\", \"any\" or a list of \"host:port\", like [\"api.github.com:443\"]".to_string();
    if let Some(word) = item.as_str() {
        return match word {
            "any" => Ok(Network::Any),
            "none" => Ok(Network::None),
            "loopback" => Ok(Network::Loopback),
            _ => Err(wrong()),
        };
    }
    let targets = strings(item).ok_or_else(wrong)?;
    for target in &targets {
        let port = target.rsplit_once(':').and_then(|(host, port)| port.parse::<u16>().ok().filter(|p| *p > 0 && !host.is_empty()));
        if port.is_none() {
            return Err(format!("has {target:?}, which is not \"host:port\" with a port from 1 to 65535"));
        }
    }
    Ok(Network::Allow(targets))
}

/// A size: bytes as a number, or a string with a unit (`KiB`, `MiB`, `GiB`,
/// `K`, `M`, `G` binary; `KB`, `MB`, `GB` decimal).
pub fn size(item: &Item) -> Option<u64> {
    if let Some(bytes) = item.as_integer() {
        return u64::try_from(bytes).ok().filter(|b| *b > 0);
    }
    parse_size(item.as_str()?)
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
