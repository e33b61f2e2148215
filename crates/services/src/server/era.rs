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
use crate::protocol::{error_codes, is_modern_version, is_supported_legacy_version, methods, supported_versions, ErrorObject};

/// The era(s) a server speaks (the demo server's `--era` flag; the
/// gateway speaks both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Eras {
    /// `initialize` handshake only (2024-11-05 … 2025-11-25).
    Legacy,
    /// Per-request `_meta` only (2026-07-28).
    Modern,
    /// Both; each request is served in the era it uses.
    Dual,
}

impl Eras {
    /// What `server/discover` lists and -32022 reports as `supported`,
    /// newest first, from the one list ([`crate::protocol::supported_versions`]).
    pub fn supported_versions(self) -> Vec<&'static str> {
        let served: fn(&str) -> bool = match self {
            Eras::Legacy => is_supported_legacy_version,
            Eras::Modern => is_modern_version,
            Eras::Dual => |_| true,
        };
        supported_versions().into_iter().filter(|version| served(version)).collect()
    }

    /// The era serving `method` with these `params` (`Value::Null` for
    /// none), or the -32022 refusal. A legacy-only server serves every
    /// request in the legacy era; a modern-only one refuses `initialize`
    /// and requests that declare no version (`server/discover` aside: it
    /// is how a client learns which version to declare).
    pub fn serve(self, method: &str, params: &Value) -> Result<Served, ErrorObject> {
        if self == Eras::Legacy {
            return Ok(Served::Legacy);
        }
        if method == methods::INITIALIZE {
            return match self {
                Eras::Dual => Ok(Served::Legacy),
                _ => Err(unsupported_version(self.supported_versions(), params.get("protocolVersion"))),
            };
        }
        let meta = params.get("_meta");
        match meta.and_then(|meta| meta.get(META_PROTOCOL_VERSION)) {
            None if method == methods::DISCOVER => Ok(Served::Modern { capabilities: json!({}) }),
            None if self == Eras::Dual => Ok(Served::Legacy),
            Some(Value::String(version)) if is_modern_version(version) => {
                let capabilities = meta.and_then(|meta| meta.get(META_CLIENT_CAPABILITIES)).cloned().unwrap_or_else(|| json!({}));
                Ok(Served::Modern { capabilities })
            }
            requested => Err(unsupported_version(self.supported_versions(), requested)),
        }
    }
}

/// How one request is served.
#[derive(Debug, Clone, PartialEq)]
pub enum Served {
    /// In the legacy era, with what `initialize` agreed (if it ran).
    Legacy,
    /// In the modern era: the request carries its own client capabilities.
    Modern { capabilities: Value },
}

impl Served {
    /// The era of `method` with these `params` at a server of both eras.
    pub fn of(method: &str, params: &Value) -> Result<Served, ErrorObject> {
        Eras::Dual.serve(method, params)
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
    fn a_single_era_server_serves_or_refuses_by_its_era() {
        let modern = json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28"}});
        assert_eq!(Eras::Legacy.serve("tools/list", &modern), Ok(Served::Legacy));
        let refused = Eras::Modern.serve("initialize", &json!({"protocolVersion": "2025-06-18"})).unwrap_err();
        assert_eq!(refused.data.unwrap(), json!({"supported": ["2026-07-28"], "requested": "2025-06-18"}));
        assert_eq!(Eras::Modern.serve("tools/list", &json!({})).unwrap_err().code, error_codes::UNSUPPORTED_PROTOCOL_VERSION);
        assert!(Eras::Modern.serve("server/discover", &json!({})).unwrap().is_modern());
        assert!(Eras::Modern.serve("tools/list", &modern).unwrap().is_modern());
        assert_eq!(Eras::Legacy.supported_versions(), ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]);
        assert_eq!(Eras::Dual.supported_versions(), crate::protocol::supported_versions());
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
