//! Secrets kept out of what the command line reports.
//!
//! Configurations are shown redacted ([`ServerConfig::redacted`]); any
//! other text mcpvisor reports (errors, warnings, status, stderr tails, log
//! lines, spinners) goes through the [`Redactor`] of the servers the
//! command started, [`install`]ed once by the session: the secrets of
//! their configurations and the shapes of secrets in general
//! (`crate::config::redact` has the rules). Before a session starts, only
//! the shapes are masked.
//!
//! Not scrubbed: what servers answer (tool results, resources, prompts,
//! listings). The answer is the server's: masking substrings changes its
//! meaning (a `1000` that happens to be a configured value, a key a tool
//! just created), and `--json` promises exact values. The user started the
//! server with those secrets; docs/cli.md records the decision.
//!
//! [`ServerConfig::redacted`]: crate::config::ServerConfig::redacted

use std::borrow::Cow;
use std::io::Write;
use std::sync::OnceLock;

use crate::config::Redactor;

static INSTALLED: OnceLock<Redactor> = OnceLock::new();

/// Makes `redactor` the one every report of this process goes through
/// (the first one installed stays).
pub fn install(redactor: Redactor) {
    let _ = INSTALLED.set(redactor);
}

/// The installed redactor, else one that knows only the shapes of secrets
/// (not installed in its place: the session's comes later).
fn installed() -> &'static Redactor {
    static SHAPES_ONLY: OnceLock<Redactor> = OnceLock::new();
    INSTALLED.get().unwrap_or_else(|| SHAPES_ONLY.get_or_init(Redactor::default))
}

/// The redactor reports go through now (to save a conversation the same way).
pub fn redactor() -> Redactor {
    installed().clone()
}

/// `text` without secrets.
pub fn scrub(text: &str) -> Cow<'_, str> {
    installed().text(text)
}

/// Every string of `value` without secrets.
pub fn scrub_json(value: &mut serde_json::Value) {
    installed().json(value);
}

/// A `tracing` writer to stderr that scrubs each log event with the
/// installed redactor (so it also covers secrets installed after logging
/// was set up).
pub fn log_writer() -> impl for<'w> tracing_subscriber::fmt::MakeWriter<'w> {
    || ScrubbedLine { buffer: Vec::new() }
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
        let text = String::from_utf8_lossy(&self.buffer);
        let _ = std::io::stderr().lock().write_all(scrub(&text).as_bytes());
    }
}
