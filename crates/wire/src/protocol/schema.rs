//! Tool schemas: arguments are checked against `inputSchema` before a call
//! is sent, `structuredContent` against `outputSchema` when the answer comes.
//!
//! The checker is this crate's own and covers what tool schemas use:
//! `type` (one or a list; `integer` is a number without a fraction),
//! `properties`, `required`, `additionalProperties`, `items`/`prefixItems`,
//! `enum`, `const`, the numeric, length and size bounds, `allOf`, `anyOf`,
//! `oneOf`, `not`, and `$ref` to `#/$defs/…` or `#/definitions/…`. Every
//! other keyword (`format`, `pattern`, remote `$ref`, ...) is not enforced:
//! the check may let through what the server will refuse, never refuse what
//! the server accepts. Likewise a check that would take more than
//! [`MAX_STEPS`] (combinators and `$ref`s can make the work grow
//! exponentially with the schema's size) stops and lets the value through. (A general JSON Schema library was measured: its
//! meta-schemas alone cost about 2.5 MB of resident memory per process,
//! more than the whole client's budget; see docs/decisions.md.)

use std::cell::Cell;
use std::sync::Arc;

use serde_json::{Map, Value};

/// `$ref` chains followed at most (a schema referring to itself in a loop).
const MAX_DEPTH: usize = 64;

/// Subschemas checked at most for one value;
/// past it the check gives up and accepts. Tool arguments and results take
/// tens to hundreds of steps; a value of thousands of items may use it up,
/// and is then checked by the server alone.
pub const MAX_STEPS: usize = 20_000;

/// What the client checks and needs to know about one tool.
///
/// The schemas are kept as compact JSON text (shared with the catalog's
/// tool) and parsed for each check: a parse costs microseconds next to a
/// call's round trip, while a parsed schema kept for every tool costs 10 to
/// 20 times its text.
#[derive(Debug, Default)]
pub struct ToolContract {
    input: Option<Arc<str>>,
    output: Option<Arc<str>>,
    /// The tool must be called as a task (`execution.taskSupport = "required"`).
    pub task_required: bool,
}

impl ToolContract {
    /// A contract from the schemas' texts (as `serde_json` writes a `JsonObject`).
    pub fn new(input: Option<Arc<str>>, output: Option<Arc<str>>, task_required: bool) -> ToolContract {
        ToolContract { input, output, task_required }
    }

    pub fn of(tool: &rmcp::model::Tool, task_required: bool) -> ToolContract {
        let text = |schema: &Map<String, Value>| Arc::from(serde_json::to_string(schema).unwrap_or_default());
        ToolContract::new(Some(text(&tool.input_schema)), tool.output_schema.as_deref().map(text), task_required)
    }

    /// Checks a call's arguments; the error names the first offending field.
    pub fn check_arguments(&self, arguments: &Value) -> Result<(), String> {
        self.check_arguments_cached(arguments, &mut SchemaCache::default())
    }

    /// [`ToolContract::check_arguments`], taking the parsed schema from `cache`.
    pub fn check_arguments_cached(&self, arguments: &Value, cache: &mut SchemaCache) -> Result<(), String> {
        match &self.input {
            Some(schema) => check(&cache.parsed(schema), arguments, "argument"),
            None => Ok(()),
        }
    }

    /// The parsed `outputSchema`, if the tool has one, taken from `cache`
    /// (for [`check_output`] once the answer is in).
    pub fn output_schema(&self, cache: &mut SchemaCache) -> Option<ParsedSchema> {
        self.output.as_ref().map(|text| cache.parsed(text))
    }

    /// Checks a result's `structuredContent`; a tool with an `outputSchema`
    /// must send one unless the result is an error.
    pub fn check_output(&self, structured: Option<&Value>, is_error: bool) -> Result<(), String> {
        check_output(self.output_schema(&mut SchemaCache::default()).as_deref(), structured, is_error)
    }
}

