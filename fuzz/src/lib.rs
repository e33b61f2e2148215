//! Helpers shared by the fuzz targets.

use arbitrary::{Result, Unstructured};
use serde_json::{Map, Number, Value};

/// Keys and strings of JSON Schema and MCP, so that generated values hit
/// the checkers' branches instead of only unknown keys.
const WORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "$ref",
    "$defs",
    "definitions",
    "#",
    "#/$defs/a",
    "#/definitions/a",
    "a",
    "object",
    "array",
    "string",
    "number",
    "integer",
    "boolean",
    "null",
    "format",
    "pattern",
];

/// An arbitrary JSON value, at most `depth` levels deep, biased towards
/// the words above.
pub fn json(u: &mut Unstructured<'_>, depth: usize) -> Result<Value> {
    let kinds = if depth == 0 { 5 } else { 7 };
    Ok(match u.choose_index(kinds)? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::Number(number(u)?),
        3 | 4 => Value::String(word(u)?),
        5 => Value::Array((0..u.int_in_range(0..=4)?).map(|_| json(u, depth - 1)).collect::<Result<_>>()?),
        _ => Value::Object(object(u, depth - 1)?),
    })
}

/// An arbitrary JSON object, at most `depth` levels deep below it.
pub fn object(u: &mut Unstructured<'_>, depth: usize) -> Result<Map<String, Value>> {
    let mut map = Map::new();
    for _ in 0..u.int_in_range(0..=5)? {
        map.insert(word(u)?, json(u, depth)?);
    }
    Ok(map)
}

fn word(u: &mut Unstructured<'_>) -> Result<String> {
    match u.ratio(3, 4)? {
        true => Ok(u.choose(WORDS)?.to_string()),
        false => u.arbitrary(),
    }
}

fn number(u: &mut Unstructured<'_>) -> Result<Number> {
    Ok(match u.choose_index(3)? {
        0 => Number::from(u.int_in_range(-3i64..=3)?),
        1 => Number::from(u.arbitrary::<i64>()?),
        _ => Number::from_f64(u.arbitrary()?).unwrap_or_else(|| Number::from(0)),
    })
}
