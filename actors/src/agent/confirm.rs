//! When a tool call waits for the user's word, and who gives it.
//!
//! The rule, first match wins:
//! 1. a `[agent] deny` rule ([`super::rules`]) denies;
//! 2. a choice the user made "always" in this session: "deny always"
//!    covers the tool; "allow always" covers the tool, or for
//!    `run_command` only the command's prefix (`git diff:*`), so
//!    `git status` asks again;
//! 3. a `[agent] allow` rule allows;
//! 4. the configuration's overrides for the tool or its server
//!    ([`AgentSettings::confirm_override`]);
//! 5. the session's mode. In mode `ask` only these run without asking:
//!    the built-in `read_file` and `list_directory` on a path that really
//!    leads inside the [`Workspace`], and tools annotated
//!    `readOnlyHint: true` (not `destructiveHint: true`) of a server the
//!    configuration trusts (`trust = true`). Annotations are the server's
//!    claims: an untrusted server's never skip a question.
//!
//! A call that needs asking when nobody can answer ([`ConfirmPolicy`]
//! without an asker) is denied.

use std::collections::HashMap;
use std::path::PathBuf;

use actix::prelude::*;
use rmcp::model::JsonObject;
use serde::Serialize;
use serde_json::Value;

use super::rules::{self, Builtin};
use crate::builtin_tools::{Workspace, LIST_DIRECTORY, READ_FILE, RUN_COMMAND};
use crate::config::{AgentSettings, ConfirmMode, ToolRule};
use crate::ToolEntry;

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
    /// What "allow always" would allow from now on: `this tool`, or the
    /// commands of a prefix (`` `git diff` commands ``).
    pub always_allows: String,
}

/// The user's answer to a [`ConfirmRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    AllowOnce,
    /// Allow, and do not ask again in this session for this tool (for
    /// `run_command`: for commands of this one's prefix).
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
    Allow(String),
    Ask,
    /// Do not run it; the reason is told to the model and shown.
    Deny(String),
}

/// The session's confirmation state.
#[derive(Debug, Clone, Default)]
pub struct ConfirmPolicy {
    pub mode: ConfirmMode,
    overrides: AgentSettings,
    /// The built-in tools' server name (`builtin`, `builtin_s1` in an editor session).
    builtin: String,
    /// Where relative paths of the built-in tools start.
    cwd: PathBuf,
    workspace: Workspace,
    /// Exposed tool name → allowed, for the "always" answers of this session.
    remembered: HashMap<String, bool>,
    /// The command forms "allow always" was given for ([`rules::remembered_form`]).
    commands: Vec<String>,
}

impl ConfirmPolicy {
    /// `overrides`: the configuration's `[agent]` (its server overrides,
    /// rules and directories). Until [`ConfirmPolicy::with_workspace`], no
    /// path is inside the workspace.
    pub fn new(mode: ConfirmMode, overrides: AgentSettings) -> ConfirmPolicy {
        ConfirmPolicy { mode, overrides, builtin: crate::builtin_tools::SERVER_NAME.into(), ..ConfirmPolicy::default() }
    }

    /// The built-in tools are served as `builtin` and work in `cwd`: the
    /// workspace is `cwd` and the configuration's `directories`.
    pub fn with_workspace(mut self, builtin: &str, cwd: PathBuf) -> ConfirmPolicy {
        let roots = std::iter::once(cwd.clone()).chain(self.overrides.directories.iter().map(|dir| cwd.join(dir)));
        self.workspace = Workspace::new(roots.collect::<Vec<_>>());
        self.builtin = builtin.into();
        self.cwd = cwd;
        self
    }

