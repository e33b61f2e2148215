//! How a client learns about the server: legacy `initialize`, modern `server/discover`.

use serde_json::{json, Value};

use super::era::{Era, META_SERVER_INFO};
use crate::protocol::negotiated_legacy_version;

const INSTRUCTIONS: &str = "The demo server bundled with mcpvisor, the peer of its tests. Every MCP feature has a \
    tool here (see `tools/list`); `fail`, `crash`, `garbage`, `big`, `spawn_grandchild` and `stderr` misbehave on \
    purpose; `received` and `cancellations` report what the server got.";

/// `discover` is cacheable for this long: capabilities never change at run time.
const DISCOVER_TTL_MS: u64 = 60_000;

/// What the server offers. Tasks (2025-11-25 shape) are a legacy feature here.
pub fn capabilities(legacy: bool) -> Value {
    let mut capabilities = json!({
        "tools": {"listChanged": true},
        "resources": {"subscribe": true, "listChanged": true},
        "prompts": {"listChanged": true},
        "logging": {},
        "completions": {},
    });
    if legacy {
        capabilities["tasks"] = json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
    }
    capabilities
}

fn server_info() -> Value {
    json!({"name": "mcpvisor-demo", "title": "mcpvisor demo server", "version": env!("CARGO_PKG_VERSION")})
}

/// Answers the requested legacy version when supported, else the latest.
pub fn initialize(params: &Value) -> Value {
    let requested = params.get("protocolVersion").and_then(Value::as_str);
    let version = negotiated_legacy_version(requested);
    json!({"protocolVersion": version, "capabilities": capabilities(true), "serverInfo": server_info(), "instructions": INSTRUCTIONS})
}

/// `server/discover`; `serverInfo` is given both as a field and in `_meta`.
pub fn discover(era: Era) -> Value {
    json!({
        "resultType": "complete",
        "supportedVersions": era.supported_versions(),
        "capabilities": capabilities(false),
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
        "ttlMs": DISCOVER_TTL_MS,
        "cacheScope": "public",
        "_meta": { META_SERVER_INFO: server_info() },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{LATEST_LEGACY_VERSION as LATEST_LEGACY, SUPPORTED_LEGACY_VERSIONS as LEGACY_VERSIONS};

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
