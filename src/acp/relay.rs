//! One session's agent events as `session/update` notifications, and the
//! answer of each `session/prompt` after the updates of its turn.
//!
//! Invariant: a prompt's response is written after every update of its
//! turn: the agent emits `TurnEnded` before it answers the `Prompt`, so
//! when the answer is handed to the relay ([`Relay::finish`]) the turn's
//! events are already queued, and they are drained first.

use std::collections::HashMap;
use std::sync::Arc;

use agent_client_protocol_schema::{
    ContentBlock, ContentChunk, Diff, PromptResponse, SessionUpdate, TextContent, ToolCall, ToolCallContent, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields,
};
use serde_json::Value;
use tokio::sync::mpsc;

use super::room::Room;
use super::tool_view::{resolve, ToolView};
use crate::actors::agent::AgentEvent;
use crate::actors::ToolEntry;
use crate::builtin_tools::{RUN_COMMAND, WRITE_FILE};
use crate::protocol::{ErrorObject, RequestId};
use crate::Handle;

/// Hands prompt answers to a session's relay.
#[derive(Clone)]
pub struct Relay {
    answers: mpsc::UnboundedSender<(RequestId, Result<PromptResponse, ErrorObject>)>,
}

impl Relay {
    /// Starts the relay of `events`; it ends when the agent and every `Relay` clone are gone.
    pub fn start(room: Arc<Room>, handle: Handle, builtin: String, events: mpsc::UnboundedReceiver<AgentEvent>) -> Relay {
        let (answers, answered) = mpsc::unbounded_channel();
        let mapper = Mapper { room, handle, builtin, catalog: HashMap::new(), calls: HashMap::new() };
        tokio::spawn(mapper.run(events, answered));
        Relay { answers }
    }

    /// Answers prompt `id` once the updates before it are out.
    pub fn finish(&self, id: RequestId, outcome: Result<PromptResponse, ErrorObject>) {
        let _ = self.answers.send((id, outcome));
    }
}

struct Mapper {
    room: Arc<Room>,
    handle: Handle,
    builtin: String,
    /// The tools by exposed name, as of the turn's last model request.
    catalog: HashMap<String, ToolEntry>,
    /// Calls in flight: the tool and the arguments.
    calls: HashMap<String, (String, Value)>,
}

type Answer = (RequestId, Result<PromptResponse, ErrorObject>);

impl Mapper {
    async fn run(mut self, mut events: mpsc::UnboundedReceiver<AgentEvent>, mut answers: mpsc::UnboundedReceiver<Answer>) {
        let (mut events_open, mut answers_open) = (true, true);
        while events_open || answers_open {
            tokio::select! {
                biased;
                event = events.recv(), if events_open => match event {
                    Some(event) => self.map(event).await,
                    None => events_open = false,
                },
                answer = answers.recv(), if answers_open => match answer {
                    Some((id, outcome)) => {
                        while let Ok(event) = events.try_recv() {
                            self.map(event).await;
                        }
                        self.room.peer.respond(&id, outcome);
                    }
                    None => answers_open = false,
                },
            }
        }
    }

    async fn map(&mut self, event: AgentEvent) {
        let update = match event {
            AgentEvent::ModelRequest { .. } => {
                self.catalog = self.handle.list_tools().await.into_iter().map(|entry| (entry.name.clone(), entry)).collect();
                return;
            }
            AgentEvent::Text { text } => SessionUpdate::AgentMessageChunk(ContentChunk::new(text_block(text))),
            AgentEvent::Reasoning { text } => SessionUpdate::AgentThoughtChunk(ContentChunk::new(text_block(text))),
            AgentEvent::ToolCallRequested { call_id, tool, arguments } => {
                let view = self.view(&tool);
                let call = ToolCall::new(call_id.clone(), view.title(&arguments, &self.room.cwd))
                    .kind(view.kind())
                    .status(ToolCallStatus::Pending)
                    .locations(view.locations(&arguments, &self.room.cwd))
                    .raw_input(arguments.clone());
                self.calls.insert(call_id, (tool, arguments));
                SessionUpdate::ToolCall(call)
            }
            AgentEvent::ToolCallStarted { call_id } => {
                if let Some(command) = self.command_of(&call_id) {
                    self.room.command_call(&command, &call_id);
                }
                status_update(&call_id, ToolCallUpdateFields::new().status(ToolCallStatus::InProgress))
            }
            AgentEvent::ToolCallFinished { call_id, is_error, output, result, .. } => {
                let terminal = self.command_of(&call_id).and_then(|command| self.room.call_ended(&command, &call_id));
                let (tool, arguments) = self.calls.remove(&call_id).unwrap_or_default();
                let mut content = Vec::new();
                if let Some(terminal) = terminal {
                    content.push(ToolCallContent::Terminal(agent_client_protocol_schema::Terminal::new(terminal)));
                } else {
                    if !is_error && self.view(&tool).builtin_tool() == Some(WRITE_FILE) {
                        content.extend(self.diff(&arguments));
                    }
                    content.push(ToolCallContent::from(text_block(output)));
                }
                let status = if is_error { ToolCallStatus::Failed } else { ToolCallStatus::Completed };
                let raw = result.and_then(|result| serde_json::to_value(result).ok());
                status_update(&call_id, ToolCallUpdateFields::new().status(status).content(content).raw_output(raw))
            }
            AgentEvent::HistoryFailed { error } => {
                tracing::warn!("the conversation is no longer saved: {error}");
                return;
            }
            _ => return,
        };
        self.room.update(update);
    }

    fn view<'a>(&'a self, tool: &'a str) -> ToolView<'a> {
        ToolView { name: tool, entry: self.catalog.get(tool), builtin: &self.builtin }
    }

    /// The command of a built-in `run_command` call.
    fn command_of(&self, call_id: &str) -> Option<String> {
        let (tool, arguments) = self.calls.get(call_id)?;
        (self.view(tool).builtin_tool() == Some(RUN_COMMAND)).then(|| arguments.get("command")?.as_str().map(str::to_string)).flatten()
    }

    fn diff(&self, arguments: &Value) -> Option<ToolCallContent> {
        let path = resolve(&self.room.cwd, arguments.get("path")?.as_str()?);
        let new_text = arguments.get("content")?.as_str()?.to_string();
        let old_text = self.room.before_write(&path);
        Some(ToolCallContent::Diff(Diff::new(path, new_text).old_text(old_text)))
    }
}

pub fn text_block(text: impl Into<String>) -> ContentBlock {
    ContentBlock::Text(TextContent::new(text))
}

fn status_update(call_id: &str, fields: ToolCallUpdateFields) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(call_id.to_string(), fields))
}
