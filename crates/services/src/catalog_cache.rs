//! The tool catalog kept on disk, per server, so tools can be searched
//! without starting every server (`mcpvisor tools --search`, the agent's
//! tool search).
//!
//! **Where**: `$XDG_CACHE_HOME/mcpvisor/tools/`, else
//! `~/.cache/mcpvisor/tools/` ([`CatalogCache::default_location`]). One
//! JSON file per server, named by the server's name made safe for a file
//! name plus a hash of the exact name (`github_1a2b3c4d.json`), holding
//! the server's name, the [`fingerprint`] of its configuration, when the
//! listing was taken and the tools (each MCP `Tool` with its exposed name).
//! A server's name is its key: two projects defining a server of the same
//! name differently take turns in one file (each change is seen by the
//! fingerprint, and costs one listing).
//!
//! **Fresh**: an entry is used only when its fingerprint is the one of the
//! server's configuration now and it was listed less than a maximum age
//! ago ([`DEFAULT_MAX_AGE`], a day: servers started by `npx`/`uvx` update
//! themselves, and their tools with them). The fingerprint covers the
//! whole configuration after `${VAR}` expansion (command, arguments,
//! environment, URL, headers, allow/deny lists, time-outs, ...) and
//! mcpvisor's version, so editing a server, changing a variable it uses
//! or upgrading mcpvisor makes its entry unused. It is a hash: no
//! configured value, secret or not, is written to the cache.
//!
//! **Written** whenever a live listing is at hand ([`CatalogCache::save_all`]:
//! only servers that are connected, so a failed start never caches an
//! empty list), atomically (a temporary file, then a rename). A file that
//! cannot be read or parsed is reported to the caller as a warning and
//! treated as missing; the next listing replaces it.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::config::ServerConfig;
use crate::naming;
use crate::pool::{KeptTool, ServerState, ServerStatus, ToolEntry};

/// How old an entry may be and still be used.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(24 * 60 * 60);

/// The layout of the files this version writes; others are not used.
const FORMAT: u32 = 1;

/// Characters of a server's name kept in its file name (the hash tells longer names apart).
const NAME_CHARS: usize = 64;

/// A cache entry that could not be used or written, for the caller to show.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the tool cache {}: cannot {action}: {reason}", .path.display())]
pub struct CacheError {
    pub path: PathBuf,
    pub action: &'static str,
    pub reason: String,
}

/// One server's tools as they were listed, kept (schemas as text).
#[derive(Debug, Clone)]
pub struct CachedListing {
    /// Milliseconds since the Unix epoch.
    pub listed_ms: u64,
    pub tools: Vec<ToolEntry<KeptTool>>,
}

/// A file's layout: `CachedTool`s when read, `CachedToolRef`s when written.
#[derive(Serialize, Deserialize)]
struct CacheFile<T> {
    format: u32,
    server: String,
    fingerprint: String,
    listed_ms: u64,
    tools: Vec<T>,
}

#[derive(Deserialize)]
struct CachedTool {
    exposed_name: String,
    tool: KeptTool,
}

#[derive(Serialize)]
struct CachedToolRef<'a, T> {
    exposed_name: &'a str,
    tool: &'a T,
}

/// The directory of the on-disk catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogCache {
    dir: PathBuf,
}

impl CatalogCache {
    /// A cache in `dir` (created when first written).
    pub fn new(dir: impl Into<PathBuf>) -> CatalogCache {
        CatalogCache { dir: dir.into() }
    }

    /// `$XDG_CACHE_HOME/mcpvisor/tools`, else `~/.cache/mcpvisor/tools`;
    /// `None` when neither variable is set.
    pub fn default_location() -> Option<CatalogCache> {
        crate::user_dirs::cache_dir(|name| std::env::var(name).ok()).map(|dir| CatalogCache::new(dir.join("tools")))
    }

    /// The file of server `name`.
    pub fn path_of(&self, name: &str) -> PathBuf {
        let readable: String = naming::sanitised(name).chars().take(NAME_CHARS).collect();
        self.dir.join(format!("{readable}_{:08x}.json", naming::fnv1a([name.as_bytes()]) as u32))
    }

    /// The server's cached tools, when the entry is fresh: listed under
    /// this configuration less than `max_age` ago. `Ok(None)` when there
    /// is no entry or it is out of date; an error when the file cannot be
    /// read or is not an entry (the caller shows it, and lists the server).
    pub fn load(&self, config: &ServerConfig, max_age: Duration) -> Result<Option<CachedListing>, CacheError> {
        let path = self.path_of(&config.name);
        let error = |action, reason: String| CacheError { path: path.clone(), action, reason };
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(error("read it", e.to_string())),
        };
        let file: CacheFile<CachedTool> =
            serde_json::from_slice(&bytes).map_err(|e| error("use it", format!("not a tool cache entry ({e}); it will be replaced")))?;
        let age = now_ms().checked_sub(file.listed_ms).map(Duration::from_millis);
        let fresh = file.format == FORMAT
            && file.server == config.name
            && file.fingerprint == fingerprint(config)
            && age.is_some_and(|age| age < max_age);
        if !fresh {
            return Ok(None);
        }
        let tools = file
            .tools
            .into_iter()
            .map(|cached| ToolEntry { name: cached.exposed_name, server: file.server.clone(), tool: cached.tool })
            .collect();
        Ok(Some(CachedListing { listed_ms: file.listed_ms, tools }))
    }

    /// Keeps `tools` (entries of `config`'s server; others are ignored) as
    /// the server's listing, taken now; the tools are written, not copied.
    pub fn save<T: Serialize>(&self, config: &ServerConfig, tools: &[ToolEntry<T>]) -> Result<(), CacheError> {
        let file = CacheFile {
            format: FORMAT,
            server: config.name.clone(),
            fingerprint: fingerprint(config),
            listed_ms: now_ms(),
            tools: tools
                .iter()
                .filter(|entry| entry.server == config.name)
                .map(|entry| CachedToolRef { exposed_name: &entry.name, tool: &entry.tool })
                .collect(),
        };
        let path = self.path_of(&config.name);
        let error = |reason: String| CacheError { path: path.clone(), action: "write it", reason };
        let text = serde_json::to_string(&file).map_err(|e| error(e.to_string()))?;
        crate::config::file::write_atomically(&path, &text).map_err(|e| error(e.to_string()))
    }

    /// Keeps the listing of every server of `configs` that `statuses` shows
    /// connected, its tools taken from `catalog` (a live listing, such as
    /// `Handle::list_tools`'s). Returns the entries that could not
    /// be written; the others are written anyway.
    pub fn save_all<T: Serialize>(&self, configs: &[ServerConfig], statuses: &[ServerStatus], catalog: &[ToolEntry<T>]) -> Vec<CacheError> {
        let connected = |name: &str| statuses.iter().any(|status| status.name == name && status.state == ServerState::Connected);
        configs.iter().filter(|config| connected(&config.name)).filter_map(|config| self.save(config, catalog).err()).collect()
    }
}

/// A hash of the server's configuration after `${VAR}` expansion (as
/// written when a variable is unset) and of mcpvisor's version: equal
/// fingerprints mean the same server, started the same way.
pub fn fingerprint(config: &ServerConfig) -> String {
    let expanded = config.expanded(|name| std::env::var(name).ok()).unwrap_or_else(|_| config.clone());
    let described = format!("{expanded:?}");
    let hash = naming::fnv1a([env!("CARGO_PKG_VERSION").as_bytes(), described.as_bytes()]);
    format!("{hash:016x}")
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64)
}

#[cfg(test)]
mod tests;
