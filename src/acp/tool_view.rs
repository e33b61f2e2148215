//! How a tool call looks in the editor: its `kind`, title and locations,
//! from the tool's nature (the built-in tools), its annotations, then
//! words of its name.

use std::path::Path;

use agent_client_protocol_schema::{ToolCallLocation, ToolKind};
use serde_json::Value;

use crate::actors::agent::{is_read_only, SEARCH_TOOL};
use crate::actors::ToolEntry;
use crate::builtin_tools::paths::expand as resolve;
use crate::builtin_tools::{LIST_DIRECTORY, READ_FILE, RUN_COMMAND, WRITE_FILE};

/// One tool as the session's calls show it.
pub struct ToolView<'a> {
    /// The exposed name the model called.
    pub name: &'a str,
    pub entry: Option<&'a ToolEntry>,
    /// The name of this session's built-in tools server.
    pub builtin: &'a str,
}

impl ToolView<'_> {
    /// The built-in tool this is (`read_file`, ...), if it is one.
    pub fn builtin_tool(&self) -> Option<&str> {
        self.entry.filter(|entry| entry.server == self.builtin).map(|entry| &*entry.tool.name)
    }

    pub fn kind(&self) -> ToolKind {
        match self.builtin_tool() {
            Some(READ_FILE) | Some(LIST_DIRECTORY) => return ToolKind::Read,
            Some(WRITE_FILE) => return ToolKind::Edit,
            Some(RUN_COMMAND) => return ToolKind::Execute,
            _ => {}
        }
        if self.name == SEARCH_TOOL {
            return ToolKind::Search;
        }
        let short = self.entry.map_or(self.name, |entry| &*entry.tool.name).to_ascii_lowercase();
        let has = |words: &[&str]| short.split(|c: char| !c.is_ascii_alphanumeric()).any(|word| words.contains(&word));
        let annotations = self.entry.and_then(|entry| entry.tool.annotations.as_ref());
        let read_only = self.entry.is_some_and(is_read_only);
        if has(&["search", "find", "grep", "query", "lookup"]) {
            ToolKind::Search
        } else if has(&["fetch", "download", "http", "url", "browse", "web"]) {
            ToolKind::Fetch
        } else if has(&["think", "reason", "plan"]) && read_only {
            ToolKind::Think
        } else if read_only || has(&["read", "get", "list", "show", "view", "cat"]) && !has(&["delete", "remove"]) {
            ToolKind::Read
        } else if has(&["delete", "remove", "rm", "unlink", "drop"]) {
            ToolKind::Delete
        } else if has(&["move", "rename", "mv"]) {
            ToolKind::Move
        } else if has(&["write", "edit", "create", "update", "patch", "replace", "insert", "set", "save"]) {
            ToolKind::Edit
        } else if has(&["run", "exec", "execute", "shell", "command", "bash"]) {
            ToolKind::Execute
        } else if annotations.and_then(|a| a.open_world_hint) == Some(true) {
            ToolKind::Fetch
        } else {
            ToolKind::Other
        }
    }

    /// A short title: what a built-in tool does to what, else the tool's
    /// own title, else its name.
    pub fn title(&self, arguments: &Value, cwd: &Path) -> String {
        let path = || resolve(cwd, arguments.get("path").and_then(Value::as_str).unwrap_or("?")).display().to_string();
        match self.builtin_tool() {
            Some(READ_FILE) => return format!("Read {}", path()),
            Some(WRITE_FILE) => return format!("Write {}", path()),
            Some(LIST_DIRECTORY) => return format!("List {}", path()),
            Some(RUN_COMMAND) => return format!("Run `{}`", arguments.get("command").and_then(Value::as_str).unwrap_or("?")),
            _ => {}
        }
        let Some(entry) = self.entry else { return self.name.to_string() };
        let title = entry.tool.title.clone().or_else(|| entry.tool.annotations.as_ref().and_then(|a| a.title.clone()));
        match title {
            Some(title) => format!("{title} ({})", entry.server),
            None => format!("{} ({})", entry.tool.name, entry.server),
        }
    }

    /// The files a built-in file tool touches.
    pub fn locations(&self, arguments: &Value, cwd: &Path) -> Vec<ToolCallLocation> {
        match (self.builtin_tool(), arguments.get("path").and_then(Value::as_str)) {
            (Some(READ_FILE | WRITE_FILE | LIST_DIRECTORY), Some(path)) => {
                let line = arguments.get("offset").and_then(Value::as_u64).and_then(|line| u32::try_from(line).ok());
                vec![ToolCallLocation::new(resolve(cwd, path)).line(line)]
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{Tool, ToolAnnotations};
    use std::sync::Arc;

    fn entry(server: &str, name: &str, read_only: Option<bool>) -> ToolEntry {
        let mut tool = Tool::new(name.to_string(), "", Arc::new(Default::default()));
        let mut annotations = ToolAnnotations::default();
        annotations.read_only_hint = read_only;
        tool.annotations = Some(annotations);
        ToolEntry { name: crate::naming::exposed_name(server, name), server: server.into(), tool }
    }

    fn kind(server: &str, name: &str, read_only: Option<bool>) -> ToolKind {
        let entry = entry(server, name, read_only);
        ToolView { name: &entry.name, entry: Some(&entry), builtin: "builtin_s1" }.kind()
    }

    #[test]
    fn kinds_come_from_the_builtin_tools_then_annotations_then_names() {
        assert_eq!(kind("builtin_s1", "write_file", None), ToolKind::Edit);
        assert_eq!(kind("builtin_s1", "run_command", None), ToolKind::Execute);
        assert_eq!(kind("builtin_s1", "read_file", Some(true)), ToolKind::Read);
        assert_eq!(kind("other", "write_file", None), ToolKind::Edit, "another server's write_file is judged by its name");
        assert_eq!(kind("git", "status", Some(true)), ToolKind::Read);
        assert_eq!(kind("fs", "delete_file", None), ToolKind::Delete);
        assert_eq!(kind("fs", "move_file", None), ToolKind::Move);
        assert_eq!(kind("web", "fetch", None), ToolKind::Fetch);
        assert_eq!(kind("code", "search_symbols", Some(true)), ToolKind::Search);
        assert_eq!(kind("demo", "add", None), ToolKind::Other);
    }
}
