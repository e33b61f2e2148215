//! What a connection agreed with its server, and how that shapes each
//! request on the wire.
//!
//! - Legacy era (2024-11-05 … 2025-11-25): the `initialize` handshake
//!   settles the version once; requests carry only their own params.
//! - Modern era (2026-07-28): no handshake; every request carries the
//!   version, the client's identity and capabilities (and the log level,
//!   when one was set) in `params._meta` under `io.modelcontextprotocol/…`.
//!
//! A request whose caller wants progress also carries its own id as
//! `_meta.progressToken`.

use serde::Serialize;
use serde_json::{Map, Value};

use super::jsonrpc::{self, RequestId};

pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// Where a modern `server/discover` result repeats its `serverInfo`.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// The generation of the protocol a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Era {
    Legacy,
    Modern,
}

impl Era {
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        }
    }
}

/// The agreed era and version, and the per-request context of the modern era.
#[derive(Debug, Clone)]
pub struct Session {
    era: Era,
    version: String,
    client_info: Value,
    capabilities: Value,
    log_level: Option<String>,
}

impl Session {
    pub fn new(era: Era, version: impl Into<String>, capabilities: Value) -> Session {
        let client_info = serde_json::json!({ "name": "mcpvisor", "version": env!("CARGO_PKG_VERSION") });
        Session { era, version: version.into(), client_info, capabilities, log_level: None }
    }

    pub fn era(&self) -> Era {
        self.era
    }

    pub fn version(&self) -> &str {
        &self.version
    }

    pub fn client_info(&self) -> &Value {
        &self.client_info
    }

    pub fn capabilities(&self) -> &Value {
        &self.capabilities
    }

    /// Switches to `era` and `version` (after negotiation or a retry).
    pub fn agree(&mut self, era: Era, version: impl Into<String>) {
        self.era = era;
        self.version = version.into();
    }

    /// The log level sent with every modern request (legacy servers get `logging/setLevel`).
    pub fn set_log_level(&mut self, level: impl Into<String>) {
        self.log_level = Some(level.into());
    }

    /// A request frame with the `_meta` this session and the caller need.
    /// `params` must serialise to an object. A legacy request without
    /// progress is serialised once, straight to bytes (the hot path).
    pub fn request_frame<P: Serialize>(&self, id: &RequestId, method: &str, params: &P, with_progress: bool) -> Vec<u8> {
        if self.era == Era::Legacy && !with_progress {
            return jsonrpc::request_frame(id, method, params);
        }
        let mut params = match serde_json::to_value(params) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        let meta = params.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
        if !meta.is_object() {
            *meta = Value::Object(Map::new());
        }
        if let Value::Object(meta) = meta {
            if with_progress {
                meta.insert("progressToken".into(), serde_json::to_value(id).unwrap_or(Value::Null));
            }
            if self.era == Era::Modern {
                self.add_modern_meta(meta);
            }
        }
        jsonrpc::request_frame(id, method, &params)
    }

    fn add_modern_meta(&self, meta: &mut Map<String, Value>) {
        meta.insert(META_PROTOCOL_VERSION.into(), Value::String(self.version.clone()));
        meta.insert(META_CLIENT_INFO.into(), self.client_info.clone());
        meta.insert(META_CLIENT_CAPABILITIES.into(), self.capabilities.clone());
        // A request's own level (a gateway's client asked for it) wins over the session's.
        if let Some(level) = &self.log_level {
            meta.entry(META_LOG_LEVEL).or_insert_with(|| Value::String(level.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sent_with(session: &Session, params: Value, with_progress: bool) -> Value {
        let frame = session.request_frame(&RequestId::Number(7), "tools/call", &params, with_progress);
        serde_json::from_slice(&frame).unwrap()
    }

    #[test]
    fn legacy_requests_carry_only_their_params() {
        let session = Session::new(Era::Legacy, "2025-11-25", json!({}));
        assert_eq!(sent(&session, json!({"name": "echo"}))["params"], json!({"name": "echo"}));
        assert_eq!(
            sent_with(&session, Value::Null, true)["params"],
            json!({"_meta": {"progressToken": 7}}),
            "null params become an object"
        );
    }

    #[test]
    fn progress_rides_in_meta_with_the_request_id() {
        let session = Session::new(Era::Legacy, "2025-11-25", json!({}));
        let params = sent_with(&session, json!({"name": "echo", "_meta": {"keep": 1}}), true)["params"].clone();
        assert_eq!(params["_meta"], json!({"keep": 1, "progressToken": 7}));
    }

    #[test]
    fn modern_requests_carry_version_identity_capabilities_and_level() {
        let mut session = Session::new(Era::Modern, "2026-07-28", json!({"roots": {}}));
        session.set_log_level("debug");
        let meta = sent(&session, json!({"name": "echo"}))["params"]["_meta"].clone();
        assert_eq!(meta[META_PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(meta[META_CLIENT_INFO]["name"], "mcpvisor");
        assert_eq!(meta[META_CLIENT_CAPABILITIES], json!({"roots": {}}));
        assert_eq!(meta[META_LOG_LEVEL], "debug");
        assert!(meta.get("progressToken").is_none());
    }

    fn sent(session: &Session, params: Value) -> Value {
        sent_with(session, params, false)
    }
}
