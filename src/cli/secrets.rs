//! Secret values kept out of everything the command line prints.
//!
//! Configurations are shown redacted ([`ServerConfig::redacted`]), but a
//! secret can also come back inside text mcpvisor did not write: a server
//! that prints its token on stderr (kept in the status' stderr tail), an
//! error message, a log line. The [`Scrubber`] knows the expanded values
//! that redaction masks and replaces them with [`MASK`] wherever they
//! appear. Values shorter than 4 characters are left alone: masking every
//! `1` or `on` would garble the output and protect nothing.
//!
//! A command [`install`]s the scrubber of the servers it starts once; every
//! printing function of the command line ([`super::output`], the log
//! writer, spinners) goes through [`scrub`].

use std::io::Write;
use std::sync::{Arc, OnceLock};

use crate::config::{Auth, ServerConfig, MASK};

const SHORTEST_SECRET: usize = 4;

static INSTALLED: OnceLock<Scrubber> = OnceLock::new();

/// Makes `scrubber` the one every output of this process goes through
/// (the first one installed stays).
pub fn install(scrubber: Scrubber) {
    let _ = INSTALLED.set(scrubber);
}

/// `text` without the installed scrubber's secrets.
pub fn scrub(text: &str) -> String {
    match INSTALLED.get() {
        Some(scrubber) => scrubber.scrub(text),
        None => text.to_string(),
    }
}

/// Every string of `value` scrubbed with the installed scrubber.
pub fn scrub_json(value: &mut serde_json::Value) {
    if let Some(scrubber) = INSTALLED.get() {
        scrubber.scrub_json(value);
    }
}

/// A `tracing` writer to stderr that scrubs each log event with the
/// installed scrubber (so it also covers secrets installed after logging
/// was set up).
pub fn log_writer() -> impl for<'w> tracing_subscriber::fmt::MakeWriter<'w> {
    || ScrubbedLine { buffer: Vec::new() }
}

/// Replaces known secret values with `***`.
#[derive(Debug, Clone, Default)]
pub struct Scrubber {
    secrets: Arc<Vec<String>>,
}

impl Scrubber {
    /// The secrets of these expanded configurations: the values their
    /// redacted forms mask.
    pub fn of<'a>(configs: impl IntoIterator<Item = &'a ServerConfig>) -> Scrubber {
        let mut secrets = Vec::new();
        for config in configs {
            let redacted = config.redacted();
            let masked = |value: &str, shown: Option<&String>| shown.is_some_and(|s| s.contains(MASK)) && !value.is_empty();
            for (key, value) in &config.env {
                if masked(value, redacted.env.get(key)) {
                    secrets.push(value.clone());
                }
            }
            for (key, value) in &config.headers {
                if masked(value, redacted.headers.get(key)) {
                    secrets.push(value.clone());
                }
            }
            match &config.auth {
                Some(Auth::Bearer { token }) => secrets.push(token.clone()),
                Some(Auth::Basic { password, .. }) => secrets.push(password.clone()),
                Some(Auth::ApiKey { value, .. }) => secrets.push(value.clone()),
                None => {}
            }
        }
        secrets.retain(|s| s.chars().count() >= SHORTEST_SECRET);
        // Longest first, so a secret containing another is masked whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Scrubber { secrets: Arc::new(secrets) }
    }

    pub fn scrub(&self, text: &str) -> String {
        self.secrets.iter().fold(text.to_string(), |text, secret| text.replace(secret.as_str(), MASK))
    }

    /// Scrubs every string inside a JSON value.
    pub fn scrub_json(&self, value: &mut serde_json::Value) {
        if self.secrets.is_empty() {
            return;
        }
        match value {
            serde_json::Value::String(text) => *text = self.scrub(text),
            serde_json::Value::Array(items) => items.iter_mut().for_each(|item| self.scrub_json(item)),
            serde_json::Value::Object(map) => map.values_mut().for_each(|item| self.scrub_json(item)),
            _ => {}
        }
    }
}

/// Collects one log event and writes it scrubbed, on drop.
struct ScrubbedLine {
    buffer: Vec<u8>,
}

impl Write for ScrubbedLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for ScrubbedLine {
    fn drop(&mut self) {
        let text = scrub(&String::from_utf8_lossy(&self.buffer));
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_the_values_redaction_masks_and_nothing_else() {
        let config = ServerConfig::stdio("s", "cmd", ["--verbose"]).with_env("API_TOKEN", "tok-12345").with_env("LEVEL", "debug");
        let scrubber = Scrubber::of([&config]);
        assert_eq!(scrubber.scrub("using tok-12345 at level debug"), "using *** at level debug");
        let mut json = serde_json::json!({"tail": ["x tok-12345"], "n": 1});
        scrubber.scrub_json(&mut json);
        assert_eq!(json, serde_json::json!({"tail": ["x ***"], "n": 1}));
    }

    #[test]
    fn short_values_are_left_alone() {
        let config = ServerConfig::stdio("s", "cmd", Vec::<String>::new()).with_env("PASS", "1");
        assert_eq!(Scrubber::of([&config]).scrub("1 2 3"), "1 2 3");
    }
}
