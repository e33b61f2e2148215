//! The gateway's span of each request it serves (OpenTelemetry on): a
//! server span, child of the client's context (`params._meta.traceparent`;
//! the HTTP front copies a `traceparent` header there), made current while
//! the request's work runs, so the tool calls it makes are its children
//! ([`crate::telemetry::otel`]).

use opentelemetry::trace::{Status, TraceContextExt};
use opentelemetry::{Context, KeyValue};
use serde_json::Value;

use super::work::{Answered, Pool};
use crate::protocol::{methods, ErrorObject, RequestId};
use crate::telemetry::otel;

/// The client's trace context of a request (`params._meta.traceparent`),
/// read before its params are parsed; `None` when OpenTelemetry is off.
pub(super) fn parent(pool: &Pool, params: &Value) -> Option<Context> {
    pool.handle.telemetry().otel().map(|_| otel::extract_from_meta(params))
}

/// The span of request `id`, child of `parent`, named by its method and
/// `target` (the tool or prompt called, the resource read;
/// [`crate::server::request::ClientRequest::target`]). `None` when
/// OpenTelemetry is off.
pub(super) fn request_span(pool: &Pool, id: &RequestId, method: &str, target: Option<&str>, parent: Option<Context>) -> Option<Context> {
    let (otel, parent) = (pool.handle.telemetry().otel()?, parent?);
    let name = match target {
        Some(target) => format!("{method} {target}"),
        None => method.to_string(),
    };
    let mut attributes = vec![
        KeyValue::new("mcp.method.name", method.to_string()),
        KeyValue::new("jsonrpc.request.id", id.to_string()),
        KeyValue::new("mcpvisor.caller", pool.caller.to_string()),
    ];
    if let (methods::TOOLS_CALL, Some(tool)) = (method, target) {
        attributes.push(KeyValue::new("gen_ai.tool.name", tool.to_string()));
    }
    if let Some(identity) = &pool.identity {
        attributes.push(KeyValue::new("enduser.id", identity.subject.clone()));
        if let Some(client) = &identity.client_id {
            attributes.push(KeyValue::new("mcpvisor.client_id", client.clone()));
        }
    }
    Some(otel.request_span(name, &parent, attributes))
}

/// Ends the request's span with its outcome (an error answer's code).
pub(super) fn end(trace: &Context, outcome: &Result<Answered, ErrorObject>) {
    let span = trace.span();
    if let Err(error) = outcome {
        span.set_attribute(KeyValue::new("rpc.response.status_code", error.code.to_string()));
        span.set_status(Status::error(error.message.clone()));
    } else if outcome.as_ref().is_ok_and(Answered::is_tool_error) {
        span.set_attribute(KeyValue::new("error.type", "tool_error"));
        span.set_status(Status::error("the tool reported an error"));
    }
    span.end();
}
