//! `mcpvisor demo-server`: a real MCP server over stdio with fault knobs.
//!
//! It speaks newline-delimited JSON-RPC 2.0 on stdin/stdout and logs to
//! stderr. It is the peer of the integration tests and of `mcpvisor demo`, so
//! besides ordinary tools (`echo`, `add`, `sleep`) it has tools that misbehave
//! on purpose (`crash`, `garbage`, `big`, `spawn_grandchild`, ...) and start-up
//! flags that break the handshake or the input side.
//!
//! It deliberately shares no protocol code with the rest of the crate, so a
//! bug in the client cannot be mirrored (and hidden) by the server.
//!
//! Structure: `handle_request` decides every answer synchronously and is
//! pure; a tool call it accepts runs in its own task. All output goes through
//! one writer task, so frames never interleave.

use std::collections::HashMap;
use std::fmt::Display;
use std::io::Write as _;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinHandle};

/// Start-up faults and knobs of the demo server (the `mcpvisor demo-server` flags).
#[derive(Debug, Clone, clap::Args)]
pub struct DemoServerOptions {
    /// Exit at once with this code, before reading anything (crash-loop tests).
    #[arg(long, value_name = "CODE")]
    pub exit_immediately: Option<i32>,
    /// Read requests but never answer `initialize` (handshake time-out tests).
    #[arg(long)]
    pub no_initialize: bool,
    /// Stop reading stdin after this many lines (a server that stops reading its input).
    #[arg(long, value_name = "N")]
    pub stop_reading_after: Option<u64>,
    /// Tools per `tools/list` page (pagination is always exercised by default).
    #[arg(long, default_value_t = DEFAULT_PAGE_SIZE)]
    pub page_size: usize,
}

const DEFAULT_PAGE_SIZE: usize = 4;

/// The same server as `mcpvisor demo-server` without flags.
impl Default for DemoServerOptions {
    fn default() -> Self {
        DemoServerOptions { exit_immediately: None, no_initialize: false, stop_reading_after: None, page_size: DEFAULT_PAGE_SIZE }
    }
}

/// Runs the server on this process's stdin/stdout until stdin closes; returns the exit code.
pub fn run(options: DemoServerOptions) -> i32 {
    log(format_args!("started (pid {})", std::process::id()));
    if let Some(code) = options.exit_immediately {
        log(format_args!("exiting at start-up with code {code}"));
        return code;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            log(format_args!("cannot start a tokio runtime: {e}"));
            return 1;
        }
    };
    let code = runtime.block_on(serve(options));
    // A write blocked on a full stdout pipe must not hold up the exit.
    runtime.shutdown_background();
    code
}

/// Protocol versions the server accepts; any other request gets [`LATEST_VERSION`].
const SUPPORTED_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
const LATEST_VERSION: &str = "2025-11-25";
/// The line the `garbage` tool writes to stdout before its answer.
const GARBAGE_LINE: &str = "this line is not JSON";
/// Largest `big` answer, far above the client's default 16 MiB frame limit.
const MAX_BIG_BYTES: u64 = 256 * 1024 * 1024;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

/// The tool catalog in `tools/list` order: name, arguments (`field: type`, where `field?`
/// is optional) and description. [`parse_call`] accepts exactly these tools and arguments.
const TOOLS: [(&str, &str, &str); 10] = [
    ("echo", "text: string", "Returns `text` unchanged."),
    ("add", "a: number, b: number", "Adds `a` and `b`; also as `structuredContent.sum`."),
    ("sleep", "ms: integer", "Sleeps `ms` milliseconds, then answers."),
    ("fail", "message?: string", "Answers a tool error (`isError: true`)."),
    ("crash", "code?: integer", "Exits the server with `code` (default 1), unanswered."),
    ("spawn_grandchild", "", "Starts `sleep 3600` in the server's process group."),
    ("garbage", "", "Writes a line that is not JSON to stdout, then answers `ok`."),
    ("big", "bytes: integer", "Answers `bytes` (at most 256 MiB) `x` characters."),
    ("cancellations", "", "Reports every `notifications/cancelled` received so far."),
    ("stderr", "text: string", "Writes `text` as a line to stderr, then answers `ok`."),
];

