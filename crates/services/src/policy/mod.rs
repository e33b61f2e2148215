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
//! - checks are pure functions of the policy, the identity and the target;
//! - a `when` uses only the names below and the functions of
//!   [`analysis::FUNCTIONS`], or the configuration is refused; its cost is
//!   estimated at load ([`analysis`]): one that would exceed
//!   [`STEP_BUDGET`] on an input of [`MIN_JUDGED_SIZE`] is refused, and at
//!   run time a rule whose estimate for this input exceeds the budget is
//!   not evaluated and denies, so no request makes a rule run longer than
//!   the budget.
//!
//! The expression sees `identity` (`subject`, `client_id`, `scopes`,
//! `claims`, `proof`; `null` when the front checked no credentials, as
//! over stdio), `server`, `kind` (`"tool"`, `"prompt"` or `"resource"`),
//! `name` (the server's own tool or prompt name, or the resource's URI or
//! URI template), `tool`, `prompt` and `resource` (the name when the kind
//! is that, else `null`), and `arguments` (a call's arguments, `{}` when it
//! sent none; `null` in lists). Besides CEL's standard library it may call
//! `path.clean(p)` and `path.within(p, dir)` ([`paths`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use cel::{Context, Env, Program};
use serde_json::Value;

use crate::config::glob_match;
use crate::config::{Effect, PolicySettings, RuleSettings};
use crate::error::ConfigError;
use crate::identity::Identity;

mod analysis;
mod paths;

use analysis::Cost;

/// The most steps one rule may take on one request (about 0.3 s of one
/// core at the interpreter's pace in a release build).
pub(crate) const STEP_BUDGET: f64 = 1_000_000.0;

/// The input size every rule must be able to judge within the budget:
/// a rule that cannot is refused at load.
pub(crate) const MIN_JUDGED_SIZE: f64 = 64.0;

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
    /// The estimated cost of `when` ([`Cost::ZERO`] without one).
    cost: Cost,
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
        Policy { default: Effect::Allow, rules: Vec::new(), env: Arc::new(environment()) }
    }
}

/// CEL's standard library and the path helpers.
fn environment() -> Env {
    let mut env = Env::stdlib();
    // Registering two new names on a fresh environment cannot clash.
    let _ = paths::register(&mut env);
    env
}

impl Policy {
    /// Compiles `settings`, read from `file`: a `when` that does not parse
    /// is an error naming the file and the rule.
    pub fn compile(settings: &PolicySettings, file: &Path) -> Result<Policy, ConfigError> {
        let env = Arc::new(environment());
        let rules = settings.rules.iter().map(|rule| compile_rule(&env, rule, file)).collect::<Result<_, ConfigError>>()?;
        Ok(Policy { default: settings.default, rules, env })
    }

    /// The estimated steps of every `when` that applies to `target`: what
    /// checking it may cost, before it is checked.
    pub fn estimate(&self, identity: Option<&Identity>, target: &Target) -> f64 {
        let rules = self.rules.iter().filter(|rule| rule.when.is_some() && rule.matches(target));
        let costs: Vec<Cost> = rules.map(|rule| rule.cost).collect();
        if costs.is_empty() {
            return 0.0;
        }
        let size = input_size(identity, target);
        costs.iter().map(|cost| cost.at(size)).sum()
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
        let mut size = None;
        let mut allowed = false;
        for rule in self.rules.iter().filter(|rule| rule.matches(target)) {
            let applies = match &rule.when {
                None => Ok(true),
                Some(program) => {
                    let size = *size.get_or_insert_with(|| input_size(identity, target));
                    match rule.cost.at(size) {
                        steps if steps > STEP_BUDGET => Err(over_budget(steps, size)),
                        _ => evaluate(program, context.get_or_insert_with(|| self.context(identity, target))),
                    }
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

/// Compiles one rule's `when` and checks its names and cost.
fn compile_rule(env: &Env, rule: &RuleSettings, file: &Path) -> Result<Rule, ConfigError> {
    let invalid = |message: String| ConfigError::InvalidSetting {
        file: PathBuf::from(file),
        field: format!("serve.policy.rules.{}.when", rule.name),
        message,
    };
    let Some(source) = rule.when.as_deref() else { return Ok(Rule { settings: rule.clone(), when: None, cost: Cost::ZERO }) };
    let program = env.compile(source).map_err(|error| invalid(format!("is not a valid CEL expression: {error}")))?;
    let found = analysis::analyse(program.expression());
    if let Some(unknown) = found.unknown.first() {
        return Err(invalid(format!(
            "uses `{unknown}`, which a policy rule does not know: a `when` may read {} and call {} besides CEL's operators and macros",
            analysis::VARIABLES.join(", "),
            analysis::FUNCTIONS.join(", ")
        )));
    }
    let at_least = found.cost.at(MIN_JUDGED_SIZE);
    if at_least > STEP_BUDGET {
        let growth = found.cost.degree().map_or_else(|| "faster than n^4".to_string(), |degree| format!("as n^{degree}"));
        return Err(invalid(format!(
            "would take about {at_least:.0} steps on arguments of only {MIN_JUDGED_SIZE} values, over the budget of {STEP_BUDGET} \
             steps per rule (its cost grows {growth} in the size n of its input): nest fewer comprehensions over the input"
        )));
    }
    Ok(Rule { settings: rule.clone(), when: Some(program), cost: found.cost })
}

/// The size of what a `when` reads, in the units of [`Cost`]: one per JSON
/// value of the arguments and the identity's claims, and one per KiB of
/// their text.
fn input_size(identity: Option<&Identity>, target: &Target) -> f64 {
    let mut size = Size::default();
    if let Some(arguments) = target.arguments {
        size.add(arguments);
    }
    if let Some(identity) = identity {
        identity.claims.values().for_each(|claim| size.add(claim));
        size.values += identity.scopes.len() as f64;
        size.bytes += identity.scopes.iter().map(String::len).sum::<usize>() as f64;
    }
    size.bytes += target.name.len() as f64;
    1.0 + size.values + size.bytes / 1024.0
}

#[derive(Default)]
struct Size {
    values: f64,
    bytes: f64,
}

impl Size {
    fn add(&mut self, value: &Value) {
        let mut pending = vec![value];
        while let Some(value) = pending.pop() {
            self.values += 1.0;
            match value {
                Value::String(text) => self.bytes += text.len() as f64,
                Value::Array(items) => pending.extend(items),
                Value::Object(fields) => {
                    self.bytes += fields.keys().map(String::len).sum::<usize>() as f64;
                    pending.extend(fields.values());
                }
                _ => {}
            }
        }
    }
}

/// Why a rule was not evaluated: its estimate for this input.
fn over_budget(steps: f64, size: f64) -> String {
    format!(
        "it would take about {steps:.0} steps for an input of size {size:.0}, over the budget of {STEP_BUDGET} steps per rule; \
         send smaller arguments, or ask the operator for a cheaper rule"
    )
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
