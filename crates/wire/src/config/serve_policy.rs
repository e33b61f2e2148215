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

use schemars::JsonSchema;
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};
use toml_edit::Item;

use super::de::{from_node, DeError, Node};
use super::expand::{expand, is_only_reference, Problem, Syntax};
use super::values::{scalar_or, scalar_type, schema_as, MaybeText, Ordered, Scalar, Strings};
use crate::error::ConfigError;

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

/// What a `${VAR}` reference looks like, for the JSON Schema.
pub(crate) const REFERENCE_PATTERN: &str = r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$";

/// A `${VAR}` reference that stands for a secret (`[serve] token`, the keys,
/// the introspection client): a literal is refused with `refused`.
pub(crate) struct Reference(pub String);

impl Reference {
    pub(crate) fn read<'de, D: Deserializer<'de>>(deserializer: D, expecting: &'static str, refused: &str) -> Result<Self, D::Error> {
        let reference = |value: Scalar| match value {
            Scalar::Str(text) if is_only_reference(&text, Syntax::Braced) => Ok(Reference(text)),
            Scalar::Str(_) => Err(refused.to_string()),
            _ => Err(format!("must be {expecting}")),
        };
        scalar_or(deserializer, expecting, reference)
    }
}

/// `[serve.keys.NAME]`: one named API key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct KeyFile {
    /// One `${VAR}` reference naming the variable that holds the key.
    token: Option<KeyToken>,
    /// Or the file that holds it (a mounted secret), relative to this file's folder.
    token_file: Option<KeyPath>,
    scopes: Option<Strings>,
    /// Claims of the key's identity: strings, integers, booleans or lists of them.
    claims: Option<Ordered<Claim>>,
}

struct KeyToken(String);

impl<'de> Deserialize<'de> for KeyToken {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let refused = "must be one reference such as \"${ALICE_KEY}\", naming the variable that holds the key";
        Reference::read(deserializer, "a string, such as \"${ALICE_KEY}\"", refused).map(|reference| KeyToken(reference.0))
    }
}

schema_as!(KeyToken, { "type": "string", "pattern": REFERENCE_PATTERN });

scalar_type!(KeyPath(String), "the path of the file that holds the key", { "type": "string", "minLength": 1 }, |value: Scalar| {
    match value {
        Scalar::Str(text) if !text.trim().is_empty() => Some(text),
        _ => None,
    }
});

/// A claim's value: a string, an integer, a boolean or a list of them.
struct Claim(Value);

impl<'de> Deserialize<'de> for Claim {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Plain;
        impl<'de> Visitor<'de> for Plain {
            type Value = Value;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string, integer, boolean or list of them")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Value, E> {
                Ok(Value::String(text.into()))
            }
            fn visit_i64<E: de::Error>(self, number: i64) -> Result<Value, E> {
                Ok(Value::from(number))
            }
            fn visit_bool<E: de::Error>(self, flag: bool) -> Result<Value, E> {
                Ok(Value::Bool(flag))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
                let mut items = Vec::new();
                while let Some(Claim(item)) = seq.next_element::<Claim>()? {
                    items.push(item);
                }
                Ok(Value::Array(items))
            }
        }
        deserializer.deserialize_any(Plain).map(Claim)
    }
}

schema_as!(Claim, {
    "anyOf": [
        { "type": ["string", "integer", "boolean"] },
        { "type": "array", "items": { "type": ["string", "integer", "boolean"] } }
    ]
});

/// The keys of `[serve.keys]`, each checked: a token or a token file, one of them.
pub(crate) fn into_keys(keys: Ordered<KeyFile>) -> Result<Vec<KeySettings>, DeError> {
    let key = |(subject, file): (String, KeyFile)| {
        let token = file.token.map(|token| token.0);
        match (&token, &file.token_file) {
            (None, None) => {
                let message = "is missing: write token = \"${VAR}\" or token_file = \"/run/secrets/NAME\"";
                return Err(DeError::field(&format!("{subject}.token"), message));
            }
            (Some(_), Some(_)) => {
                return Err(DeError::field(&format!("{subject}.token_file"), "cannot be given with token: keep one of them"))
            }
            _ => {}
        }
        let claims = file.claims.unwrap_or_default().0.into_iter().map(|(name, claim)| (name, claim.0)).collect();
        Ok(KeySettings {
            subject,
            token: token.unwrap_or_default(),
            token_file: file.token_file.map(|path| path.0.into()),
            scopes: file.scopes.map_or_else(Vec::new, |scopes| scopes.0),
            claims,
        })
    };
    keys.0.into_iter().map(key).collect()
}

