//! Where other tools keep their MCP configuration on this machine, and a
//! survey of what each holds for a project (for `mcpvisor import`).
//!
//! Project files are discovered by every command ([`super::discover`]);
//! user-level files are only listed here and copied on request, never
//! merged silently: they belong to another program, and a server a user
//! set up for one client need not be wanted in every gateway.
//!
//! | tool | user-level file |
//! | --- | --- |
//! | Claude Code | `$CLAUDE_CONFIG_DIR/.claude.json`, else `~/.claude.json` (user and local scopes) |
//! | Claude Desktop | `$XDG_CONFIG_HOME/Claude/claude_desktop_config.json`; macOS `~/Library/Application Support/Claude/…` |
//! | Codex | `$CODEX_HOME/config.toml`, else `~/.codex/config.toml` |
//! | Cursor | `~/.cursor/mcp.json` |
//! | Gemini CLI | `~/.gemini/settings.json` |
//! | OpenCode | `$XDG_CONFIG_HOME/opencode/opencode.json` |
//! | VS Code | `$XDG_CONFIG_HOME/Code/User/mcp.json`; macOS `~/Library/Application Support/Code/User/mcp.json` |
//! | Windsurf | `~/.codeium/windsurf/mcp_config.json` |
//! | Zed | `$XDG_CONFIG_HOME/zed/settings.json` |

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::file::read_optional;
use super::foreign::{self, Format, Section};

/// Other tools' files read in the project directory, lowest precedence first.
pub(crate) const FOREIGN_PROJECT_FILES: [&str; 8] = [
    ".mcp.json",
    ".cursor/mcp.json",
    ".vscode/mcp.json",
    ".gemini/settings.json",
    ".zed/settings.json",
    ".codex/config.toml",
    "opencode.json",
    "opencode.jsonc",
];

/// Every tool whose files mcpvisor reads, with the name `import` takes.
pub const TOOLS: [(&str, Format); 9] = [
    ("claude-code", Format::ClaudeCode),
    ("claude-desktop", Format::ClaudeDesktop),
    ("codex", Format::Codex),
    ("cursor", Format::Cursor),
    ("gemini", Format::Gemini),
    ("opencode", Format::OpenCode),
    ("vscode", Format::VsCode),
    ("windsurf", Format::Windsurf),
    ("zed", Format::Zed),
];

/// The tool `import` names `name`.
pub fn tool_named(name: &str) -> Option<Format> {
    TOOLS.iter().find(|(slug, _)| slug.eq_ignore_ascii_case(name)).map(|(_, format)| *format)
}

/// Which of a tool's scopes a file or section is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceScope {
    /// The user's own file: every project.
    User,
    /// Claude Code's local scope: this project, this user only.
    Local,
    /// A file in the project directory.
    Project,
}

impl SourceScope {
    pub fn name(self) -> &'static str {
        match self {
            SourceScope::User => "user",
            SourceScope::Local => "local",
            SourceScope::Project => "project",
        }
    }
}

/// One place a tool keeps servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub tool: Format,
    pub scope: SourceScope,
    pub file: PathBuf,
}

