//! How a client learns about a server, for every server this crate
//! serves (the gateway's sessions, the demo server, in-process servers):
//! the legacy `initialize` answer and the 2026-07-28 `server/discover` one.
//!
//! Invariants: `initialize` answers the client's version when it is a
//! legacy version served here, else the latest
//! ([`crate::protocol::negotiated_legacy_version`]); `server/discover`
//! lists the versions it is given, newest first, and repeats `serverInfo`
//! in `_meta`.

use serde_json::{json, Value};

use crate::protocol::negotiated_legacy_version;
use crate::protocol::session::META_SERVER_INFO;

/// Who a server says it is.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerInfo {
    pub name: String,
    pub title: Option<&'static str>,
    /// What a model should know of the server, if anything.
    pub instructions: Option<&'static str>,
}

impl ServerInfo {
    /// `serverInfo`: the name, the title if any, and this crate's version.
    pub fn to_json(&self) -> Value {
        let mut info = json!({ "name": self.name, "version": env!("CARGO_PKG_VERSION") });
        if let Some(title) = self.title {
            info["title"] = json!(title);
        }
        info
    }
}

/// How long, and for whom, a `server/discover` result may be cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoverCache {
    /// Never changes while the server runs: anyone may keep it this long.
    Public { ttl_ms: u64 },
    /// Changes (a gateway's pool does): not to be kept.
    Private,
}

/// What a full server offers (tools, prompts, resources with subscribe,
/// completions, logging, each list announcing changes); `tasks`
/// (2025-11-25, a legacy-era feature) besides when `with_tasks`.
pub fn capabilities(with_tasks: bool) -> Value {
    let mut offered = json!({
        "tools": { "listChanged": true },
        "prompts": { "listChanged": true },
        "resources": { "subscribe": true, "listChanged": true },
        "completions": {},
        "logging": {},
    });
    if with_tasks {
        offered["tasks"] = super::tasks::capability();
    }
    offered
}

/// The `initialize` answer to a client that asked for `version` (if it
/// named one).
pub fn initialize(info: &ServerInfo, version: Option<&str>, capabilities: Value) -> Value {
    let version = negotiated_legacy_version(version);
    let mut answer = json!({ "protocolVersion": version, "capabilities": capabilities, "serverInfo": info.to_json() });
    if let Some(instructions) = info.instructions {
        answer["instructions"] = json!(instructions);
    }
    answer
}

/// The `server/discover` answer listing `supported` (newest first).
pub fn discover(info: &ServerInfo, supported: Vec<&'static str>, capabilities: Value, cache: DiscoverCache) -> Value {
    let (ttl_ms, scope) = match cache {
        DiscoverCache::Public { ttl_ms } => (ttl_ms, "public"),
        DiscoverCache::Private => (0, "private"),
    };
    let mut answer = json!({
        "resultType": "complete",
        "supportedVersions": supported,
        "capabilities": capabilities,
        "serverInfo": info.to_json(),
        "ttlMs": ttl_ms,
        "cacheScope": scope,
        "_meta": { META_SERVER_INFO: info.to_json() },
    });
    if let Some(instructions) = info.instructions {
        answer["instructions"] = json!(instructions);
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{supported_versions, LATEST_LEGACY_VERSION, SUPPORTED_LEGACY_VERSIONS};

    fn info(instructions: Option<&'static str>) -> ServerInfo {
        ServerInfo { name: "s".into(), title: Some("S"), instructions }
    }

    #[test]
    fn initialize_answers_the_clients_legacy_version_or_the_latest() {
        for version in SUPPORTED_LEGACY_VERSIONS {
            assert_eq!(initialize(&info(None), Some(version), json!({}))["protocolVersion"], version);
        }
        for other in [Some("2026-07-28"), Some("1999-01-01"), None] {
            let answer = initialize(&info(None), other, json!({"tools": {}}));
            assert_eq!(answer["protocolVersion"], LATEST_LEGACY_VERSION);
            assert_eq!(answer["capabilities"], json!({"tools": {}}));
            assert!(answer.get("instructions").is_none());
        }
        let answer = initialize(&info(Some("hello")), None, json!({}));
        assert_eq!(answer["serverInfo"], json!({"name": "s", "title": "S", "version": env!("CARGO_PKG_VERSION")}));
        assert_eq!(answer["instructions"], "hello");
    }

    #[test]
    fn discover_lists_versions_cache_hints_and_server_info_twice() {
        let public = discover(&info(Some("hi")), supported_versions(), capabilities(false), DiscoverCache::Public { ttl_ms: 5 });
        assert_eq!(public["supportedVersions"], json!(supported_versions()));
        assert_eq!((public["ttlMs"].as_u64(), public["cacheScope"].as_str()), (Some(5), Some("public")));
        assert_eq!(public["serverInfo"], public["_meta"][META_SERVER_INFO]);
        assert!(public["capabilities"].get("tasks").is_none());
        let private = discover(&info(None), vec!["2026-07-28"], json!({}), DiscoverCache::Private);
        assert_eq!((private["ttlMs"].as_u64(), private["cacheScope"].as_str()), (Some(0), Some("private")));
        assert_eq!(capabilities(true)["tasks"], super::super::tasks::capability());
    }
}
