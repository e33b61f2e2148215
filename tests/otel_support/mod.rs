//! A receiver of OTLP/HTTP exports on loopback, decoded with the official
//! protocol definitions (`opentelemetry-proto`), and helpers to read spans.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

/// What the receiver was sent, decoded.
#[derive(Default)]
pub struct Received {
    pub traces: Vec<ExportTraceServiceRequest>,
    pub metrics: Vec<ExportMetricsServiceRequest>,
}

/// An OTLP/HTTP receiver on 127.0.0.1: its base URL and what it got.
pub async fn receiver() -> (String, Arc<Mutex<Received>>) {
    let received = Arc::new(Mutex::new(Received::default()));
    let (traces, metrics) = (received.clone(), received.clone());
    let app = axum::Router::new()
        .route(
            "/v1/traces",
            post(move |body: Bytes| async move {
                let request = ExportTraceServiceRequest::decode(body).expect("an ExportTraceServiceRequest");
                traces.lock().unwrap().traces.push(request);
                ([("content-type", "application/x-protobuf")], Vec::new())
            }),
        )
        .route(
            "/v1/metrics",
            post(move |body: Bytes| async move {
                let request = ExportMetricsServiceRequest::decode(body).expect("an ExportMetricsServiceRequest");
                metrics.lock().unwrap().metrics.push(request);
                ([("content-type", "application/x-protobuf")], Vec::new())
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

/// Every span received, with its resource's `service.name`.
pub fn spans(received: &Received) -> Vec<(&Span, Option<&str>)> {
    received
        .traces
        .iter()
        .flat_map(|request| &request.resource_spans)
        .flat_map(|resource| {
            let service = resource.resource.as_ref().and_then(|r| text(&r.attributes, "service.name"));
            resource.scope_spans.iter().flat_map(move |scope| scope.spans.iter().map(move |span| (span, service)))
        })
        .collect()
}

pub fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()).and_then(|value| value.value.as_ref())
}

pub fn text<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a str> {
    match attribute(attributes, key) {
        Some(any_value::Value::StringValue(text)) => Some(text),
        _ => None,
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One line per span: name, kind, ids, parent, attributes (for the eye).
pub fn describe(span: &Span) -> String {
    let attributes: Vec<String> =
        span.attributes.iter().map(|kv| format!("{}={:?}", kv.key, kv.value.as_ref().and_then(|v| v.value.as_ref()))).collect();
    format!(
        "{} kind={:?} trace={} span={} parent={} status={:?} [{}]",
        span.name,
        SpanKind::try_from(span.kind).unwrap_or(SpanKind::Unspecified),
        hex(&span.trace_id),
        hex(&span.span_id),
        hex(&span.parent_span_id),
        span.status.as_ref().map(|s| s.code),
        attributes.join(", ")
    )
}
