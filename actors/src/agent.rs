//! The Agent: one conversation with a model that uses the registry's tools.
//!
//! ```text
//! front end ──Prompt──▶ Agent ──ChatRequest──▶ ChatModel (crates/services/src/llm)
//!    ▲                    │ ──CallTool──▶ Registry ──▶ Connection ──▶ server
//!    └──AgentEvent────────┘ ──ConfirmRequest──▶ front end (terminal, editor, program)
//! ```
//!
//! Messages (replies come back as futures):
//!
//! | message | reply |
//! | --- | --- |
//! | [`Prompt`] | `Result<TurnEnded, AgentError>` once the turn ends; [`AgentEvent`]s stream meanwhile, the last `TurnEnded` or `TurnFailed` |
//! | [`Cancel`] | — the running turn ends with [`AgentStop::Cancelled`] |
//! | [`History`] | the conversation so far |
//! | [`SetModel`], [`SetConfirm`], [`SetTools`] | — applied from the next model request / tool call |
//!
//! Invariants: one turn at a time (a second `Prompt` gets
//! [`AgentError::Busy`]); the turn runs beside the mailbox, so `Cancel`,
//! `History` and the setters are answered while it runs; cancelling drops
//! the model stream (closing the HTTP response) and the tool calls in
//! flight (which sends `notifications/cancelled` to their servers); the
//! catalog is read afresh for every model request, so a restarted server
//! or a `tools/list_changed` is seen at the next one.
//!
//! The pieces: `turn` (the loop), `offer` (tools offered, schema
//! adaptation, tool search), `skills` (servers' skills the model loads),
//! `confirm` (the confirmation policy), `rules` (its `allow`/`deny` rules),
//! `compact` (summarising older turns near the context budget),
//! `results` (what the model is told about a call), `events`.

mod compact;
mod confirm;
mod events;
mod offer;
mod results;
mod rules;
mod skills;
mod traced;
mod turn;

use std::sync::{Arc, Mutex, MutexGuard};

use actix::prelude::*;
use tokio_util::sync::CancellationToken;

use crate::client_requests::Answering;
use crate::config::ConfirmMode;
use crate::guard::{catch, catch_future, PanicSwitch};
use crate::llm::{ChatMessage, ChatModel, Part, ToolCall};
use crate::outlet::Outlet;
use crate::sessions::{apply_summary, Record, SessionWriter};
use crate::{Registry, ToolEntry};

pub use confirm::{is_destructive, is_read_only, ConfirmPolicy, ConfirmRequest, Decision, Verdict};
pub use events::{AgentError, AgentEvent, AgentStop, TurnEnded};
pub use offer::{adapt_schema, ToolBudget, SEARCH_TOOL};
pub use skills::SKILL_TOOL;
use turn::Turn;

/// The agent's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentLimits {
    /// Model requests per prompt; then the turn ends with `MaxTurnRequests`.
    pub max_turns: usize,
    /// Tool calls of one model answer running at once.
    pub max_parallel_tools: usize,
    /// Characters of one tool result given to the model; the rest is cut with a note.
    pub max_tool_output: usize,
    /// The most tokens one model answer may take (`None`: the provider's default).
    pub max_tokens: Option<u32>,
    pub tool_budget: ToolBudget,
    /// The model's context, in tokens: older turns are summarised as a request nears it.
    pub context_tokens: u64,
    /// Turns kept verbatim when older ones are summarised.
    pub keep_turns: usize,
}

impl Default for AgentLimits {
    fn default() -> Self {
        AgentLimits {
            max_turns: 50,
            max_parallel_tools: 8,
            max_tool_output: 50_000,
            max_tokens: None,
            tool_budget: ToolBudget::default(),
            context_tokens: 100_000,
            keep_turns: 4,
        }
    }
}

/// The conversation as the model sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conversation {
    pub system: Option<String>,
    pub messages: Vec<ChatMessage>,
}

