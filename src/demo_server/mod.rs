//! `mcpvisor demo-server`: a real MCP server over stdio with fault knobs.
//!
//! It speaks newline-delimited JSON-RPC 2.0 on stdin/stdout and logs to
//! stderr. It is the peer of the integration tests and of `mcpvisor demo`:
//! it has a counterpart for every MCP client feature, in both protocol eras,
//! and tools that misbehave on purpose. It deliberately shares no protocol
//! code with the rest of the crate (it handles `serde_json::Value` only), so a
//! bug in the client cannot be mirrored (and hidden) by the server.
//!
//! # Flags
//!
//! | flag | effect |
//! |---|---|
//! | `--era legacy\|modern\|dual` | protocol era(s) served; default `dual` (see below) |
//! | `--page-size N` | items per page of every `*/list` (default 10: `tools/list` has 3 pages; 0 counts as 1) |
//! | `--no-templates` | `resources/templates/list` answers -32601, as some servers do |
//! | `--no-initialize` | never answers `initialize` nor `server/discover` (handshake time-outs) |
//! | `--stop-reading-after N` | stops reading stdin after N lines, keeps running |
//! | `--exit-immediately CODE` | exits with CODE before reading anything |
//! | `--skills` | serves the skills extension (SEP-2640; see Skills below) |
//! | `--request-log FILE` | appends `METHOD` (`tools/call TOOL` for calls, then `traceparent=…` and `tracestate=…` when its `_meta` has them) of every request received to FILE |
//!
//! # Eras
//!
//! * **legacy** (`2024-11-05` … `2025-11-25`): `initialize` answers with the
//!   requested version when supported, else `2025-11-25`. Request `_meta` is
//!   ignored. `server/discover` is -32601. Server-to-client requests
//!   (`sampling/createMessage`, `elicitation/create`, `roots/list`, `ping`)
//!   are real JSON-RPC requests with ids `"demo-<n>"`; the tool waits for the
//!   client's response. Change notifications are sent unsolicited
//!   (`notifications/resources/updated` only for URIs `resources/subscribe`d).
//! * **modern** (`2026-07-28`): no handshake. Every request must carry
//!   `params._meta["io.modelcontextprotocol/protocolVersion"] = "2026-07-28"`;
//!   missing or other → -32022 `{"supported": ["2026-07-28"], "requested": <it, when given>}`.
//!   `initialize` → -32022 as well (`requested` = its `protocolVersion`).
//!   `server/discover` is answered even without a version (the bootstrap probe):
//!   `{"resultType":"complete","supportedVersions":[...],"capabilities":{...},
//!   "serverInfo":{...},"instructions":"...","ttlMs":60000,"cacheScope":"public",
//!   "_meta":{"io.modelcontextprotocol/serverInfo":{...}}}`.
//!   Every result carries `resultType` (`"complete"` unless `"input_required"`);
//!   `*/list` results also `ttlMs: 0, cacheScope: "private"`. Input from the
//!   client is asked for with
//!   `{"resultType":"input_required","inputRequests":{KEY:{"method":M,"params":P}},"requestState":S}`;
//!   the client retries `tools/call` with a new id, the same arguments,
//!   `inputResponses: {KEY: <the result of M>}` (or `{KEY: {"error": {...}}}` for a
//!   refusal) and `requestState: S` unchanged (each state is accepted once; an
//!   unknown one is -32602). KEY is `sampling`, `elicitation` or `roots`.
//!   Log notifications are sent for a request only when its
//!   `_meta["io.modelcontextprotocol/logLevel"]` allows them. Change
//!   notifications go only to open `subscriptions/listen` streams: the listen
//!   request (params `{"notifications":{"toolsListChanged":true,"promptsListChanged":true,
//!   "resourcesListChanged":true,"resourceSubscriptions":[URI...]}}`) is acknowledged
//!   with `notifications/subscriptions/acknowledged`
//!   `{"_meta":{"io.modelcontextprotocol/subscriptionId":ID},"notifications":<accepted filter>}`,
//!   never answered, and ended by `notifications/cancelled` with its id; each
//!   delivered notification carries `params._meta["io.modelcontextprotocol/subscriptionId"]`.
//!   Removed in this era (-32601): `logging/setLevel`, `resources/subscribe`,
//!   `resources/unsubscribe`, `tasks/*`; `slow_task` and `ping_client` are not
//!   listed. `ping` is still answered. Unknown resource URIs are -32602
//!   (SEP-2164) instead of -32002.
//! * **dual**: both. `initialize` opens a legacy session; a request carrying
//!   the `_meta` version is served with modern semantics, one without it with
//!   legacy semantics. `supportedVersions` (and -32022 `supported`) list
//!   `2026-07-28` then the legacy versions. Unsolicited legacy change
//!   notifications are sent only once `initialize` was received.
//!
//! # Tools (`tools/list`, paginated)
//!
//! | tool | arguments | behaviour |
//! |---|---|---|
//! | `echo` | `text` | answers `text` |
//! | `add` | `a, b` | the sum, also as `structuredContent.sum` |
//! | `sleep` | `ms` | sleeps, answers `slept N ms` |
//! | `fail` | `message?` | `isError: true` |
//! | `crash` | `code?` | exits the process, unanswered |
//! | `spawn_grandchild` | | starts `sleep 3600` in the process group |
//! | `garbage` | | writes a non-JSON line to stdout, then `ok` |
//! | `big` | `bytes` | answers that many `x` (≤ 256 MiB) |
//! | `cancellations` | | `{cancellations:[{requestId,reason,tool,arguments}]}` received so far |
//! | `stderr` | `text` | writes a line to stderr |
//! | `progress` | `steps, ms` | a `notifications/progress` per step (with the request's `_meta.progressToken`), then `done N steps` |
//! | `log` | `level, message` | `notifications/message` if the level passes; answers `sent` or `filtered` |
//! | `sample` | `prompt` | asks `sampling/createMessage`; answers the model text, or `isError` quoting the refusal |
//! | `elicit` | `message` | form-mode `elicitation/create` (schema with `default`s); answers action and content |
//! | `elicit_url` | `url, message?` | URL-mode `elicitation/create`; answers the action (legacy: then `notifications/elicitation/complete`) |
//! | `needs_url` | | JSON-RPC error -32042 with `data.elicitations` |
//! | `roots` | | asks `roots/list`; answers the URIs, one per line, and `structuredContent.roots` |
//! | `ping_client` | | legacy: pings the client, answers `pong in N ms`; modern: `isError` |
//! | `slow_task` | `ms` | `execution.taskSupport: "required"` (2025-11-25 tasks); legacy only |
//! | `structured` | `a, b` | `outputSchema` and matching `structuredContent {"sum"}` |
//! | `bad_structured` | | `structuredContent` that violates its `outputSchema` |
//! | `media` | | text, image (PNG), audio (WAV), `resource_link`, embedded `resource` |
//! | `touch` | `uri?` | bumps `demo://counter` (default URI), sends `notifications/resources/updated` |
//! | `add_tool` / `add_prompt` / `add_resource` | `name` | adds one (tool echoes `text`; resource `demo://added/NAME`), sends the list_changed |
//! | `pause_reading` | `ms` | answers, then reads no input for `ms` (a server that falls behind) |
//! | `close_stdout` | | points stdout at /dev/null (the client sees EOF) and keeps running, unanswered |
//! | `received` | | notifications received: `initializeRequests`, `initialized`, `rootsListChanged`, per-method counts, `cancellations` |
//!
//! Tasks (legacy): `tools/call` of `slow_task` with `params.task: {ttl?}`
//! answers `{task:{taskId,status:"working",createdAt,lastUpdatedAt,ttl,pollInterval}}`;
//! without `params.task` it is -32601, and `params.task` on any other tool is
//! -32601. `tasks/get`, `tasks/list`, `tasks/cancel` (-32602 once terminal)
//! and `tasks/result` (waits, then the `CallToolResult` with
//! `_meta["io.modelcontextprotocol/related-task"]`) work; a task and its result
//! are forgotten `ttl` ms (default 60 000, at most 3 600 000) after creation.
//!
//! # Resources, prompts, completion
//!
//! `demo://counter` (text, the `touch` count), `demo://blob` (16 bytes, base64),
//! `demo://item/1` … `demo://item/3`, then any added resource; template
//! `demo://item/{id}` (any id reads as `item ID`). Unknown URIs: -32002
//! (legacy) with `data.uri`. Prompts `greet {name, style?}` and `plain`, then
//! added ones. `completion/complete` completes `greet`'s `style` (formal, casual,
//! pirate) and the template's `id` (1 … 30, at most 10 values, with `total`
//! and `hasMore`). Bad params anywhere: -32602 naming the method or tool and field.
//!
//! # Skills
//!
//! With `--skills`, the skills extension (SEP-2640) is announced in both eras
//! (`capabilities.extensions["io.modelcontextprotocol/skills"] = {}`):
//! `skills/list` (paginated) and `skills/get` serve `release-notes` and
//! `stale-notes`, whose entry is out of date on purpose; their files read
//! through `resources/read` as `skill://...` (see `skills.rs`).
//!
//! Structure: one concept per file; `server` routes requests and owns the
//! state; a request that takes time runs in its own task; all output goes
//! through one writer task, so frames never interleave.

