//! One redaction model for everything mcpvisor shows or logs: listings
//! (`list`, `info`), status reports, errors, warnings, log lines and the
//! stderr tails of servers.
//!
//! **What can be a secret** ([`could_be_secret`]): any value except an
//! empty one, a number, one `${VAR}` reference (it names the secret without
//! holding it) and the common setting words of [`COMMON_WORDS`] (booleans,
//! log levels, modes), compared case-insensitively. So `MAX_TOKENS = "1000"`
//! and `AUTH_REQUIRED = "false"` are shown as they are.
//!
//! **Configurations** ([`ServerConfig::redacted`]) are redacted field by
//! field: header values and auth secrets (not the Basic username, not the
//! API key's header name) and env values under secret-looking names
//! (`looks_secret`) are replaced whole by [`MASK`] when they could be
//! secrets; the value after a secret-looking flag in `args`
//! (`--api-key X`) too; in every other text field (command, args, env
//! values under neutral names, url) the secrets recognised by their shape
//! are masked (see `patterns`: URL passwords, `Authorization`/`Bearer`
//! credentials, well-known token shapes, `NAME=value` with a secret-looking
//! name).
//!
//! **Any text** ([`Redactor::text`]): every secret value of the
//! configurations ([`Redactor::from_configs`]: what the field rules above
//! mask, as written and as expanded) wherever it appears, then the same
//! shapes (in this order: a shape can end inside a known secret, at its own
//! escaped quote, and would leave the rest), each secret at
//! least [`MIN_SECRET_CHARS`] long: masking every `1` or `true` would garble
//! output and protect nothing. Each line of a multi-line secret (a PEM key)
//! is a secret of its own, so text read line by line (a server's stderr)
//! never shows one; so is a secret's JSON-escaped form.
//!
//! **JSON** ([`Redactor::json`]) is redacted inside string values only, so
//! it stays valid JSON with its keys, numbers, booleans and nulls intact.
//!
//! **Screening** ([`Redactor::screen`], for what passes between models and
//! servers): the same secrets found with their [`SecretKind`] (never their
//! value), and only the kinds asked for masked. [`Redactor::might_hold`] is
//! its pre-check: one pass over the text, no allocation, false only when
//! there is nothing to find (but for a secret's name written in an odd mix
//! of cases, `tOkEn=…`: see `patterns`).

mod patterns;
mod screen;

pub use screen::{Found, SecretKind};

use std::borrow::Cow;
use std::convert::Infallible;
use std::ops::Range;
use std::sync::Arc;

use super::expand::{is_only_reference, Syntax, TextField};
use super::ServerConfig;

/// What a hidden value is shown as.
pub const MASK: &str = "***";

/// Secrets shorter than this are not searched for in text.
pub const MIN_SECRET_CHARS: usize = 6;

/// Name fragments that mark an env variable, flag or parameter as secret (case-insensitive).
const SECRET_MARKERS: [&str; 8] = ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASS", "AUTH", "CREDENTIAL", "SIGNATURE"];

/// Whole names that are secret too: URL signatures (`?sig=`) and password abbreviations.
const SECRET_NAMES: [&str; 2] = ["sig", "pwd"];

/// Values that are settings, not secrets, whatever their name.
pub const COMMON_WORDS: [&str; 52] = [
    "true",
    "false",
    "yes",
    "no",
    "on",
    "off",
    "none",
    "null",
    "nil",
    "empty",
    "enabled",
    "disabled",
    "enable",
    "disable",
    "required",
    "optional",
    "auto",
    "default",
    "always",
    "never",
    "bearer",
    "basic",
    "digest",
    "oauth",
    "oauth2",
    "jwt",
    "apikey",
    "api_key",
    "header",
    "query",
    "cookie",
    "session",
    "password",
    "anonymous",
    "debug",
    "info",
    "notice",
    "warn",
    "warning",
    "error",
    "trace",
    "verbose",
    "quiet",
    "strict",
    "read",
    "write",
    "readonly",
    "public",
    "private",
    "local",
    "remote",
    "production",
];

/// Whether a variable, flag or parameter name looks like it holds a secret.
pub(crate) fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_MARKERS.iter().any(|marker| upper.contains(marker))
}

/// [`looks_secret`], or one of [`SECRET_NAMES`]; leading dashes of flags are ignored.
fn is_secret_name(name: &str) -> bool {
    let name = name.trim_start_matches('-');
    looks_secret(name) || SECRET_NAMES.iter().any(|secret| name.eq_ignore_ascii_case(secret))
}

