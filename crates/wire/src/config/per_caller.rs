//! `per_caller`: a stdio server behind the gateway run as one process per
//! caller, each with that caller's own secrets in its environment.
//!
//! ```toml
//! [servers.github]
//! command = "github-mcp-server"
//! args = ["stdio"]
//! env = { GITHUB_PERSONAL_ACCESS_TOKEN = "${caller.secret.GITHUB_TOKEN}", GIT_AUTHOR_EMAIL = "${caller.claims.email:-}" }
//! per_caller = { max_callers = 16, caller_idle = "10m", secrets = "/etc/mcpvisor/caller-secrets.toml" }
//! sandbox = { network = ["api.github.com:443"] }
//! ```
//!
//! `per_caller = true` takes every default. In `env` values (and only
//! there), `${caller.subject}`, `${caller.claims.NAME}` and
//! `${caller.secret.NAME}` are the caller's subject, a claim the gateway
//! kept from its token (`[serve.auth] claims`), and its entry in the
//! `secrets` file; `${caller.X:-default}` gives a default. They survive
//! the configuration's own `${VAR}` expansion and are filled in when a
//! caller's process starts ([`render_env`]); the process that lists the
//! catalog gets every one empty (or its default).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::de::DeError;
use super::values::{Count, OnOrTable, Span};

/// Per-caller processes of one server, at most (default).
pub const DEFAULT_MAX_INSTANCES: usize = 16;
/// A caller's process unused this long is ended (default).
pub const DEFAULT_INSTANCE_IDLE: Duration = Duration::from_secs(300);
/// Where a caller reference starts.
const OPEN: &str = "${caller.";

/// How a stdio server runs once per caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerCaller {
    /// Callers' processes at once; the next caller is refused.
    pub max_callers: usize,
    /// A caller's process with no call for this long is ended.
    pub caller_idle: Duration,
    /// The file of each caller's secrets (`${caller.secret.NAME}`), 0600:
    /// a table per caller, `[issuer.SUBJECT]` for a token of the gateway's
    /// issuer and `[key.NAME]` for a named key of `[serve]`.
    pub secrets: Option<PathBuf>,
}

impl Default for PerCaller {
    fn default() -> Self {
        PerCaller { max_callers: DEFAULT_MAX_INSTANCES, caller_idle: DEFAULT_INSTANCE_IDLE, secrets: None }
    }
}

/// `{ max_callers = 16, caller_idle = "5m", secrets = "..." }`: any may be left out.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PerCallerTable {
    /// Callers' processes at once (default 16).
    max_callers: Option<Count<usize, 1>>,
    /// A caller's process unused this long is ended (default "5m").
    caller_idle: Option<Span>,
    /// The 0600 file of each caller's secrets, `[issuer.SUBJECT]` / `[key.NAME]` tables.
    secrets: Option<String>,
}

impl PerCallerTable {
    /// `per_caller` as read: `true`, `false` or this table.
    pub(crate) fn into_config(file: OnOrTable<PerCallerTable>) -> Result<Option<PerCaller>, DeError> {
        Ok(match file {
            OnOrTable::On(on) => on.then(PerCaller::default),
            OnOrTable::Table(table) => {
                let secrets = table.secrets.map(PathBuf::from);
                if secrets.as_ref().is_some_and(|path| path.as_os_str().is_empty()) {
                    return Err(DeError::field("per_caller.secrets", "is empty; name the file of the callers' secrets, or remove it"));
                }
                Some(PerCaller {
                    max_callers: table.max_callers.map_or(DEFAULT_MAX_INSTANCES, |c| c.0),
                    caller_idle: table.caller_idle.map_or(DEFAULT_INSTANCE_IDLE, |s| s.0),
                    secrets,
                })
            }
        })
    }
}

