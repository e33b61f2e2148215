//! The gateway's access policy (`[serve.policy]`): which caller may list
//! and use which tool, prompt and resource of which server.
//!
//! Invariants:
//! - a rule applies to a request when its globs match the server and the
//!   thing, and its `when` expression (CEL) is true; a `when` that fails to
//!   evaluate, or is not a boolean, counts as a deny by that rule (never a
//!   panic, never an allow);
//! - deny wins: a request is allowed when some applying rule allows it and
//!   none denies it; when no rule applies, the default decides;
//! - compiling is the only fallible step a configuration meets: a `when`
//!   that does not parse is a configuration error naming the file and the
//!   rule, so a running gateway never meets one;
//! - checks are pure functions of the policy, the identity and the target.
//!
//! The expression sees `identity` (`subject`, `client_id`, `scopes`,
//! `claims`, `proof`; `null` when the front checked no credentials, as
//! over stdio), `server`, `kind` (`"tool"`, `"prompt"` or `"resource"`),
//! `name` (the server's own tool or prompt name, or the resource's URI or
//! URI template), `tool`, `prompt` and `resource` (the name when the kind
//! is that, else `null`), and `arguments` (a call's arguments, `{}` when it
//! sent none; `null` in lists).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use cel::{Context, Env, Program};
use serde_json::Value;

use crate::config::glob_match;
use crate::config::{Effect, PolicySettings, RuleSettings};
use crate::error::ConfigError;
use crate::identity::Identity;

/// What a request touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Tool,
    Prompt,
    Resource,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::Resource => "resource",
        }
    }
}

/// One thing a request lists or uses.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub server: &'a str,
    pub kind: Kind,
    /// The server's own name of the tool or prompt; a resource's URI or URI template.
    pub name: &'a str,
    /// A call's arguments; `None` in a list.
    pub arguments: Option<&'a Value>,
}

/// Why a request was refused: the rule that denied it, or the default.
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    /// The denying rule's name; `None` when the default denied.
    pub rule: Option<String>,
    /// Says which rule, or the default, and why (an evaluation error's message).
    pub reason: String,
}

/// A compiled `[serve.policy]`.
pub struct Policy {
    default: Effect,
    rules: Vec<Rule>,
    env: Arc<Env>,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy").field("default", &self.default).field("rules", &self.rules.len()).finish()
    }
}

struct Rule {
    settings: RuleSettings,
    when: Option<Program>,
}

impl Rule {
    fn matches(&self, target: &Target) -> bool {
        let any =
            |globs: &Option<Vec<String>>, text: &str| globs.as_ref().is_none_or(|globs| globs.iter().any(|glob| glob_match(glob, text)));
        let rule = &self.settings;
        if !any(&rule.servers, target.server) {
            return false;
        }
        if rule.tools.is_none() && rule.prompts.is_none() && rule.resources.is_none() {
            return true;
        }
        let globs = match target.kind {
            Kind::Tool => &rule.tools,
            Kind::Prompt => &rule.prompts,
            Kind::Resource => &rule.resources,
        };
        globs.as_ref().is_some_and(|globs| globs.iter().any(|glob| glob_match(glob, target.name)))
    }
}

impl Default for Policy {
    /// No policy: everyone may use everything.
    fn default() -> Policy {
        Policy { default: Effect::Allow, rules: Vec::new(), env: Arc::new(Env::stdlib()) }
    }
}

impl Policy {
    /// Compiles `settings`, read from `file`: a `when` that does not parse
    /// is an error naming the file and the rule.
    pub fn compile(settings: &PolicySettings, file: &Path) -> Result<Policy, ConfigError> {
        let env = Arc::new(Env::stdlib());
        let rules = settings
            .rules
            .iter()
            .map(|rule| {
                let when =
                    rule.when.as_deref().map(|source| env.compile(source)).transpose().map_err(|error| ConfigError::InvalidSetting {
                        file: PathBuf::from(file),
                        field: format!("serve.policy.rules.{}.when", rule.name),
                        message: format!("is not a valid CEL expression: {error}"),
                    })?;
                Ok(Rule { settings: rule.clone(), when })
            })
            .collect::<Result<_, ConfigError>>()?;
        Ok(Policy { default: settings.default, rules, env })
    }

