//! The connection as the one place a server's tools are offered and a call
//! to them admitted. A listed tool is withheld (left out of what goes to
//! the catalog, named in the server's status warnings, a call to it
//! refused) when its definition changed since it was pinned
//! ([`crate::integrity::pins`]; [`CallError::Withheld`], until `mcpvisor
//! tools --accept` accepts it), or when the scanner's findings in its
//! texts reach the server's `withhold` severity
//! ([`crate::integrity::scan`]; [`CallError::Flagged`]). The scan here
//! sees the server's own tools only: shadowing of other servers' tools is
//! `mcpvisor scan`'s to report.

use super::*;
use crate::config::{Pinning, Severity};
use crate::integrity::pins::{self, Withheld};
use crate::integrity::scan::{self, ToolText};
use crate::pool::KeptTool;

/// A tool of the last listing that is not offered, and why.
#[derive(Debug, Clone)]
pub(super) enum Held {
    /// Its pinned definition changed.
    Changed(Withheld),
    /// The scanner found this in it (`high conceal in description: ...`).
    Flagged { tool: String, finding: String },
}

impl Held {
    pub(super) fn tool(&self) -> &str {
        match self {
            Held::Changed(withheld) => &withheld.tool,
            Held::Flagged { tool, .. } => tool,
        }
    }

    /// The refusal of a call to it.
    pub(super) fn refusal(&self, server: &str) -> CallError {
        let server = server.to_string();
        match self {
            Held::Changed(withheld) => {
                CallError::Withheld { server, tool: withheld.tool.clone(), change: withheld.change.as_str().to_string() }
            }
            Held::Flagged { tool, finding } => CallError::Flagged { server, tool: tool.clone(), finding: finding.clone() },
        }
    }
}

impl Connection {
    /// The tools of a listing that may be offered; the others are kept in
    /// `withheld` (all offered when the runtime pins nothing and the server withholds nothing).
    /// With `pin = "notify"`, a change is accepted at once instead, and told
    /// (a warning, an [`Event::ToolAccepted`], a status warning).
    pub(super) fn admit_listed(&mut self, tools: Vec<KeptTool>) -> Vec<KeptTool> {
        let mut held: Vec<Held> = self.pin_review(&tools).into_iter().map(Held::Changed).collect();
        if self.config.pin == Pinning::Notify {
            held.retain(|held| !matches!(held, Held::Changed(changed) if self.accept_with_notice(changed)));
        }
        if let Some(level) = self.config.withhold {
            for tool in &tools {
                if !held.iter().any(|held| held.tool() == tool.name()) {
                    held.extend(flagged(&self.config.name, &tool.tool(), level));
                }
            }
        }
        for withheld in &held {
            tracing::warn!(server = %self.config.name, tool = %withheld.tool(), "tool withheld: {}", withheld.refusal(&self.config.name));
        }
        self.withheld = held;
        tools.into_iter().filter(|tool| !self.withheld.iter().any(|withheld| withheld.tool() == tool.name())).collect()
    }

    /// The listed tools whose pinned definitions changed (none when not pinned).
    fn pin_review(&self, tools: &[KeptTool]) -> Vec<Withheld> {
        let Some(store) = self.parts.pins.as_ref().filter(|_| self.config.pin != Pinning::Off) else { return Vec::new() };
        let Some(identity) = pins::identity(&self.config) else { return Vec::new() };
        let listed: Vec<(String, serde_json::Value)> =
            tools.iter().map(|tool| (tool.name().to_string(), pins::definition(&tool.tool()))).collect();
        store.review(&identity, &self.config.name, &listed)
    }

    /// Accepts a change to a pinned tool and tells of it; false if it could not be accepted.
    fn accept_with_notice(&mut self, changed: &Withheld) -> bool {
        let (Some(store), Some(identity)) = (self.parts.pins.as_ref(), pins::identity(&self.config)) else { return false };
        if store.accept(&identity, Some(&changed.tool)).is_empty() {
            return false;
        }
        let (server, change) = (self.config.name.clone(), changed.change.as_str());
        let notice = format!("tool `{}` changed ({change}) and the change was accepted, as pin = \"notify\" says", changed.tool);
        tracing::warn!(server = %server, tool = %changed.tool, "{notice}");
        self.tool_warnings.push(notice);
        self.events.do_send(Event::ToolAccepted { server, tool: changed.tool.clone(), change: change.to_string() });
        true
    }

    /// Why a call to `tool` is refused, if it is withheld.
    pub(super) fn withheld(&self, tool: &str) -> Option<&Held> {
        self.withheld.iter().find(|withheld| withheld.tool() == tool)
    }

    /// The status warnings of the withheld tools, each saying what to do.
    pub(super) fn withheld_warnings(&self) -> impl Iterator<Item = String> + '_ {
        self.withheld.iter().map(|withheld| match withheld {
            Held::Changed(withheld) => format!(
                "tool `{}` is withheld: {}; `mcpvisor tools --accept {}/{}` shows the change and accepts it",
                withheld.tool,
                withheld.change.as_str(),
                self.config.name,
                withheld.tool
            ),
            Held::Flagged { tool, finding } => format!(
                "tool `{tool}` is withheld: the scanner found {finding}; `mcpvisor scan --server {}` shows every finding",
                self.config.name
            ),
        })
    }
}

/// The tool, withheld, when its worst finding reaches `level`.
fn flagged(server: &str, tool: &rmcp::model::Tool, level: Severity) -> Option<Held> {
    let input = serde_json::Value::Object((*tool.input_schema).clone());
    let output = tool.output_schema.as_ref().map(|schema| serde_json::Value::Object((**schema).clone()));
    let text = ToolText {
        server,
        name: &tool.name,
        title: tool.title.as_deref(),
        description: tool.description.as_deref(),
        input_schema: Some(&input),
        output_schema: output.as_ref(),
    };
    // Findings come sorted, the most severe first.
    let worst = scan::scan(&text, &[]).into_iter().next().filter(|finding| finding.severity >= level)?;
    let finding = format!("{} {} in {}: {}", worst.severity.as_str(), worst.rule, worst.field, worst.reason);
    Some(Held::Flagged { tool: tool.name.to_string(), finding })
}
