//! The JSON Schema of mcpvisor's whole TOML file, derived from the same
//! types serde reads it into (`mcpvisor config schema`, and
//! docs/servers.schema.json).

use std::collections::BTreeMap;

use schemars::JsonSchema;

use super::read::ServerFile;
use crate::config::agent::AgentFile;
use crate::config::audit::AuditFile;
use crate::config::otel::TelemetryFile;
use crate::config::sandbox::SandboxDefaultFile;
use crate::config::scan::ScanFile;
use crate::config::serve::ServeFile;

/// mcpvisor's configuration file (`servers.toml`, `.mcpvisor.toml`). Only
/// described: each table is read on its own ([`super::parse_with_agent`] and the others).
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields, title = "mcpvisor configuration")]
#[allow(dead_code)]
struct ConfigFile {
    /// One table per server: `[servers.NAME]`.
    servers: Option<BTreeMap<String, ServerFile>>,
    /// The agent: its model, limits and confirmations (docs/agent.md).
    agent: Option<AgentFile>,
    /// The audit log of tool calls (docs/operations.md).
    audit: Option<AuditFile>,
    /// How `mcpvisor serve` guards itself: tokens, keys, policies (docs/gateway.md).
    serve: Option<ServeFile>,
    sandbox: Option<SandboxDefaultFile>,
    /// What the scanner of tools' texts withholds (docs/security.md).
    scan: Option<ScanFile>,
    /// OpenTelemetry export (docs/operations.md).
    telemetry: Option<TelemetryFile>,
}

/// An unset key is left out, as TOML has no null: the `null` that serde
/// allows for an `Option` is taken out of the schema.
fn without_null(schema: &mut schemars::Schema) {
    let Some(object) = schema.as_object_mut() else { return };
    if let Some(serde_json::Value::Array(words)) = object.get_mut("enum") {
        words.retain(|word| !word.is_null());
    }
    if let Some(serde_json::Value::Array(types)) = object.get_mut("type") {
        types.retain(|kind| kind != "null");
        if let [single] = types.as_slice() {
            let single = single.clone();
            object.insert("type".into(), single);
        }
    }
    let Some(serde_json::Value::Array(choices)) = object.get_mut("anyOf") else { return };
    choices.retain(|choice| choice.get("type").is_none_or(|kind| kind != "null"));
    if let [single] = choices.as_slice() {
        let Some(single) = single.as_object().cloned() else { return };
        object.remove("anyOf");
        object.extend(single);
    }
}

/// The JSON Schema (draft 2020-12) of mcpvisor's TOML, as `mcpvisor config schema` prints it.
#[doc(hidden)]
pub fn json_schema() -> serde_json::Value {
    let settings = schemars::generate::SchemaSettings::draft2020_12().for_deserialize();
    let generator = settings.with_transform(schemars::transform::RecursiveTransform(without_null)).into_generator();
    generator.into_root_schema_for::<ConfigFile>().to_value()
}
