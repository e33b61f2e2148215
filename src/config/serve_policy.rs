//! `[serve.keys.NAME]` and `[serve.policy]`: the gateway's named API keys
//! and its access rules, as written (references not expanded, expressions
//! not compiled: `crate::policy` compiles them).
//!
//! ```toml
//! [serve.keys.alice]
//! token = "${ALICE_KEY}"          # one reference, as `[serve] token`
//! scopes = ["tools:call"]
//! claims = { team = "red" }
//!
//! [serve.policy]
//! default = "deny"                # or "allow" (the default when no policy is written)
//! [[serve.policy.rules]]
//! name = "red-team-github"
//! effect = "allow"                # or "deny"; deny wins
//! servers = ["github*"]           # globs; omitted: any server
//! tools = ["*"]                   # globs on the server's own names; see `RuleSettings`
//! when = 'identity.claims.team == "red"'
//! ```

use std::path::Path;

use serde_json::{Map, Value};
use toml_edit::Item;

use super::expand::{expand, is_only_reference, Problem, Syntax};
use crate::error::ConfigError;

const KEY_KEYS: [&str; 4] = ["token", "token_file", "scopes", "claims"];
const POLICY_KEYS: [&str; 2] = ["default", "rules"];
const RULE_KEYS: [&str; 7] = ["name", "effect", "servers", "tools", "prompts", "resources", "when"];

/// One named API key: its holder is `subject` with these scopes and claims.
#[derive(Clone, PartialEq, Eq)]
pub struct KeySettings {
    pub subject: String,
    /// The key as written: one `${VAR}` reference (empty with `token_file`).
    pub token: String,
    /// Or the file that holds the key (a mounted secret), read at start and
    /// on every SIGHUP; relative paths are resolved from the configuration
    /// file's folder when read.
    pub token_file: Option<std::path::PathBuf>,
    pub scopes: Vec<String>,
    pub claims: Map<String, Value>,
}

impl std::fmt::Debug for KeySettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySettings")
            .field("subject", &self.subject)
            .field("token", &super::MASK)
            .field("token_file", &self.token_file)
            .field("scopes", &self.scopes)
            .field("claims", &self.claims)
            .finish()
    }
}

/// Whether a rule (or the default) lets a request through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Effect {
    #[default]
    Allow,
    Deny,
}

/// `[serve.policy]` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicySettings {
    /// What happens to a request no rule matches.
    pub default: Effect,
    pub rules: Vec<RuleSettings>,
}

/// One `[[serve.policy.rules]]`.
///
/// A rule applies to the servers `servers` matches (any when omitted).
/// When it names none of `tools`, `prompts` and `resources`, it applies
/// to everything those servers serve; else only to the kinds it names,
/// each matched by its globs (on the server's own tool and prompt names,
/// on resource URIs and URI templates).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleSettings {
    pub name: String,
    pub effect: Effect,
    pub servers: Option<Vec<String>>,
    pub tools: Option<Vec<String>>,
    pub prompts: Option<Vec<String>>,
    pub resources: Option<Vec<String>>,
    /// A CEL expression that must be true for the rule to apply.
    pub when: Option<String>,
}

impl KeySettings {
    /// The key with its reference expanded by `lookup`: an unset variable
    /// or a blank value is an error naming the file and the variable.
    pub fn token(&self, file: &Path, lookup: impl Fn(&str) -> Option<String>) -> Result<String, ConfigError> {
        if let Some(path) = &self.token_file {
            return self.token_from_file(file, path);
        }
        let field = format!("serve.keys.{}.token", self.subject);
        match expand_secret(&self.token, file, &field, lookup)? {
            Some(token) => Ok(token),
            None => Err(ConfigError::InvalidSetting { file: file.into(), field, message: "expands to nothing; set its variable".into() }),
        }
    }

    /// The key read from `path` (relative to `file`'s folder), trimmed;
    /// errors name the file and the key, never what the file holds.
    fn token_from_file(&self, file: &Path, path: &Path) -> Result<String, ConfigError> {
        let field = format!("serve.keys.{}.token_file", self.subject);
        let path = file.parent().unwrap_or(Path::new("/")).join(path);
        let invalid = |message: String| ConfigError::InvalidSetting { file: file.into(), field: field.clone(), message };
        // A mounted secret is a few bytes; a bound keeps a wrong path (a device, a log) from being read whole.
        let mut text = String::new();
        let read =
            std::fs::File::open(&path).and_then(|opened| std::io::Read::read_to_string(&mut std::io::Read::take(opened, 4096), &mut text));
        read.map_err(|e| invalid(format!("cannot read {}: {e}; point it at the file that holds the key", path.display())))?;
        match text.trim() {
            "" => Err(invalid(format!("{} is empty; write the key into it", path.display()))),
            token => Ok(token.to_string()),
        }
    }
}

