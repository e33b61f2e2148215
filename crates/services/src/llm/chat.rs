//! The provider-neutral conversation. Each provider maps these to its wire
//! format and back; nothing here knows about HTTP.

use rmcp::model::JsonObject;
use serde::{Deserialize, Serialize};

/// One request to a model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub system: Option<String>,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    /// The most tokens the answer may take (`None`: the provider's default).
    pub max_tokens: Option<u32>,
}

/// A message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    User {
        content: Vec<Part>,
    },
    Assistant {
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, answered to the model.
    Tool {
        call_id: String,
        name: String,
        content: Vec<Part>,
        #[serde(default)]
        is_error: bool,
    },
}

impl ChatMessage {
    /// A user message of plain text.
    pub fn user(text: impl Into<String>) -> Self {
        ChatMessage::User { content: vec![Part::Text { text: text.into() }] }
    }
}

/// A piece of message content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    Text {
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        mime_type: String,
        data: String,
    },
}

impl Part {
    pub fn text(&self) -> Option<&str> {
        match self {
            Part::Text { text } => Some(text),
            Part::Image { .. } => None,
        }
    }
}

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// A JSON Schema of `"type": "object"`.
    pub input_schema: JsonObject,
}

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments exactly as the model wrote them: usually a JSON object,
    /// but a model can write anything, and the caller says so to it.
    pub arguments: String,
}

impl ToolCall {
    /// The arguments as a JSON object, or why they are not one.
    pub fn parsed_arguments(&self) -> Result<JsonObject, String> {
        let text = if self.arguments.trim().is_empty() { "{}" } else { self.arguments.as_str() };
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Object(object)) => Ok(object),
            Ok(other) => Err(format!("the arguments must be a JSON object, not {}", crate::protocol::json_kind(&other))),
            Err(e) => Err(format!("the arguments are not valid JSON ({e})")),
        }
    }
}

/// What a model answer streams.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatEvent {
    /// A piece of the answer's text.
    Text(String),
    /// A piece of the model's visible reasoning, where it gives one.
    Reasoning(String),
    /// A whole tool call.
    ToolCall(ToolCall),
    /// The answer is complete.
    End { stop: StopReason, usage: Usage },
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    Refusal,
    /// A reason this crate does not know, as the provider named it.
    Other(String),
}

/// Tokens counted by the provider (zero where it did not say).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Tool calls being streamed in pieces, assembled by the provider's index.
#[derive(Debug, Default)]
pub(crate) struct ToolCallParts {
    calls: Vec<(u64, ToolCall)>,
}

impl ToolCallParts {
    /// Adds a piece to the call at `index`; an id or name completes the
    /// call's own, argument text is appended.
    pub fn add(&mut self, index: u64, id: Option<&str>, name: Option<&str>, arguments: Option<&str>) {
        let at = match self.calls.iter().position(|(i, _)| *i == index) {
            Some(at) => at,
            None => {
                self.calls.push((index, ToolCall { id: String::new(), name: String::new(), arguments: String::new() }));
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[at].1;
        if let Some(id) = id.filter(|id| !id.is_empty()) {
            call.id = id.to_string();
        }
        if let Some(name) = name {
            call.name.push_str(name);
        }
        if let Some(arguments) = arguments {
            call.arguments.push_str(arguments);
        }
    }

    /// The calls, in index order; a call the provider gave no id gets one.
    pub fn finish(&mut self) -> Vec<ChatEvent> {
        let mut calls = std::mem::take(&mut self.calls);
        calls.sort_by_key(|(index, _)| *index);
        calls
            .into_iter()
            .map(|(index, mut call)| {
                if call.id.is_empty() {
                    call.id = format!("call_{index}");
                }
                ChatEvent::ToolCall(call)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_call_pieces_assemble_by_index_in_any_order() {
        let mut parts = ToolCallParts::default();
        parts.add(1, Some("b"), Some("second"), Some("{\"x\":"));
        parts.add(0, Some("a"), Some("first"), Some(""));
        parts.add(1, None, None, Some("1}"));
        parts.add(0, None, None, Some("{}"));
        let calls = parts.finish();
        assert_eq!(
            calls,
            vec![
                ChatEvent::ToolCall(ToolCall { id: "a".into(), name: "first".into(), arguments: "{}".into() }),
                ChatEvent::ToolCall(ToolCall { id: "b".into(), name: "second".into(), arguments: "{\"x\":1}".into() }),
            ]
        );
    }

    #[test]
    fn arguments_that_are_not_an_object_say_why() {
        let call = |arguments: &str| ToolCall { id: "1".into(), name: "t".into(), arguments: arguments.into() };
        assert!(call("").parsed_arguments().unwrap().is_empty());
        assert_eq!(call("[1]").parsed_arguments().unwrap_err(), "the arguments must be a JSON object, not an array");
        assert!(call("{\"a\":").parsed_arguments().unwrap_err().starts_with("the arguments are not valid JSON"));
    }
}
