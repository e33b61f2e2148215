//! The server side of the protocol's eras: which era serves a request.
//!
//! Legacy versions (2024-11-05 … 2025-11-25) agree on a version once with
//! `initialize`; the modern version (2026-07-28) is stateless: every
//! request declares its version and the client's capabilities in
//! `params._meta`, and `server/discover` replaces the handshake. The
//! gateway speaks both at once, per request: a request that declares a
//! version in `_meta` is served in that era (or refused with -32022 and the
//! supported list), any other in the legacy era.
//!
//! Decision: legacy requests before `initialize` are served rather than
//! refused (what most servers do); their client capabilities are then
//! empty, so the gateway asks such a client nothing.

use serde_json::{json, Map, Value};

use crate::protocol::session::{META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION};
use crate::protocol::{error_codes, methods, supported_versions, ErrorObject, MODERN_VERSIONS};

/// How one request is served.
#[derive(Debug, Clone, PartialEq)]
pub enum Served {
    /// In the legacy era, with what `initialize` agreed (if it ran).
    Legacy,
    /// In the modern era: the request carries its own client capabilities.
    Modern { capabilities: Value },
}

impl Served {
    /// The era of `method` with these `params` (`Value::Null` for none).
    pub fn of(method: &str, params: &Value) -> Result<Served, ErrorObject> {
        if method == methods::INITIALIZE {
            return Ok(Served::Legacy);
        }
        let meta = params.get("_meta");
        match meta.and_then(|meta| meta.get(META_PROTOCOL_VERSION)) {
            None if method == methods::DISCOVER => Ok(Served::Modern { capabilities: json!({}) }),
            None => Ok(Served::Legacy),
            Some(Value::String(version)) if MODERN_VERSIONS.contains(&version.as_str()) => {
                let capabilities = meta.and_then(|meta| meta.get(META_CLIENT_CAPABILITIES)).cloned().unwrap_or_else(|| json!({}));
                Ok(Served::Modern { capabilities })
            }
            requested => Err(unsupported_version(supported_versions(), requested)),
        }
    }

    pub fn is_modern(&self) -> bool {
        matches!(self, Served::Modern { .. })
    }

    /// Adds what the modern era requires of a result: `resultType`, and
    /// cache hints on lists (the pool changes: clients must not cache).
    /// A legacy result loses the `resultType` a modern upstream server gave
    /// it (no field of that era).
    pub fn finish(&self, method: &str, mut result: Value) -> Value {
        match (self, &mut result) {
            (Served::Modern { .. }, Value::Object(map)) => finish_modern(method, map),
            (Served::Legacy, Value::Object(map)) => {
                map.remove("resultType");
            }
            _ => {}
        }
        result
    }
}

/// The modern era's additions to `method`'s result object.
pub fn finish_modern(method: &str, map: &mut Map<String, Value>) {
    map.entry("resultType").or_insert_with(|| json!("complete"));
    if method.ends_with("/list") {
        map.entry("ttlMs").or_insert_with(|| json!(0));
        map.entry("cacheScope").or_insert_with(|| json!("private"));
    }
}

/// -32022 UnsupportedProtocolVersion listing the `supported` versions
/// (newest first); `requested` is echoed when it is a string. The one
/// refusal of every server side: a session, an HTTP front, the demo server.
pub fn unsupported_version(supported: Vec<&'static str>, requested: Option<&Value>) -> ErrorObject {
    let mut data = json!({ "supported": supported });
    let message = match requested.and_then(Value::as_str) {
        Some(version) => {
            data["requested"] = json!(version);
            format!("Unsupported protocol version: {version}")
        }
        None => format!("Unsupported protocol version: requests must declare `_meta.{META_PROTOCOL_VERSION}` as a string"),
    };
    ErrorObject { code: error_codes::UNSUPPORTED_PROTOCOL_VERSION, message, data: Some(data) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_is_served_in_the_era_it_declares() {
        let modern = json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {"sampling": {}}}});
        assert_eq!(Served::of("tools/list", &modern), Ok(Served::Modern { capabilities: json!({"sampling": {}}) }));
        assert_eq!(Served::of("tools/list", &Value::Null), Ok(Served::Legacy));
        assert_eq!(Served::of("initialize", &modern), Ok(Served::Legacy));
        assert!(Served::of("server/discover", &json!({})).unwrap().is_modern());
        let old = json!({"_meta": {META_PROTOCOL_VERSION: "1999-01-01"}});
        let refusal = Served::of("tools/call", &old).unwrap_err();
        assert_eq!(refusal.code, error_codes::UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(refusal.data.unwrap()["supported"][0], "2026-07-28");
    }

    #[test]
    fn modern_results_carry_result_type_and_list_hints() {
        let modern = Served::Modern { capabilities: json!({}) };
        assert_eq!(modern.finish("tools/list", json!({"tools": []}))["cacheScope"], "private");
        assert_eq!(modern.finish("tools/call", json!({"content": []}))["resultType"], "complete");
        assert_eq!(Served::Legacy.finish("tools/list", json!({"tools": []})), json!({"tools": []}));
        assert_eq!(Served::Legacy.finish("tools/call", json!({"content": [], "resultType": "complete"})), json!({"content": []}));
    }
}
