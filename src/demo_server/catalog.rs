//! The tool catalog: what `tools/list` shows and what `tools/call` accepts.
//!
//! Invariant: [`parse_call`] accepts exactly the listed tools with arguments
//! matching their `inputSchema` (built from the same `args` spec).

use serde_json::{json, Map, Value};

use super::interaction::Ask;
use super::logging::Level;
use super::media::PNG_BASE64;
use super::rpc::ErrorObject;

/// One catalog entry. `args` lists `field: type` pairs, `field?` marking the optional ones.
pub struct ToolSpec {
    pub name: &'static str,
    title: &'static str,
    args: &'static str,
    description: &'static str,
    /// Not listed (nor usable) in the modern era: it needs a legacy feature.
    pub legacy_only: bool,
}

const fn tool(name: &'static str, title: &'static str, args: &'static str, description: &'static str) -> ToolSpec {
    ToolSpec { name, title, args, description, legacy_only: false }
}

const fn legacy_tool(name: &'static str, title: &'static str, args: &'static str, description: &'static str) -> ToolSpec {
    ToolSpec { name, title, args, description, legacy_only: true }
}

/// Largest `big` answer, far above the client's default 16 MiB frame limit.
pub const MAX_BIG_BYTES: u64 = 256 * 1024 * 1024;
const MAX_STEPS: u64 = 10_000;

/// The catalog in `tools/list` order; tools added by `add_tool` follow.
pub const TOOLS: [ToolSpec; 29] = [
    tool("echo", "Echo", "text: string", "Returns `text` unchanged."),
    tool("add", "Add", "a: number, b: number", "Adds `a` and `b`; also as `structuredContent.sum`."),
    tool("sleep", "Sleep", "ms: integer", "Sleeps `ms` milliseconds, then answers."),
    tool("fail", "Fail", "message?: string", "Answers a tool error (`isError: true`)."),
    tool("crash", "Crash", "code?: integer", "Exits the server with `code` (default 1), unanswered."),
    tool("spawn_grandchild", "Spawn a grandchild", "", "Starts `sleep 3600` in the server's process group."),
    tool("garbage", "Garbage", "", "Writes a line that is not JSON to stdout, then answers `ok`."),
    tool("big", "Big answer", "bytes: integer", "Answers `bytes` (at most 256 MiB) `x` characters."),
    tool("cancellations", "Cancellations", "", "Reports every `notifications/cancelled` received so far."),
    tool("stderr", "Write to stderr", "text: string", "Writes `text` as a line to stderr, then answers `ok`."),
    tool("progress", "Progress", "steps: integer, ms: integer", "Sends a progress notification every `ms` for `steps` steps."),
    tool("log", "Log", "level: string, message: string", "Sends `message` as a log notification at `level`, if it passes."),
    tool("sample", "Sample", "prompt: string", "Asks the client's model (sampling/createMessage) and answers its text."),
    tool("elicit", "Elicit (form)", "message: string", "Asks the user for a form (elicitation/create, form mode)."),
    tool("elicit_url", "Elicit (URL)", "url: string, message?: string", "Asks the user to visit `url` (elicitation/create, URL mode)."),
    tool("needs_url", "Needs a URL elicitation", "", "Fails with -32042: a URL elicitation is required."),
    tool("roots", "Roots", "", "Asks the client for its roots (roots/list) and answers their URIs."),
    legacy_tool("ping_client", "Ping the client", "", "Pings the client and answers the round-trip time."),
    legacy_tool("slow_task", "Slow task", "ms: integer", "Sleeps `ms` as a task (must be called with `params.task`)."),
    tool("structured", "Structured sum", "a: number, b: number", "Answers `{sum}` matching its output schema."),
    tool("bad_structured", "Bad structured", "", "Answers structured content that violates its output schema."),
    tool("media", "Media", "", "Answers one content item of each type: text, image, audio, resource link, resource."),
    tool("touch", "Touch", "uri?: string", "Bumps `demo://counter` (or touches `uri`) and notifies its subscribers."),
    tool("add_tool", "Add a tool", "name: string", "Adds a tool `name` that echoes `text`; tools/list_changed follows."),
    tool("add_prompt", "Add a prompt", "name: string", "Adds a prompt `name`; prompts/list_changed follows."),
    tool("add_resource", "Add a resource", "name: string", "Adds `demo://added/NAME`; resources/list_changed follows."),
    tool("received", "Received", "", "Reports the notifications received so far."),
    tool("pause_reading", "Pause reading", "ms: integer", "Answers, then stops reading its input for `ms` ms."),
    tool("close_stdout", "Close stdout", "", "Closes stdout (the client sees EOF) and keeps running, unanswered."),
];