/// A JSON-RPC error answer.
#[derive(Debug, Clone, PartialEq)]
struct RpcError {
    code: i64,
    message: String,
}

impl RpcError {
    fn invalid_params(message: impl Into<String>) -> Self {
        RpcError { code: INVALID_PARAMS, message: message.into() }
    }
}

/// What to do with one request, decided without side effects.
#[derive(Debug, PartialEq)]
enum Action {
    /// Answer now.
    Reply(Result<Value, RpcError>),
    /// Run a validated tool call in its own task and answer when it ends.
    Call(ToolCall),
    /// Never answer (a fault knob); the reason goes to stderr.
    Ignore(&'static str),
}

/// A tool call whose arguments have been checked against its schema.
#[derive(Debug, PartialEq)]
enum ToolCall {
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
}

/// Decides the answer to one request. Pure: every side effect is left to the caller.
fn handle_request(method: &str, params: &Value, options: &DemoServerOptions) -> Action {
    match method {
        "initialize" if options.no_initialize => Action::Ignore("not answering `initialize` (--no-initialize)"),
        "initialize" => Action::Reply(Ok(initialize(params))),
        "ping" | "logging/setLevel" => Action::Reply(Ok(json!({}))),
        "tools/list" => Action::Reply(list_tools(params, options.page_size)),
        "tools/call" => parse_call(params).map_or_else(|e| Action::Reply(Err(e)), Action::Call),
        _ => Action::Reply(Err(RpcError { code: METHOD_NOT_FOUND, message: format!("Method not found: {method}") })),
    }
}

fn initialize(params: &Value) -> Value {
    let requested = params.get("protocolVersion").and_then(Value::as_str);
    let version = requested.filter(|v| SUPPORTED_VERSIONS.contains(v)).unwrap_or(LATEST_VERSION);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": true}, "logging": {}},
        "serverInfo": {"name": "mcpvisor-demo", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "The demo server bundled with mcpvisor. `echo`, `add` and `sleep` \
            behave; `fail`, `crash`, `garbage`, `big`, `spawn_grandchild` and `stderr` misbehave \
            on purpose; `cancellations` reports the cancellations received.",
    })
}

/// One page of [`TOOLS`]. Cursors are only those this server hands out: `page:<offset>`
/// with `offset` a positive multiple of the page size inside the catalog. A page size of 0
/// (as in `DemoServerOptions::default()`) counts as 1.
fn list_tools(params: &Value, page_size: usize) -> Result<Value, RpcError> {
    let page_size = page_size.max(1);
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(cursor) => cursor
            .as_str()
            .and_then(|c| c.strip_prefix("page:"))
            .and_then(|offset| offset.parse::<usize>().ok())
            .filter(|&offset| offset > 0 && offset < TOOLS.len() && offset % page_size == 0)
            .ok_or_else(|| RpcError::invalid_params(format!("tools/list: unknown cursor {cursor}")))?,
    };
    let end = TOOLS.len().min(start + page_size);
    let tools: Vec<Value> = TOOLS[start..end].iter().map(tool_json).collect();
    let mut page = json!({ "tools": tools });
    if end < TOOLS.len() {
        page["nextCursor"] = json!(format!("page:{end}"));
    }
    Ok(page)
}

fn tool_json((name, spec, description): &(&str, &str, &str)) -> Value {
    let properties: Map<String, Value> = fields(spec).map(|(field, kind, _)| (field.to_owned(), json!({ "type": kind }))).collect();
    let required: Vec<&str> = fields(spec).filter(|f| f.2).map(|f| f.0).collect();
    json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": properties, "required": required},
    })
}

/// The `(field, type, required)` triples of an argument spec such as `"a: number, b?: string"`.
fn fields(spec: &str) -> impl Iterator<Item = (&str, &str, bool)> {
    spec.split(", ").filter_map(|f| f.split_once(": ")).map(|(field, kind)| match field.strip_suffix('?') {
        Some(optional) => (optional, kind, false),
        None => (field, kind, true),
    })
}

