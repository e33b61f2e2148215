//! The connection as the one place a server's tools are offered and a call
//! to them admitted, with tool pins ([`crate::integrity::pins`]): a listed
//! tool whose definition changed since it was pinned (or that disappeared
//! and came back) is left out of what goes to the catalog, named in the
//! server's status warnings, and a call to it is refused with
//! [`CallError::Withheld`], until `mcpvisor tools --accept` accepts it.

use super::*;
use crate::integrity::pins::{self, Withheld};
use crate::pool::KeptTool;

impl Connection {
    /// The tools of a listing that may be offered; the others are kept in
    /// `withheld` (all offered when the runtime pins nothing).
    pub(super) fn admit_listed(&mut self, tools: Vec<KeptTool>) -> Vec<KeptTool> {
        let Some(store) = self.parts.pins.clone().filter(|_| self.config.pin) else { return tools };
        let Some(identity) = pins::identity(&self.config) else { return tools };
        let listed: Vec<(String, serde_json::Value)> =
            tools.iter().map(|tool| (tool.name().to_string(), pins::definition(&tool.tool()))).collect();
        self.withheld = store.review(&identity, &self.config.name, &listed);
        for withheld in &self.withheld {
            tracing::warn!(server = %self.config.name, tool = %withheld.tool, "tool withheld: {}", withheld.change.as_str());
        }
        tools.into_iter().filter(|tool| !self.withheld.iter().any(|withheld| withheld.tool == tool.name())).collect()
    }

    /// Why a call to `tool` is refused, if it is withheld.
    pub(super) fn withheld(&self, tool: &str) -> Option<&Withheld> {
        self.withheld.iter().find(|withheld| withheld.tool == tool)
    }

    /// The status warnings of the withheld tools, each saying what to do.
    pub(super) fn withheld_warnings(&self) -> impl Iterator<Item = String> + '_ {
        self.withheld.iter().map(|withheld| {
            format!(
                "tool `{}` is withheld: {}; `mcpvisor tools --accept {}/{}` shows the change and accepts it",
                withheld.tool,
                withheld.change.as_str(),
                self.config.name,
                withheld.tool
            )
        })
    }
}

/// The refusal of a call to a withheld tool.
pub(super) fn refusal(server: &str, withheld: &Withheld) -> CallError {
    CallError::Withheld { server: server.to_string(), tool: withheld.tool.clone(), change: withheld.change.as_str().to_string() }
}
