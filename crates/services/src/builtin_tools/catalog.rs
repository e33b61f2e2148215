//! The built-in tools as the model sees them: names, descriptions written
//! for a model, input schemas and annotations (which the confirmation
//! policy reads: `readOnlyHint` tools run without asking by default).

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::json;

use super::BuiltinSettings;

pub const READ_FILE: &str = "read_file";
pub const WRITE_FILE: &str = "write_file";
pub const LIST_DIRECTORY: &str = "list_directory";
pub const RUN_COMMAND: &str = "run_command";

fn schema(properties: serde_json::Value, required: &[&str]) -> JsonObject {
    let schema = json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false});
    schema.as_object().cloned().unwrap_or_default()
}

fn tool(name: &'static str, title: &str, description: String, input: JsonObject, annotations: ToolAnnotations) -> Tool {
    let mut annotations = annotations;
    annotations.title = Some(title.into());
    Tool::new(name, description, input).with_annotations(annotations)
}

pub fn tools(settings: &BuiltinSettings) -> Vec<Tool> {
    let cwd = settings.cwd.display();
    let path = |what: &str| json!({"type": "string", "description": format!("{what}: absolute, or relative to {cwd}")});
    vec![
        tool(
            READ_FILE,
            "Read file",
            format!(
                "Reads a UTF-8 text file and returns its lines numbered from 1, like `cat -n`. Reads at most {} lines from `offset` \
                 (default: the whole file up to that many); for a longer file, call again with the next offset, which the answer names. \
                 Lines longer than {} bytes are cut. Binary files are refused. Use list_directory to find files.",
                settings.read_lines, settings.max_line_bytes
            ),
            schema(
                json!({
                    "path": path("The file to read"),
                    "offset": {"type": "integer", "minimum": 1, "description": "The first line to read, counting from 1 (default 1)"},
                    "limit": {"type": "integer", "minimum": 1, "description": format!("How many lines to read at most (default and maximum {})", settings.read_lines)},
                }),
                &["path"],
            ),
            ToolAnnotations::new().read_only(true).open_world(false),
        ),
        tool(
            WRITE_FILE,
            "Write file",
            "Writes a text file whole: creates it (and its missing parent directories) or replaces its entire content. \
             The write is atomic: readers see the old content or the new, never a mix. To change part of a file, read it first \
             and write back the complete new content."
                .into(),
            schema(
                json!({
                    "path": path("The file to write"),
                    "content": {"type": "string", "description": "The complete new content of the file"},
                }),
                &["path", "content"],
            ),
            ToolAnnotations::new().read_only(false).destructive(true).open_world(false),
        ),
        tool(
            LIST_DIRECTORY,
            "List directory",
            format!(
                "Lists the entries of a directory, sorted by name, one per line; directories end with `/`. \
                 Shows at most {} entries. Not recursive: list a subdirectory to look inside it.",
                settings.max_entries
            ),
            schema(json!({"path": path("The directory to list (\".\" for the working directory)")}), &["path"]),
            ToolAnnotations::new().read_only(true).open_world(false),
        ),
        tool(
            RUN_COMMAND,
            "Run command",
            format!(
                "Runs a shell command with `sh -c` in {cwd} (or `cwd`) and returns its output (stdout and stderr together) and exit code. \
                 stdin is empty: the command cannot ask questions, so pass flags such as `-y`. It is ended after `timeout_secs` \
                 (default {}, at most {}); background processes it starts are ended when it finishes. Output over {} bytes keeps \
                 its beginning and end. A non-zero exit code is reported as an error.",
                settings.command_timeout.as_secs(),
                settings.max_command_timeout.as_secs(),
                settings.max_output_bytes
            ),
            schema(
                json!({
                    "command": {"type": "string", "description": "The shell command line, e.g. `cargo test 2>&1 | tail -20`"},
                    "cwd": path("The directory to run it in (default: the working directory)"),
                    "timeout_secs": {"type": "integer", "minimum": 1, "maximum": settings.max_command_timeout.as_secs(), "description": "Seconds before the command is ended"},
                }),
                &["command"],
            ),
            ToolAnnotations::new().read_only(false).destructive(true).open_world(true),
        ),
    ]
}
