//! Anthropic's Messages API (`POST {base}/v1/messages`, `x-api-key`,
//! `anthropic-version: 2023-06-01`).
//!
//! Mapping: the system prompt is the top-level `system`; the assistant's
//! tool calls are `tool_use` blocks (arguments that are not a JSON object
//! are sent as `{}`: the model was already told they were unusable); tool
//! results are `tool_result` blocks, consecutive ones in one `user` message,
//! images included. `max_tokens` is required by this API: [`DEFAULT_MAX_TOKENS`]
//! when the request does not say. Streamed `text_delta`, `thinking_delta`
//! and `input_json_delta` pieces are assembled per content block index.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{json, Value};

use super::chat::ToolCallParts;
use super::http::{Client, Decoder};
use super::{ChatEvent, ChatMessage, ChatModel, ChatRequest, EventStream, LlmError, ModelSettings, Part, StopReason, Usage};

/// The API version this module speaks.
pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` when the request leaves it open.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

pub struct Anthropic {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    model: String,
    api_key: Option<String>,
    stream: bool,
}

impl Anthropic {
    pub fn new(client: Client, settings: &ModelSettings) -> Anthropic {
        Anthropic {
            inner: Arc::new(Inner { client, model: settings.model.clone(), api_key: settings.api_key.clone(), stream: settings.stream }),
        }
    }
}

impl ChatModel for Anthropic {
    fn label(&self) -> String {
        format!("anthropic/{}", self.inner.model)
    }

    fn respond(&self, request: ChatRequest) -> EventStream {
        let inner = self.inner.clone();
        super::opened_lazily(async move { inner.open(request).await })
    }
}

impl Inner {
    async fn open(&self, request: ChatRequest) -> Result<EventStream, LlmError> {
        let mut headers = vec![("anthropic-version", API_VERSION.to_string())];
        headers.extend(self.api_key.iter().map(|key| ("x-api-key", key.clone())));
        let response = self.client.post(&headers, &body(&self.model, &request, self.stream)).await?;
        if self.stream {
            return Ok(self.client.stream(response, Answer::default()));
        }
        let events = self.client.whole(response, Answer::default()).await?;
        Ok(futures::stream::iter(events.into_iter().map(Ok)).boxed())
    }
}

/// The request body.
pub fn body(model: &str, request: &ChatRequest, stream: bool) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    for message in &request.messages {
        match message {
            ChatMessage::User { content } => {
                messages.push(json!({"role": "user", "content": content.iter().map(part).collect::<Vec<_>>()}))
            }
            ChatMessage::Assistant { text, tool_calls } => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in tool_calls {
                    let input = call.parsed_arguments().unwrap_or_default();
                    blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
                }
                messages.push(json!({"role": "assistant", "content": blocks}));
            }
            ChatMessage::Tool { call_id, content, is_error, .. } => {
                let block = json!({"type": "tool_result", "tool_use_id": call_id, "content": content.iter().map(part).collect::<Vec<_>>(), "is_error": is_error});
                match messages.last_mut() {
                    Some(last) if last["role"] == "user" && last["content"][0]["type"] == "tool_result" => {
                        if let Some(blocks) = last["content"].as_array_mut() {
                            blocks.push(block);
                        }
                    }
                    _ => messages.push(json!({"role": "user", "content": [block]})),
                }
            }
        }
    }
    let mut body = json!({
        "model": model,
        "max_tokens": request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        "messages": messages,
        "stream": stream,
    });
    if let Some(system) = &request.system {
        body["system"] = json!(system);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| json!({"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}))
            .collect();
    }
    body
}

fn part(part: &Part) -> Value {
    match part {
        Part::Text { text } => json!({"type": "text", "text": text}),
        Part::Image { mime_type, data } => json!({"type": "image", "source": {"type": "base64", "media_type": mime_type, "data": data}}),
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" | "stop_sequence" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "refusal" => StopReason::Refusal,
        other => StopReason::Other(other.to_string()),
    }
}

/// Reads one answer, streamed or whole.
#[derive(Default)]
struct Answer {
    calls: ToolCallParts,
    stop: Option<StopReason>,
    usage: Usage,
    done: bool,
}

fn protocol(message: String) -> LlmError {
    LlmError::Protocol { provider: "anthropic".into(), message }
}

fn count(usage: &Value, name: &str) -> Option<u64> {
    usage.get(name).and_then(Value::as_u64)
}

impl Answer {
    fn end(&mut self) -> Vec<ChatEvent> {
        let mut events = self.calls.finish();
        let stop = self.stop.take().unwrap_or(if events.is_empty() { StopReason::EndTurn } else { StopReason::ToolUse });
        events.push(ChatEvent::End { stop, usage: self.usage });
        events
    }

    fn read_usage(&mut self, usage: &Value) {
        if let Some(input) = count(usage, "input_tokens") {
            self.usage.input_tokens = input;
        }
        if let Some(output) = count(usage, "output_tokens") {
            self.usage.output_tokens = output;
        }
    }
}

impl Decoder for Answer {
    fn event(&mut self, _name: &str, data: &str) -> Result<Vec<ChatEvent>, LlmError> {
        let event: Value = serde_json::from_str(data).map_err(|e| protocol(format!("an event is not JSON ({e})")))?;
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        let mut events = Vec::new();
        match event.get("type").and_then(Value::as_str).unwrap_or_default() {
            "message_start" => self.read_usage(&event["message"]["usage"]),
            "content_block_start" => {
                let block = &event["content_block"];
                if block["type"] == "tool_use" {
                    self.calls.add(index, block["id"].as_str(), block["name"].as_str(), None);
                }
            }
            "content_block_delta" => {
                let delta = &event["delta"];
                match delta["type"].as_str().unwrap_or_default() {
                    "text_delta" => events.extend(delta["text"].as_str().map(|t| ChatEvent::Text(t.to_string()))),
                    "thinking_delta" => events.extend(delta["thinking"].as_str().map(|t| ChatEvent::Reasoning(t.to_string()))),
                    "input_json_delta" => self.calls.add(index, None, None, delta["partial_json"].as_str()),
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = event["delta"]["stop_reason"].as_str() {
                    self.stop = Some(stop_reason(reason));
                }
                self.read_usage(&event["usage"]);
            }
            "message_stop" => self.done = true,
            "error" => {
                let error = &event["error"];
                let message = error["message"].as_str().unwrap_or("no explanation given").to_string();
                return Err(match error["type"].as_str() {
                    Some("overloaded_error") | Some("rate_limit_error") => {
                        LlmError::RateLimited { provider: "anthropic".into(), status: 529, retries: 0, message }
                    }
                    _ => LlmError::Status { provider: "anthropic".into(), status: 200, message },
                });
            }
            // ping, content_block_stop, and types added later.
            _ => {}
        }
        Ok(events)
    }

    fn done(&self) -> bool {
        self.done
    }

    fn finish(&mut self) -> Result<Vec<ChatEvent>, LlmError> {
        if !self.done {
            return Err(protocol("the stream ended before message_stop".into()));
        }
        Ok(self.end())
    }

    fn whole(&mut self, body: &[u8]) -> Result<Vec<ChatEvent>, LlmError> {
        let answer: Value = serde_json::from_slice(body).map_err(|e| protocol(format!("the answer is not JSON ({e})")))?;
        let blocks = answer.get("content").and_then(Value::as_array).ok_or_else(|| protocol("the answer has no content".into()))?;
        let mut events = Vec::new();
        for (index, block) in blocks.iter().enumerate() {
            match block["type"].as_str().unwrap_or_default() {
                "text" => events.extend(block["text"].as_str().map(|t| ChatEvent::Text(t.to_string()))),
                "thinking" => events.extend(block["thinking"].as_str().map(|t| ChatEvent::Reasoning(t.to_string()))),
                "tool_use" => {
                    let input = block.get("input").map(Value::to_string).unwrap_or_else(|| "{}".into());
                    self.calls.add(index as u64, block["id"].as_str(), block["name"].as_str(), Some(&input));
                }
                _ => {}
            }
        }
        self.stop = answer["stop_reason"].as_str().map(stop_reason);
        self.read_usage(&answer["usage"]);
        events.extend(self.end());
        Ok(events)
    }
}
