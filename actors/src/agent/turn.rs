//! One turn: model request, tool calls, model request, ... until the model
//! answers without tool calls, `max_turns` is used up, or the turn is cancelled.
//!
//! Invariants:
//! - after every step the conversation is one a provider accepts: each
//!   assistant message with tool calls is followed by exactly one tool
//!   result per call, in the calls' order (a cancelled turn gets results
//!   saying so, [`Turn::close_open_calls`]);
//! - a tool call never ends the turn: unknown tools, arguments that are not
//!   a JSON object or do not match the schema, denials and every
//!   `CallError` are answered to the model as error results it can act on;
//! - at most `max_parallel_tools` calls of one answer run at once; dropping
//!   the turn drops their `CallTool` futures, which cancels them at the servers.

use std::sync::{Arc, Mutex};

use actix::prelude::*;
use futures::StreamExt;
use serde_json::Value;

use super::compact::{estimate, near_budget, split_point, summarise};
use super::confirm::{ConfirmRequest, Decision, Verdict};
use super::events::{AgentError, AgentEvent, AgentStop, TurnEnded};
use super::offer::{Offer, SEARCH_TOOL};
use super::results::{cut, error_parts, parts_of_result, plain_text};
use super::skills::{Skills, SKILL_TOOL};
use super::traced::Traced;
use super::{AgentLimits, Shared};
use crate::client_requests::Answering;
use crate::error::CallError;
use crate::llm::{ChatEvent, ChatMessage, ChatRequest, LlmError, Part, StopReason, ToolCall, Usage};
use crate::{CallTool, ListTools, ProgressSink, Registry, ToolEntry};

/// Everything one turn uses; shared with the actor through `shared`.
pub(super) struct Turn {
    pub shared: Arc<Shared>,
    pub registry: Addr<Registry>,
    pub asker: Option<Arc<Answering<ConfirmRequest>>>,
    pub limits: AgentLimits,
    /// Tokens of the turn's model requests so far.
    pub usage: Mutex<Usage>,
    /// Where the turn's spans go (OpenTelemetry on).
    pub otel: Option<Arc<crate::telemetry::Otel>>,
    /// The turn's span (OpenTelemetry on), ended as cancelled if the turn is dropped.
    pub trace: Traced,
}

/// The most tool calls of one model answer that are run; the rest get an
/// error result asking for fewer calls at once (a model may ask for
/// thousands, each a confirmation, an event and a request to a server).
pub const MAX_CALLS_PER_ANSWER: usize = 64;

/// A model answer, assembled.
#[derive(Default)]
struct Answer {
    text: String,
    tool_calls: Vec<ToolCall>,
    stop: Option<StopReason>,
}

impl Turn {
    pub fn emit(&self, event: AgentEvent) {
        self.shared.emit(event);
    }

