//! The MCP headers of a request: the session's (`Mcp-Session-Id`,
//! `MCP-Protocol-Version` after `initialize`) and the 2026-07-28 era's,
//! mirrored from the body (`MCP-Protocol-Version`, `Mcp-Method`,
//! `Mcp-Name`, and `Mcp-Param-{Name}` for the tool parameters a server
//! marks with `x-mcp-header`), with the specification's encoding: a value
//! that is not plain printable ASCII, or starts or ends with white space,
//! is sent as `=?base64?…?=`; one over 8192 bytes is left out.

use base64::Engine;
use serde_json::Value;

use crate::protocol::session::META_PROTOCOL_VERSION;

pub(super) const SESSION_ID: &str = "mcp-session-id";
pub(super) const PROTOCOL_VERSION: &str = "mcp-protocol-version";
pub(super) const LAST_EVENT_ID: &str = "last-event-id";
const METHOD: &str = "mcp-method";
const NAME: &str = "mcp-name";
const PARAM_PREFIX: &str = "Mcp-Param-";
/// Longest header value sent for a parameter.
const MAX_PARAM_VALUE: usize = 8192;

/// The parameters of one tool mirrored as headers: (property, header name).
pub(super) type ParamHeaders = Vec<(String, String)>;

/// The protocol version a 2026-07-28-era request carries in its `_meta`;
/// `None` for a request of the `initialize` era.
pub(super) fn modern_version(message: &Value) -> Option<&str> {
    message.get("params")?.get("_meta")?.get(META_PROTOCOL_VERSION)?.as_str()
}

/// The headers mirrored from a 2026-07-28-era message: version, method and
/// the name of what it is about.
pub(super) fn mirrored(message: &Value, version: &str) -> Vec<(String, String)> {
    let mut headers = vec![(PROTOCOL_VERSION.to_string(), version.to_string())];
    let Some(method) = message.get("method").and_then(Value::as_str) else { return headers };
    headers.push((METHOD.into(), method.into()));
    let params = message.get("params");
    let name = match method {
        "tools/call" | "prompts/get" => params.and_then(|p| p.get("name")),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => params.and_then(|p| p.get("uri")),
        _ => None,
    };
    if let Some(name) = name.and_then(encode) {
        headers.push((NAME.into(), name));
    }
    headers
}

/// The `Mcp-Param-*` headers of a `tools/call` with `arguments`.
pub(super) fn param_values(params: &ParamHeaders, arguments: Option<&Value>) -> Vec<(String, String)> {
    let Some(arguments) = arguments else { return Vec::new() };
    params.iter().filter_map(|(property, header)| Some((format!("{PARAM_PREFIX}{header}"), encode(arguments.get(property)?)?))).collect()
}

/// The parameters `tool` marks with `x-mcp-header`, or why its annotations
/// are invalid (then the tool is left out).
pub(super) fn tool_params(tool: &Value) -> Result<ParamHeaders, String> {
    let Some(properties) = tool.pointer("/inputSchema/properties").and_then(Value::as_object) else { return Ok(Vec::new()) };
    let mut found: ParamHeaders = Vec::new();
    for (property, schema) in properties {
        let Some(header) = schema.get("x-mcp-header") else { continue };
        let Some(header) = header.as_str() else {
            return Err(format!("the x-mcp-header of parameter `{property}` is not a string"));
        };
        if header.is_empty() || !header.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
            return Err(format!("the x-mcp-header {header:?} of parameter `{property}` is not ASCII without spaces and colons"));
        }
        if reqwest::header::HeaderName::from_bytes(format!("{PARAM_PREFIX}{header}").as_bytes()).is_err() {
            return Err(format!("the x-mcp-header {header:?} of parameter `{property}` cannot be an HTTP header name"));
        }
        let primitive =
            // The specification admits string, integer and boolean parameters only.
            schema.get("type").and_then(Value::as_str).is_some_and(|t| matches!(t, "string" | "integer" | "boolean"));
        if !primitive {
            return Err(format!("parameter `{property}` has an x-mcp-header but is not a string, integer or boolean"));
        }
        if found.iter().any(|(_, other)| other.eq_ignore_ascii_case(header)) {
            return Err(format!("the x-mcp-header {header:?} is used twice (headers ignore case)"));
        }
        found.push((property.clone(), header.to_string()));
    }
    Ok(found)
}

