//! How a client learns about the server: legacy `initialize`, modern `server/discover`.

use serde_json::Value;

use super::era::Era;
use crate::server::lifecycle::{self, DiscoverCache, ServerInfo};

const INSTRUCTIONS: &str = "The demo server bundled with mcpvisor, the peer of its tests. Every MCP feature has a \
    tool here (see `tools/list`); `fail`, `crash`, `garbage`, `big`, `spawn_grandchild` and `stderr` misbehave on \
    purpose; `received` and `cancellations` report what the server got.";

/// `discover` is cacheable for this long: capabilities never change at run time.
const DISCOVER_TTL_MS: u64 = 60_000;

fn server_info() -> ServerInfo {
    ServerInfo { name: "mcpvisor-demo".into(), title: Some("mcpvisor demo server"), instructions: Some(INSTRUCTIONS) }
}

/// Answers the requested legacy version when supported, else the latest.
/// Tasks (2025-11-25 shape) are a legacy feature here.
pub fn initialize(params: &Value) -> Value {
    lifecycle::initialize(&server_info(), params, lifecycle::capabilities(true))
}

/// `server/discover`; `serverInfo` is given both as a field and in `_meta`.
pub fn discover(era: Era) -> Value {
    lifecycle::discover(
        &server_info(),
        era.supported_versions(),
        lifecycle::capabilities(false),
        DiscoverCache::Public { ttl_ms: DISCOVER_TTL_MS },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::session::META_SERVER_INFO;
    use crate::protocol::{LATEST_LEGACY_VERSION as LATEST_LEGACY, SUPPORTED_LEGACY_VERSIONS as LEGACY_VERSIONS};
    use serde_json::json;

    #[test]
    fn initialize_echoes_supported_legacy_versions_only() {
        for version in LEGACY_VERSIONS {
            assert_eq!(initialize(&json!({"protocolVersion": version}))["protocolVersion"], version);
        }
        for other in [json!({"protocolVersion": "1999-01-01"}), json!({"protocolVersion": "2026-07-28"}), Value::Null] {
            assert_eq!(initialize(&other)["protocolVersion"], LATEST_LEGACY);
        }
        let result = initialize(&json!({}));
        assert_eq!(result["serverInfo"]["name"], "mcpvisor-demo");
        assert_eq!(result["capabilities"]["tasks"]["requests"]["tools"]["call"], json!({}));
        assert_eq!(result["capabilities"]["resources"], json!({"subscribe": true, "listChanged": true}));
    }

    #[test]
    fn discover_lists_versions_and_modern_capabilities() {
        let result = discover(Era::Modern);
        assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
        assert_eq!(result["serverInfo"], result["_meta"][META_SERVER_INFO]);
        assert!(result["capabilities"].get("tasks").is_none());
        assert_eq!(result["capabilities"]["completions"], json!({}));
        assert_eq!(discover(Era::Dual)["supportedVersions"][1], LATEST_LEGACY);
    }
}