/// Checks a result's `structuredContent` against the tool's parsed
/// `outputSchema` (`None`: the tool has none); a tool with one must send
/// `structuredContent` unless the result is an error.
pub fn check_output(schema: Option<&Map<String, Value>>, structured: Option<&Value>, is_error: bool) -> Result<(), String> {
    match (schema, structured) {
        (None, _) => Ok(()),
        (Some(_), None) if is_error => Ok(()),
        (Some(_), None) => Err("the tool has an outputSchema but its result has no structuredContent".into()),
        (Some(schema), Some(value)) => check(schema, value, "field"),
    }
}

/// The total text of the schemas a [`SchemaCache`] keeps parsed: parsed,
/// a small schema costs 20 to 30 times its text, so a busy connection holds
/// at most some 60 KiB for it (and an idle one that never called, nothing).
pub const SCHEMA_CACHE_TEXT: usize = 2048;

/// A schema parsed, shared by the cache and the checks under way.
pub type ParsedSchema = Arc<Map<String, Value>>;

/// The parsed schemas of the tools called last, so that calling the same
/// tools again does not parse their schemas again (a parse and its drop
/// cost more than the check). Invariants: an entry is found by the identity
/// of its text (`Arc::ptr_eq`: a re-listed tool brings a new text and so is
/// parsed afresh); the kept texts add up to at most [`SCHEMA_CACHE_TEXT`]
/// bytes, the most recently used first; a larger schema is parsed for
/// each use and not kept.
#[derive(Default)]
pub struct SchemaCache {
    entries: std::collections::VecDeque<(Arc<str>, ParsedSchema)>,
    text_bytes: usize,
}

impl SchemaCache {
    /// `text` parsed (see [`parse_schema`]), from the cache when it is there.
    pub fn parsed(&mut self, text: &Arc<str>) -> ParsedSchema {
        let found = self.entries.iter().position(|(kept, _)| Arc::ptr_eq(kept, text));
        if let Some(entry) = found.and_then(|at| self.entries.remove(at)) {
            let parsed = entry.1.clone();
            self.entries.push_front(entry);
            return parsed;
        }
        let parsed = Arc::new(parse_schema(text));
        if text.len() <= SCHEMA_CACHE_TEXT {
            while self.text_bytes + text.len() > SCHEMA_CACHE_TEXT {
                let Some((evicted, _)) = self.entries.pop_back() else { break };
                self.text_bytes -= evicted.len();
            }
            self.text_bytes += text.len();
            self.entries.push_front((text.clone(), parsed.clone()));
        }
        parsed
    }

    /// The bytes of schema text kept parsed.
    pub fn text_bytes(&self) -> usize {
        self.text_bytes
    }
}

/// A schema from text `serde_json` wrote from a `JsonObject` (so it reads
/// back; an empty schema, which lets everything through, if it ever did not).
pub fn parse_schema(text: &str) -> Map<String, Value> {
    serde_json::from_str(text).unwrap_or_default()
}

/// Checks `value` against `schema`; the error starts with "`what` `path`:"
/// when the problem is below the top level.
pub fn check(schema: &Map<String, Value>, value: &Value, what: &str) -> Result<(), String> {
    let checker = Checker { root: schema, steps: Cell::new(0) };
    let outcome = checker.check_schema(schema, value, &mut Vec::new(), 0);
    if checker.exhausted() {
        // Results past the budget are not reliable (a `not` of a cut-short check).
        tracing::debug!("the schema check took more than {MAX_STEPS} steps; the value is let through");
        return Ok(());
    }
    outcome.map_err(|Violation { path, message }| match path.is_empty() {
        true => message,
        false => format!("{what} `{}`: {message}", path.join(".")),
    })
}

struct Violation {
    path: Vec<String>,
    message: String,
}

struct Checker<'s> {
    root: &'s Map<String, Value>,
    /// Subschemas checked so far (see [`MAX_STEPS`]).
    steps: Cell<usize>,
}