/// Reads (as `[serve]` does) `[serve.keys]`: one table per key, named by its subject.
#[cfg(test)]
fn read_keys(path: &Path, item: &Item) -> Result<Vec<KeySettings>, ConfigError> {
    let keys: Ordered<KeyFile> =
        from_node(Node::Item(item), "serve.keys", crate::config::values::TABLE_EXAMPLES).map_err(|error| error.into_setting_error(path))?;
    into_keys(keys).map_err(|error| error.under("serve.keys").into_setting_error(path))
}

/// `[serve.policy]` as written.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PolicyFile {
    /// What happens to a request no rule matches (default: allow).
    default: Option<EffectWord>,
    /// `[[serve.policy.rules]]`, each named; deny wins.
    rules: Option<Vec<RuleFile>>,
}

/// One `[[serve.policy.rules]]`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    /// Denials cite it; names differ.
    name: Option<String>,
    effect: Option<EffectWord>,
    /// Globs on server names; omitted: any server.
    servers: Option<Strings>,
    /// Globs on the server's own tool names.
    tools: Option<Strings>,
    prompts: Option<Strings>,
    /// Globs on resource URIs and URI templates.
    resources: Option<Strings>,
    /// A CEL expression that must be true for the rule to apply.
    when: Option<String>,
}

scalar_type!(EffectWord(Effect), "\"allow\" or \"deny\"", { "type": "string", "enum": ["allow", "deny"] }, |value: Scalar| {
    match value {
        Scalar::Str(word) if word == "allow" => Some(Effect::Allow),
        Scalar::Str(word) if word == "deny" => Some(Effect::Deny),
        _ => None,
    }
});

impl PolicyFile {
    pub(crate) fn into_policy(self) -> Result<PolicySettings, DeError> {
        let mut policy = PolicySettings { default: self.default.map_or(Effect::Allow, |effect| effect.0), rules: Vec::new() };
        for (index, rule) in self.rules.unwrap_or_default().into_iter().enumerate() {
            let Some(name) = rule.name.map(|name| name.trim().to_string()).filter(|name| !name.is_empty()) else {
                return Err(DeError::field(&format!("rules[{index}].name"), "is missing: every rule has a name, which denials cite"));
            };
            let effect = rule
                .effect
                .ok_or_else(|| DeError::field(&format!("rules.{name}.effect"), "is missing: write effect = \"allow\" or \"deny\""))?;
            if policy.rules.iter().any(|other| other.name == name) {
                return Err(DeError::field(&format!("rules.{name}"), "is a second rule of that name: names must differ"));
            }
            let globs = |list: Option<Strings>| list.map(|list| list.0);
            policy.rules.push(RuleSettings {
                name,
                effect: effect.0,
                servers: globs(rule.servers),
                tools: globs(rule.tools),
                prompts: globs(rule.prompts),
                resources: globs(rule.resources),
                when: rule.when,
            });
        }
        Ok(policy)
    }
}

/// The error with the rule it is about named as the file names it
/// (`serve.policy.rules.NAME.tools`), not by its place (`rules[2]`).
pub(crate) fn named_rules(error: DeError, policy: Option<&Item>) -> DeError {
    let Some(rules) = policy.and_then(|policy| policy.get("rules")) else { return error };
    let listed: Result<Vec<Ordered<MaybeText>>, DeError> = from_node(Node::Item(rules), "", &[]);
    let names: Vec<Option<String>> = listed
        .map(|rules| rules.into_iter().map(|rule| rule.0.into_iter().find(|(key, _)| key == "name").and_then(|(_, name)| name.0)).collect())
        .unwrap_or_default();
    error.renamed(|path| {
        let rest = path.strip_prefix("serve.policy.rules[")?;
        let (index, rest) = rest.split_once(']')?;
        let name = names.get(index.parse::<usize>().ok()?)?.as_ref()?;
        Some(format!("serve.policy.rules.{name}{rest}"))
    })
}

/// Reads (as `[serve]` does) `[serve.policy]`.
#[cfg(test)]
fn read_policy(path: &Path, item: &Item) -> Result<PolicySettings, ConfigError> {
    let policy: PolicyFile =
        from_node(Node::Item(item), "serve.policy", &[]).map_err(|error| named_rules(error, Some(item)).into_setting_error(path))?;
    policy.into_policy().map_err(|error| error.under("serve.policy").into_setting_error(path))
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