/// Whether `value` can be a secret: not empty, not a number, not only a
/// `${VAR}` reference, not one of [`COMMON_WORDS`].
pub fn could_be_secret(value: &str) -> bool {
    let value = value.trim();
    !value.is_empty()
        && value.parse::<f64>().is_err()
        && !is_only_reference(value, Syntax::Braced)
        && !COMMON_WORDS.iter().any(|word| value.eq_ignore_ascii_case(word))
}

/// Whether a flag (`--api-key`, not `--api-key=X`) announces a secret as the next argument.
fn is_secret_flag(arg: &str) -> bool {
    arg.starts_with('-') && !arg.contains('=') && is_secret_name(arg)
}

/// `text` with each span replaced by [`MASK`]; `spans` sorted, not overlapping, on character boundaries.
fn mask_spans<'t>(text: &'t str, spans: &[Range<usize>]) -> Cow<'t, str> {
    if spans.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for span in spans {
        out.push_str(&text[copied..span.start]);
        out.push_str(MASK);
        copied = span.end;
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

impl ServerConfig {
    /// The configuration with its secrets replaced by [`MASK`]; use it for
    /// everything shown to people or written to logs.
    pub fn redacted(&self) -> ServerConfig {
        let mut config = self.clone();
        config.visit_secrets(|text, spans| *text = mask_spans(text, spans).into_owned());
        config
    }

    /// Calls `found` with every text field and the byte ranges of it that hold secrets (maybe none).
    fn visit_secrets(&mut self, mut found: impl FnMut(&mut String, &[Range<usize>])) {
        let mut after_secret_flag = false;
        let never: Result<(), Infallible> = self.visit_texts(|field, text| {
            let follows_secret_flag = std::mem::take(&mut after_secret_flag);
            let whole = |secret: bool| if secret { std::iter::once(0..text.len()).collect() } else { Vec::new() };
            let spans = match field {
                TextField::Cwd
                | TextField::Auth(
                    "username"
                    | "client_id"
                    | "client_metadata_url"
                    | "assertion_file"
                    | "identity_provider.token_endpoint"
                    | "identity_provider.client_id"
                    | "identity_provider.id_token_file"
                    | "issuer"
                    | "token_endpoint"
                    | "audience"
                    | "resource"
                    | "authorization_server.issuer"
                    | "authorization_server.client_id",
                ) => Vec::new(),
                TextField::Env(name) if looks_secret(name) => whole(could_be_secret(text)),
                TextField::Header(_) | TextField::Auth(_) => whole(could_be_secret(text) && !is_only_reference(text, field.syntax())),
                TextField::Arg(_) if follows_secret_flag && !text.starts_with('-') => whole(could_be_secret(text)),
                TextField::Arg(_) => {
                    after_secret_flag = is_secret_flag(text);
                    patterns::spans(text)
                }
                TextField::Command | TextField::Env(_) | TextField::Url => patterns::spans(text),
            };
            found(text, &spans);
            Ok(())
        });
        let Ok(()) = never;
    }
}

/// Masks secrets in text and JSON: the shapes every secret has, and the
/// values of the configurations it was made from. Cheap to clone.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Longest first, so that a secret containing another is masked whole.
    secrets: Arc<[String]>,
    /// Finds any of `secrets` in one pass ([`Redactor::might_hold`]); `None` when there are none.
    known: Option<Arc<aho_corasick::AhoCorasick>>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor {{ {} secrets }}", self.secrets.len())
    }
}