/// A secret's `${VAR}` reference expanded, trimmed; `None` when blank.
/// Errors name the file, the field and the variable, never a value.
pub(crate) fn expand_secret(
    raw: &str,
    file: &Path,
    field: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, ConfigError> {
    let invalid = |message: String| ConfigError::InvalidSetting { file: file.into(), field: field.into(), message };
    match expand(raw, Syntax::Braced, &lookup) {
        Ok(secret) => Ok(Some(secret.trim().to_string()).filter(|secret| !secret.is_empty())),
        Err(Problem::Unset(var)) => Err(invalid(format!("refers to ${{{var}}}, which is not set; set it, or remove the key"))),
        Err(Problem::Malformed(reference)) => {
            Err(invalid(format!("has `{reference}`, which is not a variable reference; write ${{NAME}}, or $${{ for a literal `${{`")))
        }
    }
}

fn invalid(path: &Path, field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::InvalidSetting { file: path.into(), field: field.into(), message: message.into() }
}

fn unknown(path: &Path, key: String, known: &[&'static str]) -> ConfigError {
    ConfigError::UnknownKey { file: path.into(), server: None, key, known: known.to_vec() }
}

/// Reads `[serve.keys]`: one table per key, named by its subject.
pub(crate) fn read_keys(path: &Path, item: &Item) -> Result<Vec<KeySettings>, ConfigError> {
    let table = item.as_table_like().ok_or_else(|| invalid(path, "serve.keys", "must be a table: write [serve.keys.NAME]"))?;
    let mut keys = Vec::new();
    for (subject, item) in table.iter() {
        let field = |key: &str| format!("serve.keys.{subject}.{key}");
        let key = item.as_table_like().ok_or_else(|| invalid(path, &field(""), "must be a table with token = \"${VAR}\""))?;
        let mut settings =
            KeySettings { subject: subject.to_string(), token: String::new(), token_file: None, scopes: Vec::new(), claims: Map::new() };
        for (name, value) in key.iter() {
            match name {
                "token" => {
                    let text = value.as_str().filter(|text| is_only_reference(text, Syntax::Braced)).ok_or_else(|| {
                        invalid(
                            path,
                            &field(name),
                            "must be one reference such as \"${ALICE_KEY}\", naming the variable that holds the key",
                        )
                    })?;
                    settings.token = text.to_string();
                }
                "token_file" => {
                    let text = value
                        .as_str()
                        .filter(|text| !text.trim().is_empty())
                        .ok_or_else(|| invalid(path, &field(name), "must be the path of the file that holds the key"))?;
                    settings.token_file = Some(text.into());
                }
                "scopes" => settings.scopes = strings(path, &field(name), value)?,
                "claims" => {
                    let claims =
                        value.as_table_like().ok_or_else(|| invalid(path, &field(name), "must be a table, such as { team = \"red\" }"))?;
                    for (claim, value) in claims.iter() {
                        let value = value.as_value().and_then(claim_value).ok_or_else(|| {
                            invalid(path, &field(&format!("claims.{claim}")), "must be a string, integer, boolean or list of them")
                        })?;
                        settings.claims.insert(claim.to_string(), value);
                    }
                }
                other => return Err(unknown(path, field(other), &KEY_KEYS)),
            }
        }
        match (settings.token.is_empty(), settings.token_file.is_some()) {
            (true, false) => {
                return Err(invalid(path, &field("token"), "is missing: write token = \"${VAR}\" or token_file = \"/run/secrets/NAME\""))
            }
            (false, true) => return Err(invalid(path, &field("token_file"), "cannot be given with token: keep one of them")),
            _ => {}
        }
        keys.push(settings);
    }
    Ok(keys)
}

fn claim_value(value: &toml_edit::Value) -> Option<Value> {
    match value {
        toml_edit::Value::String(text) => Some(Value::String(text.value().clone())),
        toml_edit::Value::Integer(number) => Some(Value::from(*number.value())),
        toml_edit::Value::Boolean(flag) => Some(Value::Bool(*flag.value())),
        toml_edit::Value::Array(items) => items.iter().map(claim_value).collect::<Option<Vec<_>>>().map(Value::Array),
        _ => None,
    }
}

fn strings(path: &Path, field: &str, item: &Item) -> Result<Vec<String>, ConfigError> {
    let list = item.as_array().ok_or_else(|| invalid(path, field, "must be a list of strings, such as [\"*\"]"))?;
    list.iter()
        .map(|entry| entry.as_str().map(str::to_string))
        .collect::<Option<_>>()
        .ok_or_else(|| invalid(path, field, "must hold strings only"))
}

fn effect(path: &Path, field: &str, item: &Item) -> Result<Effect, ConfigError> {
    match item.as_str() {
        Some("allow") => Ok(Effect::Allow),
        Some("deny") => Ok(Effect::Deny),
        _ => Err(invalid(path, field, "must be \"allow\" or \"deny\"")),
    }
}

/// Reads `[serve.policy]`.
pub(crate) fn read_policy(path: &Path, item: &Item) -> Result<PolicySettings, ConfigError> {
    let table = item.as_table_like().ok_or_else(|| invalid(path, "serve.policy", "must be a table: write [serve.policy]"))?;
    let mut policy = PolicySettings::default();
    for (key, value) in table.iter() {
        match key {
            "default" => policy.default = effect(path, "serve.policy.default", value)?,
            "rules" => {
                let rules = value
                    .as_array_of_tables()
                    .ok_or_else(|| invalid(path, "serve.policy.rules", "must be tables: write [[serve.policy.rules]] for each rule"))?;
                for (index, rule) in rules.iter().enumerate() {
                    let rule = read_rule(path, index, rule)?;
                    if policy.rules.iter().any(|other| other.name == rule.name) {
                        return Err(invalid(
                            path,
                            &format!("serve.policy.rules.{}", rule.name),
                            "is a second rule of that name: names must differ",
                        ));
                    }
                    policy.rules.push(rule);
                }
            }
            other => return Err(unknown(path, format!("serve.policy.{other}"), &POLICY_KEYS)),
        }
    }
    Ok(policy)
}

fn read_rule(path: &Path, index: usize, table: &toml_edit::Table) -> Result<RuleSettings, ConfigError> {
    let name = table.get("name").and_then(Item::as_str).map(str::trim).filter(|name| !name.is_empty());
    let Some(name) = name else {
        return Err(invalid(path, &format!("serve.policy.rules[{index}].name"), "is missing: every rule has a name, which denials cite"));
    };
    let mut rule = RuleSettings { name: name.to_string(), ..RuleSettings::default() };
    let mut effect_set = false;
    for (key, value) in table.iter() {
        let field = format!("serve.policy.rules.{name}.{key}");
        match key {
            "name" => {}
            "effect" => {
                rule.effect = effect(path, &field, value)?;
                effect_set = true;
            }
            "servers" => rule.servers = Some(strings(path, &field, value)?),
            "tools" => rule.tools = Some(strings(path, &field, value)?),
            "prompts" => rule.prompts = Some(strings(path, &field, value)?),
            "resources" => rule.resources = Some(strings(path, &field, value)?),
            "when" => {
                let when = value.as_str().ok_or_else(|| invalid(path, &field, "must be a string holding a CEL expression"))?;
                rule.when = Some(when.to_string());
            }
            other => return Err(unknown(path, format!("serve.policy.rules.{name}.{other}"), &RULE_KEYS)),
        }
    }
    if !effect_set {
        return Err(invalid(path, &format!("serve.policy.rules.{name}.effect"), "is missing: write effect = \"allow\" or \"deny\""));
    }
    Ok(rule)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(text: &str) -> toml_edit::DocumentMut {
        text.parse().unwrap()
    }

    const FILE: &str = "/etc/mcpvisor/servers.toml";

    #[test]
    fn keys_are_read_with_their_scopes_and_claims_and_never_shown() {
        let doc = document(
            "[keys.alice]\ntoken = \"${ALICE_KEY}\"\nscopes = [\"tools:call\"]\nclaims = { team = \"red\", level = 3, groups = [\"a\"] }\n\
             [keys.bob]\ntoken = \"${BOB_KEY}\"\n",
        );
        let keys = read_keys(Path::new(FILE), &doc["keys"]).unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0].subject, "alice");
        assert_eq!(keys[0].scopes, ["tools:call"]);
        assert_eq!(Value::Object(keys[0].claims.clone()), serde_json::json!({"team": "red", "level": 3, "groups": ["a"]}));
        let lookup = |name: &str| (name == "ALICE_KEY").then(|| " a-secret ".to_string());
        assert_eq!(keys[0].token(Path::new(FILE), lookup).unwrap(), "a-secret");
        let unset = keys[1].token(Path::new(FILE), lookup).unwrap_err().to_string();
        assert!(unset.contains("serve.keys.bob.token") && unset.contains("${BOB_KEY}"), "{unset}");
        assert!(!format!("{:?}", keys[0]).contains("ALICE_KEY"));
    }

    #[test]
    fn a_key_may_come_from_a_file_read_each_time() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("servers.toml");
        let doc = document("[keys.alice]\ntoken_file = \"secrets/alice\"\n");
        let keys = read_keys(&config, &doc["keys"]).unwrap();
        let none = |_: &str| None;
        let missing = keys[0].token(&config, none).unwrap_err().to_string();
        assert!(missing.contains("serve.keys.alice.token_file") && missing.contains("secrets/alice"), "{missing}");
        std::fs::create_dir_all(dir.path().join("secrets")).unwrap();
        std::fs::write(dir.path().join("secrets/alice"), "first-key-0123456789abcdef\n").unwrap();
        assert_eq!(keys[0].token(&config, none).unwrap(), "first-key-0123456789abcdef");
        std::fs::write(dir.path().join("secrets/alice"), "second-key-0123456789abcdef").unwrap();
        assert_eq!(keys[0].token(&config, none).unwrap(), "second-key-0123456789abcdef", "read again, as on SIGHUP");
        std::fs::write(dir.path().join("secrets/alice"), "\n").unwrap();
        let empty = keys[0].token(&config, none).unwrap_err().to_string();
        assert!(empty.contains("is empty"), "{empty}");
    }

    #[test]
    fn key_errors_name_the_key() {
        for (body, expected) in [
            ("[keys.a]\ntoken = \"literal-secret\"\n", "`serve.keys.a.token` must be one reference"),
            ("[keys.a]\nscopes = []\n", "`serve.keys.a.token` is missing"),
            ("[keys.a]\ntoken = \"${A}\"\ntoken_file = \"/run/a\"\n", "`serve.keys.a.token_file` cannot be given with token"),
            ("[keys.a]\ntoken = \"${A}\"\nclaims = { t = 1.5 }\n", "`serve.keys.a.claims.t` must be a string"),
            ("[keys.a]\ntoken = \"${A}\"\nrole = \"x\"\n", "unknown key `serve.keys.a.role`"),
        ] {
            let message = read_keys(Path::new(FILE), &document(body)["keys"]).unwrap_err().to_string();
            assert!(message.starts_with(FILE) && message.contains(expected), "{message}");
        }
    }

    #[test]
    fn policies_are_read_rule_by_rule() {
        let doc = document(
            "[policy]\ndefault = \"deny\"\n[[policy.rules]]\nname = \"r\"\neffect = \"allow\"\nservers = [\"gh*\"]\ntools = [\"*\"]\nwhen = 'true'\n",
        );
        let policy = read_policy(Path::new(FILE), &doc["policy"]).unwrap();
        assert_eq!(policy.default, Effect::Deny);
        let rule = &policy.rules[0];
        assert_eq!((rule.name.as_str(), rule.effect, rule.when.as_deref()), ("r", Effect::Allow, Some("true")));
        assert_eq!(rule.servers.as_deref(), Some(&["gh*".to_string()][..]));
        assert!(rule.prompts.is_none() && rule.resources.is_none());
    }

    #[test]
    fn policy_errors_name_the_rule() {
        for (body, expected) in [
            ("default = \"maybe\"", "`serve.policy.default` must be \"allow\" or \"deny\""),
            ("[[policy.rules]]\neffect = \"allow\"", "`serve.policy.rules[0].name` is missing"),
            ("[[policy.rules]]\nname = \"r\"", "`serve.policy.rules.r.effect` is missing"),
            ("[[policy.rules]]\nname = \"r\"\neffect = \"allow\"\ntools = \"*\"", "`serve.policy.rules.r.tools` must be a list"),
            ("[[policy.rules]]\nname = \"r\"\neffect = \"allow\"\nwho = 1", "unknown key `serve.policy.rules.r.who`"),
            ("[[policy.rules]]\nname = \"r\"\neffect = \"allow\"\n[[policy.rules]]\nname = \"r\"\neffect = \"deny\"", "second rule"),
        ] {
            let message = read_policy(Path::new(FILE), &document(&format!("[policy]\n{body}\n"))["policy"]).unwrap_err().to_string();
            assert!(message.starts_with(FILE) && message.contains(expected), "{message}");
        }
    }
}
