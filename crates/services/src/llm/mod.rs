//! Model providers behind one seam, [`ChatModel`]: a request (system prompt,
//! messages with tool calls and results, tools) in, a stream of
//! [`ChatEvent`]s out.
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`chat`] | the provider-neutral conversation: messages, parts, tool calls, events, stop reasons, usage |
//! | [`settings`] | which provider, model, base URL and key, from flags, config and the SDKs' environment variables |
//! | [`openai`] | the Chat Completions API (OpenAI, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter, ...) |
//! | [`anthropic`] | the Messages API |
//! | [`scripted`] | a deterministic model with no key and no network, for the demo |
//! | [`http`] | the HTTP client, retries with backoff, error classification, SSE decoding with limits |
//! | [`error`] | [`LlmError`] |
//!
//! Invariants every provider keeps:
//! - a stream ends with exactly one [`ChatEvent::End`], or with one `Err`;
//! - tool calls are emitted whole ([`ChatEvent::ToolCall`]), after their
//!   streamed pieces are assembled, with the arguments exactly as the model
//!   wrote them (invalid JSON included: the caller answers it to the model);
//! - dropping the stream closes the HTTP response (that is the cancellation);
//! - nothing the server sends makes a provider panic or grow memory without
//!   bound: bodies are capped ([`http::MAX_RESPONSE_BYTES`]) and a silent
//!   stream ends with [`LlmError::Timeout`] after the idle time-out.

pub mod anthropic;
pub mod chat;
pub mod error;
pub mod http;
pub mod openai;
pub mod scripted;
pub mod settings;

use std::sync::Arc;

use futures::stream::BoxStream;

pub use chat::{ChatEvent, ChatMessage, ChatRequest, Part, StopReason, ToolCall, ToolSpec, Usage};
pub use error::LlmError;
pub use settings::{ModelSettings, Provider};

/// The events of one model answer, as they arrive.
pub type EventStream = BoxStream<'static, Result<ChatEvent, LlmError>>;

/// A model that answers a conversation. Implementations are cheap to share
/// (`Arc<dyn ChatModel>`) and safe to call concurrently.
pub trait ChatModel: Send + Sync {
    /// The provider and model, for messages and history (`openai/gpt-4o`).
    fn label(&self) -> String;

    /// Sends `request` and streams the answer. Connecting happens when the
    /// stream is first polled; errors come as the stream's last item.
    fn respond(&self, request: ChatRequest) -> EventStream;
}

/// The events of the answer `open` starts: nothing happens until the
/// stream is first polled, and a failure to open is the stream's one item.
fn opened_lazily(open: impl std::future::Future<Output = Result<EventStream, LlmError>> + Send + 'static) -> EventStream {
    use futures::StreamExt;
    futures::stream::once(open).flat_map(|opened| opened.unwrap_or_else(|error| futures::stream::iter([Err(error)]).boxed())).boxed()
}

/// The model `settings` describe.
pub fn connect(settings: &ModelSettings) -> Result<Arc<dyn ChatModel>, LlmError> {
    let client = http::Client::new(settings)?;
    Ok(match settings.provider {
        Provider::OpenAi => Arc::new(openai::OpenAi::new(client, settings)),
        Provider::Anthropic => Arc::new(anthropic::Anthropic::new(client, settings)),
    })
}