mod catalog;
mod completion;
mod era;
mod interaction;
mod lifecycle;
mod logging;
mod media;
mod prompts;
mod resources;
mod rpc;
mod server;
mod skills;
mod state;
mod tools;

#[cfg(test)]
mod tests;

use std::fmt::Display;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::mpsc;

pub use era::Era;
use server::Server;

/// Start-up faults and knobs of the demo server (the `mcpvisor demo-server` flags).
#[derive(Debug, Clone, clap::Args)]
pub struct DemoServerOptions {
    /// Exit at once with this code, before reading anything (crash-loop tests).
    #[arg(long, value_name = "CODE")]
    pub exit_immediately: Option<i32>,
    /// Read requests but never answer `initialize` nor `server/discover` (handshake time-out tests).
    #[arg(long)]
    pub no_initialize: bool,
    /// Stop reading stdin after this many lines (a server that stops reading its input).
    #[arg(long, value_name = "N")]
    pub stop_reading_after: Option<u64>,
    /// Append the method (and tool name) of every request received to this file, one per line.
    #[arg(long, value_name = "FILE")]
    pub request_log: Option<std::path::PathBuf>,
    /// Items per page of every list (pagination is always exercised by default).
    #[arg(long, default_value_t = DEFAULT_PAGE_SIZE)]
    pub page_size: usize,
    /// Protocol era(s) served: `legacy` (initialize), `modern` (2026-07-28) or `dual`.
    #[arg(long, value_enum, default_value_t = Era::Dual)]
    pub era: Era,
    /// Answer `resources/templates/list` with -32601 (method not found).
    #[arg(long)]
    pub no_templates: bool,
    /// Serve the skills extension (SEP-2640): `release-notes` and `stale-notes`.
    #[arg(long)]
    pub skills: bool,
}

/// Three `tools/list` pages by default: `tests/memory/memory_bound.rs` counts the lines the client sends
/// before its first call (initialize, initialized, 3 pages).
const DEFAULT_PAGE_SIZE: usize = 10;

/// The same server as `mcpvisor demo-server` without flags.
impl Default for DemoServerOptions {
    fn default() -> Self {
        DemoServerOptions {
            exit_immediately: None,
            no_initialize: false,
            stop_reading_after: None,
            request_log: None,
            page_size: DEFAULT_PAGE_SIZE,
            era: Era::Dual,
            no_templates: false,
            skills: false,
        }
    }
}

/// Runs the server on this process's stdin/stdout until stdin closes; returns the exit code.
pub fn run(options: DemoServerOptions) -> i32 {
    log(format_args!("started (pid {}, era {:?})", std::process::id(), options.era));
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

/// Never panics on a poisoned lock: the data stays consistent under every single operation.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn log(message: impl Display) {
    eprintln!("mcpvisor demo-server: {message}");
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
                if let Some(pause) = server.take_pause() {
                    log(format_args!("reading no input for {} ms (pause_reading)", pause.as_millis()));
                    tokio::time::sleep(pause).await;
                }
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
