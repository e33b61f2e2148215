//! Who the demo server says it is and what it offers, for the dispatcher's
//! legacy `initialize` and modern `server/discover` answers.

use serde_json::Value;

use super::skills;
use crate::server::lifecycle::{self, DiscoverCache, ServerInfo};

const INSTRUCTIONS: &str = "The demo server bundled with mcpvisor, the peer of its tests. Every MCP feature has a \
    tool here (see `tools/list`); `fail`, `crash`, `garbage`, `big`, `spawn_grandchild` and `stderr` misbehave on \
    purpose; `received` and `cancellations` report what the server got.";

/// `discover` is cacheable this long: capabilities never change at run time.
pub const DISCOVER_CACHE: DiscoverCache = DiscoverCache::Public { ttl_ms: 60_000 };

pub fn server_info() -> ServerInfo {
    ServerInfo { name: "mcpvisor-demo".into(), title: Some("mcpvisor demo server"), instructions: Some(INSTRUCTIONS) }
}

/// A full server's capabilities; tasks (2025-11-25 shape) are a legacy
/// feature here; the skills extension when `skills`.
pub fn capabilities(legacy: bool, skills: bool) -> Value {
    skills::announce(lifecycle::capabilities(legacy), skills)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::session::META_SERVER_INFO;
    use crate::protocol::LATEST_LEGACY_VERSION as LATEST_LEGACY;
    use crate::server::era::Eras;
    use serde_json::json;

    #[test]
    fn initialize_offers_tasks_and_resource_subscriptions() {
        let result = lifecycle::initialize(&server_info(), None, capabilities(true, false));
        assert_eq!(result["serverInfo"]["name"], "mcpvisor-demo");
        assert_eq!(result["capabilities"]["tasks"]["requests"]["tools"]["call"], json!({}));
        assert_eq!(result["capabilities"]["resources"], json!({"subscribe": true, "listChanged": true}));
        assert!(result["capabilities"].get("extensions").is_none());
        assert_eq!(capabilities(true, true)["extensions"], json!({"io.modelcontextprotocol/skills": {}}));
    }

    #[test]
    fn discover_lists_versions_and_modern_capabilities() {
        let discover =
            |eras: Eras| lifecycle::discover(&server_info(), eras.supported_versions(), capabilities(false, false), DISCOVER_CACHE);
        let result = discover(Eras::Modern);
        assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
        assert_eq!(result["serverInfo"], result["_meta"][META_SERVER_INFO]);
        assert!(result["capabilities"].get("tasks").is_none());
        assert_eq!(result["capabilities"]["completions"], json!({}));
        assert_eq!(discover(Eras::Dual)["supportedVersions"][1], LATEST_LEGACY);
    }
}
