//! Which model to talk to, and how.
//!
//! Environment variables mean what the official SDKs make them mean:
//! `OPENAI_BASE_URL` ends in `/v1` and requests go to
//! `{base}/chat/completions`; `ANTHROPIC_BASE_URL` has no `/v1` and requests
//! go to `{base}/v1/messages`. Keys come from `OPENAI_API_KEY` (none needed
//! for local servers) and `ANTHROPIC_API_KEY`; the model from `--model`,
//! else `MCPVISOR_MODEL`, else the configuration. Flags and configuration
//! values win over the environment.

use std::fmt;
use std::time::Duration;

use super::LlmError;

/// A model API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Provider {
    /// The Chat Completions API, as OpenAI and compatible servers speak it.
    #[default]
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
}

impl Provider {
    pub fn parse(name: &str) -> Option<Provider> {
        match name {
            "openai" => Some(Provider::OpenAi),
            "anthropic" => Some(Provider::Anthropic),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
        }
    }

    /// The variable that holds this provider's key.
    pub fn key_var(self) -> &'static str {
        match self {
            Provider::OpenAi => "OPENAI_API_KEY",
            Provider::Anthropic => "ANTHROPIC_API_KEY",
        }
    }

    /// The variable that holds this provider's base URL.
    pub fn base_url_var(self) -> &'static str {
        match self {
            Provider::OpenAi => "OPENAI_BASE_URL",
            Provider::Anthropic => "ANTHROPIC_BASE_URL",
        }
    }

    fn default_base_url(self) -> &'static str {
        match self {
            Provider::OpenAi => "https://api.openai.com/v1",
            Provider::Anthropic => "https://api.anthropic.com",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The variable that names the model for either provider.
pub const MODEL_VAR: &str = "MCPVISOR_MODEL";

/// Everything needed to talk to one model.
#[derive(Clone, PartialEq)]
pub struct ModelSettings {
    pub provider: Provider,
    pub model: String,
    /// Without a trailing `/`: `https://api.openai.com/v1`, `https://api.anthropic.com`.
    pub base_url: String,
    pub api_key: Option<String>,
    /// Ask for streamed answers (the default).
    pub stream: bool,
    /// Retries on 429, 5xx and failed connections, with backoff.
    pub max_retries: u32,
    pub connect_timeout: Duration,
    /// The longest silence in the middle of an answer.
    pub idle_timeout: Duration,
}

impl fmt::Debug for ModelSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelSettings")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

/// What the user chose explicitly (flags, configuration); unset fields come
/// from the environment, then the defaults.
#[derive(Debug, Clone, Default)]
pub struct Choices {
    pub provider: Option<Provider>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub stream: Option<bool>,
}

impl ModelSettings {
    /// Settings from `choices`, then `env` (a lookup such as `std::env::var`).
    pub fn resolve(choices: Choices, env: impl Fn(&str) -> Option<String>) -> Result<ModelSettings, LlmError> {
        let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let provider = choices.provider.unwrap_or_default();
        let model = choices.model.or_else(|| env(MODEL_VAR)).ok_or_else(|| LlmError::Settings {
            provider: provider.to_string(),
            message: format!("no model named; pass --model NAME, set {MODEL_VAR}, or set `model` under [agent] in the configuration"),
        })?;
        let base_url = choices.base_url.or_else(|| env(provider.base_url_var())).unwrap_or_else(|| provider.default_base_url().into());
        let base_url = base_url.trim_end_matches('/').to_string();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(LlmError::Settings {
                provider: provider.to_string(),
                message: format!("the base URL `{base_url}` is not an http(s) URL; fix {} or --base-url", provider.base_url_var()),
            });
        }
        Ok(ModelSettings {
            provider,
            model,
            base_url,
            api_key: choices.api_key.or_else(|| env(provider.key_var())),
            stream: choices.stream.unwrap_or(true),
            max_retries: 3,
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
        })
    }

    /// Where requests go: `{base}/chat/completions` or `{base}/v1/messages`.
    pub fn endpoint(&self) -> String {
        match self.provider {
            Provider::OpenAi => format!("{}/chat/completions", self.base_url),
            Provider::Anthropic => format!("{}/v1/messages", self.base_url),
        }
    }

    /// The variable to set when this talks to the provider's own endpoint
    /// without a key (local servers need none), else `None`.
    pub fn missing_key(&self) -> Option<&'static str> {
        let official = self.base_url == self.provider.default_base_url().trim_end_matches('/');
        (official && self.api_key.is_none()).then(|| self.provider.key_var())
    }

    /// `provider/model`, for messages.
    pub fn label(&self) -> String {
        format!("{}/{}", self.provider, self.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn base_urls_follow_the_sdks_conventions() {
        let openai =
            ModelSettings::resolve(Choices::default(), env(&[("MCPVISOR_MODEL", "m"), ("OPENAI_BASE_URL", "http://h:1/v1/")])).unwrap();
        assert_eq!(openai.endpoint(), "http://h:1/v1/chat/completions");
        let choices = Choices { provider: Some(Provider::Anthropic), ..Default::default() };
        let anthropic = ModelSettings::resolve(
            choices,
            env(&[("MCPVISOR_MODEL", "m"), ("ANTHROPIC_BASE_URL", "http://h:2"), ("ANTHROPIC_API_KEY", "k")]),
        )
        .unwrap();
        assert_eq!(anthropic.endpoint(), "http://h:2/v1/messages");
        assert_eq!(anthropic.api_key.as_deref(), Some("k"));
        assert!(!format!("{anthropic:?}").contains("\"k\""), "the key is not in Debug output");
        let defaults = ModelSettings::resolve(Choices { model: Some("gpt".into()), ..Default::default() }, env(&[])).unwrap();
        assert_eq!(defaults.endpoint(), "https://api.openai.com/v1/chat/completions");
    }

    #[test]
    fn a_key_is_missing_only_for_the_providers_own_endpoint() {
        let resolve = |vars: &[(&str, &str)]| ModelSettings::resolve(Choices::default(), env(vars)).unwrap().missing_key();
        assert_eq!(resolve(&[("MCPVISOR_MODEL", "m")]), Some("OPENAI_API_KEY"));
        assert_eq!(resolve(&[("MCPVISOR_MODEL", "m"), ("OPENAI_API_KEY", "k")]), None);
        assert_eq!(resolve(&[("MCPVISOR_MODEL", "m"), ("OPENAI_BASE_URL", "http://localhost:11434/v1")]), None);
    }

    #[test]
    fn choices_win_over_the_environment_and_a_missing_model_says_how_to_name_one() {
        let choices = Choices { model: Some("flag".into()), base_url: Some("http://flag".into()), ..Default::default() };
        let settings = ModelSettings::resolve(choices, env(&[("MCPVISOR_MODEL", "env"), ("OPENAI_BASE_URL", "http://env")])).unwrap();
        assert_eq!((settings.model.as_str(), settings.base_url.as_str()), ("flag", "http://flag"));
        let error = ModelSettings::resolve(Choices::default(), env(&[])).unwrap_err().to_string();
        assert!(error.contains("--model") && error.contains("MCPVISOR_MODEL"), "{error}");
        let bad = ModelSettings::resolve(
            Choices { model: Some("m".into()), base_url: Some("localhost:1".into()), ..Default::default() },
            env(&[]),
        );
        assert!(bad.unwrap_err().to_string().contains("not an http(s) URL"));
    }
}
