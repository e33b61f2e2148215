//! OpenTelemetry across the gateway hop: `mcpvisor serve --http` (a real
//! process) in front of the demo server, exporting over OTLP/HTTP to a
//! receiver on loopback that decodes with the official protocol
//! definitions (`opentelemetry-proto`). A client's `traceparent` header
//! becomes the parent of the gateway's request span, whose child is the
//! upstream call's span, whose context the demo server receives in
//! `_meta.traceparent`; the call counters arrive as OTLP metrics; and
//! nothing is exported, or sent on, when nothing is configured.

use std::time::Duration;

use crate::gateway_http_support as http;
use crate::otel_support::{attribute, describe, hex, receiver, spans, text, Received};
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_mcpvisor");
/// The client's own trace and span (W3C `traceparent`).
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
/// Another client trace, sent in `_meta`.
const OTHER_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
/// Long enough for a loaded machine; every wait below ends by then.
const PATIENCE: Duration = Duration::from_secs(60);

/// A config with the demo server logging each request (and its `_meta`
/// trace context) to `log`, plus `extra` tables.
fn config(log: &std::path::Path, extra: &str) -> String {
    format!("[servers.demo]\ncommand = {BIN:?}\nargs = [\"demo-server\", \"--request-log\", {:?}]\n{extra}", log.to_str().unwrap())
}

/// One `demo__echo` call in a session, sent with `headers`; checks the answer.
async fn echo(gateway: &http::Gateway, session: &str, id: u64, headers: &[(&str, &str)]) {
    echo_with_meta(gateway, session, id, headers, json!({})).await
}

/// The same, the request's `params._meta` being `meta`.
async fn echo_with_meta(gateway: &http::Gateway, session: &str, id: u64, headers: &[(&str, &str)], meta: serde_json::Value) {
    let client = http::client();
    let call = http::request(id, "tools/call", json!({"name": "demo__echo", "arguments": {"text": "hi"}, "_meta": meta}));
    let mut request = http::post(&client, &gateway.mcp(), &call).header("mcp-session-id", session);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let answer = http::json_of(request.send().await.unwrap()).await;
    assert_eq!(answer["result"]["content"][0]["text"], "hi", "{answer}");
}

/// Stops the gateway with SIGTERM (it flushes its exporters) and waits for
/// it; blocks its thread, so the receiver needs a runtime with another one.
fn stop(mut gateway: http::Gateway) -> String {
    gateway.terminate();
    let code = gateway.wait_exit(PATIENCE);
    let stderr = gateway.stderr_text();
    assert_eq!(code, Some(0), "the gateway stops cleanly: {stderr}");
    stderr
}

