//! What can go wrong talking to a model. Every message names the provider
//! and says what to do.

use std::time::Duration;

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum LlmError {
    /// The settings cannot work (no model named, a base URL that is not a URL).
    #[error("{provider}: {message}")]
    Settings { provider: String, message: String },
    /// The server could not be reached at all (after the retries).
    #[error("{provider}: cannot reach {url}: {message}; check the base URL ({hint}) and that the server is running")]
    Unreachable { provider: String, url: String, message: String, hint: &'static str },
    /// The key was refused.
    #[error("{provider}: the API key was refused ({status}: {message}); set {key_var} to a valid key")]
    Auth { provider: String, status: u16, message: String, key_var: &'static str },
    /// The server does not know the model.
    #[error("{provider}: unknown model `{model}` ({message}); pick one the server offers with --model or {model_var}")]
    UnknownModel { provider: String, model: String, message: String, model_var: &'static str },
    /// The conversation no longer fits the model's context window.
    #[error("{provider}: the conversation is longer than the model's context window ({message}); start a new conversation or let it be summarised")]
    ContextOverflow { provider: String, message: String },
    /// Still refused for load after every retry.
    #[error("{provider}: rate limited or overloaded ({status}) after {retries} retries: {message}; wait and try again")]
    RateLimited { provider: String, status: u16, retries: u32, message: String },
    /// Any other refusal by the server.
    #[error("{provider}: the server answered {status}: {message}")]
    Status { provider: String, status: u16, message: String },
    /// The server sent something this crate cannot read.
    #[error("{provider}: unreadable answer: {message}")]
    Protocol { provider: String, message: String },
    /// The answer stopped arriving.
    #[error(
        "{provider}: no data for {after:?} in the middle of an answer; the server may be overloaded (the idle time-out can be raised)"
    )]
    Timeout { provider: String, after: Duration },
}

impl LlmError {
    /// A low-cardinality name of what went wrong (a trace's `error.type`).
    pub fn kind(&self) -> &'static str {
        match self {
            LlmError::Settings { .. } => "settings",
            LlmError::Unreachable { .. } => "unreachable",
            LlmError::Auth { .. } => "auth",
            LlmError::UnknownModel { .. } => "unknown_model",
            LlmError::ContextOverflow { .. } => "context_overflow",
            LlmError::RateLimited { .. } => "rate_limited",
            LlmError::Status { .. } => "status",
            LlmError::Protocol { .. } => "protocol",
            LlmError::Timeout { .. } => "timeout",
        }
    }

    /// Whether the model could not be reached at all (the CLI's exit code 3).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, LlmError::Unreachable { .. } | LlmError::Timeout { .. } | LlmError::RateLimited { .. })
    }
}
