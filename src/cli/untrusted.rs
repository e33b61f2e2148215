//! Untrusted project files as every command shows them: the one notice
//! of a command that left them out, the folder to trust, and what their
//! servers would run. Shared by `servers` (which servers a command sees),
//! `show` (`list`) and `trust`.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::config::discover::{FOREIGN_PROJECT_FILES, PROJECT_FILE};
use crate::config::{LoadedServer, ServerConfig, UntrustedFile};

/// Every project file name, mcpvisor's last.
pub fn project_files() -> impl Iterator<Item = &'static str> {
    FOREIGN_PROJECT_FILES.into_iter().chain([PROJECT_FILE])
}

/// What a server runs, as one line: its command and arguments, or its URL.
pub fn runs(server: &LoadedServer) -> String {
    match server.config() {
        Ok(config) => command_line(&config.redacted()),
        Err(error) => format!("(cannot be read: {error})"),
    }
}

pub fn command_line(config: &ServerConfig) -> String {
    if config.command.is_empty() {
        return config.url.clone().unwrap_or_default();
    }
    std::iter::once(config.command.as_str()).chain(config.args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ")
}

/// The one notice of a command that left untrusted project files out:
/// one line on stderr, a JSON object with `--json`.
pub fn notice(untrusted: &[UntrustedFile], json: bool) {
    if untrusted.is_empty() {
        return;
    }
    let hint = format!("review them with `mcpvisor list`, then run `mcpvisor trust` in {}", project_root(&untrusted[0]).display());
    if json {
        let files: Vec<Value> = untrusted
            .iter()
            .map(|file| {
                json!({"file": file.path, "reason": file.why, "servers": file.servers.iter().map(LoadedServer::name).collect::<Vec<_>>()})
            })
            .collect();
        eprintln!("{}", json!({"warning": "project files not trusted, their servers were not started", "untrusted": files, "hint": hint}));
        return;
    }
    let files: Vec<String> = untrusted
        .iter()
        .map(|file| {
            let names: Vec<&str> = file.servers.iter().map(LoadedServer::name).collect();
            let servers = if names.is_empty() { String::new() } else { format!("; servers {}", names.join(", ")) };
            format!("{} ({}{servers})", file.path.display(), file.why.reason())
        })
        .collect();
    super::output::warn(format_args!("not trusted, so nothing in it was started: {}; {hint}", files.join(", ")));
}

/// The project folder of an untrusted file (`.cursor/mcp.json` is one level down).
pub fn project_root(file: &UntrustedFile) -> PathBuf {
    let parent = file.path.parent().unwrap_or(Path::new("/"));
    let nested = project_files().any(|name| name.contains('/') && file.path.ends_with(name));
    if nested {
        parent.parent().unwrap_or(parent).to_path_buf()
    } else {
        parent.to_path_buf()
    }
}
