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

use toml_edit::Item;

use crate::error::ConfigError;

const KEYS: [&str; 3] = ["otlp_endpoint", "service_name", "metrics_interval"];

/// What the `[telemetry]` table says; `None` fields fall back to the
/// standard `OTEL_*` variables, then to the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OtlpSettings {
    /// The collector's base URL (`http://` or `https://`).
    pub endpoint: Option<String>,
    pub service_name: Option<String>,
    pub metrics_interval: Option<Duration>,
}

/// Reads `[telemetry]` of the file at `path`.
pub(crate) fn read(path: &Path, item: &Item) -> Result<OtlpSettings, ConfigError> {
    let invalid = |field: &str, message: &str| ConfigError::InvalidSetting {
        file: path.into(),
        field: format!("telemetry.{field}"),
        message: message.into(),
    };
    let table = item
        .as_table_like()
        .ok_or_else(|| invalid("", "must be a table: write [telemetry] with otlp_endpoint = \"http://...\" below it"))?;
    let mut settings = OtlpSettings::default();
    for (key, value) in table.iter() {
        match key {
            "otlp_endpoint" => {
                let url = value
                    .as_str()
                    .filter(|url| url.starts_with("http://") || url.starts_with("https://"))
                    .filter(|url| url.parse::<http::Uri>().is_ok())
                    .ok_or_else(|| invalid(key, "must be the collector's http:// or https:// URL, like \"http://127.0.0.1:4318\""))?;
                settings.endpoint = Some(url.to_string());
            }
            "service_name" => {
                let name =
                    value.as_str().filter(|name| !name.trim().is_empty()).ok_or_else(|| invalid(key, "must be a non-empty string"))?;
                settings.service_name = Some(name.to_string());
            }
            "metrics_interval" => {
                let interval = value
                    .as_str()
                    .and_then(super::duration::parse_duration)
                    .filter(|interval| *interval >= Duration::from_millis(100))
                    .ok_or_else(|| invalid(key, "must be a span of time of at least 100ms, like \"60s\""))?;
                settings.metrics_interval = Some(interval);
            }
            _ => {
                return Err(ConfigError::UnknownKey {
                    file: path.into(),
                    server: None,
                    key: format!("telemetry.{key}"),
                    known: KEYS.to_vec(),
                })
            }
        }
    }
    Ok(settings)
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
