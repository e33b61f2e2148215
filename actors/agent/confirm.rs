//! When a tool call waits for the user's word, and who gives it.
//!
//! The rule, first match wins: a choice the user made "always" for this
//! tool in this session; the configuration's overrides for the tool or
//! its server ([`AgentSettings::confirm_override`]); the session's mode.
//! In mode `ask` a tool annotated `readOnlyHint: true` and not
//! `destructiveHint: true` runs without asking. A call that needs asking
//! when nobody can answer ([`ConfirmPolicy`] without an asker) is denied.

use std::collections::HashMap;

use actix::prelude::*;
use serde::Serialize;

use crate::actors::ToolEntry;
use crate::config::{AgentSettings, ConfirmMode};

/// A tool call that waits for the user's decision. The front end that
/// answers it (terminal prompt, editor, embedding program) gets everything
/// it needs to show it.
#[derive(Message, Debug, Clone, Serialize)]
#[rtype(result = "Decision")]
pub struct ConfirmRequest {
    pub call_id: String,
    /// The exposed name (`mcp__server__tool`).
    pub tool: String,
    pub server: String,
    /// The server's own name of the tool.
    pub server_tool: String,
    pub title: Option<String>,
    pub arguments: serde_json::Value,
    pub read_only: bool,
    pub destructive: bool,
}

/// The user's answer to a [`ConfirmRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    AllowOnce,
    /// Allow, and do not ask again for this tool in this session.
    AllowAlways,
    RejectOnce,
    /// Deny, and deny this tool without asking for the rest of the session.
    RejectAlways,
    /// The question was withdrawn (the turn was cancelled) or the asker went away.
    Cancelled,
}

impl Decision {
    pub fn allows(self) -> bool {
        matches!(self, Decision::AllowOnce | Decision::AllowAlways)
    }
}

/// What the policy says about one call before anyone is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it; the reason is shown in events (`read-only`, `mode never`, ...).
    Allow(&'static str),
    Ask,
    /// Do not run it; the user said so earlier in this session.
    Deny(&'static str),
}

/// The session's confirmation state.
#[derive(Debug, Clone, Default)]
pub struct ConfirmPolicy {
    pub mode: ConfirmMode,
    overrides: AgentSettings,
    /// Exposed tool name → allowed, for the "always" answers of this session.
    remembered: HashMap<String, bool>,
}

impl ConfirmPolicy {
    /// `overrides`: the configuration's `[agent]` (only its server overrides are used).
    pub fn new(mode: ConfirmMode, overrides: AgentSettings) -> ConfirmPolicy {
        ConfirmPolicy { mode, overrides, remembered: HashMap::new() }
    }

    pub fn judge(&self, entry: &ToolEntry) -> Verdict {
        match self.remembered.get(&entry.name) {
            Some(true) => return Verdict::Allow("allowed always in this session"),
            Some(false) => return Verdict::Deny("the user denied this tool for the rest of the session"),
            None => {}
        }
        let configured = self.overrides.confirm_override(&entry.server, &entry.tool.name);
        match configured.unwrap_or(self.mode) {
            ConfirmMode::Always => Verdict::Ask,
            ConfirmMode::Never if configured.is_some() => Verdict::Allow("trusted in the configuration"),
            ConfirmMode::Never => Verdict::Allow("confirmation is off"),
            ConfirmMode::Ask if is_read_only(entry) => Verdict::Allow("read-only"),
            ConfirmMode::Ask => Verdict::Ask,
        }
    }

    /// Keeps an "always" answer for the rest of the session.
    pub fn remember(&mut self, tool: &str, decision: Decision) {
        match decision {
            Decision::AllowAlways => self.remembered.insert(tool.to_string(), true),
            Decision::RejectAlways => self.remembered.insert(tool.to_string(), false),
            _ => None,
        };
    }
}

/// `readOnlyHint: true` and not `destructiveHint: true`.
pub fn is_read_only(entry: &ToolEntry) -> bool {
    let annotations = entry.tool.annotations.as_ref();
    annotations.and_then(|a| a.read_only_hint) == Some(true) && annotations.and_then(|a| a.destructive_hint) != Some(true)
}

/// `destructiveHint`, which MCP defaults to true for tools that are not read-only.
pub fn is_destructive(entry: &ToolEntry) -> bool {
    let annotations = entry.tool.annotations.as_ref();
    !is_read_only(entry) && annotations.and_then(|a| a.destructive_hint) != Some(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::agent::ServerConfirm;
    use rmcp::model::{Tool, ToolAnnotations};
    use std::sync::Arc;

    fn entry(server: &str, tool: &str, read_only: Option<bool>, destructive: Option<bool>) -> ToolEntry {
        let mut annotations = ToolAnnotations::default();
        annotations.read_only_hint = read_only;
        annotations.destructive_hint = destructive;
        let mut tool = Tool::new(tool.to_string(), "", Arc::new(Default::default()));
        tool.annotations = Some(annotations);
        ToolEntry { name: crate::naming::exposed_name(server, &tool.name), server: server.into(), tool }
    }

    #[test]
    fn ask_mode_runs_read_only_tools_and_asks_for_the_rest() {
        let policy = ConfirmPolicy::new(ConfirmMode::Ask, AgentSettings::default());
        assert_eq!(policy.judge(&entry("s", "get", Some(true), None)), Verdict::Allow("read-only"));
        assert_eq!(policy.judge(&entry("s", "get", Some(true), Some(true))), Verdict::Ask, "destructive wins over read-only");
        assert_eq!(policy.judge(&entry("s", "put", None, None)), Verdict::Ask);
        let always = ConfirmPolicy::new(ConfirmMode::Always, AgentSettings::default());
        assert_eq!(always.judge(&entry("s", "get", Some(true), None)), Verdict::Ask);
        let never = ConfirmPolicy::new(ConfirmMode::Never, AgentSettings::default());
        assert!(matches!(never.judge(&entry("s", "put", None, Some(true))), Verdict::Allow(_)));
    }

    #[test]
    fn overrides_and_remembered_answers_come_first() {
        let mut settings = AgentSettings::default();
        settings.servers.insert("t".into(), ServerConfirm { trust: true, ..Default::default() });
        settings.servers.insert("g".into(), ServerConfirm { tools: vec![("get_*".into(), ConfirmMode::Always)], ..Default::default() });
        let mut policy = ConfirmPolicy::new(ConfirmMode::Ask, settings);
        assert_eq!(policy.judge(&entry("t", "put", None, None)), Verdict::Allow("trusted in the configuration"));
        assert_eq!(policy.judge(&entry("g", "get_x", Some(true), None)), Verdict::Ask);
        let put = entry("s", "put", None, None);
        policy.remember(&put.name, Decision::AllowAlways);
        assert!(matches!(policy.judge(&put), Verdict::Allow(_)));
        policy.remember(&put.name, Decision::RejectAlways);
        assert!(matches!(policy.judge(&put), Verdict::Deny(_)));
        policy.remember("other", Decision::AllowOnce);
        assert_eq!(policy.judge(&entry("s", "other", None, None)), Verdict::Ask, "once is not remembered");
    }
}
