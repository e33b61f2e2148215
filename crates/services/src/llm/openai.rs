//! The Chat Completions API (`POST {base}/chat/completions`), as OpenAI and
//! the servers that copy it speak it (Ollama, vLLM, llama.cpp's server,
//! LM Studio, OpenRouter).
//!
//! Mapping: the system prompt is the first message; tool results are `tool`
//! messages (text only, as the API wants), and the images a tool returned
//! follow them in one `user` message of image parts; tools are `function`
//! tools with `tool_choice: "auto"`. Streamed `delta.tool_calls` pieces are
//! assembled by `index`; `delta.reasoning_content` / `delta.reasoning` (the
//! fields local servers use for visible reasoning) become reasoning events.
//! A server that refuses streaming with a 400 saying so is asked again
//! without it, once, and not asked to stream again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use serde_json::{json, Value};

use super::chat::ToolCallParts;
use super::http::{refuses_streaming, Client, Decoder};
use super::{ChatEvent, ChatMessage, ChatModel, ChatRequest, EventStream, LlmError, ModelSettings, Part, StopReason, Usage};

pub struct OpenAi {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    model: String,
    api_key: Option<String>,
    /// Cleared when the server refused a streaming request.
    stream: AtomicBool,
}

impl OpenAi {
    pub fn new(client: Client, settings: &ModelSettings) -> OpenAi {
        OpenAi {
            inner: Arc::new(Inner {
                client,
                model: settings.model.clone(),
                api_key: settings.api_key.clone(),
                stream: AtomicBool::new(settings.stream),
            }),
        }
    }
}

impl ChatModel for OpenAi {
    fn label(&self) -> String {
        format!("openai/{}", self.inner.model)
    }

    fn respond(&self, request: ChatRequest) -> EventStream {
        let inner = self.inner.clone();
        super::opened_lazily(async move { inner.open(request).await })
    }
}

impl Inner {
    async fn open(&self, request: ChatRequest) -> Result<EventStream, LlmError> {
        let headers: Vec<(&'static str, String)> = self.api_key.iter().map(|key| ("authorization", format!("Bearer {key}"))).collect();
        if self.stream.load(Ordering::Relaxed) {
            match self.client.post(&headers, &body(&self.model, &request, true)).await {
                Ok(response) => return Ok(self.client.stream(response, Answer::default())),
                Err(error) if refuses_streaming(&error) => {
                    tracing::info!(model = %self.model, "the server does not stream; asking for whole answers from now on");
                    self.stream.store(false, Ordering::Relaxed);
                }
                Err(error) => return Err(error),
            }
        }
        let response = self.client.post(&headers, &body(&self.model, &request, false)).await?;
        let events = self.client.whole(response, Answer::default()).await?;
        Ok(futures::stream::iter(events.into_iter().map(Ok)).boxed())
    }
}

/// The request body.
pub fn body(model: &str, request: &ChatRequest, stream: bool) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    let mut tool_images = Vec::new();
    for message in &request.messages {
        if !matches!(message, ChatMessage::Tool { .. }) && !tool_images.is_empty() {
            messages.push(json!({"role": "user", "content": std::mem::take(&mut tool_images)}));
        }
        match message {
            ChatMessage::User { content } => {
                messages.push(json!({"role": "user", "content": content.iter().map(part).collect::<Vec<_>>()}))
            }
            ChatMessage::Assistant { text, tool_calls } => {
                let mut message = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
                if !tool_calls.is_empty() {
                    message["tool_calls"] = tool_calls
                        .iter()
                        .map(
                            |call| json!({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}),
                        )
                        .collect();
                }
                messages.push(message);
            }
            ChatMessage::Tool { call_id, name, content, is_error } => {
                // The API has no error flag on tool results: it is said in the text.
                let marker = is_error.then_some("[the tool call failed]");
                let text: Vec<&str> = marker.into_iter().chain(content.iter().filter_map(Part::text)).collect();
                messages.push(json!({"role": "tool", "tool_call_id": call_id, "content": text.join("\n")}));
                let images: Vec<Value> = content.iter().filter(|p| p.text().is_none()).map(part).collect();
                if !images.is_empty() {
                    tool_images.push(json!({"type": "text", "text": format!("Images returned by the tool call {call_id} ({name}):")}));
                    tool_images.extend(images);
                }
            }
        }
    }
    if !tool_images.is_empty() {
        messages.push(json!({"role": "user", "content": tool_images}));
    }
    let mut body = json!({"model": model, "messages": messages, "stream": stream});
    if stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| json!({"type": "function", "function": {"name": tool.name, "description": tool.description, "parameters": tool.input_schema}}))
            .collect();
        body["tool_choice"] = json!("auto");
    }
    if let Some(max) = request.max_tokens {
        body["max_tokens"] = json!(max);
    }
    body
}