impl<'s> Checker<'s> {
    fn exhausted(&self) -> bool {
        self.steps.get() > MAX_STEPS
    }

    fn check(&self, schema: &'s Value, value: &Value, path: &mut Vec<String>, depth: usize) -> Result<(), Violation> {
        match schema {
            Value::Bool(false) => Err(Violation { path: path.clone(), message: "no value is allowed here".into() }),
            Value::Object(schema) => self.check_schema(schema, value, path, depth),
            _ => Ok(()),
        }
    }

    fn check_schema(&self, schema: &'s Map<String, Value>, value: &Value, path: &mut Vec<String>, depth: usize) -> Result<(), Violation> {
        let fail = |path: &Vec<String>, message: String| Err(Violation { path: path.clone(), message });
        self.steps.set(self.steps.get() + 1);
        if depth > MAX_DEPTH || self.exhausted() {
            return Ok(());
        }
        let reference = schema.get("$ref").and_then(Value::as_str);
        if reference == Some("#") {
            self.check_schema(self.root, value, path, depth + 1)?;
        } else if let Some(target) = reference.and_then(|r| self.resolve(r)) {
            self.check(target, value, path, depth + 1)?;
        }
        if let Some(expected) = schema.get("type") {
            if !type_matches(expected, value) {
                return fail(path, format!("expected {}, got {}", type_names(expected), describe(value)));
            }
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
            if !allowed.iter().any(|a| same(a, value)) {
                return fail(path, format!("{} is not one of {}", value, Value::Array(allowed.clone())));
            }
        }
        if let Some(constant) = schema.get("const") {
            if !same(constant, value) {
                return fail(path, format!("must be {constant}"));
            }
        }
        match value {
            Value::Number(n) => self.check_number(schema, n.as_f64().unwrap_or(f64::NAN), path)?,
            Value::String(s) => check_bounds(schema, s.chars().count(), "minLength", "maxLength", "characters", path)?,
            Value::Array(items) => self.check_array(schema, items, path, depth)?,
            Value::Object(fields) => self.check_object(schema, fields, path, depth)?,
            _ => {}
        }
        self.check_combinators(schema, value, path, depth)
    }

    fn check_number(&self, schema: &Map<String, Value>, n: f64, path: &[String]) -> Result<(), Violation> {
        let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
        let broken = [
            bound("minimum").filter(|&m| n < m).map(|m| format!("{n} is less than the minimum {m}")),
            bound("maximum").filter(|&m| n > m).map(|m| format!("{n} is more than the maximum {m}")),
            bound("exclusiveMinimum").filter(|&m| n <= m).map(|m| format!("{n} must be more than {m}")),
            bound("exclusiveMaximum").filter(|&m| n >= m).map(|m| format!("{n} must be less than {m}")),
            bound("multipleOf").filter(|&m| m > 0.0 && (n / m).fract().abs() > 1e-9).map(|m| format!("{n} is not a multiple of {m}")),
        ];
        match broken.into_iter().flatten().next() {
            Some(message) => Err(Violation { path: path.to_vec(), message }),
            None => Ok(()),
        }
    }

    fn check_array(&self, schema: &'s Map<String, Value>, items: &[Value], path: &mut Vec<String>, depth: usize) -> Result<(), Violation> {
        check_bounds(schema, items.len(), "minItems", "maxItems", "items", path)?;
        let prefix = schema.get("prefixItems").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        for (i, item) in items.iter().enumerate() {
            let item_schema = match prefix.get(i) {
                Some(schema) => Some(schema),
                None => schema.get("items").filter(|items| !items.is_array()),
            };
            if let Some(item_schema) = item_schema {
                path.push(i.to_string());
                self.check(item_schema, item, path, depth + 1)?;
                path.pop();
            }
        }
        Ok(())
    }

