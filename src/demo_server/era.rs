//! Protocol eras: which one serves a request, and how results differ.
//!
//! Legacy versions negotiate once with `initialize`; the modern version is
//! declared by every request in `params._meta`.

use serde_json::Value;

use super::logging::Level;
use super::rpc::ErrorObject;
pub use crate::protocol::session::{META_LOG_LEVEL, META_PROTOCOL_VERSION};
use crate::protocol::{is_modern_version, is_supported_legacy_version, supported_versions};

/// The version the modern era is served in.
pub const MODERN_VERSION: &str = crate::protocol::MODERN_VERSIONS[0];

/// The era(s) the server speaks (the `--era` flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Era {
    /// `initialize` handshake only (2024-11-05 … 2025-11-25).
    Legacy,
    /// Per-request `_meta` only (2026-07-28).
    Modern,
    /// Both; each request is served in the era it uses.
    Dual,
}

/// The semantics one request is served with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RequestEra {
    Legacy,
    /// `log_level` is the request's own threshold; `None` sends no log messages.
    Modern {
        log_level: Option<Level>,
    },
}

impl Era {
    /// What `server/discover` lists and -32022 reports as `supported`: newest first.
    /// Read from the one list, [`crate::protocol::supported_versions`].
    pub fn supported_versions(self) -> Vec<&'static str> {
        let served: fn(&str) -> bool = match self {
            Era::Legacy => is_supported_legacy_version,
            Era::Modern => is_modern_version,
            Era::Dual => |_| true,
        };
        supported_versions().into_iter().filter(|version| served(version)).collect()
    }

    /// The era serving `method`, or the error refusing the request.
    pub fn of_request(self, method: &str, params: &Value) -> Result<RequestEra, ErrorObject> {
        if self == Era::Legacy || (self == Era::Dual && method == "initialize") {
            return Ok(RequestEra::Legacy);
        }
        if method == "initialize" {
            return Err(self.unsupported(params.get("protocolVersion")));
        }
        let meta = params.get("_meta");
        match meta.and_then(|m| m.get(META_PROTOCOL_VERSION)) {
            None if self == Era::Dual => Ok(RequestEra::Legacy),
            // The bootstrap probe: it is how a client learns which versions to declare.
            None if method == "server/discover" => Ok(RequestEra::Modern { log_level: None }),
            Some(Value::String(version)) if version == MODERN_VERSION => {
                let log_level = match meta.and_then(|m| m.get(META_LOG_LEVEL)) {
                    None | Some(Value::Null) => None,
                    Some(level) => Some(Level::parse(level).ok_or_else(|| {
                        ErrorObject::invalid_params(format!(
                            "{method}: `_meta.{META_LOG_LEVEL}` must be {}, got {level}",
                            Level::expected()
                        ))
                    })?),
                };
                Ok(RequestEra::Modern { log_level })
            }
            requested => Err(self.unsupported(requested)),
        }
    }

    /// -32022 UnsupportedProtocolVersion with this era's versions.
    fn unsupported(self, requested: Option<&Value>) -> ErrorObject {
        crate::server::era::unsupported_version(self.supported_versions(), requested)
    }
}

impl RequestEra {
    pub fn is_legacy(self) -> bool {
        self == RequestEra::Legacy
    }

    /// Adds what the modern era requires of a `method`'s result: `resultType`,
    /// and cache hints on lists. Legacy results are left as they are.
    pub fn finish(self, method: &str, mut result: Value) -> Value {
        if let (RequestEra::Modern { .. }, Value::Object(map)) = (self, &mut result) {
            crate::server::era::finish_modern(method, map);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::error_codes::UNSUPPORTED_PROTOCOL_VERSION;
    use serde_json::json;

    fn modern(version: Value) -> Value {
        json!({"_meta": {META_PROTOCOL_VERSION: version, "io.modelcontextprotocol/clientCapabilities": {}}})
    }

    #[test]
    fn each_era_picks_semantics_per_request() {
        let plain = json!({});
        assert_eq!(Era::Legacy.of_request("tools/list", &modern(json!(MODERN_VERSION))), Ok(RequestEra::Legacy));
        assert_eq!(Era::Dual.of_request("tools/list", &plain), Ok(RequestEra::Legacy));
        assert_eq!(Era::Dual.of_request("initialize", &json!({"protocolVersion": MODERN_VERSION})), Ok(RequestEra::Legacy));
        let modern_era = Ok(RequestEra::Modern { log_level: None });
        assert_eq!(Era::Dual.of_request("tools/list", &modern(json!(MODERN_VERSION))), modern_era);
        assert_eq!(Era::Modern.of_request("tools/list", &modern(json!(MODERN_VERSION))), modern_era);
        assert_eq!(Era::Modern.of_request("server/discover", &plain), modern_era);
    }

    #[test]
    fn missing_or_unsupported_versions_are_32022_with_the_supported_list() {
        for (era, method, params, requested) in [
            (Era::Modern, "tools/list", json!({}), None),
            (Era::Modern, "tools/list", modern(json!("2025-11-25")), Some("2025-11-25")),
            (Era::Modern, "initialize", json!({"protocolVersion": "2025-06-18"}), Some("2025-06-18")),
            (Era::Dual, "tools/call", modern(json!("1999-01-01")), Some("1999-01-01")),
            (Era::Modern, "ping", modern(json!(7)), None),
        ] {
            let error = era.of_request(method, &params).unwrap_err();
            assert_eq!(error.code, UNSUPPORTED_PROTOCOL_VERSION);
            let data = error.data.unwrap();
            assert_eq!(data["supported"], json!(era.supported_versions()));
            assert_eq!(data.get("requested").and_then(Value::as_str), requested, "{method} {params}");
        }
        assert_eq!(Era::Modern.supported_versions(), [MODERN_VERSION]);
        assert_eq!(Era::Dual.supported_versions(), [MODERN_VERSION, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]);
    }

    #[test]
    fn the_modern_log_level_is_read_and_checked() {
        let mut params = modern(json!(MODERN_VERSION));
        params["_meta"][META_LOG_LEVEL] = json!("warning");
        let level = Level::parse(&json!("warning"));
        assert_eq!(Era::Modern.of_request("tools/call", &params), Ok(RequestEra::Modern { log_level: level }));
        params["_meta"][META_LOG_LEVEL] = json!("loud");
        assert_eq!(Era::Modern.of_request("tools/call", &params).unwrap_err().code, super::super::rpc::INVALID_PARAMS);
    }

    #[test]
    fn modern_results_carry_result_type_and_list_cache_hints() {
        let modern = RequestEra::Modern { log_level: None };
        assert_eq!(
            modern.finish("tools/list", json!({"tools": []})),
            json!({"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"})
        );
        let pending = json!({"resultType": "input_required"});
        assert_eq!(modern.finish("tools/call", pending.clone()), pending);
        assert_eq!(RequestEra::Legacy.finish("tools/list", json!({"tools": []})), json!({"tools": []}));
    }
}
