//! The OTLP exporters, watched: a batch of spans or metrics that cannot be
//! sent (the collector is down, refuses, or times out) is counted and said.
//!
//! Invariants:
//! - every failed export is counted ([`ExportFailures::count`], in
//!   `/metrics` as `mcpvisor_otel_export_failures_total`);
//! - it is said on stderr (and to `tracing`) at most once per
//!   [`SAY_EVERY`] per signal, with how many failed since the last word
//!   and the last reason: a collector that is down for an hour is a few
//!   dozen lines, not one per batch;
//! - the watch adds nothing to an export that succeeds but one atomic load.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;

/// How often a failing signal is said at most.
pub const SAY_EVERY: Duration = Duration::from_secs(60);

/// The failed exports of one signal (`spans` or `metrics`) to one endpoint.
#[derive(Debug)]
pub struct ExportFailures {
    signal: &'static str,
    /// Where they go, for the message (the configured endpoint, or the variables' word).
    endpoint: String,
    count: AtomicU64,
    /// When it was last said, and the count then.
    said: Mutex<Option<(Instant, u64)>>,
}

impl ExportFailures {
    pub fn new(signal: &'static str, endpoint: String) -> Arc<ExportFailures> {
        Arc::new(ExportFailures { signal, endpoint, count: AtomicU64::new(0), said: Mutex::new(None) })
    }

    /// Failed exports so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Counts one failed export of `items` items, and says so unless it
    /// was said less than [`SAY_EVERY`] ago.
    fn failed(&self, items: usize, error: &dyn std::fmt::Display) {
        let count = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        let mut said = self.said.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let since = match *said {
            Some((at, _)) if at.elapsed() < SAY_EVERY => return,
            Some((_, then)) => count - then,
            None => count,
        };
        *said = Some((Instant::now(), count));
        drop(said);
        let (signal, endpoint) = (self.signal, &self.endpoint);
        tracing::warn!(signal, endpoint = %endpoint, failed = since, total = count, error = %error, "OpenTelemetry export failed");
        eprintln!(
            "mcpvisor: warning: OpenTelemetry: {since} export(s) of {signal} to {endpoint} failed since the last notice \
             ({count} in all; the last, of {items} item(s): {error}); calls go on, those {signal} are lost; \
             check that the collector is up (said at most once a minute)"
        );
    }
}

/// An exporter whose failures are counted and said ([`ExportFailures`]).
#[derive(Debug)]
pub struct Watched<E> {
    inner: E,
    failures: Arc<ExportFailures>,
}

impl<E> Watched<E> {
    pub fn new(inner: E, failures: Arc<ExportFailures>) -> Watched<E> {
        Watched { inner, failures }
    }
}

impl<E: SpanExporter> SpanExporter for Watched<E> {
    fn export(&self, batch: Vec<SpanData>) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        let items = batch.len();
        async move {
            let result = self.inner.export(batch).await;
            if let Err(error) = &result {
                self.failures.failed(items, error);
            }
            result
        }
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

impl<E: PushMetricExporter> PushMetricExporter for Watched<E> {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let result = self.inner.export(metrics).await;
        if let Err(error) = &result {
            let items = metrics.scope_metrics().map(|scope| scope.metrics().count()).sum::<usize>();
            self.failures.failed(items, error);
        }
        result
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_all_counted_and_said_once_a_minute() {
        let failures = ExportFailures::new("spans", "http://127.0.0.1:4318".into());
        for _ in 0..5 {
            failures.failed(3, &"connection refused");
        }
        assert_eq!(failures.count(), 5);
        let said = *failures.said.lock().unwrap();
        assert_eq!(said.map(|(_, count)| count), Some(1), "said at the first failure only");
    }
}