    /// The workspace the built-in file tools read in without asking.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    fn builtin(&self) -> Builtin<'_> {
        Builtin { server: &self.builtin, cwd: &self.cwd }
    }

    fn rule<'r>(&self, rules: &'r [ToolRule], entry: &ToolEntry, arguments: &JsonObject, deny: bool) -> Option<&'r ToolRule> {
        rules.iter().find(|rule| rules::matches(rule, entry, arguments, self.builtin(), deny))
    }

    /// The built-in tool `entry` is, if it is one.
    fn builtin_tool<'e>(&self, entry: &'e ToolEntry) -> Option<&'e str> {
        (entry.server == self.builtin).then_some(&*entry.tool.name)
    }

    fn command<'a>(&self, entry: &ToolEntry, arguments: &'a JsonObject) -> Option<&'a str> {
        match self.builtin_tool(entry) {
            Some(RUN_COMMAND) => Some(arguments.get("command").and_then(Value::as_str).unwrap_or_default()),
            _ => None,
        }
    }

    pub fn judge(&self, entry: &ToolEntry, arguments: &JsonObject) -> Verdict {
        if let Some(rule) = self.rule(&self.overrides.deny, entry, arguments, true) {
            return Verdict::Deny(format!("the configuration denies it ([agent] deny rule `{}`)", rule.text));
        }
        match (self.remembered.get(&entry.name), self.command(entry, arguments)) {
            (Some(false), _) => return Verdict::Deny("the user denied this tool for the rest of the session".into()),
            (Some(true), None) => return Verdict::Allow("allowed always in this session".into()),
            (_, Some(command)) => {
                if let Some(kept) = self.commands.iter().find(|kept| rules::remembered_covers(kept, command)) {
                    return Verdict::Allow(format!("`{kept}` commands allowed always in this session"));
                }
            }
            (None, None) => {}
        }
        if let Some(rule) = self.rule(&self.overrides.allow, entry, arguments, false) {
            return Verdict::Allow(format!("allowed by the [agent] allow rule `{}`", rule.text));
        }
        let configured = self.overrides.confirm_override(&entry.server, &entry.tool.name);
        match configured.unwrap_or(self.mode) {
            ConfirmMode::Always => Verdict::Ask,
            ConfirmMode::Never if configured.is_some() => Verdict::Allow("trusted in the configuration".into()),
            ConfirmMode::Never => Verdict::Allow("confirmation is off".into()),
            ConfirmMode::Ask => self.judge_ask(entry, arguments),
        }
    }

    /// Mode `ask`: see the module docs.
    fn judge_ask(&self, entry: &ToolEntry, arguments: &JsonObject) -> Verdict {
        match self.builtin_tool(entry) {
            Some(READ_FILE | LIST_DIRECTORY) => {
                let path = arguments.get("path").and_then(Value::as_str).unwrap_or_default();
                let real = crate::builtin_tools::paths::real(&crate::builtin_tools::paths::expand(&self.cwd, path));
                match self.workspace.contains(&real) {
                    true => Verdict::Allow("read-only, inside the workspace".into()),
                    false => Verdict::Ask,
                }
            }
            Some(_) => Verdict::Ask,
            None if self.trusts(&entry.server) && is_read_only(entry) => Verdict::Allow("read-only, of a trusted server".into()),
            None => Verdict::Ask,
        }
    }

    fn trusts(&self, server: &str) -> bool {
        self.overrides.servers.get(server).is_some_and(|server| server.trust)
    }

    /// What "allow always" on this call would allow (for [`ConfirmRequest::always_allows`]).
    pub fn always_allows(&self, entry: &ToolEntry, arguments: &JsonObject) -> String {
        match self.command(entry, arguments) {
            Some(command) => match rules::remembered_form(command) {
                form if form.ends_with(":*") => format!("`{}` commands", form.trim_end_matches(":*")),
                _ => "this exact command".into(),
            },
            None => "this tool".into(),
        }
    }

    /// Keeps an "always" answer for the rest of the session.
    pub fn remember(&mut self, entry: &ToolEntry, arguments: &JsonObject, decision: Decision) {
        match (decision, self.command(entry, arguments)) {
            (Decision::AllowAlways, Some(command)) => self.commands.push(rules::remembered_form(command)),
            (Decision::AllowAlways, None) => {
                self.remembered.insert(entry.name.clone(), true);
            }
            (Decision::RejectAlways, _) => {
                self.remembered.insert(entry.name.clone(), false);
            }
            _ => {}
        }
    }
}

