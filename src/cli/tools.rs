//! `tools` (the catalog, searchable, from the tool cache where it can:
//! see `catalog`) and `call` (one tool call, with a progress bar while the
//! tool reports progress).

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Serialize, Serializer};
use serde_json::Value;

use super::arguments::tool_arguments;
use super::catalog;
use super::output::{content_text, first_line, report_text, table, Failure, Layout, Out, Paint, Piece};
use super::servers::{Entry, Servers};
use super::session::{start_selected, warn_about, Session};
use super::{Cli, EXIT_TOOL_ERROR};
use crate::actors::{KeptTool, Progress, ProgressSink, ToolEntry};
use crate::catalog_cache::CatalogCache;
use crate::tool_search;
use crate::{CallTool, CallToolResult};

#[derive(Debug, clap::Args)]
pub struct ToolsArgs {
    /// Only this server's tools (only it is started).
    #[arg(long, value_name = "SERVER")]
    pub server: Option<String>,
    /// Only tools matching the words of TEXT (names, titles, descriptions, server names), best first.
    /// Answered from the tool cache for servers listed recently under the same configuration.
    #[arg(long, value_name = "TEXT")]
    pub search: Option<String>,
    /// Start the servers and list their tools live even when the tool cache could answer.
    #[arg(long)]
    pub refresh: bool,
    /// Show what changed in SERVER's withheld tools (or TOOL's) since they were pinned, then accept it (starts no server).
    #[arg(long, value_name = "SERVER[/TOOL]", conflicts_with_all = ["search", "refresh", "server"])]
    pub accept: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct CallArgs {
    pub server: String,
    /// The tool's own name (as `mcpvisor tools` shows it).
    pub tool: String,
    /// The arguments as one JSON object, e.g. '{"text": "hi"}'.
    #[arg(value_name = "JSON")]
    pub arguments: Option<String>,
    /// One argument, typed by the tool's input schema (numbers, booleans, JSON for objects and arrays); repeatable.
    #[arg(long = "arg", value_name = "KEY=VALUE")]
    pub args: Vec<String>,
    /// Give up after this many seconds (default: the server's `timeout`).
    #[arg(long, value_name = "SECS", value_parser = super::parse_seconds)]
    pub timeout: Option<Duration>,
}

pub async fn tools(cli: &Cli, out: &Out, args: &ToolsArgs) -> Result<u8, Failure> {
    if let Some(target) = &args.accept {
        return super::accept::accept(cli, out, target);
    }
    let servers = Servers::load(cli)?;
    let only = args.server.as_deref();
    let cache = CatalogCache::default_location();
    let catalog = match (&args.search, &cache) {
        (Some(_), Some(cache)) if !args.refresh => catalog::cached_or_live(&servers, only, cache).await?,
        _ => catalog::live(&servers, only, cache.as_ref()).await?,
    };
    if !out.json {
        warn_about(&catalog.statuses);
        if let Some(note) = catalog.cache_note() {
            eprintln!("note: {note}");
        }
    }
    let of_server: Vec<ToolEntry<KeptTool>> =
        catalog.tools.into_iter().filter(|entry| only.is_none_or(|server| entry.server == server)).collect();
    let shown: Vec<&ToolEntry<KeptTool>> = match &args.search {
        Some(query) => tool_search::search(query, &of_server, usize::MAX),
        None => of_server.iter().collect(),
    };
    out.answer_json(&ToolsJson(&shown));
    let mut rows = vec![vec!["SERVER".into(), "TOOL".into(), "DESCRIPTION".into()]];
    rows.extend(shown.iter().map(|entry| {
        let tool = entry.tool.head();
        vec![entry.server.clone(), tool.name.to_string(), first_line(tool.description.as_deref())]
    }));
    for line in table(&rows) {
        out.answer(line);
    }
    if shown.is_empty() {
        out.pieces([Piece(Paint::Dim, "(no tools)".into())]);
    }
    Ok(0)
}

/// Each tool as MCP describes it, plus its server and exposed name; one
/// tool at a time is made into JSON as it is written (a catalog can hold
/// 100,000 tools, and a parsed schema costs many times its text).
struct ToolsJson<'a>(&'a [&'a ToolEntry<KeptTool>]);

impl Serialize for ToolsJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|entry| {
            let mut fields = entry.tool.fields();
            fields.set("server", entry.server.clone().into());
            fields.set("exposedName", entry.name.clone().into());
            // A value, so schemas are laid out like the rest when printed pretty.
            serde_json::to_value(fields).unwrap_or_default()
        }))
    }
}