fn part(part: &Part) -> Value {
    match part {
        Part::Text { text } => json!({"type": "text", "text": text}),
        Part::Image { mime_type, data } => json!({"type": "image_url", "image_url": {"url": format!("data:{mime_type};base64,{data}")}}),
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "stop" => StopReason::EndTurn,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" => StopReason::MaxTokens,
        "content_filter" => StopReason::Refusal,
        other => StopReason::Other(other.to_string()),
    }
}

fn usage(value: &Value) -> Option<Usage> {
    let count = |name: &str| value.get(name).and_then(Value::as_u64).unwrap_or(0);
    value.is_object().then(|| Usage { input_tokens: count("prompt_tokens"), output_tokens: count("completion_tokens") })
}

/// Reads one answer, streamed or whole.
#[derive(Default)]
struct Answer {
    calls: ToolCallParts,
    stop: Option<StopReason>,
    usage: Usage,
    done: bool,
}

impl Answer {
    fn protocol(message: String) -> LlmError {
        LlmError::Protocol { provider: "openai".into(), message }
    }

    fn end(&mut self) -> Vec<ChatEvent> {
        let mut events = self.calls.finish();
        let stop = match self.stop.take() {
            // Some servers say "stop" after tool calls.
            Some(StopReason::EndTurn) if !events.is_empty() => StopReason::ToolUse,
            Some(stop) => stop,
            None if !events.is_empty() => StopReason::ToolUse,
            None => StopReason::EndTurn,
        };
        events.push(ChatEvent::End { stop, usage: self.usage });
        events
    }
}

/// The reasoning and text of a message or a stream delta, in that order:
/// `reasoning_content` / `reasoning` (what local servers use for visible
/// reasoning), then `content`; empty pieces are skipped.
fn prose(message: &Value) -> Vec<ChatEvent> {
    let piece = |field: &str| message.get(field).and_then(Value::as_str).filter(|t| !t.is_empty()).map(str::to_string);
    let reasoning = ["reasoning_content", "reasoning"].into_iter().filter_map(piece).map(ChatEvent::Reasoning);
    reasoning.chain(piece("content").map(ChatEvent::Text)).collect()
}

/// A refusal reported inside a successful answer (`{"error": {...}}`).
fn embedded_error(value: &Value) -> Option<LlmError> {
    let error = value.get("error")?;
    let message = error.get("message").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| error.to_string());
    Some(LlmError::Status { provider: "openai".into(), status: 200, message })
}

impl Decoder for Answer {
    fn event(&mut self, _name: &str, data: &str) -> Result<Vec<ChatEvent>, LlmError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(Vec::new());
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| Answer::protocol(format!("a stream chunk is not JSON ({e})")))?;
        if let Some(error) = embedded_error(&chunk) {
            return Err(error);
        }
        if let Some(usage) = chunk.get("usage").and_then(usage) {
            self.usage = usage;
        }
        let mut events = Vec::new();
        for choice in chunk.get("choices").and_then(Value::as_array).into_iter().flatten() {
            let delta = &choice["delta"];
            events.extend(prose(delta));
            for (position, call) in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate() {
                let index = call.get("index").and_then(Value::as_u64).unwrap_or(position as u64);
                let function = &call["function"];
                let text = |value: &Value| value.as_str().map(str::to_string);
                self.calls.add(
                    index,
                    text(&call["id"]).as_deref(),
                    text(&function["name"]).as_deref(),
                    text(&function["arguments"]).as_deref(),
                );
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.stop = Some(stop_reason(reason));
            }
        }
        Ok(events)
    }

    fn done(&self) -> bool {
        self.done
    }

    fn finish(&mut self) -> Result<Vec<ChatEvent>, LlmError> {
        if !self.done && self.stop.is_none() {
            return Err(Answer::protocol("the stream ended before the answer did (no finish_reason, no [DONE])".into()));
        }
        Ok(self.end())
    }

    fn whole(&mut self, body: &[u8]) -> Result<Vec<ChatEvent>, LlmError> {
        let answer: Value = serde_json::from_slice(body).map_err(|e| Answer::protocol(format!("the answer is not JSON ({e})")))?;
        if let Some(error) = embedded_error(&answer) {
            return Err(error);
        }
        if let Some(usage) = answer.get("usage").and_then(usage) {
            self.usage = usage;
        }
        let choice = answer.get("choices").and_then(|c| c.get(0)).ok_or_else(|| Answer::protocol("the answer has no choices".into()))?;
        let message = &choice["message"];
        let mut events = prose(message);
        for (index, call) in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let function = &call["function"];
            let arguments = match &function["arguments"] {
                Value::String(text) => text.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            self.calls.add(index as u64, call["id"].as_str(), function["name"].as_str(), Some(&arguments));
        }
        self.stop = choice.get("finish_reason").and_then(Value::as_str).map(stop_reason);
        events.extend(self.end());
        Ok(events)
    }
}
