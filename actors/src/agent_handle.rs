//! [`AgentHandle`]: an [`Agent`] as seen from any tokio program, in this
//! crate's types only (actix users hold the `Addr<Agent>` that
//! [`Agent::start`] returns instead).
//!
//! The agent lives as long as a handle on it does: dropping the last one
//! stops it, which closes its events outlet (a reader of the events sees
//! the end of the stream once the last turn's events are read).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use actix::Addr;

use crate::agent::{Agent, AgentError, Cancel, Conversation, History, Prompt, SetConfirm, SetModel, SetTools, ToolFilter, TurnEnded};
use crate::config::ConfirmMode;
use crate::llm::ChatModel;

/// A `Send + Sync + Clone` handle on a running [`Agent`]; see the module docs.
#[derive(Clone)]
pub struct AgentHandle {
    agent: Addr<Agent>,
}

impl AgentHandle {
    pub(crate) fn new(agent: Addr<Agent>) -> AgentHandle {
        AgentHandle { agent }
    }

    /// Runs `prompt` (a [`Prompt`], or its text) as a turn; the answer comes when the turn ends.
    ///
    /// The prompt is queued at once (before the returned future is first
    /// polled), and the future borrows nothing, so it may be spawned or
    /// raced against a signal while this handle is used to [`cancel`](Self::cancel).
    /// A second prompt while a turn runs gets [`AgentError::Busy`]; an agent
    /// whose runtime stopped answers [`AgentError::RuntimeStopped`].
    pub fn prompt(&self, prompt: impl Into<Prompt>) -> TurnAnswer {
        TurnAnswer(Box::pin(self.agent.send(prompt.into())))
    }

    /// Ends the running turn (it ends as `AgentStop::Cancelled`); nothing
    /// happens without one.
    pub fn cancel(&self) {
        self.agent.do_send(Cancel);
    }

    /// The conversation so far; [`AgentError::RuntimeStopped`] when the
    /// agent is gone with its runtime.
    pub async fn history(&self) -> Result<Conversation, AgentError> {
        self.agent.send(History).await.map_err(|_| AgentError::RuntimeStopped)
    }

    /// Talks to `model` from the next model request on.
    pub fn set_model(&self, model: Arc<dyn ChatModel>) {
        self.agent.do_send(SetModel(model));
    }

    /// Uses `mode` to confirm tool calls from the next call on.
    pub fn set_confirm(&self, mode: ConfirmMode) {
        self.agent.do_send(SetConfirm(mode));
    }

    /// Shows the agent only the tools `filter` keeps (`None`: all of them),
    /// from the next model request on.
    pub fn set_tools(&self, filter: Option<ToolFilter>) {
        self.agent.do_send(SetTools(filter));
    }

    /// Arms the agent to panic at `during` (fault-injection tests only; see
    /// `actors::guard::PanicNext`).
    #[cfg(feature = "fault-injection")]
    #[doc(hidden)]
    pub async fn panic_next(&self, during: &str) {
        let _ = self.agent.send(crate::guard::PanicNext(during.to_string())).await;
    }
}

/// The answer to [`AgentHandle::prompt`], once the turn ends: a future that
/// borrows nothing (`Send + 'static`).
pub struct TurnAnswer(Pin<Box<actix::dev::Request<Agent, Prompt>>>);

impl Future for TurnAnswer {
    type Output = Result<TurnEnded, AgentError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx).map(|answer| answer.unwrap_or(Err(AgentError::RuntimeStopped)))
    }
}