/// How an agent starts.
pub struct AgentConfig {
    pub model: Arc<dyn ChatModel>,
    pub conversation: Conversation,
    pub policy: ConfirmPolicy,
    /// Who answers [`ConfirmRequest`]s; without one, calls that need
    /// confirmation are denied (and the model is told why).
    pub asker: Option<Answering<ConfirmRequest>>,
    /// Where the [`AgentEvent`]s go.
    pub events: Option<Outlet<AgentEvent>>,
    pub limits: AgentLimits,
    /// Where the conversation is saved as it goes (see [`crate::sessions`]).
    pub journal: Option<SessionWriter>,
    /// Which of the registry's tools this agent sees (`None`: all of them).
    pub tools: Option<ToolFilter>,
}

/// Picks the registry's tools an agent sees: the others are neither
/// offered to the model nor callable (a call of one is an unknown tool).
/// An editor session uses it to see only its own servers beside the
/// shared ones, and only read-only tools in its read-only mode.
pub type ToolFilter = Arc<dyn Fn(&ToolEntry) -> bool + Send + Sync>;

impl AgentConfig {
    pub fn new(model: Arc<dyn ChatModel>) -> AgentConfig {
        AgentConfig {
            model,
            conversation: Conversation::default(),
            policy: ConfirmPolicy::default(),
            asker: None,
            events: None,
            limits: AgentLimits::default(),
            journal: None,
            tools: None,
        }
    }
}

/// The system prompt of an agent working in `cwd` when the configuration sets none.
pub fn default_system_prompt(cwd: &std::path::Path) -> String {
    format!(
        "You are a capable assistant with tools from MCP servers (named mcp__SERVER__TOOL). Use them when they help; \
         when a tool fails, read its error and correct the call or explain. The working directory is {}.",
        cwd.display()
    )
}

/// Runs one prompt as a turn.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<TurnEnded, AgentError>")]
pub struct Prompt {
    pub content: Vec<Part>,
}

impl Prompt {
    pub fn text(text: impl Into<String>) -> Prompt {
        Prompt { content: vec![Part::Text { text: text.into() }] }
    }
}

impl From<&str> for Prompt {
    fn from(text: &str) -> Prompt {
        Prompt::text(text)
    }
}

impl From<String> for Prompt {
    fn from(text: String) -> Prompt {
        Prompt::text(text)
    }
}

/// Ends the running turn (nothing happens without one).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct Cancel;

/// The conversation so far.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Conversation")]
pub struct History;

/// Talks to another model from the next request on.
#[derive(Message, Clone)]
#[rtype(result = "()")]
pub struct SetModel(pub Arc<dyn ChatModel>);

/// Changes the confirmation mode from the next tool call on.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct SetConfirm(pub ConfirmMode);

/// Changes which tools the agent sees from the next model request on.
#[derive(Message, Clone)]
#[rtype(result = "()")]
pub struct SetTools(pub Option<ToolFilter>);

/// What the actor and its running turn share. Locks are held only for
/// copies and pushes, never across an await.
pub(crate) struct Shared {
    conversation: Mutex<Conversation>,
    policy: Mutex<ConfirmPolicy>,
    model: Mutex<Arc<dyn ChatModel>>,
    /// Exposed names of tools used or found, most recent last (see `offer`).
    recent: Mutex<Vec<String>>,
    /// Dropped at its first failure, which is reported once as [`AgentEvent::HistoryFailed`].
    journal: Mutex<Option<SessionWriter>>,
    events: Option<Outlet<AgentEvent>>,
    tools: Mutex<Option<ToolFilter>>,
    /// The entries of the skills loaded so far (see `skills`).
    skills: skills::Held,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Names kept in `Shared::recent`.
const MAX_RECENT_TOOLS: usize = 64;

impl Shared {
    fn push(&self, message: ChatMessage) {
        self.record(|| Record::Message { message: message.clone() });
        lock(&self.conversation).messages.push(message);
    }

    fn emit(&self, event: AgentEvent) {
        if let Some(events) = &self.events {
            events.send(event);
        }
    }

    /// Saves a record, if the conversation is saved; `record` is built only then.
    fn record(&self, record: impl FnOnce() -> Record) {
        let mut journal = lock(&self.journal);
        let Some(writer) = journal.as_ref() else { return };
        if let Err(error) = writer.append(&record()) {
            *journal = None;
            drop(journal);
            self.emit(AgentEvent::HistoryFailed { error: error.to_string() });
        }
    }

