//! OpenTelemetry for the commands that run servers (`serve`, `agent`,
//! `chat`, `acp`): started from the `[telemetry]` table or the standard
//! `OTEL_*` variables before the command's runtime (the exporters run on
//! their own threads), flushed at exit within a deadline
//! ([`crate::telemetry::otel`]).

use std::time::Duration;

use super::output::{warn, Failure};
use super::servers::{env, Servers};
use crate::telemetry::{Otel, Telemetry};

/// How long the last export of each signal may take at exit.
pub const FLUSH_DEADLINE: Duration = Duration::from_secs(10);

/// `telemetry` with OpenTelemetry added when configured (said on stderr);
/// a setting that cannot work is a usage error naming it.
pub fn start(servers: &Servers, telemetry: Telemetry) -> Result<Telemetry, Failure> {
    match Otel::start(servers.telemetry.as_ref(), env).map_err(|e| Failure::usage(e.to_string()))? {
        Some(otel) => {
            eprintln!("mcpvisor: OpenTelemetry on: traces and metrics of service `{}` go over OTLP", otel.service_name());
            Ok(telemetry.with_otel(otel))
        }
        None => Ok(telemetry),
    }
}

/// Sends the last spans and metrics, waiting at most `deadline` for each;
/// a collector that does not take them is warned about. Call it once the
/// servers stopped (their calls' spans have ended).
pub async fn flush(telemetry: &Telemetry, deadline: Duration) {
    if telemetry.otel().is_none() {
        return;
    }
    let telemetry = telemetry.clone();
    let flushed = tokio::task::spawn_blocking(move || telemetry.otel().map_or(Ok(()), |otel| otel.shutdown(deadline)));
    if let Err(problem) = flushed.await.unwrap_or_else(|e| Err(e.to_string())) {
        warn(format_args!("OpenTelemetry: {problem}; check the collector"));
    }
}
