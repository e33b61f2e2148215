//! Secrets in transit: what a tool call's arguments carry to a server and
//! what its result carries back to the model, screened by the redactor
//! ([`Redactor::screen`]: the same shapes and configured values that keep
//! secrets out of mcpvisor's own output) and masked, refused or let
//! through as the server's `secrets` setting says ([`SecretsPolicy`]).
//!
//! Invariants:
//! - the configured secrets are those of *every* server the runtime was
//!   given ([`SecretBook`], shared by its connections): server B's result
//!   cannot hand server A's token to the model; a removed server's secrets
//!   stay known;
//! - every secret found is counted by server, tool, direction, kind and
//!   action, and listed in the call's audit line ([`CallWatch::secrets`]),
//!   by kind only: no secret is ever written anywhere;
//! - a refusal ([`CallError::SecretBlocked`]) names the server, the tool,
//!   the direction, the kind and the setting to change;
//! - the common case costs one [`Redactor::might_hold`] pass per string
//!   and no allocation: only a string it does not clear is screened, and
//!   only a string with a secret to mask is replaced; image, audio and
//!   blob data are not read (they are base64, not text a model reads).

use std::sync::{Arc, RwLock};

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ResourceContents};
use serde_json::Value;

use crate::config::redact::{Found, Redactor, SecretKind};
use crate::config::{Direction, SecretAction, SecretsMode, SecretsPolicy, ServerConfig};
use crate::error::CallError;
use crate::telemetry::CallWatch;

/// The configured secrets of every server of a runtime, learnt as each
/// server's connection is made. Cheap to clone: one book, shared.
#[derive(Clone, Default)]
pub struct SecretBook(Arc<RwLock<Redactor>>);

impl std::fmt::Debug for SecretBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretBook({:?})", self.redactor())
    }
}

impl SecretBook {
    /// Adds the secrets of `configs` (as written and as expanded: see
    /// [`Redactor::from_configs`]); the matcher is built again only when
    /// one of them is new, so learning a server twice costs a lookup.
    pub fn learn<'a>(&self, configs: impl IntoIterator<Item = &'a ServerConfig>) {
        let theirs = Redactor::from_configs(configs);
        if self.redactor().holds_all(&theirs) {
            return;
        }
        let mut known = self.0.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        *known = known.merged(&theirs);
    }

    /// The redactor of every secret learnt so far.
    pub fn redactor(&self) -> Redactor {
        self.0.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }
}

/// One server's screen: its setting and the runtime's book. Cheap to
/// clone; the server and the tool are the call's own ([`CallWatch::names`]).
#[derive(Debug, Clone)]
pub struct SecretScreen {
    policy: SecretsPolicy,
    book: SecretBook,
}

impl SecretScreen {
    pub fn new(config: &ServerConfig, book: SecretBook) -> SecretScreen {
        SecretScreen { policy: config.secrets, book }
    }

    /// Screens a call's arguments before they are sent: masks what the
    /// setting masks, counts every secret in `watch`, and refuses the call
    /// when the setting blocks.
    pub fn arguments(&self, arguments: &mut Option<JsonObject>, watch: &mut CallWatch) -> Result<(), CallError> {
        let Some(arguments) = arguments.as_mut() else { return Ok(()) };
        let mode = self.policy.arguments;
        let redactor = self.book.redactor();
        let mut found = Found::default();
        for value in arguments.values_mut() {
            screen_value(value, &redactor, mode, &mut found);
        }
        self.settle(Direction::Arguments, found, watch)
    }

    /// Screens a call's result before it reaches any caller, as
    /// [`SecretScreen::arguments`] does; a blocked result is withheld
    /// (the caller gets [`CallError::SecretBlocked`]).
    pub fn result(&self, result: Result<CallToolResult, CallError>, watch: &mut CallWatch) -> Result<CallToolResult, CallError> {
        let mut result = result?;
        let mode = self.policy.results;
        let redactor = self.book.redactor();
        let mut found = Found::default();
        for block in &mut result.content {
            match block {
                ContentBlock::Text(text) => screen_text(&mut text.text, &redactor, mode, &mut found),
                ContentBlock::Resource(embedded) => match &mut embedded.resource {
                    ResourceContents::TextResourceContents { uri, text, .. } => {
                        screen_text(uri, &redactor, mode, &mut found);
                        screen_text(text, &redactor, mode, &mut found);
                    }
                    ResourceContents::BlobResourceContents { uri, .. } => screen_text(uri, &redactor, mode, &mut found),
                    _ => {}
                },
                ContentBlock::ResourceLink(link) => {
                    screen_text(&mut link.uri, &redactor, mode, &mut found);
                    if let Some(description) = link.description.as_mut() {
                        screen_text(description, &redactor, mode, &mut found);
                    }
                }
                // Base64 data, and blocks this version of rmcp does not know.
                _ => {}
            }
        }
        if let Some(structured) = result.structured_content.as_mut() {
            screen_value(structured, &redactor, mode, &mut found);
        }
        self.settle(Direction::Results, found, watch)?;
        Ok(result)
    }

