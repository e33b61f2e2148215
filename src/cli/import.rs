//! `import`: other tools' MCP configurations into mcpvisor's TOML.
//!
//! - `import` lists every source found on this machine for this project
//!   (tool, scope, file, the servers' names) and changes nothing;
//! - `import TOOL` (`claude-code`, `codex`, `gemini`, ...) copies that
//!   tool's user-level servers (Claude Code: its user, project and local
//!   scopes, as Claude Code itself sees them here);
//! - `import FILE` copies a file's servers.
//!
//! Each tool's own settings map onto mcpvisor's where one exists
//! ([`crate::config::foreign`]); the keys that do not are named in a warning
//! (and in `--json`'s `unmapped`), never dropped silently. Secrets (env
//! values, headers, tokens) are never printed.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::output::{table, warn, Failure, Out};
use super::servers::{absolute, current_dir, env, is_native, load_file, native_file};
use super::Cli;
use crate::config::sources::{self, Source, SourceScope, TOOLS};
use crate::config::{foreign, native, Scope, ServerConfig};
use crate::error::ConfigError;

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// A tool (claude-code, claude-desktop, codex, cursor, gemini, opencode, vscode, windsurf, zed) or a file;
    /// without it, list what there is to import and change nothing.
    pub source: Option<String>,
    /// Which file to import into (default: user).
    #[arg(long, value_enum)]
    pub scope: Option<super::manage::ScopeArg>,
}

pub fn import(cli: &Cli, out: &Out, args: &ImportArgs) -> Result<u8, Failure> {
    let Some(source) = &args.source else { return list(out) };
    let project = current_dir()?;
    let (label, kind, found) = match sources::tool_named(source).filter(|_| !Path::new(source).exists()) {
        Some(tool) => {
            let (file, found) = read_tool(tool, &project)?;
            (file.display().to_string(), tool.name(), found)
        }
        None => {
            let file = absolute(Path::new(source))?;
            let (kind, found) = read_file(&file, &project)?;
            (source.clone(), kind, found)
        }
    };
    let target = native_file(cli, args.scope.map(Scope::from))?;
    let existing: Vec<String> = native::load(&target)?.into_iter().map(|c| c.name).collect();
    let before = std::fs::read(&target).ok();
    let (mut imported, mut skipped, mut unmapped, mut errors) = (Vec::new(), Vec::new(), serde_json::Map::new(), 0);
    for server in found {
        match server {
            Ok((config, _)) if existing.contains(&config.name) => skipped.push(
                json!({"server": config.name, "reason": format!("already in {}; remove it there first to import it again", target.display())}),
            ),
            Ok((config, keys)) => {
                native::upsert(&target, &ServerConfig { scope: Scope::User, ..config.clone() })?;
                if !keys.is_empty() {
                    unmapped.insert(config.name.clone(), json!(keys));
                }
                imported.push(config.name);
            }
            Err(error) => {
                errors += 1;
                skipped.push(json!({"server": null, "reason": error.to_string()}));
            }
        }
    }
    if !imported.is_empty() {
        super::trust::after_own_write(&target, before.as_deref());
    }
    out.json(&json!({"file": label, "format": kind, "into": target, "imported": imported, "skipped": skipped, "unmapped": unmapped}));
    out.line(format!("Imported {} server(s) from {label} ({kind}) into {}: {}", imported.len(), target.display(), imported.join(", ")));
    for (server, keys) in &unmapped {
        warn(format_args!("`{server}`: {kind}'s {} mean(s) nothing to mcpvisor and was not imported", quoted(keys)));
    }
    for skip in &skipped {
        let reason = skip["reason"].as_str().unwrap_or_default();
        match skip["server"].as_str() {
            Some(server) => warn(format_args!("skipped `{server}`: {reason}")),
            None => warn(format_args!("skipped: {reason}")),
        }
    }
    Ok(if errors > 0 { super::EXIT_USAGE } else { 0 })
}

/// `a`, `b` of a JSON array of keys.
fn quoted(keys: &Value) -> String {
    let keys: Vec<String> = keys.as_array().into_iter().flatten().filter_map(Value::as_str).map(|key| format!("`{key}`")).collect();
    keys.join(", ")
}

