//! The redactor (`config::Redactor`): configured secrets and secret shapes
//! masked in text and in JSON.
//!
//! Properties: never panics; `json` keeps the value valid JSON with the
//! same structure, keys, numbers, booleans and nulls (only string values
//! change); no configured secret of `MIN_SECRET_CHARS` characters or more
//! appears in the output of `text`, nor in any string value after `json`.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpvisor_wire::config::redact::MIN_SECRET_CHARS;
use mcpvisor_wire::config::Redactor;
use serde_json::Value;

#[derive(Arbitrary, Debug)]
struct Input {
    secrets: Vec<String>,
    text: String,
}

/// The value with every string replaced by the same placeholder.
fn shape(value: &Value) -> Value {
    match value {
        Value::String(_) => Value::String(String::new()),
        Value::Array(items) => Value::Array(items.iter().map(shape).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
        other => other.clone(),
    }
}

fn strings<'v>(value: &'v Value, out: &mut Vec<&'v str>) {
    match value {
        Value::String(text) => out.push(text),
        Value::Array(items) => items.iter().for_each(|item| strings(item, out)),
        Value::Object(map) => map.values().for_each(|item| strings(item, out)),
        _ => {}
    }
}

fuzz_target!(|input: Input| {
    let redactor = Redactor::with_secrets(input.secrets.iter().cloned());
    let checked: Vec<&String> = input.secrets.iter().filter(|s| s.chars().count() >= MIN_SECRET_CHARS).collect();
    let text = redactor.text(&input.text);
    for secret in &checked {
        assert!(!text.contains(secret.as_str()), "secret {secret:?} left in {text:?}");
    }
    if let Ok(original) = serde_json::from_str::<Value>(&input.text) {
        let mut redacted = original.clone();
        redactor.json(&mut redacted);
        let serialized = serde_json::to_string(&redacted).expect("a Value serializes");
        // Valid JSON; compared as values, not re-parsed: serde_json's float
        // printing does not round-trip every f64, which is not ours to test.
        serde_json::from_str::<Value>(&serialized).expect("redacted JSON parses");
        assert_eq!(shape(&redacted), shape(&original), "structure, keys, numbers and booleans are kept");
        let mut values = Vec::new();
        strings(&redacted, &mut values);
        for secret in &checked {
            assert!(values.iter().all(|v| !v.contains(secret.as_str())), "secret {secret:?} left in {serialized}");
        }
    }
});