/// The `arguments` of one call, for checked extraction with errors naming tool and field.
struct Args<'a> {
    tool: &'a str,
    map: &'a Map<String, Value>,
}

impl Args<'_> {
    /// `Ok(None)` when absent or null; an error when present with the wrong type.
    fn optional<T>(&self, field: &str, expected: &str, convert: impl Fn(&Value) -> Option<T>) -> Result<Option<T>, RpcError> {
        match self.map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => convert(value).map(Some).ok_or_else(|| {
                RpcError::invalid_params(format!("tool `{}`: argument `{field}` must be {expected}, got {value}", self.tool))
            }),
        }
    }

    fn required<T>(&self, field: &str, expected: &str, convert: impl Fn(&Value) -> Option<T>) -> Result<T, RpcError> {
        self.optional(field, expected, convert)?
            .ok_or_else(|| RpcError::invalid_params(format!("tool `{}`: missing required argument `{field}` ({expected})", self.tool)))
    }
}

fn as_string(value: &Value) -> Option<String> {
    value.as_str().map(str::to_owned)
}

/// Validates `tools/call` params into a [`ToolCall`]; absent `arguments` mean `{}`.
fn parse_call(params: &Value) -> Result<ToolCall, RpcError> {
    let name = params.get("name").and_then(Value::as_str).ok_or_else(|| RpcError::invalid_params("tools/call: `name` must be a string"))?;
    let empty = Map::new();
    let map = match params.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(map)) => map,
        Some(other) => return Err(RpcError::invalid_params(format!("tool `{name}`: `arguments` must be an object, got {other}"))),
    };
    let args = Args { tool: name, map };
    Ok(match name {
        "echo" => ToolCall::Echo(args.required("text", "a string", as_string)?),
        "add" => ToolCall::Add(args.required("a", "a number", Value::as_f64)?, args.required("b", "a number", Value::as_f64)?),
        "sleep" => ToolCall::Sleep(args.required("ms", "a non-negative integer", Value::as_u64)?),
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
        "stderr" => ToolCall::Stderr(args.required("text", "a string", as_string)?),
        _ => return Err(RpcError::invalid_params(format!("Unknown tool: {name}"))),
    })
}

/// One incoming JSON-RPC message, sorted by shape.
#[derive(Debug, PartialEq)]
enum Message {
    Request { id: Value, method: String, params: Value },
    Notification { method: String, params: Value },
    Response,
    Invalid(&'static str),
}

fn classify(message: Value) -> Message {
    let Value::Object(mut map) = message else {
        return Message::Invalid("not a JSON object (batches are not supported)");
    };
    let params = map.remove("params").unwrap_or(Value::Null);
    match (map.remove("method"), map.remove("id")) {
        (Some(Value::String(method)), Some(id)) => Message::Request { id, method, params },
        (Some(Value::String(method)), None) => Message::Notification { method, params },
        (Some(_), _) => Message::Invalid("`method` is not a string"),
        (None, _) if map.contains_key("result") || map.contains_key("error") => Message::Response,
        (None, _) => Message::Invalid("neither a request, a notification nor a response"),
    }
}

/// One answer as a stdout frame, newline included.
fn response_frame(id: &Value, result: Result<Value, RpcError>) -> Vec<u8> {
    let message = match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code, "message": e.message}}),
    };
    // Serialising a `Value` cannot fail: its map keys are strings.
    let mut frame = serde_json::to_vec(&message).unwrap_or_default();
    frame.push(b'\n');
    frame
}