/// A value as a header value per the specification, `None` when it is not
/// a primitive or is too long.
fn encode(value: &Value) -> Option<String> {
    let text = match value {
        Value::String(text) => text.clone(),
        Value::Number(number) => number.to_string(),
        Value::Bool(flag) => flag.to_string(),
        _ => return None,
    };
    let padded = text.starts_with([' ', '\t']) || text.ends_with([' ', '\t']);
    let plain = text.bytes().all(|b| (0x20..0x7f).contains(&b));
    let encoded = match plain && !padded {
        true => text,
        false => format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(text.as_bytes())),
    };
    (encoded.len() <= MAX_PARAM_VALUE).then_some(encoded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_encoded_as_the_specification_says() {
        assert_eq!(encode(&json!("us-west1")).as_deref(), Some("us-west1"));
        assert_eq!(encode(&json!("Hello, 世界")).as_deref(), Some("=?base64?SGVsbG8sIOS4lueVjA==?="));
        assert_eq!(encode(&json!(" padded ")).as_deref(), Some("=?base64?IHBhZGRlZCA=?="));
        assert_eq!(encode(&json!("line1\nline2")).as_deref(), Some("=?base64?bGluZTEKbGluZTI=?="));
        assert_eq!(encode(&json!(42)).as_deref(), Some("42"));
        assert_eq!(encode(&json!(true)).as_deref(), Some("true"));
        assert_eq!(encode(&json!({"a": 1})), None);
        assert_eq!(encode(&json!("x".repeat(9000))), None);
    }

    #[test]
    fn annotations_are_checked() {
        let tool = |props: Value| json!({"name": "t", "inputSchema": {"type": "object", "properties": props}});
        let good = tool(json!({"region": {"type": "string", "x-mcp-header": "Region"}, "q": {"type": "string"},
                               "n": {"type": "integer", "x-mcp-header": "N"}, "b": {"type": "boolean", "x-mcp-header": "B"}}));
        assert_eq!(tool_params(&good).unwrap().len(), 3);
        for bad in [
            json!({"a": {"type": "string", "x-mcp-header": "Has Space"}}),
            json!({"a": {"type": "string", "x-mcp-header": "a:b"}}),
            json!({"a": {"type": "object", "x-mcp-header": "A"}}),
            json!({"score": {"type": "number", "x-mcp-header": "Score"}}),
            json!({"a": {"type": "string", "x-mcp-header": "X"}, "b": {"type": "number", "x-mcp-header": "x"}}),
            json!({"a": {"type": "string", "x-mcp-header": "Région"}}),
        ] {
            assert!(tool_params(&tool(bad.clone())).is_err(), "{bad}");
        }
    }

    #[test]
    fn modern_messages_mirror_method_and_name() {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"region": "eu"}, "_meta": {META_PROTOCOL_VERSION: "2026-07-28"}}});
        assert_eq!(modern_version(&call), Some("2026-07-28"));
        let headers = mirrored(&call, "2026-07-28");
        assert!(headers.contains(&("mcp-method".into(), "tools/call".into())) && headers.contains(&("mcp-name".into(), "echo".into())));
        let params = vec![("region".to_string(), "Region".to_string())];
        assert_eq!(param_values(&params, call.pointer("/params/arguments")), [("Mcp-Param-Region".to_string(), "eu".to_string())]);
        assert_eq!(modern_version(&json!({"method": "initialize", "params": {}})), None);
    }
}
