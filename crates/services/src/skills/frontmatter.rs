//! A `SKILL.md`'s YAML frontmatter: found, parsed and compared with the
//! frontmatter its skill entry carries.

use rmcp::model::JsonObject;
use serde_json::Value;

/// The frontmatter block and the body after it: the file starts with a
/// `---` line and the block ends at the next `---` (or `...`) line.
/// `None` when the file has no such block.
pub fn split(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = rest.strip_prefix("---\r\n").or_else(|| rest.strip_prefix("---\n"))?;
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        if bare == "---" || bare == "..." {
            return Some((&rest[..at], &rest[at + line.len()..]));
        }
        at += line.len();
    }
    None
}

/// Compares the YAML `yaml` with `listed`, field by field; the error names
/// the fields that differ (or says why the YAML cannot be read).
pub fn compare(yaml: &str, listed: &JsonObject) -> Result<(), String> {
    let parsed: Value = serde_yaml::from_str(yaml).map_err(|e| format!("its YAML cannot be read: {e}"))?;
    let Value::Object(file) = parsed else { return Err("its YAML is not a mapping".into()) };
    let mut differing: Vec<&str> = file.keys().chain(listed.keys()).map(String::as_str).collect();
    differing.sort_unstable();
    differing.dedup();
    differing.retain(|field| !same(file.get(*field).unwrap_or(&Value::Null), listed.get(*field).unwrap_or(&Value::Null)));
    match differing.as_slice() {
        [] => Ok(()),
        fields => Err(format!("field(s) {} differ", fields.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", "))),
    }
}

/// JSON equality where numbers compare by value (YAML `1.0` and JSON `1`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(key, value)| y.get(key).is_some_and(|other| same(value, other)))
        }
        _ => a == b,
    }
}