    pub fn usage(&self) -> Usage {
        *self.usage.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn add_usage(&self, usage: Usage) {
        let mut total = self.usage.lock().unwrap_or_else(|e| e.into_inner());
        total.input_tokens += usage.input_tokens;
        total.output_tokens += usage.output_tokens;
    }

    /// Runs the turn that `prompt` starts, in its span.
    pub async fn run(&self, prompt: Vec<Part>) -> Result<TurnEnded, AgentError> {
        let outcome = self.rounds(prompt).await;
        self.trace.end(&outcome);
        outcome
    }

    async fn rounds(&self, prompt: Vec<Part>) -> Result<TurnEnded, AgentError> {
        self.shared.push(ChatMessage::User { content: prompt });
        let mut skills = Skills::default();
        for round in 1..=self.limits.max_turns {
            let catalog = self.shared.visible(self.registry.send(ListTools).await.map_err(|_| AgentError::RuntimeStopped)?);
            if round == 1 {
                skills = Skills::list(&self.registry, &catalog).await;
            }
            let mut offer = Offer::build(catalog, self.limits.tool_budget, &self.shared.recent_tools());
            offer.specs.extend(skills.spec());
            let (system, messages) = self.shared.snapshot();
            if near_budget(estimate(system.as_deref(), &messages, &offer.specs), self.limits.context_tokens) {
                self.compact().await?;
            }
            let answer = match self.ask_model(round, &offer).await {
                // The estimate was short of the provider's count: summarise and try once more.
                Err(AgentError::Model(LlmError::ContextOverflow { .. })) if self.compact().await? => self.ask_model(round, &offer).await?,
                answer => answer?,
            };
            let calls = answer.tool_calls.clone();
            self.shared.push(ChatMessage::Assistant { text: answer.text, tool_calls: answer.tool_calls });
            if calls.is_empty() {
                return Ok(TurnEnded { stop_reason: stop_of(answer.stop), usage: self.usage() });
            }
            let (run, refused) = calls.split_at(calls.len().min(MAX_CALLS_PER_ANSWER));
            let results: Vec<ChatMessage> = futures::stream::iter(run.iter().map(|call| self.run_call(call, &offer, &skills)))
                .buffered(self.limits.max_parallel_tools)
                .collect()
                .await;
            for result in results {
                self.shared.push(result);
            }
            for call in refused {
                let text = format!(
                    "Not run: this answer asked for {} tool calls and one answer may ask for at most {MAX_CALLS_PER_ANSWER}; \
                     the first {MAX_CALLS_PER_ANSWER} ran. Ask for this call again, and for fewer calls at once.",
                    calls.len()
                );
                self.shared.push(ChatMessage::Tool {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: error_parts(text),
                    is_error: true,
                });
            }
        }
        Ok(TurnEnded { stop_reason: AgentStop::MaxTurnRequests, usage: self.usage() })
    }

    /// Sends the conversation to the model and streams its answer out as events.
    async fn ask_model(&self, round: usize, offer: &Offer) -> Result<Answer, AgentError> {
        let model = self.shared.model();
        self.emit(AgentEvent::ModelRequest { round, model: model.label(), tools: offer.specs.len() });
        let (system, messages) = self.shared.snapshot();
        let request = ChatRequest { system, messages, tools: offer.specs.clone(), max_tokens: self.limits.max_tokens };
        let span = self.trace.model_request(self.otel.as_ref(), &model.label(), round);
        let answer = self.read_answer(model.respond(request), &span).await;
        span.end(&answer);
        answer
    }

    /// The model's answer as it streams in, shown as events.
    async fn read_answer(&self, mut stream: crate::llm::EventStream, span: &Traced) -> Result<Answer, AgentError> {
        let mut answer = Answer::default();
        while let Some(event) = stream.next().await {
            match event? {
                ChatEvent::Text(text) => {
                    answer.text.push_str(&text);
                    self.emit(AgentEvent::Text { text });
                }
                ChatEvent::Reasoning(text) => self.emit(AgentEvent::Reasoning { text }),
                ChatEvent::ToolCall(call) => answer.tool_calls.push(call),
                ChatEvent::End { stop, usage } => {
                    span.answered(usage, &stop);
                    self.add_usage(usage);
                    answer.stop = Some(stop);
                    break;
                }
            }
        }
        if answer.stop.is_none() {
            let message = "the answer ended before the model said it was complete".to_string();
            return Err(LlmError::Protocol { provider: self.shared.model().label(), message }.into());
        }
        unique_call_ids(&mut answer.tool_calls);
        Ok(answer)
    }

    /// One tool call, answered to the model whatever happens.
    async fn run_call(&self, call: &ToolCall, offer: &Offer, skills: &Skills) -> ChatMessage {
        let parsed = call.parsed_arguments();
        let shown = parsed.as_ref().map_or_else(|_| Value::String(call.arguments.clone()), |object| Value::Object(object.clone()));
        self.emit(AgentEvent::ToolCallRequested { call_id: call.id.clone(), tool: call.name.clone(), arguments: shown.clone() });
        let outcome = match (offer.entry(&call.name), parsed) {
            _ if call.name == SEARCH_TOOL && offer.searching => Ok(self.search(call, offer)),
            _ if call.name == SKILL_TOOL && skills.offered() => {
                skills.answer(&self.registry, &self.shared.skills, call).await.map(Called::Local)
            }
            (None, _) => Err(unknown_tool(&call.name, offer)),
            (Some(_), Err(why)) => {
                Err(format!("invalid arguments for `{}`: {why}. Call it again with a JSON object that matches its input schema", call.name))
            }
            (Some(entry), Ok(arguments)) => self.confirmed_call(call, entry, arguments, shown).await,
        };
        let (content, is_error, result, error) = match outcome {
            Ok(Called::Answered(result)) => {
                let (parts, is_error) = parts_of_result(&result, self.limits.max_tool_output);
                (parts, is_error, Some(Box::new(result)), None)
            }
            Ok(Called::Failed(error)) => (error_parts(format!("The call failed: {error}")), true, None, Some(Box::new(error))),
            Ok(Called::Local(text)) => (cut(vec![Part::Text { text }], self.limits.max_tool_output), false, None, None),
            Err(message) => (error_parts(message), true, None, None),
        };
        let output = plain_text(&content);
        self.emit(AgentEvent::ToolCallFinished { call_id: call.id.clone(), tool: call.name.clone(), is_error, output, result, error });
        ChatMessage::Tool { call_id: call.id.clone(), name: call.name.clone(), content, is_error }
    }

    /// Asks when the policy says so, then calls the tool through the registry.
    async fn confirmed_call(
        &self,
        call: &ToolCall,
        entry: &ToolEntry,
        arguments: rmcp::model::JsonObject,
        shown: Value,
    ) -> Result<Called, String> {
        let (verdict, always_allows) =
            self.shared.policy(|policy| (policy.judge(entry, &arguments), policy.always_allows(entry, &arguments)));
        let id = call.id.clone();
        match verdict {
            Verdict::Allow(why) => self.emit(AgentEvent::ToolCallApproved { call_id: id.clone(), why }),
            Verdict::Deny(why) => return Err(self.denied(&id, &call.name, &why)),
            Verdict::Ask => {
                let Some(asker) = &self.asker else {
                    return Err(self.denied(&id, &call.name, "it needs the user's confirmation and nobody can give it in this session"));
                };
                let request = ConfirmRequest {
                    call_id: id.clone(),
                    tool: entry.name.clone(),
                    server: entry.server.clone(),
                    server_tool: entry.tool.name.to_string(),
                    title: entry.tool.title.clone().or_else(|| entry.tool.annotations.as_ref().and_then(|a| a.title.clone())),
                    arguments: shown,
                    read_only: super::confirm::is_read_only(entry),
                    destructive: super::confirm::is_destructive(entry),
                    always_allows,
                };
                let decision = asker.ask(request).await.unwrap_or(Decision::Cancelled);
                self.shared.policy(|policy| policy.remember(entry, &arguments, decision));
                match decision {
                    Decision::AllowOnce => {
                        self.emit(AgentEvent::ToolCallApproved { call_id: id.clone(), why: "allowed by the user".into() })
                    }
                    Decision::AllowAlways => {
                        self.emit(AgentEvent::ToolCallApproved { call_id: id.clone(), why: "allowed always by the user".into() })
                    }
                    Decision::RejectOnce | Decision::RejectAlways => return Err(self.denied(&id, &call.name, "the user denied it")),
                    Decision::Cancelled => return Err(self.denied(&id, &call.name, "the question was withdrawn before the user answered")),
                }
            }
        }
        self.shared.used_tool(&entry.name);
        self.emit(AgentEvent::ToolCallStarted { call_id: id.clone() });
        let (sink, mut progress) = ProgressSink::channel();
        let mut answer =
            Box::pin(self.registry.send(CallTool::new(entry.name.clone(), arguments).with_progress(sink).with_trace(self.trace.context())));
        let outcome = loop {
            tokio::select! {
                outcome = &mut answer => break outcome,
                Some(step) = progress.recv() => self.emit(AgentEvent::ToolCallProgress {
                    call_id: id.clone(), progress: step.progress, total: step.total, message: step.message,
                }),
            }
        };
        Ok(match outcome {
            Ok(Ok(result)) => Called::Answered(result),
            Ok(Err(error)) => Called::Failed(error),
            Err(_) => Called::Failed(CallError::RuntimeStopped { tool: entry.name.clone() }),
        })
    }

    fn denied(&self, call_id: &str, tool: &str, why: &str) -> String {
        self.emit(AgentEvent::ToolCallDenied { call_id: call_id.into(), why: why.into() });
        format!("The call to `{tool}` was not made: {why}. Do not retry it; carry on without it or ask the user.")
    }

    /// Answers [`SEARCH_TOOL`]: the best matches, whose schemas the next request offers.
    fn search(&self, call: &ToolCall, offer: &Offer) -> Called {
        let arguments = call.parsed_arguments().unwrap_or_default();
        let query = arguments.get("query").and_then(Value::as_str).unwrap_or_default();
        let limit = arguments.get("limit").and_then(Value::as_u64).map_or(8, |n| n.clamp(1, 20) as usize);
        let catalog: Vec<ToolEntry> = offer.catalog().cloned().collect();
        let found = crate::tool_search::search(query, &catalog, limit);
        if found.is_empty() {
            return Called::Local(format!("No tool matches \"{query}\". Try other words."));
        }
        let mut lines = vec![format!("Tools matching \"{query}\" (callable by these names from the next step on):")];
        // The best match last, as the most recent: it is offered first.
        for entry in found.iter().rev() {
            self.shared.used_tool(&entry.name);
        }
        for entry in &found {
            let description = entry.tool.description.as_deref().unwrap_or("");
            lines.push(format!("- {}: {}", entry.name, description.lines().next().unwrap_or("")));
        }
        Called::Local(lines.join("\n"))
    }

    /// Summarises the turns before the last `keep_turns` (see `compact`);
    /// false when there were none.
    async fn compact(&self) -> Result<bool, AgentError> {
        let (_, messages) = self.shared.snapshot();
        let Some(split) = split_point(&messages, self.limits.keep_turns) else { return Ok(false) };
        let (summary, usage) = summarise(&*self.shared.model(), &messages[..split]).await?;
        self.add_usage(usage);
        self.shared.replace_with_summary(split, &summary);
        self.emit(AgentEvent::Compacted { summarised: split, kept: messages.len() - split });
        Ok(true)
    }

    /// After a cancellation: answers the calls of the last assistant
    /// message that have no result yet, so the conversation stays valid.
    pub fn close_open_calls(&self) {
        let open: Vec<ToolCall> = self.shared.open_calls();
        for call in open {
            let text = "The user cancelled the turn before this call finished; its outcome is unknown.".to_string();
            self.shared.push(ChatMessage::Tool { call_id: call.id, name: call.name, content: vec![Part::Text { text }], is_error: true });
        }
    }
}

/// How a tool call ended, before it is told to the model.
enum Called {
    Answered(rmcp::model::CallToolResult),
    Failed(CallError),
    /// Answered by the agent itself ([`SEARCH_TOOL`], [`SKILL_TOOL`]).
    Local(String),
}

fn stop_of(stop: Option<StopReason>) -> AgentStop {
    match stop {
        Some(StopReason::MaxTokens) => AgentStop::MaxTokens,
        Some(StopReason::Refusal) => AgentStop::Refusal,
        _ => AgentStop::EndTurn,
    }
}

fn unknown_tool(name: &str, offer: &Offer) -> String {
    let mut offered: Vec<&str> = offer.specs.iter().map(|spec| spec.name.as_str()).collect();
    offered.sort_unstable();
    let shown = offered.iter().take(30).copied().collect::<Vec<_>>().join(", ");
    let more = offered.len().saturating_sub(30);
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!("There is no tool named `{name}`. Call one of the offered tools by its exact name: {shown}{more}")
}

/// Models sometimes repeat an id within one answer; results are matched by
/// id, so repeats get a suffix.
fn unique_call_ids(calls: &mut [ToolCall]) {
    let mut seen = std::collections::HashSet::new();
    for (index, call) in calls.iter_mut().enumerate() {
        if !seen.insert(call.id.clone()) {
            call.id = format!("{}_{index}", call.id);
            seen.insert(call.id.clone());
        }
    }
}