    /// Whether the policy is the default one that allows everything.
    pub fn allows_everything(&self) -> bool {
        self.default == Effect::Allow && self.rules.is_empty()
    }

    /// Whether `identity` (none: unauthenticated) may list or use `target`.
    pub fn check(&self, identity: Option<&Identity>, target: &Target) -> Result<(), Denial> {
        if self.allows_everything() {
            return Ok(());
        }
        let mut context = None;
        let mut allowed = false;
        for rule in self.rules.iter().filter(|rule| rule.matches(target)) {
            let applies = match &rule.when {
                None => Ok(true),
                Some(program) => {
                    let context = context.get_or_insert_with(|| self.context(identity, target));
                    evaluate(program, context)
                }
            };
            let name = &rule.settings.name;
            match (applies, rule.settings.effect) {
                (Err(why), _) => {
                    return Err(Denial {
                        rule: Some(name.clone()),
                        reason: format!("the rule `{name}` could not be evaluated ({why}), which denies"),
                    })
                }
                (Ok(true), Effect::Deny) => {
                    return Err(Denial { rule: Some(name.clone()), reason: format!("the rule `{name}` denies it") })
                }
                (Ok(true), Effect::Allow) => allowed = true,
                (Ok(false), _) => {}
            }
        }
        match allowed || self.default == Effect::Allow {
            true => Ok(()),
            false => Err(Denial { rule: None, reason: "no rule allows it; the default is deny".into() }),
        }
    }

    fn context(&self, identity: Option<&Identity>, target: &Target) -> Context<'static, 'static> {
        let mut context = Context::with_env(self.env.clone());
        let only = |kind: Kind| (target.kind == kind).then_some(target.name);
        // Serialising strings, maps and JSON values cannot fail: each `add_variable` is infallible here.
        let _ = context.add_variable("identity", identity);
        let _ = context.add_variable("server", target.server);
        let _ = context.add_variable("kind", target.kind.label());
        let _ = context.add_variable("name", target.name);
        let _ = context.add_variable("tool", only(Kind::Tool));
        let _ = context.add_variable("prompt", only(Kind::Prompt));
        let _ = context.add_variable("resource", only(Kind::Resource));
        let _ = context.add_variable("arguments", target.arguments);
        context
    }
}

/// A `when`'s answer: a boolean, or why there is none.
fn evaluate(program: &Program, context: &Context) -> Result<bool, String> {
    match program.execute(context) {
        Ok(cel::Value::Bool(answer)) => Ok(answer),
        Ok(other) => Err(format!("it gave {:?}, not true or false", other.type_of())),
        Err(error) => Err(bounded(error.to_string())),
    }
}

/// The longest evaluation error quoted in a denial, in characters: an
/// error may quote a value, and arguments can be large.
const MAX_ERROR_CHARS: usize = 200;

fn bounded(mut text: String) -> String {
    if let Some((cut, _)) = text.char_indices().nth(MAX_ERROR_CHARS) {
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// The policy in force, replaced whole on reload: each check reads the one
/// current when it starts.
#[derive(Debug, Default)]
pub struct Current<T>(Arc<RwLock<Arc<T>>>);

impl<T> Clone for Current<T> {
    fn clone(&self) -> Current<T> {
        Current(self.0.clone())
    }
}

impl<T> Current<T> {
    pub fn new(value: T) -> Current<T> {
        Current(Arc::new(RwLock::new(Arc::new(value))))
    }

    pub fn get(&self) -> Arc<T> {
        self.0.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    pub fn set(&self, value: T) {
        *self.0.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(value);
    }
}

#[cfg(test)]
mod tests;
