//! OpenTelemetry traces and metrics, exported over OTLP/HTTP (protobuf).
//!
//! Off unless an endpoint is configured ([`OtlpSettings`], or the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
//! variables): then [`super::Telemetry`] holds no [`Otel`] and the call
//! path pays one `Option` check, nothing allocated.
//!
//! Invariants:
//! - spans are exported by the SDK's batch processor on its own thread, its
//!   queue bounded (2048 spans by default, `OTEL_BSP_MAX_QUEUE_SIZE`; more are
//!   dropped), so a slow collector never slows a call;
//! - metrics are pushed every `metrics_interval` (`OTEL_METRIC_EXPORT_INTERVAL`,
//!   60 s by default) by the SDK's periodic reader, on its own thread;
//! - [`Otel::shutdown`] flushes both within a deadline, and must run off
//!   any tokio runtime's thread (it blocks);
//! - trace context travels in W3C form (`traceparent`, `tracestate`) both in
//!   HTTP headers and in a request's `params._meta` (SEP-414).

use std::borrow::Cow;
use std::time::Duration;

use opentelemetry::metrics::{Counter, Histogram, MeterProvider as _};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use serde_json::{Map, Value};

use crate::config::OtlpSettings;

use super::metrics::{Outcome, LATENCY_BUCKETS};
use super::otel_export::{ExportFailures, Watched};

/// The service name when neither the table nor `OTEL_SERVICE_NAME` gives one.
pub const DEFAULT_SERVICE_NAME: &str = "mcpvisor";
/// How long one export may take before it is given up.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// The instrumentation scope of every span and instrument.
const SCOPE: &str = "mcpvisor";

/// The exporters and instruments of one process; see the module invariants.
#[derive(Debug)]
pub struct Otel {
    tracer: SdkTracer,
    traces: SdkTracerProvider,
    meters: SdkMeterProvider,
    calls: Counter<u64>,
    latency: Histogram<f64>,
    service_name: String,
    /// Exports of spans, then of metrics, that could not be sent.
    failures: [std::sync::Arc<ExportFailures>; 2],
}

/// Why OpenTelemetry could not start, naming the setting to fix.
#[derive(Debug, thiserror::Error)]
#[error("OpenTelemetry: {0}")]
pub struct OtelError(String);