fn text_result(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

fn structured_result(text: String, structured: Value) -> Value {
    json!({"content": [{"type": "text", "text": text}], "structuredContent": structured})
}

fn error_result(text: String) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

fn log(message: impl Display) {
    eprintln!("mcpvisor demo-server: {message}");
}

/// Frames for stdout, each one whole line with its newline; one writer task owns stdout.
type Out = mpsc::UnboundedSender<Vec<u8>>;

/// A tool call still running. `seq` tells it apart from a later call reusing its id.
struct InFlight {
    seq: u64,
    /// The call's `name` and `arguments`, as the `cancellations` tool reports them.
    tool: Value,
    arguments: Value,
    abort: AbortHandle,
}

/// State shared with the call tasks.
#[derive(Default)]
struct Shared {
    /// Running calls by the JSON text of their id. An entry is removed exactly once:
    /// by the call when it ends (then it answers) or by a cancellation (then nobody does).
    in_flight: Mutex<HashMap<String, InFlight>>,
    /// Every `notifications/cancelled`, as the `cancellations` tool reports them.
    cancellations: Mutex<Vec<Value>>,
    next_seq: AtomicU64,
}

/// Never panics on a poisoned lock: the data stays consistent under every single operation.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

struct Server {
    options: DemoServerOptions,
    out: Out,
    shared: Arc<Shared>,
}

impl Server {
    fn new(options: DemoServerOptions, out: Out) -> Self {
        let shared = Arc::default();
        Server { options, out, shared }
    }

    fn handle_line(&self, line: &[u8]) {
        if line.trim_ascii().is_empty() {
            return;
        }
        let message = match serde_json::from_slice::<Value>(line) {
            Ok(message) => message,
            Err(e) => {
                let preview: String = String::from_utf8_lossy(line).chars().take(120).collect();
                return log(format_args!("ignoring a line that is not JSON ({e}): {}", preview.trim_end()));
            }
        };
        match classify(message) {
            Message::Request { id, method, params } => match handle_request(&method, &params, &self.options) {
                Action::Reply(result) => self.send(response_frame(&id, result)),
                Action::Call(call) => self.start_call(id, &params, call),
                Action::Ignore(why) => log(why),
            },
            Message::Notification { method, params } if method == "notifications/cancelled" => self.cancel(&params),
            Message::Notification { .. } | Message::Response => {}
            Message::Invalid(why) => log(format_args!("ignoring a message: {why}")),
        }
    }

    fn send(&self, frame: Vec<u8>) {
        // Fails only once the writer is gone (stdout broken); nothing is left to tell.
        let _ = self.out.send(frame);
    }

    fn start_call(&self, id: Value, params: &Value, call: ToolCall) {
        let key = id.to_string();
        let seq = self.shared.next_seq.fetch_add(1, Ordering::Relaxed);
        let (shared, out) = (Arc::clone(&self.shared), self.out.clone());
        // Registered under the lock before the task can finish and look for its entry.
        let mut in_flight = lock(&self.shared.in_flight);
        let task_key = key.clone();
        let task = tokio::spawn(async move {
            let result = execute(call, &shared, &out).await;
            let mut in_flight = lock(&shared.in_flight);
            if in_flight.get(&task_key).is_some_and(|entry| entry.seq == seq) {
                in_flight.remove(&task_key);
                let _ = out.send(response_frame(&id, Ok(result)));
            }
        });
        let field = |name| params.get(name).cloned().unwrap_or(Value::Null);
        let entry = InFlight { seq, tool: field("name"), arguments: field("arguments"), abort: task.abort_handle() };
        in_flight.insert(key, entry);
    }

    /// Records a cancellation and aborts the call if it still runs; it then never answers.
    fn cancel(&self, params: &Value) {
        let Some(request_id) = params.get("requestId") else {
            return log("ignoring notifications/cancelled without `requestId`");
        };
        let entry = lock(&self.shared.in_flight).remove(&request_id.to_string());
        if let Some(entry) = &entry {
            entry.abort.abort();
        }
        let (tool, arguments) = entry.map_or((Value::Null, Value::Null), |e| (e.tool, e.arguments));
        let record = json!({
            "requestId": request_id,
            "reason": params.get("reason").cloned().unwrap_or(Value::Null),
            "tool": tool,
            "arguments": arguments,
        });
        lock(&self.shared.cancellations).push(record);
    }

    /// Drops the running calls and lets the writer flush what is already answered (boundedly).
    async fn shutdown(self, writer: JoinHandle<()>) {
        for (_, call) in lock(&self.shared.in_flight).drain() {
            call.abort.abort();
        }
        drop(self);
        let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    }
}

async fn execute(call: ToolCall, shared: &Shared, out: &Out) -> Value {
    match call {
        ToolCall::Echo(text) => text_result(text),
        ToolCall::Add(a, b) => {
            let sum = a + b;
            if !sum.is_finite() {
                return error_result("the sum of `a` and `b` is not a finite number".into());
            }
            // Integral sums print as integers: 2 + 40 is "42", not "42.0".
            let sum = if sum.fract() == 0.0 && sum.abs() < 9.0e15 { json!(sum as i64) } else { json!(sum) };
            structured_result(sum.to_string(), json!({ "sum": sum }))
        }
        ToolCall::Sleep(ms) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            text_result(format!("slept {ms} ms"))
        }
        ToolCall::Fail(message) => error_result(message),
        ToolCall::Crash(code) => {
            log(format_args!("crash requested, exiting with code {code}"));
            let _ = std::io::stderr().flush();
            std::process::exit(code)
        }
        ToolCall::SpawnGrandchild => spawn_grandchild(),
        ToolCall::Garbage => {
            let _ = out.send(format!("{GARBAGE_LINE}\n").into_bytes());
            text_result("ok")
        }
        ToolCall::Big(bytes) => text_result("x".repeat(bytes)),
        ToolCall::Cancellations => {
            let report = json!({ "cancellations": lock(&shared.cancellations).clone() });
            structured_result(report.to_string(), report)
        }
        ToolCall::Stderr(text) => {
            eprintln!("{text}");
            text_result("ok")
        }
    }
}

