//! The `[telemetry]` table of mcpvisor's TOML: where OpenTelemetry traces
//! and metrics go (OTLP over HTTP, protobuf), as plain data;
//! `crate::telemetry::otel` exports to the endpoint these values name.
//!
//! ```toml
//! [telemetry]
//! otlp_endpoint = "http://127.0.0.1:4318"  # the collector's base URL; /v1/traces and /v1/metrics are added
//! service_name = "mcpvisor-gateway"        # resource attribute service.name (default "mcpvisor")
//! metrics_interval = "60s"                 # how often metrics are pushed
//! ```
//!
//! Off when neither the table nor the standard variables
//! (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)
//! name an endpoint. A later file's table replaces an earlier one's whole.

use std::path::Path;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use toml_edit::Item;

use super::de::{from_node, Node};
use super::duration::parse_duration;
use super::values::{scalar_type, Scalar, DURATION_PATTERN, TABLE_EXAMPLES};
use crate::error::ConfigError;

/// What the `[telemetry]` table says; `None` fields fall back to the
/// standard `OTEL_*` variables, then to the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OtlpSettings {
    /// The collector's base URL (`http://` or `https://`).
    pub endpoint: Option<String>,
    pub service_name: Option<String>,
    pub metrics_interval: Option<Duration>,
}

/// `[telemetry]` as written.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TelemetryFile {
    /// The collector's base URL; /v1/traces and /v1/metrics are added.
    otlp_endpoint: Option<Endpoint>,
    /// The resource attribute service.name (default "mcpvisor").
    service_name: Option<ServiceName>,
    /// How often metrics are pushed, like "60s".
    metrics_interval: Option<Interval>,
}

scalar_type!(
    Endpoint(String),
    "the collector's http:// or https:// URL, like \"http://127.0.0.1:4318\"",
    { "type": "string", "pattern": "^https?://" },
    |value: Scalar| match value {
        Scalar::Str(url) if (url.starts_with("http://") || url.starts_with("https://")) && url.parse::<http::Uri>().is_ok() => Some(url),
        _ => None,
    }
);

scalar_type!(ServiceName(String), "a non-empty string", { "type": "string", "minLength": 1 }, |value: Scalar| match value {
    Scalar::Str(name) if !name.trim().is_empty() => Some(name),
    _ => None,
});

scalar_type!(
    Interval(Duration),
    "a span of time of at least 100ms, like \"60s\"",
    { "type": "string", "pattern": DURATION_PATTERN },
    |value: Scalar| match value {
        Scalar::Str(text) => parse_duration(&text).filter(|interval| *interval >= Duration::from_millis(100)),
        _ => None,
    }
);

/// Reads `[telemetry]` of the file at `path`.
pub(crate) fn read(path: &Path, item: &Item) -> Result<OtlpSettings, ConfigError> {
    if item.as_table_like().is_none() {
        let message = "must be a table: write [telemetry] with otlp_endpoint = \"http://...\" below it".into();
        return Err(ConfigError::InvalidSetting { file: path.into(), field: "telemetry.".into(), message });
    }
    let table: TelemetryFile = from_node(Node::Item(item), "telemetry", TABLE_EXAMPLES).map_err(|error| error.into_setting_error(path))?;
    Ok(OtlpSettings {
        endpoint: table.otlp_endpoint.map(|url| url.0),
        service_name: table.service_name.map(|name| name.0),
        metrics_interval: table.metrics_interval.map(|interval| interval.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn telemetry(text: &str) -> Result<OtlpSettings, String> {
        let document: toml_edit::DocumentMut = text.parse().unwrap();
        read(Path::new("/etc/mcpvisor/servers.toml"), &document["telemetry"]).map_err(|e| e.to_string())
    }

    #[test]
    fn reads_every_key() {
        let settings =
            telemetry("[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318\"\nservice_name = \"gw\"\nmetrics_interval = \"5s\"\n")
                .unwrap();
        assert_eq!(settings.endpoint.as_deref(), Some("http://127.0.0.1:4318"));
        assert_eq!(settings.service_name.as_deref(), Some("gw"));
        assert_eq!(settings.metrics_interval, Some(Duration::from_secs(5)));
    }

    #[test]
    fn errors_name_the_file_and_the_key() {
        for (body, expected) in [
            ("otlp_endpoint = \"127.0.0.1:4318\"", "`telemetry.otlp_endpoint` must be the collector's http:// or https:// URL"),
            ("service_name = \"\"", "`telemetry.service_name` must be a non-empty string"),
            ("metrics_interval = \"1ms\"", "`telemetry.metrics_interval` must be a span of time of at least 100ms"),
            ("endpoint = \"x\"", "unknown key `telemetry.endpoint`; the known keys are otlp_endpoint"),
        ] {
            let message = telemetry(&format!("[telemetry]\n{body}\n")).unwrap_err();
            assert!(message.starts_with("/etc/mcpvisor/servers.toml: ") && message.contains(expected), "{message}");
        }
    }
}