impl Otel {
    /// Starts the exporters when an endpoint is configured; `None` when
    /// not (or when `OTEL_SDK_DISABLED=true`). `env` reads variables.
    pub fn start(settings: Option<&OtlpSettings>, env: impl Fn(&str) -> Option<String>) -> Result<Option<Otel>, OtelError> {
        let env = |name: &str| env(name).filter(|value| !value.trim().is_empty());
        if env("OTEL_SDK_DISABLED").is_some_and(|value| value.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let endpoint = settings.and_then(|settings| settings.endpoint.clone());
        let traces_on =
            endpoint.is_some() || env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some() || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some();
        if !traces_on {
            return Ok(None);
        }
        let metrics_on =
            endpoint.is_some() || env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some() || env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT").is_some();
        let service_name = settings
            .and_then(|settings| settings.service_name.clone())
            .or_else(|| env("OTEL_SERVICE_NAME"))
            .unwrap_or_else(|| DEFAULT_SERVICE_NAME.into());
        let resource = Resource::builder().with_service_name(service_name.clone()).build();
        // Where a configured base URL's signals go (the OTLP/HTTP paths); without one the exporter reads the variables.
        let signal_url = |path: &str| endpoint.as_ref().map(|base| format!("{}/{path}", base.trim_end_matches('/')));
        let where_from = match &endpoint {
            Some(_) => "check [telemetry] otlp_endpoint",
            None => "check OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        };
        let fail =
            |what: &str, error: &dyn std::fmt::Display| OtelError(format!("cannot start the {what} exporter: {error}; {where_from}"));
        // Where each signal goes, for the notice of a failed export (no user or query part).
        let target = |path: &str, variable: &str| {
            let url = signal_url(path)
                .or_else(|| env(variable))
                .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT").map(|base| format!("{}/{path}", base.trim_end_matches('/'))))
                .unwrap_or_default();
            match reqwest::Url::parse(&url) {
                Ok(mut url) => {
                    let _ = (url.set_username(""), url.set_password(None));
                    url.set_query(None);
                    url.to_string()
                }
                Err(_) => format!("the collector {variable} names"),
            }
        };
        let failures = [
            ExportFailures::new("spans", target("v1/traces", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")),
            ExportFailures::new("metrics", target("v1/metrics", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")),
        ];

        let mut spans =
            opentelemetry_otlp::SpanExporter::builder().with_http().with_http_client(http_client().map_err(|e| fail("span", &e))?);
        if let Some(url) = signal_url("v1/traces") {
            spans = spans.with_endpoint(url);
        }
        let spans = Watched::new(spans.with_timeout(EXPORT_TIMEOUT).build().map_err(|e| fail("span", &e))?, failures[0].clone());
        let traces = SdkTracerProvider::builder()
            .with_span_processor(BatchSpanProcessor::builder(spans).build())
            .with_resource(resource.clone())
            .build();

        let mut meters = SdkMeterProvider::builder().with_resource(resource);
        if metrics_on {
            let mut exporter =
                opentelemetry_otlp::MetricExporter::builder().with_http().with_http_client(http_client().map_err(|e| fail("metric", &e))?);
            if let Some(url) = signal_url("v1/metrics") {
                exporter = exporter.with_endpoint(url);
            }
            let exporter =
                Watched::new(exporter.with_timeout(EXPORT_TIMEOUT).build().map_err(|e| fail("metric", &e))?, failures[1].clone());
            let mut reader = PeriodicReader::builder(exporter);
            if let Some(interval) = settings.and_then(|settings| settings.metrics_interval) {
                reader = reader.with_interval(interval);
            }
            meters = meters.with_reader(reader.build());
        }
        let meters = meters.build();
        let meter = meters.meter(SCOPE);
        let calls = meter.u64_counter("mcpvisor.tool.calls").with_description("Tool calls answered, by server, tool and outcome").build();
        let latency = meter
            .f64_histogram("mcpvisor.tool.call.duration")
            .with_unit("s")
            .with_description("Time from a tool call's arrival at its server's connection to its answer")
            .with_boundaries(LATENCY_BUCKETS.to_vec())
            .build();
        Ok(Some(Otel { tracer: traces.tracer(SCOPE), traces, meters, calls, latency, service_name, failures }))
    }

    pub fn service_name(&self) -> &str {
        &self.service_name
    }

    /// Exports (of spans or metrics) that could not be sent so far.
    pub fn export_failures(&self) -> u64 {
        self.failures.iter().map(|failures| failures.count()).sum()
    }

    /// A server-side span of one request the gateway serves, child of
    /// `parent` (the client's context, or none); the returned context holds it.
    #[doc(hidden)]
    pub fn request_span(&self, name: String, parent: &Context, attributes: Vec<KeyValue>) -> Context {
        let span =
            self.tracer.span_builder(name).with_kind(SpanKind::Server).with_attributes(attributes).start_with_context(&self.tracer, parent);
        parent.with_span(span)
    }

    /// A client-side span of one call to a server (or a model), child of `parent`.
    #[doc(hidden)]
    pub fn client_span(&self, name: String, parent: Option<&Context>, attributes: Vec<KeyValue>) -> Context {
        self.span(name, SpanKind::Client, parent, attributes)
    }

    /// A span of work inside the process (an agent's turn), child of `parent`.
    #[doc(hidden)]
    pub fn internal_span(&self, name: String, parent: Option<&Context>, attributes: Vec<KeyValue>) -> Context {
        self.span(name, SpanKind::Internal, parent, attributes)
    }

    fn span(&self, name: String, kind: SpanKind, parent: Option<&Context>, attributes: Vec<KeyValue>) -> Context {
        let root = Context::new();
        let parent = parent.unwrap_or(&root);
        let span = self.tracer.span_builder(name).with_kind(kind).with_attributes(attributes).start_with_context(&self.tracer, parent);
        parent.with_span(span)
    }

    /// Counts and times one finished tool call.
    pub(crate) fn record_call(&self, server: &str, tool: &str, outcome: Outcome, took: Duration) {
        let attributes = [
            KeyValue::new("mcpvisor.server", server.to_string()),
            KeyValue::new("gen_ai.tool.name", tool.to_string()),
            KeyValue::new("mcpvisor.outcome", outcome.label()),
        ];
        self.calls.add(1, &attributes);
        self.latency.record(took.as_secs_f64(), &attributes[..2]);
    }

    /// Flushes what is buffered and stops the exporters, within `deadline`
    /// each; what could not be sent, if anything. Blocks: call it off the
    /// runtime's thread.
    pub fn shutdown(&self, deadline: Duration) -> Result<(), String> {
        let traces = self.traces.shutdown_with_timeout(deadline);
        let meters = self.meters.shutdown_with_timeout(deadline);
        let failed: Vec<String> = [("spans", traces), ("metrics", meters)]
            .into_iter()
            .filter_map(|(signal, outcome)| outcome.err().map(|error| format!("the last {signal} ({error})")))
            .collect();
        match failed.is_empty() {
            true => Ok(()),
            false => Err(format!("{} could not be sent within {deadline:?}", failed.join(" and "))),
        }
    }
}

/// The exporters' HTTP client (reqwest's blocking half: the SDK exports on
/// its own threads, outside any tokio runtime).
fn http_client() -> Result<reqwest::blocking::Client, reqwest::Error> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::blocking::Client::builder().timeout(EXPORT_TIMEOUT).build()
}

/// The context a request's `params._meta` carries (`traceparent`,
/// `tracestate`), or an empty one; a malformed `traceparent` is ignored.
#[doc(hidden)]
pub fn extract_from_meta(params: &Value) -> Context {
    match params.get("_meta").and_then(Value::as_object) {
        Some(meta) => TraceContextPropagator::new().extract(&MetaCarrier(meta)),
        None => Context::new(),
    }
}

/// Whether `cx` holds a span whose context can be sent on.
#[doc(hidden)]
pub fn has_span(cx: &Context) -> bool {
    cx.span().span_context().is_valid()
}

/// Writes `cx`'s span as `traceparent` (and `tracestate`) into `meta`.
#[doc(hidden)]
pub fn inject_into_meta(cx: &Context, meta: &mut Map<String, Value>) {
    TraceContextPropagator::new().inject_context(cx, &mut MetaInjector(meta));
}

/// Tells the span `cx` holds how long its call waited for a free slot
/// (`mcpvisor.queue_ms`; 0 when one was free).
#[doc(hidden)]
pub fn queued_for(cx: &Context, waited: Duration) {
    cx.span().set_attribute(KeyValue::new("mcpvisor.queue_ms", waited.as_secs_f64() * 1000.0));
}

/// Tells the span `cx` holds how long its call waited for its rate-limit permit.
#[doc(hidden)]
pub fn rate_limited_for(cx: &Context, waited: Duration) {
    cx.span().set_attribute(KeyValue::new("mcpvisor.rate_limit_wait_ms", waited.as_secs_f64() * 1000.0));
}

/// Ends the span `cx` holds with `outcome` (and the error kind, if any).
#[doc(hidden)]
pub fn end_span(cx: &Context, outcome: Outcome, error_kind: Option<&'static str>) {
    let span = cx.span();
    span.set_attribute(KeyValue::new("mcpvisor.outcome", outcome.label()));
    if let Some(kind) = error_kind {
        span.set_attribute(KeyValue::new("error.type", kind));
    }
    if !matches!(outcome, Outcome::Ok) {
        span.set_status(Status::Error { description: Cow::Borrowed(outcome.label()) });
    }
    span.end();
}

struct MetaCarrier<'a>(&'a Map<String, Value>);

impl Extractor for MetaCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

struct MetaInjector<'a>(&'a mut Map<String, Value>);

impl Injector for MetaInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_string(), Value::String(value));
    }
}

