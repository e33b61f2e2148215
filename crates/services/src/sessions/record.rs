//! The lines of a session file: one [`Record`] per line, as JSON, and how
//! they replay into the conversation a model should see.

use serde::{Deserialize, Serialize};

use super::SessionId;
use crate::llm::chat::{ChatMessage, StopReason, Usage};

/// The first record of every session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Started {
    pub session_id: SessionId,
    /// Milliseconds since the Unix epoch.
    pub created_ms: u64,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The system prompt the conversation started with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
}

/// One line of a session file. Readers skip (with a warning) record types
/// they do not know, so new types can be added without breaking old readers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    Started(Started),
    /// A message of the conversation, in the order it was added.
    Message {
        message: ChatMessage,
    },
    /// The first `replaced` messages of the conversation as replayed so far
    /// (see [`apply_summary`]) were summarised into `summary`.
    Summary {
        summary: String,
        replaced: usize,
    },
    /// A prompt's turn ended.
    TurnEnded {
        stop_reason: StopReason,
        usage: Usage,
    },
}

/// The `type` of every record this version writes and reads.
pub(super) const KNOWN_TYPES: [&str; 4] = ["started", "message", "summary", "turn_ended"];

/// What a model is given in place of the messages a summary replaced.
pub const SUMMARY_HEADING: &str = "[Summary of the earlier turns of this conversation, written to save context]";

/// The user message that stands for summarised turns: [`SUMMARY_HEADING`],
/// a blank line, the summary.
pub fn summary_message(summary: &str) -> ChatMessage {
    ChatMessage::user(format!("{SUMMARY_HEADING}\n\n{summary}"))
}

/// Replaces the first `replaced` messages by one [`summary_message`]; the
/// agent does this when it summarises, and replaying a session file does
/// it again at the same point, so both see the same conversation. A count
/// past the end replaces every message.
pub fn apply_summary(messages: &mut Vec<ChatMessage>, summary: &str, replaced: usize) {
    messages.drain(..replaced.min(messages.len()));
    messages.insert(0, summary_message(summary));
}

/// The conversation a file's records replay to.
#[derive(Debug, Default)]
pub(super) struct Replay {
    pub started: Option<Started>,
    pub messages: Vec<ChatMessage>,
    pub warnings: Vec<String>,
}

impl Replay {
    /// Adds one line (numbered from 1). `complete` is false for a last
    /// line without its newline: the writer stopped in the middle of it.
    pub fn line(&mut self, number: usize, bytes: &[u8], complete: bool) {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let value: serde_json::Value = match serde_json::from_slice(bytes) {
            Ok(value) => value,
            Err(_) if !complete => {
                self.warnings.push(format!("line {number} is incomplete (the program writing it stopped); it was skipped"));
                return;
            }
            Err(e) => {
                self.warnings.push(format!("line {number} is not JSON ({e}); it was skipped"));
                return;
            }
        };
        let kind = value.get("type").and_then(|kind| kind.as_str()).unwrap_or_default().to_string();
        if !KNOWN_TYPES.contains(&kind.as_str()) {
            self.warnings.push(format!("line {number}: record type {kind:?} is unknown (written by a newer mcpvisor?); it was skipped"));
            return;
        }
        match serde_json::from_value::<Record>(value) {
            Ok(record) => self.record(number, record),
            Err(e) => self.warnings.push(format!("line {number}: not a valid `{kind}` record ({e}); it was skipped")),
        }
    }

    fn record(&mut self, number: usize, record: Record) {
        match record {
            Record::Started(started) if self.started.is_none() => self.started = Some(started),
            Record::Started(_) => self.warnings.push(format!("line {number}: a second `started` record; it was skipped")),
            Record::Message { message } => self.messages.push(message),
            Record::Summary { summary, replaced } => {
                if replaced > self.messages.len() {
                    self.warnings.push(format!(
                        "line {number}: a summary of {replaced} messages where there were {}; it replaces them all",
                        self.messages.len()
                    ));
                }
                apply_summary(&mut self.messages, &summary, replaced);
            }
            Record::TurnEnded { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_tagged_by_type_in_snake_case() {
        let started = Record::Started(Started {
            session_id: SessionId::at(0, 1),
            created_ms: 0,
            model: "m".into(),
            cwd: None,
            system: Some("be brief".into()),
        });
        assert_eq!(
            serde_json::to_value(&started).unwrap(),
            serde_json::json!({"type": "started", "session_id": "19700101-000000-000-000001", "created_ms": 0, "model": "m", "system": "be brief"})
        );
        let ended = Record::TurnEnded { stop_reason: StopReason::EndTurn, usage: Usage { input_tokens: 3, output_tokens: 4 } };
        let json = serde_json::to_value(&ended).unwrap();
        assert_eq!(json["type"], "turn_ended");
        assert_eq!(serde_json::from_value::<Record>(json).unwrap(), ended);
        let message = serde_json::to_value(Record::Message { message: ChatMessage::user("hi") }).unwrap();
        assert_eq!((message["type"].as_str(), message["message"]["role"].as_str()), (Some("message"), Some("user")));
    }

    #[test]
    fn a_summary_replaces_the_messages_it_covers() {
        let mut messages: Vec<ChatMessage> = (0..4).map(|i| ChatMessage::user(format!("m{i}"))).collect();
        apply_summary(&mut messages, "earlier: m0 to m2", 3);
        assert_eq!(messages, vec![summary_message("earlier: m0 to m2"), ChatMessage::user("m3")]);
        apply_summary(&mut messages, "everything", 9);
        assert_eq!(messages, vec![summary_message("everything")]);
    }

    #[test]
    fn a_session_id_that_is_not_one_makes_the_record_invalid() {
        let mut replay = Replay::default();
        replay.line(1, br#"{"type":"started","session_id":"../x","created_ms":0,"model":"m"}"#, true);
        assert!(replay.started.is_none());
        assert!(replay.warnings[0].starts_with("line 1: not a valid `started` record"), "{:?}", replay.warnings);
    }
}