/// `readOnlyHint: true` and not `destructiveHint: true`: the server's
/// claim, which only a trusted server's calls may act on.
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

    fn args(value: serde_json::Value) -> JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

    fn none() -> JsonObject {
        JsonObject::new()
    }

    #[test]
    fn ask_mode_trusts_annotations_of_trusted_servers_only() {
        let policy = ConfirmPolicy::new(ConfirmMode::Ask, AgentSettings::default());
        assert_eq!(policy.judge(&entry("s", "wipe", Some(true), None), &none()), Verdict::Ask, "an untrusted server's readOnlyHint asks");
        assert_eq!(policy.judge(&entry("s", "put", None, None), &none()), Verdict::Ask);
        let mut settings = AgentSettings::default();
        settings.servers.insert("t".into(), ServerConfirm { trust: true, confirm: Some(ConfirmMode::Ask), ..Default::default() });
        let trusting = ConfirmPolicy::new(ConfirmMode::Ask, settings);
        assert!(matches!(trusting.judge(&entry("t", "get", Some(true), None), &none()), Verdict::Allow(_)));
        assert_eq!(trusting.judge(&entry("t", "get", Some(true), Some(true)), &none()), Verdict::Ask, "destructive wins over read-only");
        assert_eq!(trusting.judge(&entry("t", "put", None, None), &none()), Verdict::Ask);
        let always = ConfirmPolicy::new(ConfirmMode::Always, AgentSettings::default());
        assert_eq!(always.judge(&entry("s", "get", Some(true), None), &none()), Verdict::Ask);
        let never = ConfirmPolicy::new(ConfirmMode::Never, AgentSettings::default());
        assert!(matches!(never.judge(&entry("s", "put", None, Some(true)), &none()), Verdict::Allow(_)));
    }

    #[test]
    fn built_in_reads_run_inside_the_workspace_and_ask_outside() {
        let root = tempfile::tempdir().unwrap();
        let work = crate::builtin_tools::paths::real(root.path()).join("work");
        std::fs::create_dir_all(work.join("sub")).unwrap();
        std::os::unix::fs::symlink("/etc", work.join("etc")).unwrap();
        let policy = ConfirmPolicy::new(ConfirmMode::Ask, AgentSettings::default()).with_workspace("builtin", work.clone());
        let read = entry("builtin", "read_file", Some(true), None);
        let judge = |path: &str| policy.judge(&read, &args(serde_json::json!({ "path": path })));
        assert!(matches!(judge("sub/a.txt"), Verdict::Allow(_)));
        assert!(matches!(judge(&work.join("b").display().to_string()), Verdict::Allow(_)));
        for outside in ["../x", "sub/../../x", "etc/passwd", "/etc/passwd", "~/.ssh/id_ed25519"] {
            assert_eq!(judge(outside), Verdict::Ask, "{outside}");
        }
        let list = entry("builtin", "list_directory", Some(true), None);
        assert_eq!(policy.judge(&list, &args(serde_json::json!({ "path": ".." }))), Verdict::Ask);
        let other = entry("other", "read_file", Some(true), None);
        assert_eq!(
            policy.judge(&other, &args(serde_json::json!({ "path": "sub/a" }))),
            Verdict::Ask,
            "another server's read_file is not ours"
        );
    }

    #[test]
    fn deny_rules_win_and_allow_rules_come_before_the_mode() {
        let rules = |texts: &[&str]| texts.iter().map(|text| ToolRule::parse(text).unwrap()).collect();
        let mut settings = AgentSettings {
            allow: rules(&["run_command(git diff:*)", "mcp__time__*"]),
            deny: rules(&["run_command(rm:*)", "mcp__time__*"]),
            ..AgentSettings::default()
        };
        settings.servers.insert("time".into(), ServerConfirm { trust: true, ..Default::default() });
        let policy = ConfirmPolicy::new(ConfirmMode::Never, settings.clone());
        let run = entry("builtin", "run_command", None, Some(true));
        let command = |c: &str| args(serde_json::json!({ "command": c }));
        assert!(matches!(policy.judge(&run, &command("ls; rm -rf x")), Verdict::Deny(_)), "deny wins over mode never");
        assert!(matches!(policy.judge(&entry("time", "now", None, None), &none()), Verdict::Deny(_)), "and over trust and allow");
        let ask = ConfirmPolicy::new(ConfirmMode::Always, settings);
        assert!(matches!(ask.judge(&run, &command("git diff --stat")), Verdict::Allow(_)));
        assert_eq!(ask.judge(&run, &command("git status")), Verdict::Ask);
    }

    #[test]
    fn allow_always_on_a_command_covers_its_prefix_only() {
        let mut policy = ConfirmPolicy::new(ConfirmMode::Ask, AgentSettings::default());
        let run = entry("builtin", "run_command", None, Some(true));
        let command = |c: &str| args(serde_json::json!({ "command": c }));
        assert_eq!(policy.always_allows(&run, &command("git diff HEAD")), "`git diff` commands");
        policy.remember(&run, &command("git diff HEAD"), Decision::AllowAlways);
        assert!(matches!(policy.judge(&run, &command("git diff --stat")), Verdict::Allow(_)));
        assert_eq!(policy.judge(&run, &command("git status")), Verdict::Ask);
        assert_eq!(policy.judge(&run, &command("git diff && curl x | sh")), Verdict::Ask);
        let put = entry("s", "put", None, None);
        policy.remember(&put, &none(), Decision::AllowAlways);
        assert!(matches!(policy.judge(&put, &none()), Verdict::Allow(_)));
        policy.remember(&put, &none(), Decision::RejectAlways);
        assert!(matches!(policy.judge(&put, &none()), Verdict::Deny(_)));
        policy.remember(&entry("s", "other", None, None), &none(), Decision::AllowOnce);
        assert_eq!(policy.judge(&entry("s", "other", None, None), &none()), Verdict::Ask, "once is not remembered");
    }

    #[test]
    fn overrides_come_before_the_mode() {
        let mut settings = AgentSettings::default();
        settings.servers.insert("t".into(), ServerConfirm { trust: true, ..Default::default() });
        settings.servers.insert("g".into(), ServerConfirm { tools: vec![("get_*".into(), ConfirmMode::Always)], ..Default::default() });
        let policy = ConfirmPolicy::new(ConfirmMode::Ask, settings);
        assert_eq!(policy.judge(&entry("t", "put", None, None), &none()), Verdict::Allow("trusted in the configuration".into()));
        assert_eq!(policy.judge(&entry("g", "get_x", Some(true), None), &none()), Verdict::Ask);
    }
}
