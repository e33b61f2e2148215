//! `scan`: the configured servers' tools read for what their texts may
//! hide from the user and say to a model ([`crate::integrity::scan`]).
//!
//! Invariants: the servers are started as `tools` starts them (an
//! untrusted project's are not); the exit status is 1 when a finding at
//! or above `--fail-on` is found, 0 otherwise (3 when a server could not
//! be listed, as `tools`); `--json` is one array of findings, each with
//! its server and tool.

use serde::Serialize;
use serde_json::Value;

use super::catalog;
use super::output::{table, Failure, Out, Paint, Piece};
use super::servers::Servers;
use super::session::warn_about;
use super::{Cli, EXIT_TOOL_ERROR};
use crate::catalog_cache::CatalogCache;
use crate::integrity::scan::{rules_loaded, scan as scan_tool, Finding, OtherTool, Severity, ToolText};

#[derive(Debug, clap::Args)]
pub struct ScanArgs {
    /// Only this server's tools (only it is started; the others' names still count for shadowing when cached).
    #[arg(long, value_name = "SERVER")]
    pub server: Option<String>,
    /// Exit with status 1 when a finding of this severity or above is found: low, medium or high.
    #[arg(long, value_name = "SEVERITY", default_value = "high", value_parser = parse_severity)]
    pub fail_on: Severity,
}

fn parse_severity(text: &str) -> Result<Severity, String> {
    text.parse()
}

/// One finding of one tool, as `--json` writes it.
#[derive(Serialize)]
struct Found<'a> {
    server: &'a str,
    tool: &'a str,
    #[serde(flatten)]
    finding: &'a Finding,
}

pub async fn scan(cli: &Cli, out: &Out, args: &ScanArgs) -> Result<u8, Failure> {
    if let Err(error) = rules_loaded() {
        // A bug (the tests load the same file); what still works is said, not hidden.
        eprintln!("mcpvisor: warning: the instruction rules did not load ({error}); only hidden Unicode and shadowing are checked");
    }
    let servers = Servers::load(cli)?;
    let cache = CatalogCache::default_location();
    let catalog = catalog::live(&servers, args.server.as_deref(), cache.as_ref()).await?;
    if !out.json {
        warn_about(&catalog.statuses);
    }
    let others: Vec<OtherTool> = catalog.tools.iter().map(|entry| OtherTool { server: &entry.server, name: entry.tool.name() }).collect();
    let mut found: Vec<(String, String, Finding)> = Vec::new();
    for entry in catalog.tools.iter().filter(|entry| args.server.as_deref().is_none_or(|server| entry.server == server)) {
        let tool = entry.tool.tool();
        let input = Value::Object((*tool.input_schema).clone());
        let output = tool.output_schema.as_ref().map(|schema| Value::Object((**schema).clone()));
        let text = ToolText {
            server: &entry.server,
            name: &tool.name,
            title: tool.title.as_deref(),
            description: tool.description.as_deref(),
            input_schema: Some(&input),
            output_schema: output.as_ref(),
        };
        found.extend(scan_tool(&text, &others).into_iter().map(|finding| (entry.server.clone(), tool.name.to_string(), finding)));
    }
    found.sort_by(|a, b| b.2.severity.cmp(&a.2.severity).then_with(|| (&a.0, &a.1).cmp(&(&b.0, &b.1))));
    let json: Vec<Found> = found.iter().map(|(server, tool, finding)| Found { server, tool, finding }).collect();
    out.answer_json(&json);
    let mut rows = vec![vec!["SEVERITY".into(), "TOOL".into(), "RULE".into(), "WHERE".into(), "WHY".into()]];
    rows.extend(found.iter().map(|(server, tool, finding)| {
        let why = format!("{}: “{}”", finding.reason, finding.excerpt);
        vec![finding.severity.as_str().into(), format!("{server}/{tool}"), finding.rule.clone(), finding.field.clone(), why]
    }));
    if found.is_empty() {
        out.pieces([Piece(Paint::Dim, format!("no findings in {} tools", catalog.tools.len()))]);
    } else {
        for line in table(&rows) {
            out.answer(line);
        }
    }
    let failing = found.iter().filter(|(_, _, finding)| finding.severity >= args.fail_on).count();
    if failing > 0 && !out.json {
        eprintln!(
            "mcpvisor: {failing} finding(s) at {} or above; read each tool's text before using its server (`mcpvisor tools --server NAME --json`)",
            args.fail_on.as_str()
        );
    }
    Ok(if failing > 0 { EXIT_TOOL_ERROR } else { 0 })
}
