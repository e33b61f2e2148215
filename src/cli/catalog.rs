//! The tools `tools` shows: listed live from the servers it starts, or,
//! for a search, taken from the on-disk tool cache
//! ([`crate::catalog_cache`]) for every server whose entry there is fresh,
//! so only the others are started. Every live listing is written to the
//! cache; a cache that cannot be read or written is a warning, never a
//! failure: the command then simply starts the servers.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::output::{warn, Failure};
use super::servers::{Entry, Servers};
use super::session::{start_entries, Session};
use crate::actors::{KeptTool, ServerStatus, ToolEntry};
use crate::catalog_cache::{CacheError, CatalogCache, DEFAULT_MAX_AGE};

/// What a warning about a server that did not connect adds.
const LEAVING_OUT: &str = "its tools are not listed";

/// The tools found (kept: schemas as text), and the statuses of the
/// servers started for them.
pub struct Catalog {
    pub tools: Vec<ToolEntry<KeptTool>>,
    pub statuses: Vec<ServerStatus>,
    /// How many servers' tools came from the cache, and when the oldest was listed (ms since the epoch).
    pub cached: Option<(usize, u64)>,
}

impl Catalog {
    /// A `note:` line for stderr when some tools came from the cache.
    pub fn cache_note(&self) -> Option<String> {
        let (servers, oldest_ms) = self.cached?;
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64);
        let age = Duration::from_millis(now_ms.saturating_sub(oldest_ms));
        let whose = if servers == 1 { "1 server".to_string() } else { format!("{servers} servers") };
        Some(format!("the tools of {whose} come from the tool cache (listed up to {} ago); --refresh lists them live", short_age(age)))
    }
}

/// Starts the selected servers (one, or all) and lists their tools.
pub async fn live(servers: &Servers, only: Option<&str>, cache: Option<&CatalogCache>) -> Result<Catalog, Failure> {
    let entries = servers.to_start(only)?;
    let session = start_entries(entries.clone(), only, LEAVING_OUT).await?;
    Ok(listed(session, entries, cache).await)
}

/// The selected servers' tools: from the cache where it is fresh, the
/// others started and listed (and cached).
pub async fn cached_or_live(servers: &Servers, only: Option<&str>, cache: &CatalogCache) -> Result<Catalog, Failure> {
    let selected: Vec<&Entry> = match only {
        Some(name) => vec![servers.get(name)?],
        None => servers.entries.iter().filter(|entry| entry.enabled()).collect(),
    };
    let mut tools = Vec::new();
    let mut cached: Option<(usize, u64)> = None;
    let mut to_start = Vec::new();
    for entry in selected {
        // A disabled server named with --server is "started" to say it is disabled.
        let found = if entry.enabled() { cache.load(&entry.config()?, DEFAULT_MAX_AGE) } else { Ok(None) };
        match found {
            Ok(Some(listing)) => {
                let (count, oldest) = cached.unwrap_or((0, listing.listed_ms));
                cached = Some((count + 1, oldest.min(listing.listed_ms)));
                tools.extend(listing.tools);
            }
            Ok(None) => to_start.push(entry),
            Err(error) => {
                warn(error);
                to_start.push(entry);
            }
        }
    }
    let mut catalog = Catalog { tools: Vec::new(), statuses: Vec::new(), cached };
    if !to_start.is_empty() {
        let started = servers.within_limit(to_start)?;
        let session = start_entries(started.clone(), only, LEAVING_OUT).await?;
        catalog = Catalog { cached, ..listed(session, started, Some(cache)).await };
    }
    catalog.tools.extend(tools);
    catalog.tools.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(catalog)
}

/// Lists the session's tools and statuses, ends it, and caches the listings.
async fn listed(session: Session, entries: Vec<&Entry>, cache: Option<&CatalogCache>) -> Catalog {
    let tools = session.handle.list_kept_tools().await;
    let statuses = session.handle.status().await;
    session.close().await;
    if let Some(cache) = cache {
        save(cache, &entries, &statuses, &tools);
    }
    Catalog { tools, statuses, cached: None }
}

/// Keeps the listings of the connected servers among `entries` in `cache`.
pub fn save(cache: &CatalogCache, entries: &[&Entry], statuses: &[ServerStatus], tools: &[ToolEntry<KeptTool>]) {
    match entries.iter().map(|entry| entry.config()).collect::<Result<Vec<_>, _>>() {
        Ok(configs) => warn_once(cache.save_all(&configs, statuses, tools)),
        Err(error) => warn(error.message),
    }
}

/// The first error of writing the cache, with how many more there were:
/// a cache directory that cannot be written fails every server alike.
fn warn_once(errors: Vec<CacheError>) {
    if let Some(first) = errors.first() {
        let more = match errors.len() - 1 {
            0 => String::new(),
            n => format!(" (and {n} more entries)"),
        };
        warn(format_args!("{first}{more}; tools are listed live until it can be written"));
    }
}

/// `42 s`, `5 min`, `3 h`.
fn short_age(age: Duration) -> String {
    match age.as_secs() {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s => format!("{} h", s / 3600),
    }
}
