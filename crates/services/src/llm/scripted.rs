//! `scripted`: a deterministic model that needs no key and no network, for
//! the demo and for trying the agent out. It is a real [`ChatModel`]: it
//! reads the request's tools and messages and answers in the same events a
//! provider streams, so everything around it (tool calls through the
//! registry, confirmation, history) runs for real.
//!
//! Its script, per request:
//! - the last message is the user's: if the prompt names an offered tool
//!   (its exposed name, or the server's own name of it as a whole word),
//!   it calls that tool, filling required arguments from the prompt:
//!   numbers in order for `number`/`integer` fields, the words after the
//!   tool's name for `string` fields, `true` for `boolean` ones; otherwise
//!   it answers with what it can do and the tools it was offered;
//!   when the prompt names no offered tool but the agent offers its catalog
//!   search (`search_tools`), it searches with the prompt first, and tries
//!   again with the tools found;
//! - the last message is a tool result: it reports each result of the
//!   last round in a sentence and ends the turn.

use futures::StreamExt;
use serde_json::{Map, Value};

use super::{ChatEvent, ChatMessage, ChatModel, ChatRequest, EventStream, Part, StopReason, ToolCall, ToolSpec, Usage};

/// The scripted model; its label is `scripted/demo`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Scripted;

impl ChatModel for Scripted {
    fn label(&self) -> String {
        "scripted/demo".into()
    }

    fn respond(&self, request: ChatRequest) -> EventStream {
        let mut events: Vec<ChatEvent> = Vec::new();
        let (text, calls) = answer(&request);
        // Streamed in words, as a provider does.
        events.extend(text.split_inclusive(' ').map(|piece| ChatEvent::Text(piece.to_string())));
        let stop = if calls.is_empty() { StopReason::EndTurn } else { StopReason::ToolUse };
        events.extend(calls.into_iter().map(ChatEvent::ToolCall));
        let input_tokens = serde_json::to_string(&request.messages).map_or(0, |s| s.len() as u64 / 4);
        let output_tokens = text.len() as u64 / 4;
        events.push(ChatEvent::End { stop, usage: Usage { input_tokens, output_tokens } });
        futures::stream::iter(events.into_iter().map(Ok)).boxed()
    }
}

/// The name of the agent's catalog search tool, offered when the catalog is large.
const SEARCH_TOOL: &str = "search_tools";

fn answer(request: &ChatRequest) -> (String, Vec<ToolCall>) {
    let id = format!("scripted_{}", request.messages.len());
    match request.messages.last() {
        Some(ChatMessage::User { content }) => {
            let prompt: String = content.iter().filter_map(Part::text).collect::<Vec<_>>().join(" ");
            if let Some(call) = call_named(request, &prompt, id.clone()) {
                return (format!("I will call `{}`.", call.name), vec![call]);
            }
            if request.tools.iter().any(|tool| tool.name == SEARCH_TOOL) {
                let arguments = serde_json::json!({ "query": prompt }).to_string();
                return ("Let me find the right tool.".into(), vec![ToolCall { id, name: SEARCH_TOOL.into(), arguments }]);
            }
            (capabilities(&request.tools), Vec::new())
        }
        Some(ChatMessage::Tool { name, .. }) if name == SEARCH_TOOL => {
            // The search's finds are offered now: try the prompt again.
            let prompt = last_prompt(&request.messages);
            match call_named(request, &prompt, id) {
                Some(call) => (format!("I will call `{}`.", call.name), vec![call]),
                None => (report(&request.messages), Vec::new()),
            }
        }
        Some(ChatMessage::Tool { .. }) => (report(&request.messages), Vec::new()),
        _ => ("There is nothing to answer.".into(), Vec::new()),
    }
}

/// A call of the first offered tool the prompt names, with arguments from the prompt.
fn call_named(request: &ChatRequest, prompt: &str, id: String) -> Option<ToolCall> {
    let tools = request.tools.iter().filter(|tool| tool.name != SEARCH_TOOL);
    let (tool, after) = tools
        .clone()
        .find_map(|tool| prompt.contains(&tool.name).then(|| (tool, named_in(prompt, tool))))
        .or_else(|| tools.clone().find_map(|tool| named_in(prompt, tool).map(|at| (tool, Some(at)))))?;
    let after = after.unwrap_or(prompt.len());
    let arguments = Value::Object(arguments_for(tool, prompt, &prompt[after..])).to_string();
    Some(ToolCall { id, name: tool.name.clone(), arguments })
}