/// The arguments of tools added by `add_tool`.
const ADDED_TOOL_ARGS: &str = "text: string";

impl ToolSpec {
    pub fn json(&self) -> Value {
        let mut tool = tool_json(self.name, self.title, self.args, self.description);
        if let (Value::Object(tool), Value::Object(extras)) = (&mut tool, extras(self.name)) {
            tool.extend(extras);
        }
        tool
    }
}

pub fn added_tool_json(name: &str) -> Value {
    tool_json(name, name, ADDED_TOOL_ARGS, "Returns `text` unchanged (added by `add_tool`).")
}

fn tool_json(name: &str, title: &str, args: &str, description: &str) -> Value {
    let properties: Map<String, Value> = fields(args).map(|(field, kind, _)| (field.to_owned(), json!({ "type": kind }))).collect();
    let required: Vec<&str> = fields(args).filter(|f| f.2).map(|f| f.0).collect();
    json!({
        "name": name,
        "title": title,
        "description": description,
        "inputSchema": {"type": "object", "properties": properties, "required": required},
    })
}

/// What some tools add to their listing: annotations, icons, output schemas, task support.
fn extras(name: &str) -> Value {
    let sum_schema = json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]});
    match name {
        "echo" => json!({
            "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false},
            "icons": [{"src": format!("data:image/png;base64,{PNG_BASE64}"), "mimeType": "image/png", "sizes": ["1x1"]}],
        }),
        "add" => json!({"annotations": {"readOnlyHint": true, "idempotentHint": true}}),
        "crash" => json!({"annotations": {"readOnlyHint": false, "destructiveHint": true}}),
        "structured" | "bad_structured" => json!({ "outputSchema": sum_schema }),
        "slow_task" => json!({"execution": {"taskSupport": "required"}}),
        _ => json!({}),
    }
}

/// The `(field, type, required)` triples of an argument spec such as `"a: number, b?: string"`.
pub fn fields(spec: &str) -> impl Iterator<Item = (&str, &str, bool)> {
    spec.split(", ").filter_map(|f| f.split_once(": ")).map(|(field, kind)| match field.strip_suffix('?') {
        Some(optional) => (optional, kind, false),
        None => (field, kind, true),
    })
}

/// A tool call whose arguments have been checked against its schema.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolCall {
    Echo(String),
    Add(f64, f64),
    Sleep(u64),
    Fail(String),
    Crash(i32),
    SpawnGrandchild,
    Garbage,
    Big(usize),
    Cancellations,
    Stderr(String),
    Progress {
        steps: u64,
        ms: u64,
    },
    Log {
        level: Level,
        message: String,
    },
    /// `sample`, `elicit`, `elicit_url` and `roots`: a question for the client.
    Ask(Ask),
    NeedsUrl,
    PingClient,
    SlowTask(u64),
    Structured(f64, f64),
    BadStructured,
    Media,
    Touch(String),
    Extend(Addition, String),
    Received,
    PauseReading(u64),
    CloseStdout,
}

/// What `add_tool`, `add_prompt` and `add_resource` add.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Addition {
    Tool,
    Prompt,
    Resource,
}

/// The `arguments` of one call, for checked extraction with errors naming tool and field.
struct Args<'a> {
    tool: &'a str,
    map: &'a Map<String, Value>,
}