/// A gateway without an audit log, exporting to a fresh receiver every
/// 100 ms, the demo server logging its requests in the returned folder.
async fn traced_gateway() -> (http::Gateway, std::sync::Arc<std::sync::Mutex<Received>>, tempfile::TempDir) {
    let (url, received) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", url.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "100")];
    let gateway = http::Gateway::start_with_config(&config(&log, ""), "127.0.0.1:0", &["--no-audit"], &env).expect("the gateway starts");
    (gateway, received, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_through_the_gateway_is_one_trace_from_the_client_to_the_server() {
    let (url, received) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let env =
        [("OTEL_EXPORTER_OTLP_ENDPOINT", url.as_str()), ("OTEL_SERVICE_NAME", "gateway-under-test"), ("OTEL_BSP_SCHEDULE_DELAY", "100")];
    let gateway = http::Gateway::start_with_config(&config(&log, ""), "127.0.0.1:0", &["--no-audit"], &env).expect("the gateway starts");
    assert!(gateway.stderr_text().contains("OpenTelemetry on"), "{}", gateway.stderr_text());
    let session = http::open_session(&http::client(), &gateway.mcp()).await;
    let parent = format!("00-{TRACE_ID}-{CLIENT_SPAN}-01");
    echo(&gateway, &session, 7, &[("traceparent", &parent), ("tracestate", "client=1")]).await;
    // In `_meta` (SEP-414), which wins over a header.
    let in_meta = json!({"traceparent": format!("00-{OTHER_TRACE}-{CLIENT_SPAN}-01")});
    echo_with_meta(&gateway, &session, 8, &[("traceparent", &parent)], in_meta).await;
    stop(gateway);

    let received = received.lock().unwrap();
    let spans = spans(&received);
    for (span, _) in &spans {
        eprintln!("span: {}", describe(span));
    }
    let served: Vec<&Span> = spans.iter().map(|(span, _)| *span).filter(|span| span.name == "tools/call demo__echo").collect();
    let from_meta =
        served.iter().find(|span| text(&span.attributes, "jsonrpc.request.id") == Some("8")).expect("the second request's span");
    assert_eq!(hex(&from_meta.trace_id), OTHER_TRACE, "_meta's context wins over the header's");
    let (request, service) = spans
        .iter()
        .find(|(span, _)| span.name == "tools/call demo__echo" && text(&span.attributes, "jsonrpc.request.id") == Some("7"))
        .expect("the first request's span");
    assert_eq!(*service, Some("gateway-under-test"));
    assert_eq!(request.kind, SpanKind::Server as i32);
    assert_eq!(
        (hex(&request.trace_id), hex(&request.parent_span_id)),
        (TRACE_ID.to_string(), CLIENT_SPAN.to_string()),
        "the client's trace and span"
    );
    assert_eq!(text(&request.attributes, "mcp.method.name"), Some("tools/call"));
    assert_eq!(text(&request.attributes, "jsonrpc.request.id"), Some("7"));

    let (call, _) =
        spans.iter().find(|(span, _)| span.name == "tools/call echo" && span.parent_span_id == request.span_id).expect("the call's span");
    assert_eq!(call.kind, SpanKind::Client as i32);
    assert_eq!((hex(&call.trace_id), &call.parent_span_id), (TRACE_ID.to_string(), &request.span_id), "a child of the request's span");
    for (key, value) in [("mcpvisor.server", "demo"), ("gen_ai.tool.name", "echo"), ("mcpvisor.outcome", "ok"), ("mcpvisor.era", "modern")]
    {
        assert_eq!(text(&call.attributes, key), Some(value), "{key}: {}", describe(call));
    }
    assert!(
        matches!(attribute(&call.attributes, "mcpvisor.queue_ms"), Some(any_value::Value::DoubleValue(ms)) if *ms >= 0.0),
        "{}",
        describe(call)
    );

    let requests = std::fs::read_to_string(&log).unwrap();
    let sent = format!("tools/call echo traceparent=00-{TRACE_ID}-{}-01 tracestate=client=1", hex(&call.span_id));
    assert!(requests.lines().any(|line| line == sent), "the server gets the call span's context in _meta: {requests}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_telemetry_table_sends_call_metrics_over_otlp() {
    let (url, received) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let table = format!("[telemetry]\notlp_endpoint = {url:?}\nservice_name = \"from-the-table\"\nmetrics_interval = \"200ms\"\n");
    let gateway = http::Gateway::start_with_config(&config(&log, &table), "127.0.0.1:0", &["--no-audit"], &[]).expect("the gateway starts");
    let session = http::open_session(&http::client(), &gateway.mcp()).await;
    echo(&gateway, &session, 1, &[]).await;
    echo(&gateway, &session, 2, &[]).await;
    // The periodic push (every 200 ms) brings them while the gateway runs.
    let deadline = std::time::Instant::now() + PATIENCE;
    let counted = loop {
        let found = calls_counted(&received.lock().unwrap());
        if found == Some(2) || std::time::Instant::now() > deadline {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(counted, Some(2), "two ok calls of demo/echo counted over OTLP");
    stop(gateway);
    let received = received.lock().unwrap();
    let histogram = received
        .metrics
        .iter()
        .flat_map(|request| &request.resource_metrics)
        .flat_map(|resource| &resource.scope_metrics)
        .flat_map(|scope| &scope.metrics)
        .filter(|metric| metric.name == "mcpvisor.tool.call.duration")
        .filter_map(|metric| match &metric.data {
            Some(Data::Histogram(histogram)) => histogram.data_points.last(),
            _ => None,
        })
        .next_back()
        .expect("the latency histogram");
    assert_eq!((histogram.count, text(&histogram.attributes, "gen_ai.tool.name")), (2, Some("echo")));
    assert_eq!(histogram.explicit_bounds.first(), Some(&0.001), "the Prometheus buckets");
    let service = received.metrics[0].resource_metrics[0].resource.as_ref().and_then(|r| text(&r.attributes, "service.name"));
    assert_eq!(service, Some("from-the-table"));
    assert!(!received.traces.is_empty(), "the table's endpoint takes the traces too");
}

/// The latest `mcpvisor.tool.calls` count of ok demo/echo calls.
fn calls_counted(received: &Received) -> Option<i64> {
    let points = received
        .metrics
        .iter()
        .flat_map(|request| &request.resource_metrics)
        .flat_map(|resource| &resource.scope_metrics)
        .flat_map(|scope| &scope.metrics)
        .filter(|metric| metric.name == "mcpvisor.tool.calls")
        .filter_map(|metric| match &metric.data {
            Some(Data::Sum(sum)) => Some(&sum.data_points),
            _ => None,
        })
        .flatten();
    points
        .filter(|point| {
            [("mcpvisor.server", "demo"), ("gen_ai.tool.name", "echo"), ("mcpvisor.outcome", "ok")]
                .iter()
                .all(|(key, value)| text(&point.attributes, key) == Some(value))
        })
        .filter_map(|point| match point.value {
            Some(opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsInt(n)) => Some(n),
            _ => None,
        })
        .next_back()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_configuration_nothing_is_exported_or_sent_on() {
    // The standard OTLP/HTTP port, where a wrongly enabled exporter would go by default.
    let standard = std::net::TcpListener::bind("127.0.0.1:4318").ok();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", ""), ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ""), ("OTEL_SERVICE_NAME", "unused")];
    let gateway = http::Gateway::start_with_config(&config(&log, ""), "127.0.0.1:0", &["--no-audit"], &env).expect("the gateway starts");
    let session = http::open_session(&http::client(), &gateway.mcp()).await;
    echo(&gateway, &session, 1, &[("traceparent", &format!("00-{TRACE_ID}-{CLIENT_SPAN}-01"))]).await;
    let stderr = stop(gateway);
    assert!(!stderr.contains("OpenTelemetry"), "{stderr}");
    let requests = std::fs::read_to_string(&log).unwrap();
    assert!(requests.lines().any(|line| line == "tools/call echo"), "no trace context sent on: {requests}");
    if let Some(standard) = standard {
        standard.set_nonblocking(true).unwrap();
        assert!(standard.accept().is_err(), "nothing connected to the standard OTLP port");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_sse_client_s_traceparent_header_is_the_parent_too() {
    let (gateway, received, dir) = traced_gateway().await;
    let client = http::client();
    let stream = client.get(format!("{}/sse", gateway.base)).header("accept", "text/event-stream").send().await.unwrap();
    let mut events = http::SseReader::new(stream);
    let endpoint = events.next().await.expect("the endpoint event");
    let message_url = format!("{}{}", gateway.base, endpoint.data.as_str().expect("a URL"));
    assert_eq!(http::post(&client, &message_url, &http::initialize("2024-11-05")).send().await.unwrap().status(), 202);
    events.next().await.expect("the answer to initialize");
    let call = http::request(3, "tools/call", json!({"name": "demo__echo", "arguments": {"text": "old"}}));
    let parent = format!("00-{TRACE_ID}-{CLIENT_SPAN}-01");
    let posted = http::post(&client, &message_url, &call).header("traceparent", &parent).send().await.unwrap();
    assert_eq!(posted.status(), 202);
    let answer = events.next().await.expect("the call's answer");
    assert_eq!(answer.data["result"]["content"][0]["text"], "old", "{:?}", answer.data);
    drop(events);
    stop(gateway);

    let received = received.lock().unwrap();
    let spans = spans(&received);
    let (request, _) = spans.iter().find(|(span, _)| span.name == "tools/call demo__echo").expect("the request's span");
    assert_eq!(
        (hex(&request.trace_id), hex(&request.parent_span_id)),
        (TRACE_ID.to_string(), CLIENT_SPAN.to_string()),
        "{}",
        describe(request)
    );
    let requests = std::fs::read_to_string(dir.path().join("requests.log")).unwrap();
    assert!(
        requests.lines().any(|line| line.starts_with(&format!("tools/call echo traceparent=00-{TRACE_ID}-"))),
        "the server gets the trace on: {requests}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_augmented_call_s_upstream_span_is_its_request_s_child() {
    let (gateway, received, _dir) = traced_gateway().await;
    let client = http::client();
    let session = http::open_session(&client, &gateway.mcp()).await;
    let parent = format!("00-{TRACE_ID}-{CLIENT_SPAN}-01");
    let call = http::request(5, "tools/call", json!({"name": "demo__echo", "arguments": {"text": "later"}, "task": {"ttl": 60000}}));
    let request = http::post(&client, &gateway.mcp(), &call).header("mcp-session-id", &session).header("traceparent", &parent);
    let created = http::json_of(request.send().await.unwrap()).await;
    let task = created["result"]["task"]["taskId"].as_str().expect("a CreateTaskResult").to_string();
    let fetch = http::request(6, "tasks/result", json!({"taskId": task}));
    let result = http::json_of(http::post(&client, &gateway.mcp(), &fetch).header("mcp-session-id", &session).send().await.unwrap()).await;
    assert_eq!(result["result"]["content"][0]["text"], "later", "{result}");
    stop(gateway);

    let received = received.lock().unwrap();
    let spans = spans(&received);
    let (request, _) = spans
        .iter()
        .find(|(span, _)| span.name == "tools/call demo__echo" && text(&span.attributes, "jsonrpc.request.id") == Some("5"))
        .expect("the request's span");
    assert_eq!(hex(&request.trace_id), TRACE_ID);
    let (call, _) = spans.iter().find(|(span, _)| span.name == "tools/call echo").expect("the upstream call's span");
    assert_eq!((&call.trace_id, &call.parent_span_id), (&request.trace_id, &request.span_id), "{}", describe(call));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_rides_on_input_required_stays_its_first_request_s_child() {
    let (gateway, received, _dir) = traced_gateway().await;
    let client = http::client();
    let meta = json!({"io.modelcontextprotocol/protocolVersion": http::MODERN, "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
        "traceparent": format!("00-{TRACE_ID}-{CLIENT_SPAN}-01")});
    let first = http::request(1, "tools/call", json!({"name": "demo__sample", "arguments": {"prompt": "hello"}, "_meta": meta}));
    let pending = http::call_modern(&client, &gateway.mcp(), &first).await;
    assert_eq!(pending["result"]["resultType"], "input_required", "{pending}");
    let state = pending["result"]["requestState"].clone();
    let sampled = json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"});
    let mut retry = first.clone();
    retry["id"] = json!(2);
    retry["params"]["requestState"] = state;
    retry["params"]["inputResponses"] = json!({"sampling": sampled});
    let answer = http::call_modern(&client, &gateway.mcp(), &retry).await;
    assert_eq!(answer["result"]["content"][0]["text"], "hi", "{answer}");
    stop(gateway);

    let received = received.lock().unwrap();
    let spans = spans(&received);
    let (request, _) = spans
        .iter()
        .find(|(span, _)| span.name == "tools/call demo__sample" && text(&span.attributes, "jsonrpc.request.id") == Some("1"))
        .expect("the first request's span");
    assert_eq!(hex(&request.parent_span_id), CLIENT_SPAN);
    let (call, _) = spans.iter().find(|(span, _)| span.name == "tools/call sample").expect("the upstream call's span");
    assert_eq!((&call.trace_id, &call.parent_span_id), (&request.trace_id, &request.span_id), "{}", describe(call));
    assert_eq!(text(&call.attributes, "mcpvisor.outcome"), Some("ok"), "{}", describe(call));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_is_down_is_said_once_a_minute_and_counted() {
    // A port that was just free: nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let endpoint = format!("http://{closed}");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "100")];
    let gateway = http::Gateway::start_with_config(&config(&log, ""), "127.0.0.1:0", &["--no-audit"], &env).expect("the gateway starts");
    let session = http::open_session(&http::client(), &gateway.mcp()).await;
    let failures = || async {
        let text = http::client().get(format!("{}/metrics", gateway.base)).send().await.unwrap().text().await.unwrap();
        text.lines().find_map(|line| line.strip_prefix("mcpvisor_otel_export_failures_total ")).and_then(|n| n.parse::<f64>().ok())
    };
    // Calls go on while their spans are lost; each batch (every 100 ms) fails.
    let deadline = std::time::Instant::now() + PATIENCE;
    let mut id = 1;
    while failures().await.unwrap_or(0.0) < 3.0 {
        assert!(std::time::Instant::now() < deadline, "no failed export counted: {}", gateway.stderr_text());
        echo(&gateway, &session, id, &[]).await;
        id += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stderr = stop(gateway);
    let notices: Vec<&str> =
        stderr.lines().filter(|line| line.contains("OpenTelemetry: ") && line.contains("export(s) of spans")).collect();
    assert_eq!(notices.len(), 1, "said once for many failures: {stderr}");
    assert!(notices[0].contains(&format!("{endpoint}/v1/traces")), "{}", notices[0]);
}