/// A server to import with the keys of its entry that map to nothing, or why it cannot be.
type Importable = Result<(ServerConfig, Vec<String>), ConfigError>;

/// A tool's user-level servers: the first of its files that exists.
fn read_tool(tool: foreign::Format, project: &Path) -> Result<(PathBuf, Vec<Importable>), Failure> {
    let candidates: Vec<PathBuf> =
        sources::user_files(env).into_iter().filter(|(format, _)| *format == tool).map(|(_, file)| file).collect();
    let Some(file) = candidates.iter().find(|file| file.is_file()) else {
        let looked: Vec<String> = candidates.iter().map(|file| file.display().to_string()).collect();
        return Err(Failure::usage(format!(
            "no {} configuration on this machine (looked at {}); name its file instead: `mcpvisor import FILE`",
            tool.name(),
            looked.join(", ")
        )));
    };
    Ok((file.clone(), read_file(file, project)?.1))
}

/// The servers of a file to import, each or its problem, and the file's kind.
fn read_file(file: &Path, project: &Path) -> Result<(&'static str, Vec<Importable>), Failure> {
    let text = std::fs::read_to_string(file).map_err(|e| Failure::usage(format!("{}: cannot read: {e}", file.display())))?;
    if is_native(file) && !foreign::is_codex(file, &text) {
        return Ok(("mcpvisor", native::load(file)?.into_iter().map(|config| Ok((config, Vec::new()))).collect()));
    }
    if file.file_name().is_some_and(|name| name == ".claude.json") {
        // The project's `.mcp.json` comes along only if its folder is trusted.
        let record = crate::config::Locations::new(None, env).trust.record()?;
        let loaded = load_file(file, project, record.as_ref())?;
        return Ok((
            foreign::Format::ClaudeCode.name(),
            loaded.servers.into_iter().map(|server| server.config().map(|config| (config, server.unmapped))).collect(),
        ));
    }
    let (format, servers) = foreign::parse_each(file, &text, &Default::default())?;
    Ok((format.name(), servers.into_iter().map(|found| found.map(|found| (found.config, found.unmapped))).collect()))
}

/// `import` alone: every source there is, read but not changed.
fn list(out: &Out) -> Result<u8, Failure> {
    let project = current_dir()?;
    let found = sources::existing(&project, env);
    let mut rows = vec![["TOOL", "SCOPE", "FILE", "SERVERS"].map(String::from).to_vec()];
    let mut listed = Vec::new();
    for source in &found {
        let survey = sources::survey(source, &project);
        let slug = TOOLS.iter().find(|(_, tool)| *tool == source.tool).map_or("", |(slug, _)| *slug);
        let servers = if survey.servers.is_empty() { "-".to_string() } else { survey.servers.join(", ") };
        rows.push(vec![source.tool.name().into(), source.scope.name().into(), describe(source, &project), servers]);
        for (server, keys) in &survey.unmapped {
            warn(format_args!("{}: `{server}` has settings mcpvisor does not use: {}", source.file.display(), keys.join(", ")));
        }
        for problem in &survey.problems {
            warn(format_args!("{problem}"));
        }
        listed.push(json!({
            "tool": source.tool.name(),
            "name": slug,
            "scope": source.scope.name(),
            "file": source.file,
            "discovered": source.scope != SourceScope::User,
            "servers": survey.servers,
            "unmapped": survey.unmapped,
            "problems": survey.problems,
        }));
    }
    out.json(&json!({"sources": listed, "changed": false}));
    if found.is_empty() {
        out.line("No other tool's MCP configuration was found on this machine for this directory.");
    }
    for line in table(&rows).skip(usize::from(found.is_empty())) {
        out.line(line);
    }
    out.line("");
    out.line("Nothing was changed. Project and local sources are read by every command here; user sources only when imported:");
    let names: Vec<&str> = TOOLS.iter().map(|(slug, _)| *slug).collect();
    out.line(format!("`mcpvisor import TOOL` ({}) or `mcpvisor import FILE`.", names.join(", ")));
    Ok(0)
}

/// The file, and for Claude Code's local scope the project's key in it.
fn describe(source: &Source, project: &Path) -> String {
    match source.scope {
        SourceScope::Local => format!("{} (projects[{:?}])", source.file.display(), project.display().to_string()),
        _ => source.file.display().to_string(),
    }
}
