//! Taking a server's listed tools in: each tool is judged alone, so one bad
//! tool never takes its server's other tools down, and no tool is lost
//! without a warning.
//!
//! - a tool whose `inputSchema` is missing, `null` or not an object is kept
//!   with the schema `{"type": "object"}` (its arguments are then checked
//!   for being an object only); an unusable `outputSchema` is dropped the
//!   same way; both are warned about;
//! - a tool that still cannot be read (a name that is not a string, ...) or
//!   has an empty name is left out with a warning;
//! - a name listed twice: the first tool keeps it, the others are left out
//!   with a warning;
//! - tools excluded by the server's allow/deny lists leave silently: the
//!   user asked for it;
//! - a tool's schemas are kept as compact JSON text ([`KeptTool`]): a
//!   parsed schema costs 10 to 20 times its text; tools whose schemas have
//!   the same text share one copy, as servers with many tools often repeat
//!   the same argument shapes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rmcp::model::{JsonObject, Tool};

use crate::pool::KeptTool;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::config::ToolFilter;
use crate::protocol::json_kind;
use crate::protocol::schema::ToolContract;

/// The tools of one listing, judged page by page as the pages come.
#[derive(Default)]
pub(super) struct ToolIntake {
    pub(super) tools: Vec<KeptTool>,
    /// What calls to each tool are checked against, by the server's tool name.
    pub(super) contracts: HashMap<String, Arc<ToolContract>>,
    /// One sentence per tool left out or changed.
    pub(super) warnings: Vec<String>,
    /// Tools seen so far, all pages together (for their positions).
    taken: usize,
    names: HashSet<String>,
    schemas: SharedSchemas,
}

impl ToolIntake {
    /// Judges the tools of one page, read straight from the page's text.
    pub(super) fn take_page(&mut self, items: Vec<&RawValue>, filter: &ToolFilter) {
        for item in items {
            self.taken += 1;
            self.take_one(item, filter);
        }
    }

    fn take_one(&mut self, item: &RawValue, filter: &ToolFilter) {
        let position = self.taken;
        let extras = Extras::of(item);
        let ReadTool { tool, repairs, task_required } = match read_tool(item, &extras) {
            Ok(read) => read,
            Err(Unreadable { name, problem }) => {
                let who = name.map_or(format!("tool #{position}"), |name| format!("tool `{name}` (#{position})"));
                return self.warnings.push(format!("{who} was left out: {problem}"));
            }
        };
        let name = tool.name.to_string();
        self.warnings.extend(repairs.into_iter().map(|repair| format!("tool `{name}`: {repair}")));
        if name.is_empty() {
            return self.warnings.push(format!("tool #{position} has an empty name and was left out"));
        }
        if !self.names.insert(name.clone()) {
            let warning = format!("tool `{name}` is listed more than once; the first one is kept, #{position} was left out");
            return self.warnings.push(warning);
        }
        if filter.permits(&name) {
            let kept = self.schemas.keep(tool);
            let contract = ToolContract::new(Some(kept.input_schema_text().clone()), kept.output_schema_text().cloned(), task_required);
            self.contracts.insert(name, Arc::new(contract));
            self.tools.push(kept);
        }
    }
}

struct Unreadable {
    name: Option<String>,
    problem: String,
}

/// A tool read from its listing.
struct ReadTool {
    tool: Tool,
    /// What had to be repaired to read it, one sentence each.
    repairs: Vec<String>,
    task_required: bool,
}

/// Reads one listed tool: straight from its text when it is well formed,
/// else through a repair of its schemas.
fn read_tool(raw: &RawValue, extras: &Extras) -> Result<ReadTool, Unreadable> {
    let task_required = extras.task_required();
    if let Ok(tool) = serde_json::from_str::<Tool>(raw.get()) {
        return Ok(ReadTool { tool, repairs: Vec::new(), task_required });
    }
    let mut value: Value = serde_json::from_str(raw.get()).map_err(|e| Unreadable { name: None, problem: e.to_string() })?;
    let Some(fields) = value.as_object_mut() else {
        return Err(Unreadable { name: None, problem: format!("it is {}, not an object", json_kind(&value)) });
    };
    let name = fields.get("name").and_then(Value::as_str).map(str::to_string);
    let mut repairs = Vec::new();
    match fields.get("inputSchema") {
        Some(Value::Object(_)) => {}
        other => {
            let problem = match other {
                None => "it has no inputSchema".to_string(),
                Some(other) => format!("its inputSchema is {}, not an object", json_kind(other)),
            };
            repairs.push(format!("{problem}; it is kept, and its arguments are not checked"));
            fields.insert("inputSchema".into(), serde_json::json!({ "type": "object" }));
        }
    }
    match fields.get("outputSchema") {
        None | Some(Value::Object(_)) => {}
        Some(other) => {
            repairs.push(format!("its outputSchema is {}, not an object; its results are not checked", json_kind(other)));
            fields.remove("outputSchema");
        }
    }
    match serde_json::from_value::<Tool>(value) {
        Ok(tool) => Ok(ReadTool { tool, repairs, task_required }),
        Err(error) => Err(Unreadable { name, problem: format!("it is not a valid tool: {error}") }),
    }
}

