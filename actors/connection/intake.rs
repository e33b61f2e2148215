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
//!   user asked for it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::config::ToolFilter;
use crate::protocol::json_kind;
use crate::protocol::schema::ToolContract;

/// The tools of one complete listing, judged.
#[derive(Debug, Default)]
pub(super) struct ToolIntake {
    pub(super) tools: Vec<Tool>,
    /// What calls to each tool are checked against, by the server's tool name.
    pub(super) contracts: HashMap<String, Arc<ToolContract>>,
    /// One sentence per tool left out or changed.
    pub(super) warnings: Vec<String>,
}

impl ToolIntake {
    pub(super) fn judge(raw: Vec<Box<RawValue>>, filter: &ToolFilter) -> ToolIntake {
        let mut intake = ToolIntake::default();
        let mut seen = HashSet::new();
        for (index, item) in raw.into_iter().enumerate() {
            let position = index + 1;
            let ReadTool { tool, repairs, task_required } = match read_tool(&item) {
                Ok(read) => read,
                Err(Unreadable { name, problem }) => {
                    let who = name.map_or(format!("tool #{position}"), |name| format!("tool `{name}` (#{position})"));
                    intake.warnings.push(format!("{who} was left out: {problem}"));
                    continue;
                }
            };
            drop(item);
            let name = tool.name.to_string();
            intake.warnings.extend(repairs.into_iter().map(|repair| format!("tool `{name}`: {repair}")));
            if name.is_empty() {
                intake.warnings.push(format!("tool #{position} has an empty name and was left out"));
                continue;
            }
            if !seen.insert(name.clone()) {
                intake.warnings.push(format!("tool `{name}` is listed more than once; the first one is kept, #{position} was left out"));
                continue;
            }
            if !filter.permits(&name) {
                continue;
            }
            intake.contracts.insert(name, Arc::new(ToolContract::of(&tool, task_required)));
            intake.tools.push(tool);
        }
        intake
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
fn read_tool(raw: &RawValue) -> Result<ReadTool, Unreadable> {
    let task_required = task_required(raw);
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
            let what = other.map_or("missing", json_kind);
            repairs.push(format!("its inputSchema is {what}, not an object; it is kept, and its arguments are not checked"));
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

/// `execution.taskSupport = "required"` (2025-11-25 tasks), which
/// `rmcp::model::Tool` does not keep.
fn task_required(raw: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct Extras {
        #[serde(default)]
        execution: Value,
    }
    serde_json::from_str::<Extras>(raw.get())
        .is_ok_and(|extras| extras.execution.pointer("/taskSupport").and_then(Value::as_str) == Some("required"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(tools: &[&str]) -> ToolIntake {
        let raw = tools.iter().map(|t| RawValue::from_string(t.to_string()).unwrap()).collect();
        ToolIntake::judge(raw, &ToolFilter::default())
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
        let names: Vec<_> = intake.tools.iter().map(|t| t.name.to_string()).collect();
        assert_eq!(names, ["ok", "no_schema", "null_schema", "text_schema"]);
        let warnings = intake.warnings.join("\n");
        for expected in [
            "tool `no_schema`: its inputSchema is missing",
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
}
