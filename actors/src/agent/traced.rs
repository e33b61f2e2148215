//! The agent's spans (OpenTelemetry on; [`crate::telemetry::otel`]), named
//! after the OpenTelemetry GenAI semantic conventions: one internal span
//! per turn (`invoke_agent`), and as its children a client span per model
//! request (`chat {model}`: provider, model, outcome, tokens when the
//! answer says them) and the turn's tool calls (the connection's
//! `tools/call` spans, made children through `CallTool::with_trace`).
//!
//! Invariant: every span started here ends once, a dropped one (the turn
//! was cancelled) as `error.type = cancelled`.

use std::sync::{Arc, Mutex};

use opentelemetry::trace::{Status, TraceContextExt};
use opentelemetry::{Context, KeyValue};

use super::events::AgentError;
use crate::llm::{StopReason, Usage};
use crate::telemetry::Otel;

/// One span of the agent, `None` inside when OpenTelemetry is off or once
/// it ended (a turn's is shared by its tool calls, hence the lock).
pub(super) struct Traced(Mutex<Option<Context>>);

impl Traced {
    /// The span of a turn with `model` (`provider/model`).
    pub(super) fn turn(otel: Option<&Arc<Otel>>, model: &str) -> Traced {
        Traced::of(otel.map(|otel| {
            let attributes = vec![
                KeyValue::new("gen_ai.operation.name", "invoke_agent"),
                KeyValue::new("gen_ai.agent.name", "mcpvisor"),
                KeyValue::new("gen_ai.request.model", split(model).1.to_string()),
            ];
            otel.internal_span("invoke_agent mcpvisor".into(), None, attributes)
        }))
    }

    /// The span of one model request of the turn `self` is.
    pub(super) fn model_request(&self, otel: Option<&Arc<Otel>>, model: &str, round: usize) -> Traced {
        let (provider, name) = split(model);
        let parent = self.context();
        Traced::of(otel.map(|otel| {
            let attributes = vec![
                KeyValue::new("gen_ai.operation.name", "chat"),
                KeyValue::new("gen_ai.provider.name", provider.to_string()),
                KeyValue::new("gen_ai.request.model", name.to_string()),
                KeyValue::new("mcpvisor.agent.round", round as i64),
            ];
            otel.client_span(format!("chat {name}"), parent.as_ref(), attributes)
        }))
    }

    fn of(cx: Option<Context>) -> Traced {
        Traced(Mutex::new(cx))
    }

    /// What a tool call of this turn carries to be its span's child.
    pub(super) fn context(&self) -> Option<Context> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Tells the model request's span what the answer said it cost and why it stopped.
    pub(super) fn answered(&self, usage: Usage, stop: &StopReason) {
        if let Some(cx) = self.context() {
            let span = cx.span();
            let reason = match stop {
                StopReason::EndTurn => "stop",
                StopReason::ToolUse => "tool_calls",
                StopReason::MaxTokens => "length",
                StopReason::Refusal => "content_filter",
                StopReason::Other(other) => other.as_str(),
            };
            span.set_attribute(KeyValue::new(
                "gen_ai.response.finish_reasons",
                opentelemetry::Value::Array(vec![opentelemetry::StringValue::from(reason.to_string())].into()),
            ));
            // Zero is "not said" (see `Usage`): no attribute then.
            if usage.input_tokens > 0 {
                span.set_attribute(KeyValue::new("gen_ai.usage.input_tokens", usage.input_tokens as i64));
            }
            if usage.output_tokens > 0 {
                span.set_attribute(KeyValue::new("gen_ai.usage.output_tokens", usage.output_tokens as i64));
            }
        }
    }

    /// Ends the span with the outcome of its work.
    pub(super) fn end<T>(&self, outcome: &Result<T, AgentError>) {
        if let Some(cx) = self.0.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let span = cx.span();
            match outcome {
                Ok(_) => span.set_attribute(KeyValue::new("mcpvisor.outcome", "ok")),
                Err(error) => {
                    span.set_attribute(KeyValue::new("mcpvisor.outcome", "error"));
                    span.set_attribute(KeyValue::new("error.type", error_type(error)));
                    span.set_status(Status::error(error.to_string()));
                }
            }
            span.end();
        }
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        if let Some(cx) = self.0.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
            let span = cx.span();
            span.set_attribute(KeyValue::new("mcpvisor.outcome", "cancelled"));
            span.set_attribute(KeyValue::new("error.type", "cancelled"));
            span.set_status(Status::error("cancelled"));
            span.end();
        }
    }
}

/// `provider/model` as its two halves (the provider empty when there is no `/`).
fn split(label: &str) -> (&str, &str) {
    label.split_once('/').unwrap_or(("", label))
}

/// A low-cardinality name of what went wrong (`error.type`).
fn error_type(error: &AgentError) -> &'static str {
    match error {
        AgentError::Model(model) => model.kind(),
        AgentError::Busy => "busy",
        AgentError::RuntimeStopped => "runtime_stopped",
        AgentError::Internal(_) => "panic",
    }
}