/// Schema texts already kept, while one listing is taken in.
#[derive(Default)]
struct SharedSchemas {
    texts: HashSet<Arc<str>>,
}

impl SharedSchemas {
    /// Keeps `tool` with its schemas as text, sharing a text already kept.
    fn keep(&mut self, tool: Tool) -> KeptTool {
        let input = self.text_of(&tool.input_schema);
        let output = tool.output_schema.as_deref().map(|schema| self.text_of(schema));
        KeptTool::new(tool, input, output)
    }

    fn text_of(&mut self, schema: &JsonObject) -> Arc<str> {
        let text = serde_json::to_string(schema).unwrap_or_default();
        if let Some(shared) = self.texts.get(text.as_str()) {
            return shared.clone();
        }
        let text: Arc<str> = text.into();
        self.texts.insert(text.clone());
        text
    }
}

/// What a listed tool's text tells besides `rmcp::model::Tool`, read in
/// one pass without copying: its task support.
#[derive(Default, serde::Deserialize)]
struct Extras<'a> {
    #[serde(borrow)]
    execution: Option<&'a RawValue>,
}

impl<'a> Extras<'a> {
    fn of(raw: &'a RawValue) -> Extras<'a> {
        serde_json::from_str(raw.get()).unwrap_or_default()
    }

    /// `execution.taskSupport = "required"` (2025-11-25 tasks).
    fn task_required(&self) -> bool {
        #[derive(serde::Deserialize)]
        struct Execution<'a> {
            #[serde(borrow, rename = "taskSupport")]
            task_support: Option<&'a str>,
        }
        let execution = self.execution.and_then(|raw| serde_json::from_str::<Execution>(raw.get()).ok());
        execution.is_some_and(|e| e.task_support == Some("required"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(tools: &[&str]) -> ToolIntake {
        let raw: Vec<Box<RawValue>> = tools.iter().map(|t| RawValue::from_string(t.to_string()).unwrap()).collect();
        let mut intake = ToolIntake::default();
        intake.take_page(raw.iter().map(|r| &**r).collect(), &ToolFilter::default());
        intake
    }

    #[test]
    fn usable_tools_are_kept_and_every_loss_is_warned() {
        let intake = judge(&[
            r#"{"name":"ok","inputSchema":{"type":"object"}}"#,
            r#"{"name":"no_schema"}"#,
            r#"{"name":"null_schema","inputSchema":null}"#,
            r#"{"name":"text_schema","inputSchema":"x","outputSchema":5}"#,
            r#"{"name":"ok","inputSchema":{"type":"object"}}"#,
            r#"{"name":"","inputSchema":{"type":"object"}}"#,
            r#"{"name":7,"inputSchema":{}}"#,
            r#""a string""#,
        ]);
        let names: Vec<_> = intake.tools.iter().map(|t| t.name().to_string()).collect();
        assert_eq!(names, ["ok", "no_schema", "null_schema", "text_schema"]);
        let warnings = intake.warnings.join("\n");
        for expected in [
            "tool `no_schema`: it has no inputSchema; it is kept",
            "tool `null_schema`: its inputSchema is null",
            "tool `text_schema`: its inputSchema is a string",
            "tool `text_schema`: its outputSchema is a number",
            "tool `ok` is listed more than once; the first one is kept, #5 was left out",
            "tool #6 has an empty name and was left out",
            "tool #7 was left out: it is not a valid tool",
            "tool #8 was left out: it is a string, not an object",
        ] {
            assert!(warnings.contains(expected), "missing {expected:?} in:\n{warnings}");
        }
        assert_eq!(intake.contracts.len(), 4);
    }

    #[test]
    fn tools_with_the_same_schema_text_share_one_kept_text() {
        let intake = judge(&[
            r#"{"name":"a","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}}}"#,
            r#"{"name":"b","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}}}"#,
            r#"{"name":"c","inputSchema":{"type":"object"}}"#,
        ]);
        let [a, b, c] = [0, 1, 2].map(|i| intake.tools[i].input_schema_text());
        assert!(Arc::ptr_eq(a, b));
        assert!(!Arc::ptr_eq(a, c));
        assert_eq!(&**c, r#"{"type":"object"}"#);
        let contract = &intake.contracts["a"];
        assert_eq!(contract.check_arguments(&serde_json::json!({"x": 1})), Err("argument `x`: expected string, got a number (1)".into()));
    }
}
