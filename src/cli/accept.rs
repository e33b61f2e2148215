//! `tools --accept SERVER[/TOOL]`: shows what changed in a server's
//! withheld tools since they were pinned, with what the scanner finds in
//! the new texts, then pins the new definitions
//! ([`crate::integrity::pins`]). Starts no server: the pins file holds
//! both the pinned and the offered definitions.
//!
//! Invariants: every server-written text is shown escaped for the
//! terminal; `--json` is one object `{server, accepted, changes}`.

use serde_json::{json, Value};

use super::output::{report_text, Failure, Layout, Out};
use super::servers::Servers;
use super::session::prepare;
use super::Cli;
use crate::integrity::pins::{identity, pins_file, PendingChange, PinStore};
use crate::integrity::scan::{scan, ToolText};

/// The fields of a definition a change is shown by.
const FIELDS: [&str; 5] = ["title", "description", "inputSchema", "outputSchema", "annotations"];

pub fn accept(cli: &Cli, out: &Out, target: &str) -> Result<u8, Failure> {
    let (server, tool) = match target.split_once('/') {
        Some((server, tool)) => (server, Some(tool)),
        None => (target, None),
    };
    let servers = Servers::load(cli)?;
    let config = prepare([servers.get(server)?], |_| {})?
        .into_iter()
        .next()
        .ok_or_else(|| Failure::usage(format!("server `{server}` is disabled")))?;
    let file = pins_file(|name| std::env::var(name).ok())
        .ok_or_else(|| Failure::usage("no state directory: neither XDG_STATE_HOME nor HOME is set, so no tool is pinned"))?;
    let store = PinStore::open(file);
    let id = identity(&config).ok_or_else(|| Failure::usage(format!("server `{server}` runs in-process: its tools are not pinned")))?;
    let changes: Vec<PendingChange> = store.pending(&id).into_iter().filter(|change| tool.is_none_or(|tool| change.tool == tool)).collect();
    if changes.is_empty() {
        let what = tool.map_or_else(|| format!("server `{server}`"), |tool| format!("`{tool}` of server `{server}`"));
        return Err(Failure::usage(format!("no change of {what} is waiting to be accepted (`mcpvisor status` names withheld tools)")));
    }
    for change in &changes {
        out.answer(format!("{}/{}: {}", server, report_text(&change.tool, Layout::OneLine), change.change.as_str()));
        for field in FIELDS {
            let (before, after) = (change.pinned.as_ref().and_then(|pinned| pinned.get(field)), change.offered.get(field));
            if before != after {
                out.answer(format!("  {field}:"));
                out.answer(format!("  - {}", shown(before)));
                out.answer(format!("  + {}", shown(after)));
            }
        }
        for finding in findings(server, change) {
            out.answer(format!("  scan: {} {} in {}: {}", finding.severity.as_str(), finding.rule, finding.field, finding.reason));
        }
    }
    let accepted: Vec<String> = changes.iter().flat_map(|change| store.accept(&id, Some(&change.tool))).collect();
    out.answer(format!("accepted: {}", accepted.iter().map(|tool| report_text(tool, Layout::OneLine)).collect::<Vec<_>>().join(", ")));
    let changes: Vec<Value> = changes
        .iter()
        .map(|change| json!({"tool": change.tool, "change": change.change, "pinned": change.pinned, "offered": change.offered}))
        .collect();
    out.answer_json(&json!({"server": server, "accepted": accepted, "changes": changes}));
    Ok(0)
}

/// A field's value on one line, escaped (absent: `(none)`).
fn shown(value: Option<&Value>) -> String {
    match value {
        None => "(none)".into(),
        Some(Value::String(text)) => report_text(text, Layout::OneLine),
        Some(other) => report_text(&other.to_string(), Layout::OneLine),
    }
}

fn findings(server: &str, change: &PendingChange) -> Vec<crate::integrity::scan::Finding> {
    let offered = &change.offered;
    let text = ToolText {
        server,
        name: &change.tool,
        title: offered.get("title").and_then(Value::as_str),
        description: offered.get("description").and_then(Value::as_str),
        input_schema: offered.get("inputSchema"),
        output_schema: offered.get("outputSchema"),
    };
    scan(&text, &[])
}