/// Starts `sleep 3600` in this process's group (no `setsid`/`setpgid`), reaped by a thread.
fn spawn_grandchild() -> Value {
    let spawned = std::process::Command::new("sleep").arg("3600").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn();
    match spawned {
        Ok(mut child) => {
            let pid = child.id();
            // Reaps it if killed while this server lives, so it does not linger as a zombie.
            std::thread::spawn(move || child.wait());
            structured_result(format!("started grandchild pid {pid}"), json!({ "pid": pid }))
        }
        Err(e) => error_result(format!("cannot start `sleep 3600`: {e}")),
    }
}

/// Writes frames, one per line, flushing whenever no further frame is ready.
async fn write_frames(mut frames: mpsc::UnboundedReceiver<Vec<u8>>) {
    let mut stdout = BufWriter::new(tokio::io::stdout());
    while let Some(first) = frames.recv().await {
        let mut next = Some(first);
        while let Some(frame) = next {
            if let Err(e) = stdout.write_all(&frame).await {
                return log(format_args!("cannot write stdout: {e}"));
            }
            next = frames.try_recv().ok();
        }
        if let Err(e) = stdout.flush().await {
            return log(format_args!("cannot write stdout: {e}"));
        }
    }
}

async fn serve(options: DemoServerOptions) -> i32 {
    let (out, frames) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_frames(frames));
    let stop_after = options.stop_reading_after;
    let server = Server::new(options, out);
    let mut stdin = BufReader::new(tokio::io::stdin());
    let mut line = Vec::new();
    let mut lines_read = 0u64;
    loop {
        if stop_after.is_some_and(|n| lines_read >= n) {
            log(format_args!("stopped reading stdin after {lines_read} lines (--stop-reading-after)"));
            // Keeps answering what was read, and lives until killed.
            return std::future::pending().await;
        }
        line.clear();
        match stdin.read_until(b'\n', &mut line).await {
            Ok(0) => break,
            Ok(_) => {
                lines_read += 1;
                server.handle_line(&line);
            }
            Err(e) => {
                log(format_args!("cannot read stdin: {e}"));
                server.shutdown(writer).await;
                return 1;
            }
        }
    }
    log("stdin closed, exiting");
    server.shutdown(writer).await;
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> DemoServerOptions {
        DemoServerOptions::default()
    }

    fn reply(method: &str, params: Value) -> Result<Value, RpcError> {
        match handle_request(method, &params, &options()) {
            Action::Reply(result) => result,
            other => panic!("expected a reply, got {other:?}"),
        }
    }

    #[test]
    fn initialize_echoes_supported_versions_only() {
        for version in SUPPORTED_VERSIONS {
            let result = reply("initialize", json!({"protocolVersion": version})).unwrap();
            assert_eq!(result["protocolVersion"], version);
        }
        let result = reply("initialize", json!({"protocolVersion": "1999-01-01"})).unwrap();
        assert_eq!(result["protocolVersion"], LATEST_VERSION);
        assert_eq!(result["serverInfo"]["name"], "mcpvisor-demo");
        assert_eq!(result["capabilities"]["tools"]["listChanged"], true);
        assert_eq!(reply("initialize", Value::Null).unwrap()["protocolVersion"], LATEST_VERSION);
    }

    #[test]
    fn no_initialize_ignores_the_handshake_only() {
        let options = DemoServerOptions { no_initialize: true, ..options() };
        assert!(matches!(handle_request("initialize", &json!({}), &options), Action::Ignore(_)));
        assert_eq!(handle_request("ping", &Value::Null, &options), Action::Reply(Ok(json!({}))));
    }

    #[test]
    fn unknown_methods_are_not_found() {
        let error = reply("resources/list", json!({})).unwrap_err();
        assert_eq!(error, RpcError { code: METHOD_NOT_FOUND, message: "Method not found: resources/list".into() });
    }

    #[test]
    fn pagination_walks_the_whole_catalog() {
        for page_size in [0, 1, 3, 4, 10, 100] {
            let (mut names, mut params, mut pages) = (Vec::new(), json!({}), 0);
            loop {
                let page = list_tools(&params, page_size).unwrap();
                pages += 1;
                for tool in page["tools"].as_array().unwrap() {
                    assert_eq!(tool["inputSchema"]["type"], "object");
                    names.push(tool["name"].as_str().unwrap().to_owned());
                }
                match page.get("nextCursor") {
                    Some(cursor) => params = json!({ "cursor": cursor }),
                    None => break,
                }
            }
            let expected: Vec<&str> = TOOLS.iter().map(|t| t.0).collect();
            assert_eq!(names, expected);
            assert_eq!(pages, TOOLS.len().div_ceil(page_size.max(1)));
        }
    }

    #[test]
    fn unknown_cursors_are_invalid_params() {
        for cursor in [json!("nope"), json!("page:0"), json!("page:3"), json!("page:40"), json!(7)] {
            let error = reply("tools/list", json!({ "cursor": cursor })).unwrap_err();
            assert_eq!(error.code, INVALID_PARAMS, "{cursor}");
        }
    }

    #[test]
    fn every_listed_tool_accepts_arguments_matching_its_schema() {
        for (name, spec, _) in TOOLS {
            let sample = |kind| if kind == "string" { json!("x") } else { json!(1) };
            let arguments: Map<String, Value> = fields(spec).map(|(field, kind, _)| (field.to_owned(), sample(kind))).collect();
            assert!(parse_call(&json!({"name": name, "arguments": arguments})).is_ok(), "{name}");
        }
    }

    #[test]
    fn argument_errors_name_the_tool_and_field() {
        let cases = [
            (json!({"name": "echo"}), "tool `echo`: missing required argument `text`"),
            (json!({"name": "add", "arguments": {"a": 1, "b": "2"}}), "tool `add`: argument `b`"),
            (json!({"name": "sleep", "arguments": {"ms": -5}}), "tool `sleep`: argument `ms`"),
            (json!({"name": "big", "arguments": {"bytes": 1u64 << 40}}), "argument `bytes`"),
            (json!({"name": "crash", "arguments": {"code": 1u64 << 40}}), "argument `code`"),
            (json!({"name": "echo", "arguments": [1]}), "`arguments` must be an object"),
            (json!({"name": "nope"}), "Unknown tool: nope"),
            (json!({}), "`name` must be a string"),
        ];
        for (params, expected) in cases {
            let error = parse_call(&params).unwrap_err();
            assert_eq!(error.code, INVALID_PARAMS);
            assert!(error.message.contains(expected), "{}", error.message);
        }
        assert_eq!(parse_call(&json!({"name": "crash"})), Ok(ToolCall::Crash(1)));
    }

    #[test]
    fn messages_are_classified_by_shape() {
        assert!(matches!(classify(json!({"id": 1, "method": "ping"})), Message::Request { .. }));
        assert!(matches!(classify(json!({"method": "notifications/initialized"})), Message::Notification { .. }));
        assert_eq!(classify(json!({"id": 1, "result": {}})), Message::Response);
        assert!(matches!(classify(json!([1])), Message::Invalid(_)));
        assert!(matches!(classify(json!({"id": 1, "method": 5})), Message::Invalid(_)));
    }

    /// The `id` and `result` of the next answer on `frames`.
    async fn next_result(frames: &mut mpsc::UnboundedReceiver<Vec<u8>>) -> (Value, Value) {
        let frame = tokio::time::timeout(Duration::from_secs(5), frames.recv()).await;
        let answer: Value = serde_json::from_slice(&frame.unwrap().unwrap()).unwrap();
        (answer["id"].clone(), answer["result"].clone())
    }

    fn send(server: &Server, method: &str, params: Value, id: Option<u64>) {
        let mut message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        if let Some(id) = id {
            message["id"] = json!(id);
        }
        server.handle_line(message.to_string().as_bytes());
    }

    fn call(server: &Server, id: u64, tool: &str, arguments: Value) {
        let params = json!({"name": tool, "arguments": arguments});
        send(server, "tools/call", params, Some(id));
    }

    #[tokio::test]
    async fn tools_answer_and_slow_calls_do_not_block_others() {
        let (out, mut frames) = mpsc::unbounded_channel();
        let server = Server::new(options(), out);
        server.handle_line(b"this is not json\n");
        call(&server, 1, "sleep", json!({"ms": 200}));
        call(&server, 2, "add", json!({"a": 2, "b": 40}));
        let (id, add) = next_result(&mut frames).await;
        assert_eq!((id, &add["content"][0]["text"]), (json!(2), &json!("42")));
        assert_eq!(add["structuredContent"], json!({"sum": 42}));
        call(&server, 3, "big", json!({"bytes": 1000}));
        let (_, big) = next_result(&mut frames).await;
        assert_eq!(big["content"][0]["text"], "x".repeat(1000));
        call(&server, 4, "fail", json!({}));
        assert_eq!(next_result(&mut frames).await.1["isError"], true);
        call(&server, 5, "garbage", json!({}));
        assert_eq!(frames.recv().await.unwrap(), b"this line is not JSON\n");
        assert_eq!(next_result(&mut frames).await.1["content"][0]["text"], "ok");
        let (id, slept) = next_result(&mut frames).await;
        assert_eq!((id, &slept["content"][0]["text"]), (json!(1), &json!("slept 200 ms")));
    }

    #[tokio::test]
    async fn cancelled_calls_stop_silently_and_are_reported() {
        let (out, mut frames) = mpsc::unbounded_channel();
        let server = Server::new(options(), out);
        call(&server, 1, "sleep", json!({"ms": 60_000}));
        let cancelled = "notifications/cancelled";
        send(&server, cancelled, json!({"requestId": 1, "reason": "bored"}), None);
        send(&server, cancelled, json!({"requestId": "x"}), None);
        call(&server, 2, "cancellations", json!({}));
        let (id, report) = next_result(&mut frames).await;
        assert_eq!(id, 2, "the cancelled call must not answer");
        let expected = json!([
            {"requestId": 1, "reason": "bored", "tool": "sleep", "arguments": {"ms": 60_000}},
            {"requestId": "x", "reason": null, "tool": null, "arguments": null},
        ]);
        assert_eq!(report["structuredContent"]["cancellations"], expected);
        assert!(lock(&server.shared.in_flight).is_empty());
    }
}