/// `per_caller` as the editor writes it back: `true` when every setting is its default.
pub fn to_value(per_caller: &PerCaller, duration: impl Fn(Duration) -> toml_edit::Value) -> toml_edit::Value {
    if *per_caller == PerCaller::default() {
        return toml_edit::Value::from(true);
    }
    let mut table = toml_edit::InlineTable::new();
    if per_caller.max_callers != DEFAULT_MAX_INSTANCES {
        table.insert("max_callers", (per_caller.max_callers as i64).into());
    }
    if per_caller.caller_idle != DEFAULT_INSTANCE_IDLE {
        table.insert("caller_idle", duration(per_caller.caller_idle));
    }
    if let Some(secrets) = &per_caller.secrets {
        table.insert("secrets", secrets.to_string_lossy().as_ref().into());
    }
    toml_edit::Value::InlineTable(table)
}

/// What a caller's process may be given: who it is, the claims the gateway
/// kept from its token, and its entry of the secrets file.
pub struct CallerFacts<'a> {
    pub subject: &'a str,
    pub claims: &'a Map<String, Value>,
    pub secrets: &'a BTreeMap<String, String>,
}

/// Whether `inner` (between `${` and `}`) is a caller reference, and a
/// well-formed one: `Some(Ok(path))` (`subject`, `claims.NAME`,
/// `secret.NAME`, perhaps with `:-default`), `Some(Err(why))`, or `None`
/// for any other text.
pub(crate) fn caller_reference(inner: &str) -> Option<Result<(), &'static str>> {
    let path = inner.strip_prefix("caller.")?;
    let path = path.split_once(":-").map_or(path, |(path, _)| path);
    let named = |name: &str| !name.is_empty() && name.bytes().all(|c| c.is_ascii_alphanumeric() || b"_-.".contains(&c));
    Some(match path.split_once('.') {
        None if path == "subject" => Ok(()),
        Some(("claims" | "secret", name)) if named(name) => Ok(()),
        _ => Err("write ${caller.subject}, ${caller.claims.NAME} or ${caller.secret.NAME}"),
    })
}

/// Whether `text` holds a caller reference.
pub(crate) fn mentions_caller(text: &str) -> bool {
    text.contains(OPEN)
}

/// The first `${caller.…}` of `text` that is not a well-formed reference, and why.
pub(crate) fn malformed(text: &str) -> Option<(&str, &'static str)> {
    text.match_indices(OPEN).find_map(|(at, _)| {
        let Some(close) = text[at..].find('}').map(|close| at + close) else { return Some((&text[at..], "it is not closed with `}`")) };
        caller_reference(&text[at + 2..close]).and_then(Result::err).map(|why| (&text[at..=close], why))
    })
}

/// `env` with its caller references filled in for `caller`, or, with no
/// caller (the process that lists the catalog), each one its default or
/// empty. `Err` names the variable and the reference this caller has no
/// value for and no default.
pub fn render_env(env: &BTreeMap<String, String>, caller: Option<&CallerFacts<'_>>) -> Result<BTreeMap<String, String>, String> {
    env.iter()
        .map(|(key, text)| {
            let value = render(text, caller).map_err(|reference| {
                format!("env.{key} needs ${{{reference}}}, which this caller does not have; give it one, or write a default (${{{reference}:-}})")
            })?;
            if value.contains('\0') {
                return Err(format!("env.{key} would hold a NUL byte from this caller's values; an environment variable cannot"));
            }
            Ok((key.clone(), value))
        })
        .collect()
}

