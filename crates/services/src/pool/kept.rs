//! A listed tool as the catalog keeps it ([`KeptTool`]): its schemas as
//! compact JSON text, parsed only when a whole rmcp [`Tool`] is asked for,
//! and written straight from the text when the tool is serialized.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock};

use rmcp::model::{JsonObject, Tool};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::protocol::schema::parse_schema;

/// A listed tool as the catalog keeps it: rmcp's [`Tool`] whose schemas
/// stay compact JSON text until a [`Tool`] is asked for.
///
/// A parsed schema costs 10 to 20 times its text (a `serde_json::Map` is a
/// B-tree of mostly empty nodes), so a catalog of parsed tools costs many
/// times its listing; the text is parsed again each time [`KeptTool::tool`]
/// hands a tool out, and nothing parsed stays behind. Serializing a kept
/// tool writes the tool MCP lists, its schemas copied from the text.
/// Cloning one allocates nothing: its parts are shared.
#[derive(Debug, Clone)]
pub struct KeptTool {
    /// The tool with one shared empty `inputSchema` and no `outputSchema`;
    /// behind a pointer, as maps keep many kept tools inline in half-empty nodes.
    head: Arc<Tool>,
    input_schema: Arc<str>,
    output_schema: Option<Arc<str>>,
}

/// The empty schema every kept tool's head shares.
static NO_SCHEMA: LazyLock<Arc<JsonObject>> = LazyLock::new(Default::default);

impl KeptTool {
    /// Keeps `tool` with the texts of its schemas (as `serde_json` writes
    /// the tool's own `input_schema` and `output_schema`; equal texts may
    /// share one allocation).
    pub fn new(mut tool: Tool, input_schema: Arc<str>, output_schema: Option<Arc<str>>) -> KeptTool {
        tool.input_schema = NO_SCHEMA.clone();
        tool.output_schema = None;
        KeptTool { head: Arc::new(tool), input_schema, output_schema }
    }

    /// Keeps a whole `tool`, writing its schemas as text (none shared).
    pub fn of(tool: Tool) -> KeptTool {
        let text = |schema: &JsonObject| Arc::from(serde_json::to_string(schema).unwrap_or_else(|_| "{}".into()));
        let input = text(&tool.input_schema);
        let output = tool.output_schema.as_deref().map(text);
        KeptTool::new(tool, input, output)
    }

    /// The tool's name on its server.
    pub fn name(&self) -> &str {
        &self.head.name
    }

    /// The tool but its schemas: its `input_schema` here is empty and its
    /// `output_schema` `None` (the schemas are the texts).
    pub fn head(&self) -> &Tool {
        &self.head
    }

    /// The `inputSchema` as compact JSON text.
    pub fn input_schema_text(&self) -> &Arc<str> {
        &self.input_schema
    }

    /// The `outputSchema` as compact JSON text, if the tool has one.
    pub fn output_schema_text(&self) -> Option<&Arc<str>> {
        self.output_schema.as_ref()
    }

    /// The whole tool, its schemas parsed afresh.
    pub fn tool(&self) -> Tool {
        self.tool_with(&mut ParsedSchemas::default())
    }

    /// The whole tool, its schemas parsed once per text in `parsed`.
    pub fn tool_with(&self, parsed: &mut ParsedSchemas) -> Tool {
        let mut tool = (*self.head).clone();
        tool.input_schema = parsed.parse(&self.input_schema);
        tool.output_schema = self.output_schema.as_ref().map(|text| parsed.parse(text));
        tool
    }

    /// The fields MCP's `Tool` has, the schemas borrowed as raw text: what
    /// this tool serializes as, for a front to change before it is written.
    pub fn fields(&self) -> ToolFields<'_> {
        let mut fields: BTreeMap<String, Field<'_>> = match serde_json::to_value(&*self.head) {
            Ok(Value::Object(map)) => map.into_iter().map(|(key, value)| (key, Field::Value(value))).collect(),
            _ => BTreeMap::new(),
        };
        fields.insert("inputSchema".into(), Field::of_text(&self.input_schema));
        match &self.output_schema {
            Some(text) => fields.insert("outputSchema".into(), Field::of_text(text)),
            None => fields.remove("outputSchema"),
        };
        ToolFields { fields }
    }
}

impl Serialize for KeptTool {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.fields().serialize(serializer)
    }
}

/// Reads a whole tool, then keeps it ([`KeptTool::of`]): its parsed
/// schemas live only while it is read.
impl<'de> Deserialize<'de> for KeptTool {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<KeptTool, D::Error> {
        Tool::deserialize(deserializer).map(KeptTool::of)
    }
}

/// A kept tool's fields in name order (as a parsed tool's `Value` writes
/// them), ready to serialize; [`ToolFields::set`] adds or replaces one.
pub struct ToolFields<'a> {
    fields: BTreeMap<String, Field<'a>>,
}

impl ToolFields<'_> {
    /// Sets field `key` to `value`.
    pub fn set(&mut self, key: &str, value: Value) {
        self.fields.insert(key.to_string(), Field::Value(value));
    }
}

impl Serialize for ToolFields<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(&self.fields)
    }
}

/// One field: a value, or a schema's text written as it is.
#[derive(Serialize)]
#[serde(untagged)]
enum Field<'a> {
    Value(Value),
    Raw(&'a RawValue),
}

impl<'a> Field<'a> {
    /// A schema's text, checked to be one JSON value (it always is: it was
    /// written by `serde_json`); text that is not is parsed as a schema.
    fn of_text(text: &'a str) -> Field<'a> {
        match serde_json::from_str::<&RawValue>(text) {
            Ok(raw) => Field::Raw(raw),
            Err(_) => Field::Value(Value::Object(parse_schema(text))),
        }
    }
}

/// Schemas parsed while many kept tools are handed out at once: tools
/// whose schemas have the same text share one parsed schema, as they did
/// when listed.
#[derive(Default)]
pub struct ParsedSchemas {
    by_text: HashMap<Arc<str>, Arc<JsonObject>>,
}

impl ParsedSchemas {
    fn parse(&mut self, text: &Arc<str>) -> Arc<JsonObject> {
        self.by_text.entry(text.clone()).or_insert_with(|| Arc::new(parse_schema(text))).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn whole() -> Tool {
        serde_json::from_value(json!({
            "name": "t", "description": "d", "annotations": {"readOnlyHint": true},
            "inputSchema": {"type": "object", "properties": {"x": {"type": "number", "minimum": 1.5}}},
            "outputSchema": {"type": "object"}
        }))
        .unwrap()
    }

    #[test]
    fn a_kept_tool_writes_what_the_whole_tool_writes() {
        let tool = whole();
        let kept = KeptTool::of(tool.clone());
        assert_eq!(serde_json::to_string(&kept).unwrap(), serde_json::to_string(&json!(tool)).unwrap());
        assert_eq!(json!(kept), json!(tool));
        let read: KeptTool = serde_json::from_value(json!(tool)).unwrap();
        assert_eq!(read.tool(), tool);
        let mut bare = tool.clone();
        bare.output_schema = None;
        let kept = KeptTool::of(bare.clone());
        let mut fields = kept.fields();
        fields.set("name", json!("served"));
        let mut expected = json!(bare);
        expected["name"] = json!("served");
        assert_eq!(json!(fields), expected);
    }
}