/// Claude Code's `.claude.json`.
pub fn claude_json(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let var = |name: &str| env(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    var("CLAUDE_CONFIG_DIR").or_else(|| var("HOME")).map(|dir| dir.join(".claude.json"))
}

/// Every tool's user-level files, whether they exist or not.
pub fn user_files(env: impl Fn(&str) -> Option<String>) -> Vec<(Format, PathBuf)> {
    let var = |name: &str| env(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    let Some(home) = var("HOME") else { return claude_json(&env).map(|file| vec![(Format::ClaudeCode, file)]).unwrap_or_default() };
    let config = var("XDG_CONFIG_HOME").filter(|dir| dir.is_absolute()).unwrap_or_else(|| home.join(".config"));
    let mac = home.join("Library/Application Support");
    let mut files = vec![(Format::ClaudeCode, claude_json(&env).unwrap_or_else(|| home.join(".claude.json")))];
    files.extend([
        (Format::ClaudeDesktop, config.join("Claude/claude_desktop_config.json")),
        (Format::ClaudeDesktop, mac.join("Claude/claude_desktop_config.json")),
        (Format::Codex, var("CODEX_HOME").unwrap_or_else(|| home.join(".codex")).join("config.toml")),
        (Format::Cursor, home.join(".cursor/mcp.json")),
        (Format::Gemini, home.join(".gemini/settings.json")),
        (Format::OpenCode, config.join("opencode/opencode.json")),
        (Format::VsCode, config.join("Code/User/mcp.json")),
        (Format::VsCode, mac.join("Code/User/mcp.json")),
        (Format::Windsurf, home.join(".codeium/windsurf/mcp_config.json")),
        (Format::Zed, config.join("zed/settings.json")),
    ]);
    files
}

/// The sources of servers for `project` that exist on this machine: the
/// tools' user-level files, Claude Code's local scope of the project, and
/// the project's own files.
pub fn existing(project: &Path, env: impl Fn(&str) -> Option<String>) -> Vec<Source> {
    let mut sources = Vec::new();
    for (tool, file) in user_files(&env) {
        if file.is_file() && !sources.iter().any(|source: &Source| source.file == file) {
            sources.push(Source { tool, scope: SourceScope::User, file: file.clone() });
            if tool == Format::ClaudeCode {
                sources.push(Source { tool, scope: SourceScope::Local, file });
            }
        }
    }
    for name in FOREIGN_PROJECT_FILES {
        let file = project.join(name);
        if let (true, Some(tool)) = (file.is_file(), Format::from_path(&file)) {
            sources.push(Source { tool, scope: SourceScope::Project, file });
        }
    }
    sources
}

/// What a source holds: its servers' names, with the keys of each that
/// mcpvisor does not use, and the problems that keep servers (or the whole
/// file) from being read. Secrets are never part of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Survey {
    pub servers: Vec<String>,
    pub unmapped: BTreeMap<String, Vec<String>>,
    pub problems: Vec<String>,
}

/// Reads `source` (without changing anything) for [`Survey`].
pub fn survey(source: &Source, project: &Path) -> Survey {
    let mut survey = Survey::default();
    let text = match read_optional(&source.file) {
        Ok(text) => text.unwrap_or_default(),
        Err(error) => {
            survey.problems.push(error.to_string());
            return survey;
        }
    };
    let section = if source.scope == SourceScope::Local { Section::ClaudeLocal(project) } else { Section::Servers };
    let read = foreign::for_each_server_in(&source.file, &text, &BTreeMap::new(), section, |_, server| match server {
        Ok(found) => {
            if !found.unmapped.is_empty() {
                survey.unmapped.insert(found.config.name.clone(), found.unmapped);
            }
            survey.servers.push(found.config.name);
        }
        Err(error) => survey.problems.push(error.to_string()),
    });
    if let Err(error) = read {
        survey.problems.push(error.to_string());
    }
    survey
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_by_name_and_their_user_files() {
        assert_eq!(tool_named("Codex"), Some(Format::Codex));
        assert_eq!(tool_named("nano"), None);
        let env = |name: &str| match name {
            "HOME" => Some("/h".to_string()),
            "CODEX_HOME" => Some("/c".to_string()),
            _ => None,
        };
        let files = user_files(env);
        assert!(files.contains(&(Format::ClaudeCode, "/h/.claude.json".into())));
        assert!(files.contains(&(Format::Codex, "/c/config.toml".into())));
        assert!(files.contains(&(Format::Zed, "/h/.config/zed/settings.json".into())));
        assert!(files.contains(&(Format::Windsurf, "/h/.codeium/windsurf/mcp_config.json".into())));
        for (_, file) in &files {
            assert!(
                Format::from_path(file).is_some() || file.ends_with("opencode.json") || file.ends_with("config.toml"),
                "every user file's format is told by its name (Codex's by its content): {}",
                file.display()
            );
        }
        assert_eq!(claude_json(|name| (name == "CLAUDE_CONFIG_DIR").then(|| "/cc".to_string())), Some("/cc/.claude.json".into()));
    }
}