    fn check_object(
        &self,
        schema: &'s Map<String, Value>,
        fields: &Map<String, Value>,
        path: &mut Vec<String>,
        depth: usize,
    ) -> Result<(), Violation> {
        let properties = schema.get("properties").and_then(Value::as_object);
        for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if !fields.contains_key(name) {
                path.push(name.to_string());
                let violation = Violation { path: path.clone(), message: "is required but missing".into() };
                path.pop();
                return Err(violation);
            }
        }
        check_bounds(schema, fields.len(), "minProperties", "maxProperties", "properties", path)?;
        for (name, field) in fields {
            path.push(name.clone());
            let result = match (properties.and_then(|p| p.get(name)), schema.get("additionalProperties")) {
                (Some(field_schema), _) => self.check(field_schema, field, path, depth + 1),
                (None, Some(Value::Bool(false))) => {
                    Err(Violation { path: path.clone(), message: "is not a known property (additionalProperties is false)".into() })
                }
                (None, Some(extra @ Value::Object(_))) => self.check(extra, field, path, depth + 1),
                (None, _) => Ok(()),
            };
            path.pop();
            result?;
        }
        Ok(())
    }

    fn check_combinators(
        &self,
        schema: &'s Map<String, Value>,
        value: &Value,
        path: &mut Vec<String>,
        depth: usize,
    ) -> Result<(), Violation> {
        let list = |key: &str| schema.get(key).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        for sub in list("allOf") {
            self.check(sub, value, path, depth + 1)?;
        }
        let fits = |sub: &'s Value| self.check(sub, value, &mut path.clone(), depth + 1).is_ok();
        let any_of = list("anyOf");
        if !any_of.is_empty() && !any_of.iter().any(fits) {
            return Err(Violation { path: path.clone(), message: "matches none of the schemas in anyOf".into() });
        }
        let one_of = list("oneOf");
        if !one_of.is_empty() {
            let matching = one_of.iter().filter(|sub| fits(sub)).count();
            if matching != 1 {
                return Err(Violation {
                    path: path.clone(),
                    message: format!("matches {matching} of the schemas in oneOf; exactly one must match"),
                });
            }
        }
        if let Some(not) = schema.get("not") {
            if fits(not) {
                return Err(Violation { path: path.clone(), message: "matches the schema in `not`".into() });
            }
        }
        Ok(())
    }

    /// A local reference (`#`, `#/$defs/x`, `#/definitions/x`); others are not followed.
    fn resolve(&self, reference: &str) -> Option<&'s Value> {
        let pointer = reference.strip_prefix('#')?;
        let mut segments = pointer.strip_prefix('/')?.splitn(2, '/');
        let first = self.root.get(&segments.next()?.replace("~1", "/").replace("~0", "~"))?;
        match segments.next() {
            Some(rest) => first.pointer(&format!("/{rest}")),
            None => Some(first),
        }
    }
}

fn check_bounds(schema: &Map<String, Value>, size: usize, min: &str, max: &str, unit: &str, path: &[String]) -> Result<(), Violation> {
    let bound = |key: &str| schema.get(key).and_then(Value::as_u64);
    let message = match (bound(min), bound(max)) {
        (Some(least), _) if (size as u64) < least => format!("has {size} {unit}, fewer than {least}"),
        (_, Some(most)) if (size as u64) > most => format!("has {size} {unit}, more than {most}"),
        _ => return Ok(()),
    };
    Err(Violation { path: path.to_vec(), message })
}

fn type_matches(expected: &Value, value: &Value) -> bool {
    match expected {
        Value::String(name) => is_type(name, value),
        Value::Array(names) => names.iter().filter_map(Value::as_str).any(|name| is_type(name, value)),
        _ => true,
    }
}

