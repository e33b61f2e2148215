//! One session's agent events as `session/update` notifications, and the
//! frames that must follow them: the answer of each `session/prompt` and
//! the permission questions (`session/request_permission`) of its calls.
//!
//! Invariant: such a frame is written after every update queued before it
//! was handed to the relay ([`Relay::finish`], [`Relay::ask_permission`]):
//! the relay drains the queued events first. The agent emits `TurnEnded`
//! before it answers the `Prompt`, and a call's `ToolCallRequested` (after
//! the text that led to it) before it asks, so the editor has seen the
//! turn's updates before its answer, and the call and the text before the
//! question about it.

use std::collections::HashMap;
use std::sync::Arc;

use agent_client_protocol_schema::{
    ContentBlock, ContentChunk, Diff, PermissionOption, PromptResponse, RequestPermissionRequest, RequestPermissionResponse, SessionUpdate,
    TextContent, ToolCall, ToolCallContent, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::peer::Pending;
use super::room::Room;
use super::tool_view::ToolView;
use crate::actors::agent::{AgentEvent, ConfirmRequest};
use crate::actors::ToolEntry;
use crate::builtin_tools::paths::expand as resolve;
use crate::builtin_tools::{RUN_COMMAND, WRITE_FILE};
use crate::protocol::{error_codes, ErrorObject, RequestId};
use crate::Handle;

/// Hands prompt answers and permission questions to a session's relay.
#[derive(Clone)]
pub struct Relay {
    behind: mpsc::UnboundedSender<Behind>,
}

/// A frame written once the updates queued before it are out.
enum Behind {
    /// The answer to a `session/prompt`.
    Answer(RequestId, Result<PromptResponse, ErrorObject>),
    /// A permission question; the request written is handed back to await its answer.
    Question(ConfirmRequest, Vec<PermissionOption>, oneshot::Sender<Result<Pending, ErrorObject>>),
}

impl Relay {
    /// Starts the relay of `events`; it ends when the agent and every `Relay` clone are gone.
    pub fn start(room: Arc<Room>, handle: Handle, builtin: String, events: mpsc::UnboundedReceiver<AgentEvent>) -> Relay {
        let (behind, queued) = mpsc::unbounded_channel();
        let mapper = Mapper { room, handle, builtin, catalog: HashMap::new(), calls: HashMap::new() };
        tokio::spawn(mapper.run(events, queued));
        Relay { behind }
    }

    /// Answers prompt `id` once the updates before it are out.
    pub fn finish(&self, id: RequestId, outcome: Result<PromptResponse, ErrorObject>) {
        let _ = self.behind.send(Behind::Answer(id, outcome));
    }

    /// Asks the editor whether `request`'s call may run, once the updates
    /// before it (the call's `tool_call`, the text that led to it) are out;
    /// the question's `toolCall` is the call as announced (title, kind,
    /// locations, input). Dropping the future withdraws the question.
    pub async fn ask_permission(
        &self,
        request: ConfirmRequest,
        options: Vec<PermissionOption>,
    ) -> Result<RequestPermissionResponse, ErrorObject> {
        let (sent, written) = oneshot::channel();
        let stopped = || ErrorObject { code: error_codes::INTERNAL_ERROR, message: "the session's relay stopped".into(), data: None };
        self.behind.send(Behind::Question(request, options, sent)).map_err(|_| stopped())?;
        written.await.map_err(|_| stopped())??.answer().await
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

impl Mapper {
    async fn run(mut self, mut events: mpsc::UnboundedReceiver<AgentEvent>, mut queued: mpsc::UnboundedReceiver<Behind>) {
        let (mut events_open, mut queued_open) = (true, true);
        while events_open || queued_open {
            tokio::select! {
                biased;
                event = events.recv(), if events_open => match event {
                    Some(event) => self.map(event).await,
                    None => events_open = false,
                },
                behind = queued.recv(), if queued_open => match behind {
                    Some(behind) => {
                        while let Ok(event) = events.try_recv() {
                            self.map(event).await;
                        }
                        self.write(behind);
                    }
                    None => queued_open = false,
                },
            }
        }
    }

    fn write(&self, behind: Behind) {
        match behind {
            Behind::Answer(id, outcome) => self.room.peer.respond(&id, outcome),
            // The asker gave up (the turn was cancelled) before its turn came: nothing to ask.
            Behind::Question(_, _, sent) if sent.is_closed() => {}
            Behind::Question(request, options, sent) => {
                let call = ToolCallUpdate::from(self.announce(request.call_id, &request.tool, request.arguments));
                let question = RequestPermissionRequest::new(self.room.session_id.clone(), call, options);
                let _ = sent.send(self.room.peer.send_request("session/request_permission", &question));
            }
        }
    }

    /// A call as the editor is told of it: pending, with its title, kind, locations and input.
    fn announce(&self, call_id: String, tool: &str, arguments: Value) -> ToolCall {
        let view = self.view(tool);
        ToolCall::new(call_id, view.title(&arguments, &self.room.cwd))
            .kind(view.kind())
            .status(ToolCallStatus::Pending)
            .locations(view.locations(&arguments, &self.room.cwd))
            .raw_input(arguments)
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
                let call = self.announce(call_id.clone(), &tool, arguments.clone());
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