/// `work` with `trace` current while it runs (the tool calls it makes are
/// children of that span), or `work` itself when there is none.
#[doc(hidden)]
pub fn within<F: std::future::Future>(trace: Option<Context>, work: F) -> impl std::future::Future<Output = F::Output> {
    match trace {
        Some(trace) => futures::future::Either::Left(opentelemetry::trace::FutureExt::with_context(work, trace)),
        None => futures::future::Either::Right(work),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn meta_round_trips_the_w3c_context_and_ignores_malformed_ones() {
        let params = serde_json::json!({"_meta": {"traceparent": PARENT, "tracestate": "rojo=00f067aa0ba902b7"}});
        let cx = extract_from_meta(&params);
        let span = cx.span().span_context().clone();
        assert_eq!(span.trace_id(), TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap());
        assert_eq!(span.span_id(), SpanId::from_hex("00f067aa0ba902b7").unwrap());
        assert!(span.is_remote() && span.is_sampled());
        let mut meta = Map::new();
        inject_into_meta(&cx, &mut meta);
        assert_eq!(meta["traceparent"], PARENT);
        assert_eq!(meta["tracestate"], "rojo=00f067aa0ba902b7");

        for broken in [serde_json::json!({"_meta": {"traceparent": "00-zz-00f067aa0ba902b7-01"}}), serde_json::json!({"_meta": 3})] {
            assert!(!has_span(&extract_from_meta(&broken)), "{broken}");
        }
        let unsampled = SpanContext::new(span.trace_id(), span.span_id(), TraceFlags::default(), true, TraceState::default());
        let mut meta = Map::new();
        inject_into_meta(&Context::new().with_remote_span_context(unsampled), &mut meta);
        assert!(meta["traceparent"].as_str().unwrap().ends_with("-00"), "{meta:?}");
    }

    #[test]
    fn off_without_an_endpoint() {
        assert!(Otel::start(None, |_| None).unwrap().is_none());
        let disabled = |name: &str| match name {
            "OTEL_SDK_DISABLED" => Some("true".into()),
            _ => Some("http://127.0.0.1:9".into()),
        };
        assert!(Otel::start(None, disabled).unwrap().is_none());
    }
}