fn is_type(name: &str, value: &Value) -> bool {
    match name {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.as_f64().is_some_and(|n| n.fract() == 0.0),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn type_names(expected: &Value) -> String {
    match expected {
        Value::Array(names) => names.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
        other => other.as_str().unwrap_or("?").to_string(),
    }
}

fn describe(value: &Value) -> String {
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    let shown = value.to_string();
    match shown.len() {
        0..=40 if !value.is_object() && !value.is_array() => format!("{kind} ({shown})"),
        _ => kind.to_string(),
    }
}

/// JSON equality where 1 and 1.0 are the same number.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_parses_a_text_once_and_keeps_at_most_its_budget() {
        let mut cache = SchemaCache::default();
        let small: Arc<str> = Arc::from(r#"{"type":"object","properties":{"text":{"type":"string"}}}"#);
        let first = cache.parsed(&small);
        assert!(Arc::ptr_eq(&first, &cache.parsed(&small)), "the second use is not parsed again");
        // The same text in another allocation (a re-listed tool) is parsed afresh.
        let relisted: Arc<str> = Arc::from(&*small);
        assert!(!Arc::ptr_eq(&first, &cache.parsed(&relisted)));
        let large: Arc<str> = Arc::from(format!(r#"{{"description":"{}"}}"#, "x".repeat(SCHEMA_CACHE_TEXT)));
        assert_eq!(cache.parsed(&large)["description"].as_str().map(str::len), Some(SCHEMA_CACHE_TEXT));
        assert_eq!(cache.text_bytes(), 2 * small.len(), "a schema over the budget is not kept");
        for _ in 0..2 * SCHEMA_CACHE_TEXT / small.len() {
            cache.parsed(&Arc::from(&*small));
            assert!(cache.text_bytes() <= SCHEMA_CACHE_TEXT);
        }
        assert!(!cache.entries.iter().any(|(kept, _)| Arc::ptr_eq(kept, &small)), "the least recently used left first");
    }
    use serde_json::json;

    /// Found by fuzzing (fuzz target `schema`): each `oneOf` checks both of
    /// its branches, so a chain of n of them takes 2^n steps (the fuzzer's
    /// hung the connection's thread). The check now stops after MAX_STEPS
    /// and accepts; 16 levels (2^17 steps in full) show it.
    #[test]
    fn an_exponential_schema_is_cut_short_and_accepts() {
        let mut defs = serde_json::Map::new();
        for level in 0..16 {
            let next = format!("#/$defs/l{}", level + 1);
            defs.insert(format!("l{level}"), json!({"oneOf": [{"$ref": next}, {"$ref": next}]}));
        }
        defs.insert("l16".into(), json!({"type": "string"}));
        let schema = json!({"$defs": defs, "$ref": "#/$defs/l0"});
        let checker = Checker { root: schema.as_object().unwrap(), steps: Cell::new(0) };
        let _ = checker.check_schema(checker.root, &json!(1), &mut Vec::new(), 0);
        assert!(checker.steps.get() <= MAX_STEPS + 64 * 3, "{} steps", checker.steps.get());
        assert_eq!(check(schema.as_object().unwrap(), &json!(1), "argument"), Ok(()));
        // Small schemas are still checked in full.
        assert!(check(json!({"oneOf": [{"type": "string"}, {"type": "string"}]}).as_object().unwrap(), &json!("x"), "argument").is_err());
    }

    fn fails(schema: Value, value: Value) -> String {
        check(schema.as_object().unwrap(), &value, "argument").unwrap_err()
    }

    fn passes(schema: &Value, value: Value) -> Result<(), String> {
        check(schema.as_object().unwrap(), &value, "argument")
    }

    #[test]
    fn types_properties_and_required_name_the_field() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "integer"}}, "required": ["a", "b"]});
        assert_eq!(passes(&schema, json!({"a": 1.5, "b": 2})), Ok(()));
        assert_eq!(passes(&schema, json!({"a": 1, "b": 2.0})), Ok(()), "2.0 is an integer");
        assert_eq!(fails(schema.clone(), json!({"a": 1, "b": "2"})), "argument `b`: expected integer, got a string (\"2\")");
        assert_eq!(fails(schema.clone(), json!({"a": 1})), "argument `b`: is required but missing");
        assert_eq!(fails(schema, json!([1])), "expected object, got an array");
    }

    #[test]
    fn nested_arrays_enums_and_bounds() {
        let schema = json!({"type": "object", "properties": {
            "tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "maxItems": 2},
            "n": {"type": ["integer", "null"], "minimum": 1, "exclusiveMaximum": 10},
            "name": {"type": "string", "minLength": 2}},
            "additionalProperties": false});
        assert_eq!(passes(&schema, json!({"tags": ["x"], "n": null, "name": "ab"})), Ok(()));
        assert_eq!(fails(schema.clone(), json!({"tags": ["x", "z"]})), "argument `tags.1`: \"z\" is not one of [\"x\",\"y\"]");
        assert_eq!(fails(schema.clone(), json!({"tags": ["x", "y", "x"]})), "argument `tags`: has 3 items, more than 2");
        assert_eq!(fails(schema.clone(), json!({"n": 10})), "argument `n`: 10 must be less than 10");
        assert_eq!(fails(schema.clone(), json!({"n": 0})), "argument `n`: 0 is less than the minimum 1");
        assert_eq!(fails(schema.clone(), json!({"name": "é"})), "argument `name`: has 1 characters, fewer than 2");
        assert_eq!(fails(schema, json!({"other": 1})), "argument `other`: is not a known property (additionalProperties is false)");
    }

    #[test]
    fn combinators_and_local_references() {
        let schema = json!({"$defs": {"pos": {"type": "integer", "minimum": 0}}, "type": "object", "properties": {
            "p": {"$ref": "#/$defs/pos"},
            "either": {"anyOf": [{"type": "string"}, {"type": "boolean"}]},
            "one": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
            "not_null": {"not": {"type": "null"}}}});
        assert_eq!(passes(&schema, json!({"p": 3, "either": true, "one": 1.5, "not_null": 0})), Ok(()));
        assert_eq!(fails(schema.clone(), json!({"p": -1})), "argument `p`: -1 is less than the minimum 0");
        assert_eq!(fails(schema.clone(), json!({"either": 1})), "argument `either`: matches none of the schemas in anyOf");
        assert_eq!(fails(schema.clone(), json!({"one": 1})), "argument `one`: matches 2 of the schemas in oneOf; exactly one must match");
        assert_eq!(fails(schema, json!({"not_null": null})), "argument `not_null`: matches the schema in `not`");
    }

    #[test]
    fn unknown_keywords_and_loops_never_refuse() {
        let schema =
            json!({"type": "object", "properties": {"s": {"type": "string", "format": "email", "pattern": "^x"}, "me": {"$ref": "#"}}});
        assert_eq!(passes(&schema, json!({"s": "not an email"})), Ok(()));
        let looping = json!({"$ref": "#"});
        assert_eq!(passes(&looping, json!(1)), Ok(()), "a self-reference stops at the depth limit");
        assert_eq!(passes(&json!({"type": "no-such-type"}), json!(1)), Ok(()));
    }

    fn tool(output: Option<Value>) -> rmcp::model::Tool {
        let mut tool: rmcp::model::Tool = serde_json::from_value(json!({"name": "t", "inputSchema": {"type": "object"}})).unwrap();
        tool.output_schema = output.map(|o| std::sync::Arc::new(o.as_object().unwrap().clone()));
        tool
    }

    #[test]
    fn structured_content_is_checked_against_the_output_schema() {
        let output = json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]});
        let contract = ToolContract::of(&tool(Some(output)), false);
        assert_eq!(contract.check_output(Some(&json!({"sum": 3})), false), Ok(()));
        assert!(contract.check_output(Some(&json!({"sum": "3"})), false).unwrap_err().starts_with("field `sum`"));
        assert!(contract.check_output(None, false).is_err());
        assert_eq!(contract.check_output(None, true), Ok(()), "an error result need not match");
        assert_eq!(ToolContract::of(&tool(None), false).check_output(Some(&json!(1)), false), Ok(()));
    }
}