    fn snapshot(&self) -> (Option<String>, Vec<ChatMessage>) {
        let conversation = lock(&self.conversation);
        (conversation.system.clone(), conversation.messages.clone())
    }

    fn model(&self) -> Arc<dyn ChatModel> {
        lock(&self.model).clone()
    }

    fn policy<R>(&self, f: impl FnOnce(&mut ConfirmPolicy) -> R) -> R {
        f(&mut lock(&self.policy))
    }

    /// The catalog as this agent sees it.
    fn visible(&self, mut catalog: Vec<ToolEntry>) -> Vec<ToolEntry> {
        if let Some(filter) = lock(&self.tools).clone() {
            catalog.retain(|entry| filter(entry));
        }
        catalog
    }

    fn recent_tools(&self) -> Vec<String> {
        lock(&self.recent).clone()
    }

    fn used_tool(&self, name: &str) {
        let mut recent = lock(&self.recent);
        recent.retain(|known| known != name);
        recent.push(name.to_string());
        let excess = recent.len().saturating_sub(MAX_RECENT_TOOLS);
        recent.drain(..excess);
    }

    /// Replaces the first `count` messages by one user message holding `summary`.
    fn replace_with_summary(&self, count: usize, summary: &str) {
        self.record(|| Record::Summary { summary: summary.to_string(), replaced: count });
        apply_summary(&mut lock(&self.conversation).messages, summary, count);
    }

    /// The calls of the last assistant message that have no result yet.
    fn open_calls(&self) -> Vec<ToolCall> {
        let conversation = lock(&self.conversation);
        let messages = &conversation.messages;
        let Some(at) = messages.iter().rposition(|m| matches!(m, ChatMessage::Assistant { .. })) else { return Vec::new() };
        let ChatMessage::Assistant { tool_calls, .. } = &messages[at] else { return Vec::new() };
        let answered: Vec<&str> = messages[at..]
            .iter()
            .filter_map(|m| match m {
                ChatMessage::Tool { call_id, .. } => Some(call_id.as_str()),
                _ => None,
            })
            .collect();
        tool_calls.iter().filter(|call| !answered.contains(&call.id.as_str())).cloned().collect()
    }
}

/// The agent actor; see the module docs.
pub struct Agent {
    shared: Arc<Shared>,
    registry: Addr<Registry>,
    asker: Option<Arc<Answering<ConfirmRequest>>>,
    limits: AgentLimits,
    /// Set while a turn runs.
    running: Option<CancellationToken>,
    /// Where the turns' spans go (OpenTelemetry on; [`traced`]).
    otel: Option<Arc<crate::telemetry::Otel>>,
    /// Arms a handler or the turn to panic (tests; see [`crate::guard`]).
    panic_next: PanicSwitch,
}

impl Agent {
    /// Starts an agent that calls tools through `registry`.
    pub fn start(registry: Addr<Registry>, config: AgentConfig) -> Addr<Agent> {
        Agent::start_traced(registry, config, None)
    }

    /// The same, the turns traced to `otel` when it is some.
    pub(crate) fn start_traced(registry: Addr<Registry>, config: AgentConfig, otel: Option<Arc<crate::telemetry::Otel>>) -> Addr<Agent> {
        let shared = Shared {
            conversation: Mutex::new(config.conversation),
            policy: Mutex::new(config.policy),
            model: Mutex::new(config.model),
            recent: Mutex::new(Vec::new()),
            journal: Mutex::new(config.journal),
            events: config.events,
            tools: Mutex::new(config.tools),
            skills: skills::Held::default(),
        };
        Agent {
            shared: Arc::new(shared),
            registry,
            asker: config.asker.map(Arc::new),
            limits: config.limits,
            running: None,
            otel,
            panic_next: PanicSwitch::default(),
        }
        .start()
    }
}

impl Actor for Agent {
    type Context = Context<Self>;
}

impl Handler<Prompt> for Agent {
    type Result = ResponseActFuture<Self, Result<TurnEnded, AgentError>>;

