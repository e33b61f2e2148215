//! A saved conversation replayed to the editor on `session/load`: user
//! and agent text as chunks, each tool call with its final status and
//! output (the result that follows it in the history; a call without one
//! is shown failed).

use agent_client_protocol_schema::{ContentBlock, ContentChunk, ImageContent, SessionUpdate, ToolCall, ToolCallContent, ToolCallStatus};

use super::relay::text_block;
use crate::llm::{ChatMessage, Part};

pub fn updates(messages: &[ChatMessage]) -> Vec<SessionUpdate> {
    let mut updates = Vec::new();
    for (at, message) in messages.iter().enumerate() {
        match message {
            ChatMessage::User { content } => {
                updates.extend(content.iter().map(|part| SessionUpdate::UserMessageChunk(ContentChunk::new(block(part)))));
            }
            ChatMessage::Assistant { text, tool_calls } => {
                if !text.is_empty() {
                    updates.push(SessionUpdate::AgentMessageChunk(ContentChunk::new(text_block(text.clone()))));
                }
                for call in tool_calls {
                    let result = messages[at + 1..].iter().find_map(|later| match later {
                        ChatMessage::Tool { call_id, content, is_error, .. } if *call_id == call.id => Some((content, *is_error)),
                        _ => None,
                    });
                    let (status, content) = match result {
                        Some((content, false)) => {
                            (ToolCallStatus::Completed, content.iter().map(|p| ToolCallContent::from(block(p))).collect())
                        }
                        Some((content, true)) => {
                            (ToolCallStatus::Failed, content.iter().map(|p| ToolCallContent::from(block(p))).collect())
                        }
                        None => (ToolCallStatus::Failed, Vec::new()),
                    };
                    let input = call.parsed_arguments().map(serde_json::Value::Object).unwrap_or_else(|_| call.arguments.clone().into());
                    let shown = ToolCall::new(call.id.clone(), call.name.clone()).status(status).content(content).raw_input(input);
                    updates.push(SessionUpdate::ToolCall(shown));
                }
            }
            ChatMessage::Tool { .. } => {}
        }
    }
    updates
}

fn block(part: &Part) -> ContentBlock {
    match part {
        Part::Text { text } => text_block(text.clone()),
        Part::Image { mime_type, data } => ContentBlock::Image(ImageContent::new(data.clone(), mime_type.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolCall as ModelCall;

    #[test]
    fn a_call_is_replayed_with_the_status_of_its_result() {
        let messages = vec![
            ChatMessage::user("add 1 and 2"),
            ChatMessage::Assistant {
                text: "I will add.".into(),
                tool_calls: vec![
                    ModelCall { id: "c1".into(), name: "mcp__demo__add".into(), arguments: "{\"a\":1,\"b\":2}".into() },
                    ModelCall { id: "c2".into(), name: "mcp__demo__fail".into(), arguments: "{}".into() },
                ],
            },
            ChatMessage::Tool {
                call_id: "c1".into(),
                name: "mcp__demo__add".into(),
                content: vec![Part::Text { text: "3".into() }],
                is_error: false,
            },
        ];
        let json: Vec<serde_json::Value> = updates(&messages).iter().map(|u| serde_json::to_value(u).unwrap()).collect();
        assert_eq!(json[0]["sessionUpdate"], "user_message_chunk");
        assert_eq!(json[1]["content"]["text"], "I will add.");
        assert_eq!((json[2]["status"].as_str(), json[2]["rawInput"]["a"].as_i64()), (Some("completed"), Some(1)));
        assert_eq!(json[2]["content"][0]["content"]["text"], "3");
        assert_eq!(json[3]["status"], "failed", "a call without a result did not finish");
    }
}
