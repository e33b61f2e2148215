//! Tool and prompt arguments from the command line: an optional JSON
//! object, then `--arg k=v` pairs that add to it or replace its keys.
//!
//! A tool's `--arg` value is typed by the tool's `inputSchema`: `string`
//! keeps the text; `integer`, `number` and `boolean` parse it; `object`,
//! `array` and `null` read it as JSON. A property with several types takes
//! the first that parses. A property the schema does not describe (or does
//! not type) is read as JSON when it parses as JSON, else kept as text, so
//! `--arg n=3` is a number and `--arg name=ada` a string.
//! Prompt arguments are always strings (MCP says so).

use serde_json::{Map, Value};

use super::output::Failure;

/// `k=v` split at the first `=`.
fn split_pair(pair: &str) -> Result<(&str, &str), Failure> {
    match pair.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key, value)),
        _ => Err(Failure::usage(format!("--arg `{pair}` is not KEY=VALUE; write e.g. --arg text=hello"))),
    }
}

/// The JSON positional argument, which must be an object.
fn base_object(json: Option<&str>, what: &str) -> Result<Map<String, Value>, Failure> {
    let Some(text) = json else { return Ok(Map::new()) };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(Failure::usage(format!("the arguments of {what} must be a JSON object like '{{\"text\": \"hi\"}}', not {other}"))),
        Err(e) => Err(Failure::usage(format!(
            "the arguments of {what} are not valid JSON ({e}); write a JSON object like '{{\"text\": \"hi\"}}'"
        ))),
    }
}

/// The arguments of a call to `tool` of `server`, typed by `schema`.
pub fn tool_arguments(
    json: Option<&str>,
    pairs: &[String],
    schema: &Map<String, Value>,
    server: &str,
    tool: &str,
) -> Result<Map<String, Value>, Failure> {
    let what = format!("`{tool}` of server `{server}`");
    let mut arguments = base_object(json, &what)?;
    let properties = schema.get("properties").and_then(Value::as_object);
    for pair in pairs {
        let (key, text) = split_pair(pair)?;
        let types = properties.and_then(|p| p.get(key)).map(declared_types).unwrap_or_default();
        let value = typed(text, &types).ok_or_else(|| {
            Failure::usage(format!("--arg {key}={text}: {what} takes `{key}` as {}; give a value of that type", types.join(" or ")))
        })?;
        arguments.insert(key.to_string(), value);
    }
    Ok(arguments)
}

/// The arguments of a prompt: strings only.
pub fn prompt_arguments(pairs: &[String]) -> Result<Map<String, Value>, Failure> {
    let mut arguments = Map::new();
    for pair in pairs {
        let (key, text) = split_pair(pair)?;
        arguments.insert(key.to_string(), Value::String(text.to_string()));
    }
    Ok(arguments)
}

/// The JSON Schema `type`s of a property (one or a list).
fn declared_types(property: &Value) -> Vec<String> {
    match property.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).map(String::from).collect(),
        _ => Vec::new(),
    }
}

/// `text` as the first of `types` it parses as; untyped: JSON if it is, else text.
fn typed(text: &str, types: &[String]) -> Option<Value> {
    if types.is_empty() {
        return Some(serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string())));
    }
    types.iter().find_map(|t| as_type(text, t))
}

fn as_type(text: &str, json_type: &str) -> Option<Value> {
    let parsed = || serde_json::from_str::<Value>(text.trim()).ok();
    match json_type {
        "string" => Some(Value::String(text.to_string())),
        "integer" => parsed().filter(|v| v.is_i64() || v.is_u64()),
        "number" => parsed().filter(Value::is_number),
        "boolean" => parsed().filter(Value::is_boolean),
        "object" => parsed().filter(Value::is_object),
        "array" => parsed().filter(Value::is_array),
        "null" => parsed().filter(Value::is_null),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Map<String, Value> {
        json!({"type": "object", "properties": {
            "text": {"type": "string"}, "n": {"type": "integer"}, "x": {"type": "number"},
            "on": {"type": "boolean"}, "tags": {"type": "array"}, "opt": {"type": ["integer", "string"]}
        }})
        .as_object()
        .cloned()
        .unwrap()
    }

    fn args(json: Option<&str>, pairs: &[&str]) -> Result<Value, String> {
        let pairs: Vec<String> = pairs.iter().map(|p| p.to_string()).collect();
        tool_arguments(json, &pairs, &schema(), "demo", "t").map(Value::Object).map_err(|f| f.message)
    }

    #[test]
    fn values_follow_the_schema() {
        let got = args(None, &["text=42", "n=7", "x=2.5", "on=true", "tags=[1,2]", "opt=abc", "free=3", "word=ada"]).unwrap();
        assert_eq!(got, json!({"text": "42", "n": 7, "x": 2.5, "on": true, "tags": [1, 2], "opt": "abc", "free": 3, "word": "ada"}));
        assert_eq!(args(None, &["opt=5"]).unwrap(), json!({"opt": 5}));
    }

    #[test]
    fn pairs_add_to_and_replace_the_json_object() {
        assert_eq!(args(Some(r#"{"text": "a", "n": 1}"#), &["n=2"]).unwrap(), json!({"text": "a", "n": 2}));
    }

    #[test]
    fn bad_input_says_what_to_write() {
        assert!(args(None, &["n=seven"]).unwrap_err().contains("takes `n` as integer"));
        assert!(args(None, &["novalue"]).unwrap_err().contains("is not KEY=VALUE"));
        assert!(args(Some("[1]"), &[]).unwrap_err().contains("must be a JSON object"));
        assert!(args(Some("{oops"), &[]).unwrap_err().contains("not valid JSON"));
    }
}