fn last_prompt(messages: &[ChatMessage]) -> String {
    let content = messages.iter().rev().find_map(|message| match message {
        ChatMessage::User { content } => Some(content),
        _ => None,
    });
    content.map(|content| content.iter().filter_map(Part::text).collect::<Vec<_>>().join(" ")).unwrap_or_default()
}

/// Where the tool's name ends in the prompt, if the prompt names it.
fn named_in(prompt: &str, tool: &ToolSpec) -> Option<usize> {
    if let Some(at) = prompt.find(&tool.name) {
        return Some(at + tool.name.len());
    }
    let short = tool.name.rsplit("__").next().unwrap_or(&tool.name);
    let mut offset = 0;
    for word in prompt.split_inclusive(|c: char| !(c.is_alphanumeric() || c == '_')) {
        let bare = word.trim_end_matches(|c: char| !(c.is_alphanumeric() || c == '_'));
        if bare.eq_ignore_ascii_case(short) {
            return Some(offset + bare.len());
        }
        offset += word.len();
    }
    None
}

fn arguments_for(tool: &ToolSpec, prompt: &str, after_name: &str) -> Map<String, Value> {
    let mut numbers = prompt.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-')).filter_map(|w| w.parse::<f64>().ok());
    let required: Vec<&str> =
        tool.input_schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let properties = tool.input_schema.get("properties").and_then(Value::as_object);
    let mut arguments = Map::new();
    for name in required {
        let kind = properties.and_then(|p| p.get(name)).and_then(|p| p.get("type")).and_then(Value::as_str).unwrap_or("string");
        let value = match kind {
            "number" => numbers.next().map_or(Value::from(1), Value::from),
            "integer" => Value::from(numbers.next().map_or(1, |n| n as i64)),
            "boolean" => Value::Bool(true),
            _ => Value::String(after_name.trim().trim_matches(|c: char| c == ':' || c == '"').trim().to_string()),
        };
        arguments.insert(name.to_string(), value);
    }
    arguments
}

fn capabilities(tools: &[ToolSpec]) -> String {
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).take(12).collect();
    let more = tools.len().saturating_sub(names.len());
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!(
        "I am the scripted demo model: I call a tool when your prompt names it (\"add 2 and 3\", \"echo hello\"). Tools offered: {}{more}.",
        names.join(", ")
    )
}

/// One sentence per result of the last round of tool calls.
fn report(messages: &[ChatMessage]) -> String {
    let results = messages.iter().rev().map_while(|message| match message {
        ChatMessage::Tool { name, content, is_error, .. } => Some((name, content, *is_error)),
        _ => None,
    });
    let mut sentences: Vec<String> = results
        .map(|(name, content, is_error)| {
            let text: Vec<&str> = content.iter().filter_map(Part::text).collect();
            let verb = if is_error { "failed" } else { "answered" };
            format!("`{name}` {verb}: {}", text.join(" ").trim())
        })
        .collect();
    sentences.reverse();
    sentences.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, schema: Value) -> ToolSpec {
        ToolSpec { name: name.into(), description: String::new(), input_schema: schema.as_object().cloned().unwrap() }
    }

    #[test]
    fn a_prompt_that_names_a_tool_calls_it_with_arguments_from_the_prompt() {
        let add = tool(
            "mcp__demo__add",
            json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
        );
        let echo = tool("mcp__demo__echo", json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}));
        let request = |text: &str| ChatRequest {
            messages: vec![ChatMessage::user(text)],
            tools: vec![add.clone(), echo.clone()],
            ..Default::default()
        };
        let (_, calls) = answer(&request("please add 2 and 3.5"));
        assert_eq!((calls[0].name.as_str(), calls[0].arguments.as_str()), ("mcp__demo__add", r#"{"a":2.0,"b":3.5}"#));
        let (_, calls) = answer(&request("Echo: hello world"));
        assert_eq!(calls[0].arguments, r#"{"text":"hello world"}"#);
        let (text, calls) = answer(&request("what can you do?"));
        assert!(calls.is_empty() && text.contains("mcp__demo__add"), "{text}");
    }

    #[test]
    fn tool_results_are_reported_and_end_the_turn() {
        let messages = vec![
            ChatMessage::user("add 1 2"),
            ChatMessage::Assistant { text: String::new(), tool_calls: vec![] },
            ChatMessage::Tool {
                call_id: "1".into(),
                name: "mcp__demo__add".into(),
                content: vec![Part::Text { text: "3".into() }],
                is_error: false,
            },
        ];
        let (text, calls) = answer(&ChatRequest { messages, ..Default::default() });
        assert_eq!((text.as_str(), calls.len()), ("`mcp__demo__add` answered: 3", 0));
    }
}