    /// False only when a raw answer (JSON text) surely holds no secret to
    /// count: for a path that passes answers through without parsing them.
    pub fn might_hold(&self, raw: &str) -> bool {
        self.book.redactor().might_hold(raw)
    }

    /// Counts what was found, and refuses when the setting blocks.
    fn settle(&self, direction: Direction, found: Found, watch: &mut CallWatch) -> Result<(), CallError> {
        if found.is_empty() {
            return Ok(());
        }
        let mode = self.policy.mode(direction);
        watch.secrets(direction, &found, mode);
        match (mode, found.first()) {
            (SecretsMode::Block, Some(kind)) => {
                let (server, tool) = watch.names();
                tracing::warn!(server, tool, "{} withheld: it held {}", direction.as_str(), kind.described());
                Err(CallError::SecretBlocked { server: server.to_string(), tool: tool.to_string(), direction, kind })
            }
            _ => Ok(()),
        }
    }
}

/// Screens one string in place: replaced only when something is masked.
fn screen_text(text: &mut String, redactor: &Redactor, mode: SecretsMode, found: &mut Found) {
    if !redactor.might_hold(text) {
        return;
    }
    let (screened, here) = redactor.screen(text, |kind: SecretKind| mode.action(kind) == SecretAction::Masked);
    found.extend(&here);
    if let std::borrow::Cow::Owned(masked) = screened {
        *text = masked;
    }
}