    /// Guarded: a panic in the handler or in the turn fails the turn with
    /// [`AgentError::Internal`] (and `TurnFailed`); the conversation so far
    /// is kept and the next prompt runs.
    fn handle(&mut self, prompt: Prompt, ctx: &mut Context<Self>) -> Self::Result {
        let body = self.panic_next.tripping("Prompt", |agent: &mut Self, _: &mut Context<Self>| agent.prompt(prompt));
        match catch("agent", "Prompt", || body(self, ctx)) {
            Ok(turn) => turn,
            Err(panic) => {
                self.running = None;
                self.shared.emit(AgentEvent::TurnFailed { error: panic.to_string(), usage: Default::default() });
                Box::pin(fut::ready(Err(AgentError::Internal(panic))))
            }
        }
    }
}

impl Agent {
    fn prompt(&mut self, prompt: Prompt) -> ResponseActFuture<Self, Result<TurnEnded, AgentError>> {
        if self.running.is_some() {
            return Box::pin(fut::ready(Err(AgentError::Busy)));
        }
        let token = CancellationToken::new();
        self.running = Some(token.clone());
        let turn = Arc::new(Turn {
            shared: self.shared.clone(),
            registry: self.registry.clone(),
            asker: self.asker.clone(),
            limits: self.limits,
            usage: Mutex::new(Default::default()),
            trace: traced::Traced::turn(self.otel.as_ref(), &self.shared.model().label()),
            otel: self.otel.clone(),
        });
        let trip = self.panic_next.tripping("turn", |_: &mut (), _: &mut ()| ());
        let (running, after_panic) = (turn.clone(), turn.clone());
        let guarded = catch_future("agent".into(), "a turn".into(), async move {
            trip(&mut (), &mut ());
            running.run(prompt.content).await
        });
        let running = async move {
            guarded.await.unwrap_or_else(|panic| {
                // The history keeps what the turn did; its open calls get an answer.
                after_panic.close_open_calls();
                Err(AgentError::Internal(panic))
            })
        };
        let run = async move {
            let ended = tokio::select! {
                ended = running => ended,
                () = token.cancelled() => {
                    turn.close_open_calls();
                    Ok(TurnEnded { stop_reason: AgentStop::Cancelled, usage: turn.usage() })
                }
            };
            match &ended {
                Ok(ended) => {
                    turn.shared.record(|| Record::TurnEnded { stop_reason: ended.stop_reason.into(), usage: ended.usage });
                    turn.emit(AgentEvent::TurnEnded { stop_reason: ended.stop_reason, usage: ended.usage });
                }
                Err(error) => turn.emit(AgentEvent::TurnFailed { error: error.to_string(), usage: turn.usage() }),
            }
            ended
        };
        Box::pin(run.into_actor(self).map(|ended, agent, _| {
            agent.running = None;
            ended
        }))
    }
}

impl Handler<Cancel> for Agent {
    type Result = ();

    fn handle(&mut self, _: Cancel, _: &mut Context<Self>) {
        if let Some(token) = &self.running {
            token.cancel();
        }
    }
}

impl Handler<History> for Agent {
    type Result = MessageResult<History>;

    fn handle(&mut self, _: History, _: &mut Context<Self>) -> Self::Result {
        MessageResult(lock(&self.shared.conversation).clone())
    }
}

impl Handler<SetModel> for Agent {
    type Result = ();

    fn handle(&mut self, SetModel(model): SetModel, _: &mut Context<Self>) {
        *lock(&self.shared.model) = model;
    }
}

impl Handler<SetConfirm> for Agent {
    type Result = ();

    fn handle(&mut self, SetConfirm(mode): SetConfirm, _: &mut Context<Self>) {
        self.shared.policy(|policy| policy.mode = mode);
    }
}

#[cfg(feature = "fault-injection")]
impl Handler<crate::guard::PanicNext> for Agent {
    type Result = ();

    fn handle(&mut self, msg: crate::guard::PanicNext, _: &mut Context<Self>) {
        self.panic_next.arm(msg.0);
    }
}

impl Handler<SetTools> for Agent {
    type Result = ();

    fn handle(&mut self, SetTools(filter): SetTools, _: &mut Context<Self>) {
        *lock(&self.shared.tools) = filter;
    }
}
