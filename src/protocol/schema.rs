//! Tool schemas, compiled once per listing: arguments are checked against
//! `inputSchema` before a call is sent, `structuredContent` against
//! `outputSchema` when the answer comes.
//!
//! A schema that does not compile (a server's bug) is not enforced: the
//! call goes through and a warning names the tool, so a sloppy schema never
//! makes a working tool unusable.

use jsonschema::Validator;
use serde_json::Value;

/// What the client checks and needs to know about one tool.
#[derive(Debug, Default)]
pub struct ToolContract {
    input: Option<Validator>,
    output: Option<Validator>,
    /// The tool must be called as a task (`execution.taskSupport = "required"`).
    pub task_required: bool,
}

impl ToolContract {
    /// Compiles the schemas of a tool as listed by its server.
    pub fn of(server: &str, tool: &rmcp::model::Tool, task_required: bool) -> ToolContract {
        let compile = |which: &str, schema: Value| match jsonschema::validator_for(&schema) {
            Ok(validator) => Some(validator),
            Err(error) => {
                tracing::warn!(server, tool = %tool.name, "its {which} is not a valid JSON schema ({error}); it is not enforced");
                None
            }
        };
        let input = compile("inputSchema", Value::Object((*tool.input_schema).clone()));
        let output = tool.output_schema.as_ref().and_then(|schema| compile("outputSchema", Value::Object((**schema).clone())));
        ToolContract { input, output, task_required }
    }

    /// Checks a call's arguments; the error names the first offending field.
    pub fn check_arguments(&self, arguments: &Value) -> Result<(), String> {
        check(self.input.as_ref(), arguments, "argument")
    }

    /// Checks a result's `structuredContent`; a tool with an `outputSchema`
    /// must send one unless the result is an error.
    pub fn check_output(&self, structured: Option<&Value>, is_error: bool) -> Result<(), String> {
        match (&self.output, structured) {
            (None, _) => Ok(()),
            (Some(_), None) if is_error => Ok(()),
            (Some(_), None) => Err("the tool has an outputSchema but its result has no structuredContent".into()),
            (Some(validator), Some(value)) => check(Some(validator), value, "structuredContent field"),
        }
    }
}

fn check(validator: Option<&Validator>, instance: &Value, what: &str) -> Result<(), String> {
    let Some(validator) = validator else { return Ok(()) };
    let Some(error) = validator.iter_errors(instance).next() else { return Ok(()) };
    let path = error.instance_path().to_string();
    let field = path.trim_start_matches('/').replace('/', ".");
    Err(match field.is_empty() {
        true => error.to_string(),
        false => format!("{what} `{field}`: {error}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(input: Value, output: Option<Value>) -> rmcp::model::Tool {
        let mut tool: rmcp::model::Tool = serde_json::from_value(json!({"name": "t", "inputSchema": input})).unwrap();
        tool.output_schema = output.map(|o| std::sync::Arc::new(o.as_object().unwrap().clone()));
        tool
    }

    #[test]
    fn arguments_are_checked_and_the_field_is_named() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]});
        let contract = ToolContract::of("s", &tool(schema, None), false);
        assert_eq!(contract.check_arguments(&json!({"a": 1, "b": 2})), Ok(()));
        let wrong = contract.check_arguments(&json!({"a": 1, "b": "2"})).unwrap_err();
        assert!(wrong.starts_with("argument `b`:"), "{wrong}");
        let missing = contract.check_arguments(&json!({"a": 1})).unwrap_err();
        assert!(missing.contains("\"b\" is a required property"), "{missing}");
    }

    #[test]
    fn structured_content_is_checked_against_the_output_schema() {
        let output = json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]});
        let contract = ToolContract::of("s", &tool(json!({"type": "object"}), Some(output)), false);
        assert_eq!(contract.check_output(Some(&json!({"sum": 3})), false), Ok(()));
        assert!(contract.check_output(Some(&json!({"sum": "3"})), false).unwrap_err().contains("`sum`"));
        assert!(contract.check_output(None, false).is_err());
        assert_eq!(contract.check_output(None, true), Ok(()), "an error result need not match");
    }

    #[test]
    fn a_broken_schema_is_not_enforced() {
        let contract = ToolContract::of("s", &tool(json!({"type": "no-such-type"}), None), false);
        assert_eq!(contract.check_arguments(&json!({"anything": 1})), Ok(()));
    }
}
