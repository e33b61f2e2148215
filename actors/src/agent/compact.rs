//! Keeping a long conversation within the model's context: older turns are
//! summarised by the model itself, the last `keep_turns` stay verbatim.
//!
//! The size of a request is estimated as its JSON length / 4 (about four
//! characters a token for English text and JSON; providers do not expose
//! their tokenizers). When the estimate passes 80 % of `context_tokens`,
//! or the provider answers that the context overflowed, everything before
//! the last `keep_turns` turns (a turn starts at a user message, so a tool
//! call is never parted from its result) is sent to the model with a
//! request to summarise it, and replaced by one user message that holds
//! the summary, marked as such ([`crate::sessions::summary_message`], so a
//! resumed conversation replays to the same messages). A conversation with no turn old enough to
//! summarise is left alone (the provider's error then ends the turn).

use futures::StreamExt;

use crate::llm::{ChatEvent, ChatMessage, ChatModel, ChatRequest, LlmError, Part, ToolSpec, Usage};

/// Share of `context_tokens` a request may reach before older turns are summarised.
const HIGH_WATER: f64 = 0.8;
/// Characters of one tool result kept in the text that is summarised.
const RESULT_CHARS: usize = 2_000;
/// The most tokens the summary may take.
const SUMMARY_TOKENS: u32 = 2_000;

const SUMMARISER: &str = "You summarise conversations between a user and an assistant that uses tools, so that the assistant can \
     continue the work without the full text. Keep: the user's goals and preferences, decisions made, facts learned (file paths, \
     names, numbers, errors and how they were resolved), what was done with which tool and its outcome, and what is still open. \
     Be concise and factual; write it as notes, not as a reply.";

/// The estimated tokens of a request.
pub fn estimate(system: Option<&str>, messages: &[ChatMessage], tools: &[ToolSpec]) -> u64 {
    let bytes = system.map_or(0, str::len)
        + serde_json::to_string(messages).map_or(0, |s| s.len())
        + serde_json::to_string(tools).map_or(0, |s| s.len());
    bytes as u64 / 4
}

/// Whether a request of `estimate` tokens is near `budget`.
pub fn near_budget(estimate: u64, budget: u64) -> bool {
    estimate as f64 > budget as f64 * HIGH_WATER
}

/// Where the last `keep_turns` turns start, if anything before them can be summarised.
pub fn split_point(messages: &[ChatMessage], keep_turns: usize) -> Option<usize> {
    let starts: Vec<usize> = messages.iter().enumerate().filter(|(_, m)| matches!(m, ChatMessage::User { .. })).map(|(i, _)| i).collect();
    let keep = keep_turns.max(1);
    let at = *starts.get(starts.len().checked_sub(keep)?)?;
    (at > 0).then_some(at)
}

/// The model's summary of `messages`, and the tokens it took.
pub async fn summarise(model: &dyn ChatModel, messages: &[ChatMessage]) -> Result<(String, Usage), LlmError> {
    let request = ChatRequest {
        system: Some(SUMMARISER.into()),
        messages: vec![ChatMessage::user(format!("Summarise this conversation:\n\n{}", transcript(messages)))],
        tools: Vec::new(),
        max_tokens: Some(SUMMARY_TOKENS),
    };
    let mut stream = model.respond(request);
    let (mut summary, mut usage) = (String::new(), Usage::default());
    while let Some(event) = stream.next().await {
        match event? {
            ChatEvent::Text(piece) => summary.push_str(&piece),
            ChatEvent::End { usage: used, .. } => {
                usage = used;
                break;
            }
            _ => {}
        }
    }
    Ok((summary.trim().to_string(), usage))
}

/// The messages as plain text for the summariser; long tool results are cut.
fn transcript(messages: &[ChatMessage]) -> String {
    let text_of = |parts: &[Part]| parts.iter().filter_map(Part::text).collect::<Vec<_>>().join("\n");
    let lines: Vec<String> = messages
        .iter()
        .map(|message| match message {
            ChatMessage::User { content } => format!("User: {}", text_of(content)),
            ChatMessage::Assistant { text, tool_calls } => {
                let calls: Vec<String> = tool_calls.iter().map(|c| format!("[called {} with {}]", c.name, c.arguments)).collect();
                format!("Assistant: {text} {}", calls.join(" "))
            }
            ChatMessage::Tool { name, content, is_error, .. } => {
                let mut result = text_of(content);
                if let Some((cut, _)) = result.char_indices().nth(RESULT_CHARS) {
                    result.truncate(cut);
                    result.push_str(" …(cut)");
                }
                format!("Result of {name}{}: {result}", if *is_error { " (error)" } else { "" })
            }
        })
        .collect();
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolCall;

    fn turn(n: usize) -> Vec<ChatMessage> {
        let call = ToolCall { id: format!("c{n}"), name: "t".into(), arguments: "{}".into() };
        vec![
            ChatMessage::user(format!("q{n}")),
            ChatMessage::Assistant { text: String::new(), tool_calls: vec![call] },
            ChatMessage::Tool {
                call_id: format!("c{n}"),
                name: "t".into(),
                content: vec![Part::Text { text: "r".into() }],
                is_error: false,
            },
            ChatMessage::Assistant { text: format!("a{n}"), tool_calls: vec![] },
        ]
    }

    #[test]
    fn the_split_keeps_whole_turns_and_needs_an_older_one() {
        let messages: Vec<ChatMessage> = (0..3).flat_map(turn).collect();
        assert_eq!(split_point(&messages, 1), Some(8));
        assert_eq!(split_point(&messages, 2), Some(4));
        assert_eq!(split_point(&messages, 3), None, "nothing is older than the kept turns");
        assert_eq!(split_point(&turn(0), 1), None);
    }

    #[test]
    fn the_transcript_names_calls_and_cuts_long_results() {
        let mut messages = turn(0);
        messages[2] = ChatMessage::Tool {
            call_id: "c0".into(),
            name: "t".into(),
            content: vec![Part::Text { text: "x".repeat(5000) }],
            is_error: true,
        };
        let text = transcript(&messages);
        assert!(text.contains("[called t with {}]") && text.contains("Result of t (error): ") && text.contains("…(cut)"));
        assert!(text.len() < 2_200);
        assert!(near_budget(900, 1000) && !near_budget(700, 1000));
    }
}