/// One text with its caller references filled in; `Err`: the reference without a value.
fn render(text: &str, caller: Option<&CallerFacts<'_>>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        let Some(close) = rest[at..].find('}').map(|close| at + close) else { break };
        out.push_str(&rest[..at]);
        let inner = &rest[at + 2..close];
        let (path, default) = inner.split_once(":-").map_or((inner, None), |(path, default)| (path, Some(default)));
        match caller.and_then(|caller| value(caller, &path["caller.".len()..])).or(default.map(str::to_owned)) {
            Some(value) => out.push_str(&value),
            None if caller.is_none() => {}
            None => return Err(path.to_owned()),
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn value(caller: &CallerFacts<'_>, path: &str) -> Option<String> {
    match path.split_once('.') {
        None if path == "subject" => Some(caller.subject.to_owned()),
        Some(("claims", name)) => match caller.claims.get(name)? {
            Value::String(text) => Some(text.clone()),
            Value::Number(number) => Some(number.to_string()),
            Value::Bool(on) => Some(on.to_string()),
            _ => None,
        },
        Some(("secret", name)) => caller.secrets.get(name).cloned(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn references_are_filled_from_the_caller() {
        let claims = serde_json::json!({"email": "alice@example.com", "level": 3, "groups": ["a"]});
        let secrets = env(&[("GITHUB_TOKEN", "ghp_alice")]);
        let facts = CallerFacts { subject: "alice", claims: claims.as_object().unwrap(), secrets: &secrets };
        let template = env(&[
            ("TOKEN", "${caller.secret.GITHUB_TOKEN}"),
            ("WHO", "user=${caller.subject} <${caller.claims.email}> L${caller.claims.level}"),
            ("GROUPS", "${caller.claims.groups:-none}"),
            ("PLAIN", "${HOME} stays $5"),
        ]);
        let rendered = render_env(&template, Some(&facts)).unwrap();
        assert_eq!(rendered["TOKEN"], "ghp_alice");
        assert_eq!(rendered["WHO"], "user=alice <alice@example.com> L3");
        assert_eq!(rendered["GROUPS"], "none", "a claim that is not a scalar is not a value");
        assert_eq!(rendered["PLAIN"], "${HOME} stays $5");
        // A caller's value is inserted once, never read as a template: no way into another secret.
        let sly = serde_json::json!({"name": "${caller.secret.GITHUB_TOKEN} ${GW_SECRET}"});
        let facts = CallerFacts { subject: "mallory", claims: sly.as_object().unwrap(), secrets: &BTreeMap::new() };
        let rendered = render_env(&env(&[("NAME", "${caller.claims.name}")]), Some(&facts)).unwrap();
        assert_eq!(rendered["NAME"], "${caller.secret.GITHUB_TOKEN} ${GW_SECRET}");
    }

    #[test]
    fn a_missing_value_is_named_and_the_catalog_gets_defaults_or_nothing() {
        let (claims, secrets) = (Map::new(), BTreeMap::new());
        let facts = CallerFacts { subject: "bob", claims: &claims, secrets: &secrets };
        let template = env(&[("TOKEN", "${caller.secret.GITHUB_TOKEN}")]);
        let error = render_env(&template, Some(&facts)).unwrap_err();
        assert!(error.contains("env.TOKEN needs ${caller.secret.GITHUB_TOKEN}"), "{error}");
        let catalog = render_env(&env(&[("TOKEN", "${caller.secret.GITHUB_TOKEN}"), ("MODE", "${caller.claims.mode:-ro}")]), None).unwrap();
        assert_eq!((catalog["TOKEN"].as_str(), catalog["MODE"].as_str()), ("", "ro"));
        let nul = env(&[("WHO", "${caller.subject}")]);
        let facts = CallerFacts { subject: "a\0b", claims: &claims, secrets: &secrets };
        assert!(render_env(&nul, Some(&facts)).unwrap_err().contains("NUL"));
    }

    #[test]
    fn only_known_paths_are_references() {
        assert_eq!(caller_reference("caller.subject"), Some(Ok(())));
        assert_eq!(caller_reference("caller.claims.email:-x"), Some(Ok(())));
        assert_eq!(caller_reference("caller.secret.GITHUB_TOKEN"), Some(Ok(())));
        assert!(matches!(caller_reference("caller.token"), Some(Err(_))));
        assert!(matches!(caller_reference("caller.secret."), Some(Err(_))));
        assert_eq!(caller_reference("HOME"), None);
    }
}