impl Redactor {
    /// The secrets of these configurations: what [`ServerConfig::redacted`]
    /// masks, as written and, for values with `${VAR}` references, as
    /// expanded from the process environment.
    pub fn from_configs<'a>(configs: impl IntoIterator<Item = &'a ServerConfig>) -> Redactor {
        let mut secrets = Vec::new();
        let mut collect = |config: &ServerConfig| {
            config.clone().visit_secrets(|text, spans| secrets.extend(spans.iter().map(|span| text[span.clone()].to_string())));
        };
        for config in configs {
            collect(config);
            if let Ok(expanded) = config.expanded(|name| std::env::var(name).ok()) {
                if expanded != *config {
                    collect(&expanded);
                }
            }
        }
        Redactor::with_secrets(secrets)
    }

    /// A redactor for these secret values; those shorter than
    /// [`MIN_SECRET_CHARS`] are ignored.
    pub fn with_secrets(secrets: impl IntoIterator<Item = String>) -> Redactor {
        let mut all = Vec::new();
        for secret in secrets {
            if secret.contains(['\n', '\r']) {
                all.extend(secret.lines().map(|line| line.trim().to_string()));
            }
            if let Some(escaped) = serde_json::to_string(&secret).ok().and_then(|quoted| Some(quoted.get(1..quoted.len() - 1)?.to_string()))
            {
                all.push(escaped);
            }
            all.push(secret);
        }
        all.retain(|secret| secret.chars().count() >= MIN_SECRET_CHARS);
        all.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        all.dedup();
        let known = (!all.is_empty())
            .then(|| aho_corasick::AhoCorasick::builder().match_kind(aho_corasick::MatchKind::LeftmostFirst).build(&all).ok().map(Arc::new))
            .flatten();
        Redactor { secrets: all.into(), known }
    }

    /// Whether every secret of `other` is one of these already.
    pub fn holds_all(&self, other: &Redactor) -> bool {
        // `secrets` is sorted longest first, then by text (see `with_secrets`).
        let order = |a: &String, b: &String| b.len().cmp(&a.len()).then_with(|| a.cmp(b));
        other.secrets.iter().all(|secret| self.secrets.binary_search_by(|known| order(known, secret)).is_ok())
    }

    /// This redactor with the secrets of `other` too.
    pub fn merged(&self, other: &Redactor) -> Redactor {
        self.with_more(other.secrets.iter().cloned())
    }

    /// This redactor with `more` secret values.
    pub fn with_more(&self, more: impl IntoIterator<Item = String>) -> Redactor {
        Redactor::with_secrets(self.secrets.iter().cloned().chain(more))
    }

    /// `text` with its secrets masked; borrowed when there were none.
    pub fn text<'t>(&self, text: &'t str) -> Cow<'t, str> {
        // Known secrets first: a shape can end inside one (a quoted value
        // ends at the secret's own escaped quote in JSON text) and would
        // leave the rest of it.
        let mut out = Cow::Borrowed(text);
        self.mask_known(&mut out);
        let spans = patterns::spans(&out);
        if !spans.is_empty() {
            out = Cow::Owned(mask_spans(&out, &spans).into_owned());
            self.mask_known(&mut out);
        }
        out
    }

    /// Masks the known secrets in `out` until none is left: masking can
    /// join pieces into a new occurrence (when a secret contains `***`);
    /// every round shortens the text, so this ends.
    fn mask_known(&self, out: &mut Cow<'_, str>) {
        while let Some(masked) = self.mask_secrets(out) {
            *out = Cow::Owned(masked);
        }
    }

    /// The text with every occurrence of a known secret masked; `None` if there was none.
    fn mask_secrets(&self, text: &str) -> Option<String> {
        let mut spans = Vec::new();
        for secret in self.secrets.iter() {
            spans.extend(text.match_indices(secret.as_str()).map(|(at, _)| at..at + secret.len()));
        }
        if spans.is_empty() {
            return None;
        }
        Some(mask_spans(text, &patterns::merge(spans)).into_owned())
    }

    /// Masks JSON whose keys name their values, such as a tool call's
    /// arguments: a string under a secret-looking key (`looks_secret`, at
    /// any depth below it) is masked whole when it could be a secret (the
    /// rule of a configuration's `env`), then every string as [`Redactor::json`]
    /// does. Numbers, booleans, nulls, keys and the structure stay.
    pub fn named_json(&self, value: &mut serde_json::Value) {
        let mut stack = vec![(&mut *value, false)];
        while let Some((value, under_secret_name)) = stack.pop() {
            match value {
                serde_json::Value::String(text) if under_secret_name && could_be_secret(text) => *text = MASK.into(),
                serde_json::Value::Array(items) => stack.extend(items.iter_mut().map(|item| (item, under_secret_name))),
                serde_json::Value::Object(map) => {
                    stack.extend(map.iter_mut().map(|(key, item)| (item, under_secret_name || looks_secret(key))))
                }
                _ => {}
            }
        }
        self.json(value);
    }

    /// Masks the secrets inside every string value of `value` (keys, numbers,
    /// booleans and the structure stay). Deep values do not grow the stack.
    pub fn json(&self, value: &mut serde_json::Value) {
        let mut stack = vec![value];
        while let Some(value) = stack.pop() {
            match value {
                serde_json::Value::String(text) => {
                    if let Cow::Owned(masked) = self.text(text) {
                        *text = masked;
                    }
                }
                serde_json::Value::Array(items) => stack.extend(items.iter_mut()),
                serde_json::Value::Object(map) => stack.extend(map.values_mut()),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests;
