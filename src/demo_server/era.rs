//! Protocol eras: which one serves a request, and how results differ.
//!
//! Legacy versions negotiate once with `initialize`; the modern version is
//! declared by every request in `params._meta`.

use serde_json::Value;

use super::logging::Level;
use super::rpc::ErrorObject;
pub use crate::protocol::session::META_LOG_LEVEL;
use crate::server::dispatch::ServedEra;
use crate::server::era::Served;

/// The era(s) the server speaks (the `--era` flag).
pub use crate::server::era::Eras as Era;

/// The semantics one request is served with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RequestEra {
    Legacy,
    /// `log_level` is the request's own threshold; `None` sends no log messages.
    Modern {
        log_level: Option<Level>,
    },
}

/// The era serving `method` at a server of `era`s, with the modern log
/// level read and checked, or the error refusing the request.
pub fn of_request(era: Era, method: &str, params: &Value) -> Result<RequestEra, ErrorObject> {
    match era.serve(method, params)? {
        Served::Legacy => Ok(RequestEra::Legacy),
        Served::Modern { .. } => {
            let log_level = match params.get("_meta").and_then(|meta| meta.get(META_LOG_LEVEL)) {
                None | Some(Value::Null) => None,
                Some(level) => Some(Level::parse(level).ok_or_else(|| {
                    ErrorObject::invalid_params(format!("{method}: `_meta.{META_LOG_LEVEL}` must be {}, got {level}", Level::expected()))
                })?),
            };
            Ok(RequestEra::Modern { log_level })
        }
    }
}

impl ServedEra for RequestEra {
    fn is_legacy(&self) -> bool {
        RequestEra::is_legacy(*self)
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
    use crate::protocol::session::META_PROTOCOL_VERSION;
    use crate::protocol::MODERN_VERSIONS;

    const MODERN_VERSION: &str = MODERN_VERSIONS[0];
    use serde_json::json;

    fn modern(version: Value) -> Value {
        json!({"_meta": {META_PROTOCOL_VERSION: version, "io.modelcontextprotocol/clientCapabilities": {}}})
    }

    #[test]
    fn each_era_picks_semantics_per_request() {
        let plain = json!({});
        assert_eq!(of_request(Era::Legacy, "tools/list", &modern(json!(MODERN_VERSION))), Ok(RequestEra::Legacy));
        assert_eq!(of_request(Era::Dual, "tools/list", &plain), Ok(RequestEra::Legacy));
        assert_eq!(of_request(Era::Dual, "initialize", &json!({"protocolVersion": MODERN_VERSION})), Ok(RequestEra::Legacy));
        let modern_era = Ok(RequestEra::Modern { log_level: None });
        assert_eq!(of_request(Era::Dual, "tools/list", &modern(json!(MODERN_VERSION))), modern_era);
        assert_eq!(of_request(Era::Modern, "tools/list", &modern(json!(MODERN_VERSION))), modern_era);
        assert_eq!(of_request(Era::Modern, "server/discover", &plain), modern_era);
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
            let error = of_request(era, method, &params).unwrap_err();
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
        assert_eq!(of_request(Era::Modern, "tools/call", &params), Ok(RequestEra::Modern { log_level: level }));
        params["_meta"][META_LOG_LEVEL] = json!("loud");
        assert_eq!(of_request(Era::Modern, "tools/call", &params).unwrap_err().code, super::super::rpc::INVALID_PARAMS);
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
