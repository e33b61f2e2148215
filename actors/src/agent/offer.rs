//! Which tools a model request offers, and how their schemas are adapted.
//!
//! The catalog's tools are offered under their exposed names
//! (`mcp__{server}__{tool}`), which already fit every provider's name rule
//! (`[A-Za-z0-9_-]{1,64}`, see [`crate::naming`]). Schemas are adapted to
//! what both providers accept, without changing what they allow at the
//! levels below the root:
//! - the root is `"type": "object"` with `properties` (added when missing);
//! - root-level `oneOf`/`anyOf`/`allOf`/`not`/`enum`/`const`, which neither
//!   API accepts, are dropped, as are `$schema` and `$id`, which some
//!   OpenAI-compatible servers refuse. Arguments are still checked against
//!   the server's own schema before a call, so the model hears about a
//!   constraint it could not see.
//!
//! When the catalog is larger than the [`ToolBudget`] (tools or schema
//! bytes), the model gets [`SEARCH_TOOL`] plus the tools it used or found
//! most recently, as many as fit, instead of every schema.

use std::collections::HashMap;

use rmcp::model::JsonObject;
use serde_json::{json, Value};

use crate::llm::ToolSpec;
use crate::ToolEntry;

/// The name of the tool that searches the catalog when not every tool is offered.
pub const SEARCH_TOOL: &str = "search_tools";

/// Beyond these, the model searches the catalog instead of seeing it all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolBudget {
    pub max_tools: usize,
    /// Bytes of the offered tools' names, descriptions and schemas as JSON.
    pub max_schema_bytes: usize,
}

impl Default for ToolBudget {
    fn default() -> Self {
        ToolBudget { max_tools: 64, max_schema_bytes: 64 * 1024 }
    }
}

/// The tools of one model request, and the catalog they were picked from.
#[derive(Debug, Clone, Default)]
pub struct Offer {
    pub specs: Vec<ToolSpec>,
    /// Every tool of the catalog by exposed name, offered or not.
    catalog: HashMap<String, ToolEntry>,
    /// True when the catalog did not fit and [`SEARCH_TOOL`] is offered.
    pub searching: bool,
}

impl Offer {
    /// `recent`: exposed names the model used or found, most recent last;
    /// they are offered first when the catalog does not fit.
    pub fn build(catalog: Vec<ToolEntry>, budget: ToolBudget, recent: &[String]) -> Offer {
        let all: Vec<ToolSpec> = catalog.iter().map(spec_of).collect();
        let bytes: usize = all.iter().map(spec_bytes).sum();
        let catalog: HashMap<String, ToolEntry> = catalog.into_iter().map(|entry| (entry.name.clone(), entry)).collect();
        if all.len() <= budget.max_tools && bytes <= budget.max_schema_bytes {
            return Offer { specs: all, catalog, searching: false };
        }
        let search = search_spec(catalog.len());
        let mut used = spec_bytes(&search);
        let mut specs = vec![search];
        for name in recent.iter().rev() {
            let Some(spec) = catalog.get(name).map(spec_of) else { continue };
            if specs.iter().any(|offered| offered.name == spec.name) {
                continue;
            }
            if specs.len() >= budget.max_tools || used + spec_bytes(&spec) > budget.max_schema_bytes {
                break;
            }
            used += spec_bytes(&spec);
            specs.push(spec);
        }
        Offer { specs, catalog, searching: true }
    }

    pub fn entry(&self, name: &str) -> Option<&ToolEntry> {
        self.catalog.get(name)
    }

    /// Every catalog entry, in no particular order.
    pub fn catalog(&self) -> impl Iterator<Item = &ToolEntry> {
        self.catalog.values()
    }
}

/// A catalog tool as the model sees it.
pub fn spec_of(entry: &ToolEntry) -> ToolSpec {
    let tool = &entry.tool;
    let description = tool.description.as_deref().map(str::to_owned).or_else(|| tool.title.clone()).unwrap_or_default();
    ToolSpec { name: entry.name.clone(), description, input_schema: adapt_schema(&tool.input_schema) }
}

/// A tool's input schema in the shape both providers accept (see the module docs).
pub fn adapt_schema(schema: &JsonObject) -> JsonObject {
    let mut adapted = schema.clone();
    for keyword in ["oneOf", "anyOf", "allOf", "not", "enum", "const", "$schema", "$id"] {
        adapted.remove(keyword);
    }
    adapted.insert("type".into(), Value::from("object"));
    if !adapted.get("properties").is_some_and(Value::is_object) {
        adapted.insert("properties".into(), json!({}));
    }
    adapted
}

fn spec_bytes(spec: &ToolSpec) -> usize {
    spec.name.len() + spec.description.len() + serde_json::to_string(&spec.input_schema).map_or(0, |s| s.len())
}

fn search_spec(catalog_size: usize) -> ToolSpec {
    let schema = json!({
        "type": "object",
        "properties": {
            "query": { "type": "string", "description": "What the tool should do, in a few words (\"read a file\", \"github issues\") or part of its name." },
            "limit": { "type": "integer", "minimum": 1, "maximum": 20, "description": "How many tools to return (default 8)." }
        },
        "required": ["query"]
    });
    ToolSpec {
        name: SEARCH_TOOL.into(),
        description: format!(
            "Search the {catalog_size} available tools by what they do. Only some tools are offered directly; the tools this returns can be \
             called by their exact name from the next step on."
        ),
        input_schema: schema.as_object().cloned().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::Tool;
    use std::sync::Arc;

    fn entry(server: &str, tool: &str, schema: Value) -> ToolEntry {
        let tool = Tool::new(tool.to_string(), format!("{tool} does things"), Arc::new(schema.as_object().cloned().unwrap()));
        ToolEntry { name: crate::naming::exposed_name(server, &tool.name), server: server.into(), tool }
    }

    #[test]
    fn schemas_get_an_object_root_without_root_combinators() {
        let schema = json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
                            "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}});
        let adapted = adapt_schema(schema.as_object().unwrap());
        assert_eq!(
            Value::Object(adapted),
            json!({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}})
        );
        assert_eq!(Value::Object(adapt_schema(&JsonObject::new())), json!({"type": "object", "properties": {}}));
    }

    #[test]
    fn a_catalog_over_budget_offers_search_and_the_recent_tools() {
        let catalog: Vec<ToolEntry> = (0..10).map(|i| entry("s", &format!("t{i}"), json!({"type": "object"}))).collect();
        let fits = Offer::build(catalog.clone(), ToolBudget { max_tools: 10, max_schema_bytes: 100_000 }, &[]);
        assert!(!fits.searching);
        assert_eq!(fits.specs.len(), 10);
        let recent = vec!["mcp__s__t3".to_string(), "mcp__s__t7".to_string(), "mcp__gone__x".to_string()];
        let over = Offer::build(catalog, ToolBudget { max_tools: 3, max_schema_bytes: 100_000 }, &recent);
        assert!(over.searching);
        let names: Vec<&str> = over.specs.iter().map(|spec| spec.name.as_str()).collect();
        assert_eq!(names, [SEARCH_TOOL, "mcp__s__t7", "mcp__s__t3"]);
        assert!(over.entry("mcp__s__t9").is_some(), "tools not offered can still be called once found");
    }
}