/// Screens every string of `value` (not its keys); deep values do not grow the stack.
fn screen_value(value: &mut Value, redactor: &Redactor, mode: SecretsMode, found: &mut Found) {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(text) => screen_text(text, redactor, mode, found),
            Value::Array(items) => stack.extend(items.iter_mut()),
            Value::Object(map) => stack.extend(map.values_mut()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::telemetry::{AuditConfig, CallStart, Telemetry};

    const KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----";
    const TOKEN: &str = "tok-of-server-a-0123456789";
    const GITHUB: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";

    /// A book that knows server `a`'s token, and a screen for server `b`.
    fn screen(secrets: SecretsPolicy) -> SecretScreen {
        let book = SecretBook::default();
        book.learn([&ServerConfig::stdio("a", "srv", ["x"]).with_env("API_TOKEN", TOKEN)]);
        let mut b = ServerConfig::stdio("b", "srv", ["y"]);
        b.secrets = secrets;
        book.learn([&b]);
        SecretScreen::new(&b, book)
    }

    fn watch(telemetry: &Telemetry) -> CallWatch {
        telemetry.watch(CallStart {
            server: "b",
            tool: "read",
            caller: None,
            identity: None,
            upstream: None,
            arguments: None,
            redactor: &Redactor::default(),
            stats: telemetry.metrics().tool("b", "read"),
            era: "legacy",
            parent: None,
        })
    }

    fn result(text: &str) -> CallToolResult {
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content = Some(serde_json::json!({ "nested": [{ "value": text }], "n": 1 }));
        result
    }

    fn texts(result: &CallToolResult) -> String {
        serde_json::to_string(result).unwrap()
    }

    #[test]
    fn by_default_private_keys_and_every_servers_configured_secrets_are_masked_in_results_and_counted() {
        let telemetry = Telemetry::default();
        let mut watch = watch(&telemetry);
        let text = format!("id_rsa:\n{KEY}\nenv: API_TOKEN={TOKEN}\ngh: {GITHUB}");
        let screened = screen(SecretsPolicy::default()).result(Ok(result(&text)), &mut watch).unwrap();
        let shown = texts(&screened);
        assert!(!shown.contains("BEGIN OPENSSH") && !shown.contains("b3BlbnNzaC1") && !shown.contains(TOKEN), "{shown}");
        assert!(shown.contains(GITHUB), "other shapes are let through by default: {shown}");
        watch.finish(&Ok(screened));
        let calls = telemetry.metrics().calls();
        let read = &calls[0];
        assert_eq!(read.secrets_found(Direction::Results, SecretKind::PrivateKey), 2, "in the text and in structuredContent");
        assert_eq!(read.secrets_found(Direction::Results, SecretKind::Configured), 2);
        assert_eq!(read.secrets_found(Direction::Results, SecretKind::Token), 2);
        let allowed = read.secrets.iter().find(|found| found.kind == "token").unwrap();
        assert_eq!(allowed.action, "allowed");
    }

    #[test]
    fn mask_masks_every_shape_and_allow_lets_everything_through_counted() {
        let telemetry = Telemetry::default();
        let text = format!("gh: {GITHUB} and {TOKEN}");
        let masked = screen(SecretsPolicy::both(SecretsMode::Mask)).result(Ok(result(&text)), &mut watch(&telemetry)).unwrap();
        assert!(!texts(&masked).contains(GITHUB) && !texts(&masked).contains(TOKEN), "{}", texts(&masked));
        let allowed = screen(SecretsPolicy::both(SecretsMode::Allow)).result(Ok(result(&text)), &mut watch(&telemetry)).unwrap();
        assert_eq!(allowed, result(&text));
        let calls = telemetry.metrics().calls();
        assert_eq!(calls[0].secrets_found(Direction::Results, SecretKind::Token), 4);
        assert!(
            calls[0].secrets.iter().any(|found| found.action == "allowed") && calls[0].secrets.iter().any(|found| found.action == "masked")
        );
    }

    #[test]
    fn block_refuses_arguments_and_withholds_results_naming_the_kind_never_the_secret() {
        let telemetry = Telemetry::default();
        let block = screen(SecretsPolicy::both(SecretsMode::Block));
        let mut arguments = serde_json::json!({ "q": KEY, "limit": 3 }).as_object().cloned();
        let refused = block.arguments(&mut arguments, &mut watch(&telemetry)).unwrap_err();
        let message = refused.to_string();
        assert!(matches!(refused, CallError::SecretBlocked { direction: Direction::Arguments, kind: SecretKind::PrivateKey, .. }));
        assert!(
            message.contains("`read` of server `b`") && message.contains("a private key") && message.contains("[servers.b] secrets"),
            "{message}"
        );
        assert!(!message.contains("b3BlbnNzaC1"), "{message}");
        let withheld = block.result(Ok(result(&format!("x {TOKEN}"))), &mut watch(&telemetry)).unwrap_err();
        assert!(withheld.to_string().contains("the result was withheld") && !withheld.to_string().contains(TOKEN), "{withheld}");
        let calls = telemetry.metrics().calls();
        assert_eq!(calls[0].secrets_found(Direction::Arguments, SecretKind::PrivateKey), 1);
        assert_eq!(calls[0].secrets.iter().map(|found| found.action).collect::<Vec<_>>(), ["blocked", "blocked"]);
    }

    #[test]
    fn arguments_are_masked_by_default_only_for_keys_and_configured_values() {
        let telemetry = Telemetry::default();
        let mut arguments = serde_json::json!({ "q": format!("{TOKEN} {GITHUB}"), "nested": { "k": KEY }, "n": 1 }).as_object().cloned();
        screen(SecretsPolicy::default()).arguments(&mut arguments, &mut watch(&telemetry)).unwrap();
        let sent = serde_json::to_string(&arguments).unwrap();
        assert!(!sent.contains(TOKEN) && !sent.contains("b3BlbnNzaC1") && sent.contains(GITHUB) && sent.contains("\"n\":1"), "{sent}");
    }

    #[test]
    fn a_result_without_secrets_is_left_as_it_was_not_even_reallocated() {
        let telemetry = Telemetry::default();
        let before = result("the weather in Paris: 21 degrees, light wind");
        let input = before.clone();
        let text_at = |result: &CallToolResult| match &result.content[0] {
            ContentBlock::Text(text) => text.text.as_ptr(),
            _ => std::ptr::null(),
        };
        let pointer = text_at(&input);
        let after = screen(SecretsPolicy::both(SecretsMode::Mask)).result(Ok(input), &mut watch(&telemetry)).unwrap();
        assert_eq!((&after, text_at(&after)), (&before, pointer));
        assert!(telemetry.metrics().calls().iter().all(|calls| calls.secrets.is_empty()));
    }

    #[test]
    fn the_audit_line_lists_the_kinds_found_and_never_the_secret() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let telemetry = Telemetry::default().with_audit(AuditConfig::file(&path)).unwrap();
        let mut watch = watch(&telemetry);
        let screened = screen(SecretsPolicy::default()).result(Ok(result(KEY)), &mut watch);
        watch.finish(&screened);
        assert!(telemetry.audit().unwrap().flush(Duration::from_secs(5)));
        let line = std::fs::read_to_string(&path).unwrap();
        let line: Value = serde_json::from_str(line.trim()).unwrap();
        assert_eq!(line["secrets"], serde_json::json!([{ "direction": "results", "kind": "private_key", "action": "masked", "count": 2 }]));
        assert!(!line.to_string().contains("b3BlbnNzaC1"));
    }
}