pub async fn call(cli: &Cli, out: &Out, args: &CallArgs) -> Result<u8, Failure> {
    let servers = Servers::load(cli)?;
    let entry = servers.get(&args.server)?;
    let session = start_selected(&servers, Some(&args.server), "").await?;
    let result = call_started(&session, entry, args).await;
    session.close().await;
    let result = result?;
    out.answer_json(&result);
    let failed = result.is_error == Some(true);
    if !out.json {
        let text = result_text(&result);
        if failed {
            return Err(Failure {
                code: EXIT_TOOL_ERROR,
                message: format!("`{}` of server `{}` answered with an error: {text}", args.tool, args.server),
            });
        }
        out.answer(text);
    }
    Ok(if failed { EXIT_TOOL_ERROR } else { 0 })
}

async fn call_started(session: &Session, entry: &Entry, args: &CallArgs) -> Result<CallToolResult, Failure> {
    let catalog = session.handle.list_kept_tools().await;
    let of_server: Vec<&ToolEntry<KeptTool>> = catalog.iter().filter(|t| t.server == args.server).collect();
    let Some(tool) = of_server.iter().find(|t| t.tool.name() == args.tool) else {
        let statuses = session.handle.status().await;
        if statuses.iter().any(|status| status.name == args.server && status.withheld.contains(&args.tool)) {
            // The connection refuses it, saying why and what to do.
            let call = CallTool::new(args.tool.clone(), Value::Object(Default::default()));
            return Ok(session.handle.call_on(&args.server, call).await?);
        }
        if !entry.config()?.tools.permits(&args.tool) {
            return Err(Failure::usage(format!(
                "tool `{}` of server `{}` is excluded by the server's tool allow/deny lists; change them in its configuration to call it",
                args.tool, args.server
            )));
        }
        let names: Vec<&str> = of_server.iter().map(|t| t.tool.name()).collect();
        return Err(Failure::usage(format!(
            "server `{}` has no tool `{}`; its tools are: {} (`mcpvisor tools --server {}` describes them)",
            args.server,
            args.tool,
            names.join(", "),
            args.server
        )));
    };
    let schema = tool.tool.tool().input_schema;
    let arguments = tool_arguments(args.arguments.as_deref(), &args.args, &schema, &args.server, &args.tool)?;
    let (sink, progress) = ProgressSink::channel();
    let mut call = CallTool::new(args.tool.clone(), Value::Object(arguments)).with_progress(sink);
    if let Some(timeout) = args.timeout {
        call = call.with_timeout(timeout);
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    let shower = tokio::spawn(show_progress(progress, bar.clone(), format!("{}/{}", args.server, args.tool)));
    let result = session.handle.call_on(&args.server, call).await;
    shower.abort();
    bar.finish_and_clear();
    Ok(result?)
}

/// Draws the tool's progress notifications as a bar on stderr (hidden when
/// stderr is not a terminal).
async fn show_progress(mut progress: tokio::sync::mpsc::UnboundedReceiver<Progress>, bar: ProgressBar, label: String) {
    // Positions are kept in thousandths: progress values may be fractions.
    const SCALE: f64 = 1000.0;
    let style =
        ProgressStyle::with_template("{prefix:.bold} [{bar:30}] {percent:>3}% {msg}").unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style.progress_chars("=> "));
    bar.set_prefix(label);
    while let Some(update) = progress.recv().await {
        let total = update.total.filter(|t| *t > 0.0).unwrap_or(update.progress.max(1.0) * 2.0);
        bar.set_length((total * SCALE) as u64);
        bar.set_position((update.progress.clamp(0.0, total) * SCALE) as u64);
        let count = match update.total {
            Some(total) => format!("{}/{}", update.progress, total),
            None => format!("{}", update.progress),
        };
        bar.set_message(report_text(&format!("{count} {}", update.message.unwrap_or_default()), Layout::OneLine));
    }
}

/// A result as text: its content blocks, else its structured content.
fn result_text(result: &CallToolResult) -> String {
    if result.content.is_empty() {
        if let Some(structured) = &result.structured_content {
            return serde_json::to_string_pretty(structured).unwrap_or_default();
        }
    }
    result.content.iter().map(content_text).collect::<Vec<_>>().join("\n")
}