impl Args<'_> {
    /// `Ok(None)` when absent or null; an error when present with the wrong type.
    fn optional<T>(&self, field: &str, expected: &str, convert: impl Fn(&Value) -> Option<T>) -> Result<Option<T>, ErrorObject> {
        match self.map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => convert(value).map(Some).ok_or_else(|| {
                ErrorObject::invalid_params(format!("tool `{}`: argument `{field}` must be {expected}, got {value}", self.tool))
            }),
        }
    }

    fn required<T>(&self, field: &str, expected: &str, convert: impl Fn(&Value) -> Option<T>) -> Result<T, ErrorObject> {
        self.optional(field, expected, convert)?
            .ok_or_else(|| ErrorObject::invalid_params(format!("tool `{}`: missing required argument `{field}` ({expected})", self.tool)))
    }

    fn string(&self, field: &str) -> Result<String, ErrorObject> {
        self.required(field, "a string", as_string)
    }

    fn number(&self, field: &str) -> Result<f64, ErrorObject> {
        self.required(field, "a number", Value::as_f64)
    }

    fn millis(&self) -> Result<u64, ErrorObject> {
        self.required("ms", "a non-negative integer", Value::as_u64)
    }

    /// A name for something added at run time: non-empty, without `/` or spaces.
    fn name(&self) -> Result<String, ErrorObject> {
        let valid = |v: &Value| v.as_str().filter(|s| !s.is_empty() && !s.contains(['/', ' '])).map(str::to_owned);
        self.required("name", "a non-empty string without `/` or spaces", valid)
    }
}

fn as_string(value: &Value) -> Option<String> {
    value.as_str().map(str::to_owned)
}

