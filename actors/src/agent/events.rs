//! What an agent tells its subscriber while a turn runs, and how a turn ends.

use actix::prelude::*;
use rmcp::model::CallToolResult;
use serde::{Serialize, Serializer};

use crate::error::CallError;
use crate::llm::{LlmError, StopReason, Usage};

/// One step of a turn, in the order it happened. Text and reasoning come
/// in pieces as the model streams them; a tool call goes requested →
/// approved or denied → started → progress… → finished.
#[derive(Message, Debug, Clone, Serialize)]
#[rtype(result = "()")]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A model request of this turn is being sent (1 for the first).
    ModelRequest {
        round: usize,
        model: String,
        tools: usize,
    },
    Text {
        text: String,
    },
    Reasoning {
        text: String,
    },
    ToolCallRequested {
        call_id: String,
        tool: String,
        arguments: serde_json::Value,
    },
    ToolCallApproved {
        call_id: String,
        why: String,
    },
    ToolCallDenied {
        call_id: String,
        why: String,
    },
    ToolCallStarted {
        call_id: String,
    },
    ToolCallProgress {
        call_id: String,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    /// `result` when the server answered (which may be an error result),
    /// `error` when the call failed; `output` is what the model was given.
    ToolCallFinished {
        call_id: String,
        tool: String,
        is_error: bool,
        output: String,
        result: Option<Box<CallToolResult>>,
        #[serde(serialize_with = "display")]
        error: Option<Box<CallError>>,
    },
    /// Older turns were summarised to stay within the model's context.
    Compacted {
        summarised: usize,
        kept: usize,
    },
    /// The conversation could not be saved; it goes on unsaved.
    HistoryFailed {
        error: String,
    },
    TurnEnded {
        stop_reason: AgentStop,
        usage: Usage,
    },
    /// The turn ended with an error (the `Prompt`'s answer is that error);
    /// `usage`: the tokens its model requests took before it.
    TurnFailed {
        error: String,
        usage: Usage,
    },
}

/// Why a turn ended without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStop {
    /// The model answered without asking for more tool calls.
    EndTurn,
    /// The model's answer hit its token limit.
    MaxTokens,
    /// `max_turns` model round trips were used up.
    MaxTurnRequests,
    /// The model refused.
    Refusal,
    /// [`super::Cancel`] ended it.
    Cancelled,
}

impl AgentStop {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentStop::EndTurn => "end_turn",
            AgentStop::MaxTokens => "max_tokens",
            AgentStop::MaxTurnRequests => "max_turn_requests",
            AgentStop::Refusal => "refusal",
            AgentStop::Cancelled => "cancelled",
        }
    }
}

impl From<AgentStop> for StopReason {
    /// The provider-neutral reason saved in history; the agent's own ones are `Other`.
    fn from(stop: AgentStop) -> StopReason {
        match stop {
            AgentStop::EndTurn => StopReason::EndTurn,
            AgentStop::MaxTokens => StopReason::MaxTokens,
            AgentStop::Refusal => StopReason::Refusal,
            other => StopReason::Other(other.as_str().to_string()),
        }
    }
}

/// The answer to a [`super::Prompt`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TurnEnded {
    pub stop_reason: AgentStop,
    /// Tokens of every model request of the turn.
    pub usage: Usage,
}

/// Why a turn could not go on.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Model(#[from] LlmError),
    #[error("a turn is already running; wait for it to end or cancel it")]
    Busy,
    #[error("the runtime was shut down during the turn")]
    RuntimeStopped,
    /// A panic in the agent; the conversation so far is kept.
    #[error("the turn failed: {0}")]
    Internal(crate::error::Panicked),
}

fn display<S: Serializer, T: std::fmt::Display>(value: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => s.collect_str(value),
        None => s.serialize_none(),
    }
}