/// Validates a call of tool `name` with its `arguments` (as sent) into a
/// [`ToolCall`]; absent `arguments` mean `{}`. `added` are the tools added
/// by `add_tool`, which echo.
pub fn parse_call(name: &str, arguments: &Value, added: &[String]) -> Result<ToolCall, ErrorObject> {
    let empty = Map::new();
    let map = match arguments {
        Value::Null => &empty,
        Value::Object(map) => map,
        other => return Err(ErrorObject::invalid_params(format!("tool `{name}`: `arguments` must be an object, got {other}"))),
    };
    let args = Args { tool: name, map };
    Ok(match name {
        "echo" => ToolCall::Echo(args.string("text")?),
        "add" => ToolCall::Add(args.number("a")?, args.number("b")?),
        "sleep" => ToolCall::Sleep(args.millis()?),
        "fail" => ToolCall::Fail(args.optional("message", "a string", as_string)?.unwrap_or_else(|| "failed as requested".into())),
        "crash" => {
            ToolCall::Crash(args.optional("code", "a 32-bit integer", |v| v.as_i64().and_then(|c| i32::try_from(c).ok()))?.unwrap_or(1))
        }
        "spawn_grandchild" => ToolCall::SpawnGrandchild,
        "garbage" => ToolCall::Garbage,
        "big" => ToolCall::Big(args.required("bytes", "an integer from 0 to 268435456", |v| {
            v.as_u64().filter(|&b| b <= MAX_BIG_BYTES).and_then(|b| usize::try_from(b).ok())
        })?),
        "cancellations" => ToolCall::Cancellations,
        "stderr" => ToolCall::Stderr(args.string("text")?),
        "progress" => ToolCall::Progress {
            steps: args.required("steps", "an integer from 0 to 10000", |v| v.as_u64().filter(|&s| s <= MAX_STEPS))?,
            ms: args.millis()?,
        },
        "log" => ToolCall::Log { level: args.required("level", &Level::expected(), Level::parse)?, message: args.string("message")? },
        "sample" => ToolCall::Ask(Ask::sample(&args.string("prompt")?)),
        "elicit" => ToolCall::Ask(Ask::elicit(&args.string("message")?)),
        "elicit_url" => ToolCall::Ask(Ask::elicit_url(
            &args.string("url")?,
            &args.optional("message", "a string", as_string)?.unwrap_or_else(|| "Please open this page to continue.".into()),
        )),
        "needs_url" => ToolCall::NeedsUrl,
        "roots" => ToolCall::Ask(Ask::roots()),
        "ping_client" => ToolCall::PingClient,
        "slow_task" => ToolCall::SlowTask(args.millis()?),
        "structured" => ToolCall::Structured(args.number("a")?, args.number("b")?),
        "bad_structured" => ToolCall::BadStructured,
        "media" => ToolCall::Media,
        "touch" => ToolCall::Touch(args.optional("uri", "a string", as_string)?.unwrap_or_else(|| super::resources::COUNTER_URI.into())),
        "add_tool" => ToolCall::Extend(Addition::Tool, args.name()?),
        "add_prompt" => ToolCall::Extend(Addition::Prompt, args.name()?),
        "add_resource" => ToolCall::Extend(Addition::Resource, args.name()?),
        "received" => ToolCall::Received,
        "pause_reading" => ToolCall::PauseReading(args.millis()?),
        "close_stdout" => ToolCall::CloseStdout,
        _ if added.iter().any(|a| a == name) => ToolCall::Echo(args.string("text")?),
        _ => return Err(ErrorObject::invalid_params(format!("Unknown tool: {name}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call as `tools/call` params carry it.
    fn call(params: &Value, added: &[String]) -> Result<ToolCall, ErrorObject> {
        parse_call(params["name"].as_str().unwrap(), params.get("arguments").unwrap_or(&Value::Null), added)
    }

    #[test]
    fn every_listed_tool_accepts_arguments_matching_its_schema() {
        for spec in &TOOLS {
            let tool = spec.json();
            let sample = |kind: &str, field: &str| match (kind, field) {
                (_, "level") => json!("info"),
                (_, "name") => json!("x"),
                ("string", _) => json!("x"),
                _ => json!(1),
            };
            let properties = tool["inputSchema"]["properties"].as_object().unwrap();
            let arguments: Map<String, Value> =
                properties.iter().map(|(field, schema)| (field.clone(), sample(schema["type"].as_str().unwrap(), field))).collect();
            assert!(parse_call(spec.name, &Value::Object(arguments), &[]).is_ok(), "{}", spec.name);
            assert!(tool["title"].is_string() && tool["description"].is_string(), "{}", spec.name);
        }
    }

    #[test]
    fn listings_carry_annotations_icons_output_schemas_and_task_support() {
        let find = |name: &str| TOOLS.iter().find(|t| t.name == name).unwrap().json();
        assert_eq!(find("echo")["annotations"]["readOnlyHint"], true);
        assert!(find("echo")["icons"][0]["src"].as_str().unwrap().starts_with("data:image/png;base64,iVBORw0KGgo"));
        assert_eq!(find("crash")["annotations"]["destructiveHint"], true);
        assert_eq!(find("structured")["outputSchema"]["required"], json!(["sum"]));
        assert_eq!(find("slow_task")["execution"]["taskSupport"], "required");
        assert_eq!(added_tool_json("mine")["inputSchema"]["required"], json!(["text"]));
    }

    #[test]
    fn argument_errors_name_the_tool_and_field() {
        let cases = [
            (json!({"name": "echo"}), "tool `echo`: missing required argument `text`"),
            (json!({"name": "add", "arguments": {"a": 1, "b": "2"}}), "tool `add`: argument `b`"),
            (json!({"name": "sleep", "arguments": {"ms": -5}}), "tool `sleep`: argument `ms`"),
            (json!({"name": "big", "arguments": {"bytes": 1u64 << 40}}), "argument `bytes`"),
            (json!({"name": "crash", "arguments": {"code": 1u64 << 40}}), "argument `code`"),
            (json!({"name": "log", "arguments": {"level": "loud", "message": "m"}}), "tool `log`: argument `level` must be one of debug"),
            (json!({"name": "progress", "arguments": {"steps": 1_000_000, "ms": 1}}), "tool `progress`: argument `steps`"),
            (json!({"name": "add_tool", "arguments": {"name": "a/b"}}), "tool `add_tool`: argument `name`"),
            (json!({"name": "elicit_url", "arguments": {}}), "tool `elicit_url`: missing required argument `url`"),
            (json!({"name": "echo", "arguments": [1]}), "`arguments` must be an object"),
            (json!({"name": "nope"}), "Unknown tool: nope"),
        ];
        for (params, expected) in cases {
            let error = call(&params, &[]).unwrap_err();
            assert_eq!(error.code, super::super::rpc::INVALID_PARAMS);
            assert!(error.message.contains(expected), "{}", error.message);
        }
        assert_eq!(call(&json!({"name": "crash"}), &[]), Ok(ToolCall::Crash(1)));
        let added = ["mine".to_owned()];
        assert_eq!(call(&json!({"name": "mine", "arguments": {"text": "hi"}}), &added), Ok(ToolCall::Echo("hi".into())));
    }
}
