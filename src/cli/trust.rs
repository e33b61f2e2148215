//! `trust`: which project folders may start their servers.
//!
//! `mcpvisor trust [DIR]` records DIR (default: the current directory) and
//! the digest of each project file it has now, after showing what those
//! files would start; `--list` shows the record and what changed since;
//! `--revoke DIR` forgets a folder. The record and its rules are
//! [`crate::config::trust`]; the notice every other command gives about
//! untrusted files is `super::untrusted`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::output::{Failure, Out, Paint, Piece};
use super::servers::{absolute, current_dir, env};
use super::untrusted::{command_line, project_files};
use super::Cli;
use crate::config::discover::PROJECT_FILE;
use crate::config::trust::{digest, folder_key, trust_file, TrustedFolders};
use crate::config::ServerConfig;

#[derive(Debug, clap::Args)]
pub struct TrustArgs {
    /// The project folder to trust (default: the current directory).
    #[arg(conflicts_with_all = ["list", "revoke"])]
    pub dir: Option<PathBuf>,
    /// List the trusted folders and whether their project files are still as trusted.
    #[arg(long)]
    pub list: bool,
    /// Forget a trusted folder: its project files start nothing again.
    #[arg(long, value_name = "DIR", conflicts_with = "list")]
    pub revoke: Option<PathBuf>,
}

fn record_file() -> Result<PathBuf, Failure> {
    trust_file(env).ok_or_else(|| Failure::usage("no state directory to keep trusted folders in: set XDG_STATE_HOME or HOME"))
}

pub fn trust(_cli: &Cli, out: &Out, args: &TrustArgs) -> Result<u8, Failure> {
    let file = record_file()?;
    let mut record = TrustedFolders::load(&file)?;
    if args.list {
        return list(out, &record);
    }
    if let Some(dir) = &args.revoke {
        let dir = absolute(dir)?;
        if !record.revoke(&dir) {
            return Err(Failure::usage(format!("{} is not a trusted folder; `mcpvisor trust --list` shows those that are", dir.display())));
        }
        record.save(&file)?;
        out.json(&json!({"revoked": folder_key(&dir)}));
        out.line(format!("{} is no longer trusted: its project files start nothing", folder_key(&dir).display()));
        return Ok(0);
    }
    let dir = folder_key(&absolute(&args.dir.clone().map_or_else(current_dir, Ok)?)?);
    if !dir.is_dir() {
        return Err(Failure::usage(format!("{} is not a folder", dir.display())));
    }
    let mut files = BTreeMap::new();
    let mut shown = Vec::new();
    for name in project_files() {
        let Ok(bytes) = std::fs::read(dir.join(name)) else { continue };
        files.insert(name.to_string(), digest(&bytes));
        shown.push((name, servers_of(&dir, name)));
    }
    if files.is_empty() {
        let names: Vec<&str> = project_files().collect();
        out.json(&json!({"trusted": Value::Null, "folder": dir, "files": []}));
        out.line(format!("{} has no project file ({}); nothing to trust", dir.display(), names.join(", ")));
        return Ok(0);
    }
    record.trust(&dir, files.clone(), today());
    record.save(&file)?;
    out.json(&json!({
        "trusted": dir,
        "files": shown.iter().map(|(name, servers)| json!({
            "file": name,
            "digest": files[*name],
            "servers": servers.iter().map(|(name, command)| json!({"name": name, "command": command})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    }));
    out.line(format!("Trusted {} with its project files as they are now:", dir.display()));
    for (name, servers) in &shown {
        out.pieces([Piece::plain(format!("  {name}")), Piece(Paint::Dim, format!("  {}", &files[*name][..19]))]);
        for (server, command) in servers {
            out.line(format!("    {server}: {command}"));
        }
    }
    out.pieces([Piece(Paint::Dim, "A file that changes, or a new one, is not used until you trust the folder again.".into())]);
    Ok(0)
}

/// The servers a project file defines, each with what it runs (secrets
/// redacted), read as the file is (no precedence: every one of them).
fn servers_of(dir: &Path, name: &str) -> Vec<(String, String)> {
    let path = dir.join(name);
    let configs: Vec<Result<ServerConfig, String>> = if name == PROJECT_FILE {
        match crate::config::native::load(&path) {
            Ok(configs) => configs.into_iter().map(Ok).collect(),
            Err(error) => return vec![("(file)".into(), format!("cannot be read: {error}"))],
        }
    } else {
        let loaded = crate::config::discover::editor_file(&path);
        loaded.servers.iter().map(|server| server.config().map_err(|e| e.to_string())).collect()
    };
    configs
        .into_iter()
        .map(|config| match config {
            Ok(config) => (config.name.clone(), command_line(&config.redacted())),
            Err(error) => ("(server)".into(), format!("cannot be read: {error}")),
        })
        .collect()
}

/// A trusted folder as it is now: each project file's state against the record.
struct FolderNow {
    dir: PathBuf,
    trusted_on: String,
    /// File and `trusted`, `changed`, `removed` or `new`; trusted ones first.
    files: Vec<(String, &'static str)>,
}

fn folder_now(dir: &Path, folder: &crate::config::trust::TrustedFolder) -> FolderNow {
    let mut files: Vec<(String, &'static str)> = project_files()
        .filter_map(|name| {
            let bytes = std::fs::read(dir.join(name)).ok();
            let state = match (folder.files.get(name), bytes) {
                (Some(recorded), Some(bytes)) if *recorded == digest(&bytes) => "trusted",
                (Some(_), Some(_)) => "changed",
                (Some(_), None) => "removed",
                (None, Some(_)) => "new",
                (None, None) => return None,
            };
            Some((name.to_string(), state))
        })
        .collect();
    files.sort_by_key(|(_, state)| *state != "trusted");
    FolderNow { dir: dir.to_path_buf(), trusted_on: folder.trusted_on.clone(), files }
}

fn list(out: &Out, record: &TrustedFolders) -> Result<u8, Failure> {
    let folders: Vec<FolderNow> = record.folders.iter().map(|(dir, folder)| folder_now(dir, folder)).collect();
    out.json(
        &folders
            .iter()
            .map(|now| {
                let files: Vec<Value> = now.files.iter().map(|(file, state)| json!({"file": file, "state": state})).collect();
                json!({"folder": now.dir, "trusted_on": now.trusted_on, "files": files})
            })
            .collect::<Vec<_>>(),
    );
    if folders.is_empty() {
        out.line("No folder is trusted: project files start nothing. Trust one with `mcpvisor trust [DIR]`.");
    }
    for now in &folders {
        out.line(format!("{} (trusted on {})", now.dir.display(), now.trusted_on));
        for (file, state) in &now.files {
            let paint = if matches!(*state, "trusted" | "removed") { Paint::Dim } else { Paint::Bad };
            out.pieces([Piece::plain(format!("  {file}: ")), Piece(paint, state.to_string())]);
        }
    }
    Ok(0)
}

fn today() -> String {
    let days = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400);
    let (year, month, day) = crate::civil_date::civil_from_days(days as i64);
    format!("{year:04}-{month:02}-{day:02}")
}

/// After mcpvisor itself wrote `file` at the user's command (`add`,
/// `remove`, `enable`, `disable` with the project's file): the new bytes
/// stay trusted if the old ones were, or if there were none. An untrusted
/// file stays untrusted: the command added to what the user never reviewed.
pub fn after_own_write(file: &Path, before: Option<&[u8]>) {
    let (Some(dir), Some(name)) = (file.parent(), file.file_name().and_then(|n| n.to_str())) else { return };
    if name != PROJECT_FILE {
        return;
    }
    let (Ok(record_file), Ok(after)) = (record_file(), std::fs::read(file)) else { return };
    let Ok(mut record) = TrustedFolders::load(&record_file) else { return };
    let trusted_before = match before {
        None => true,
        Some(bytes) => record.verdict(dir, name, bytes).is_ok(),
    };
    if !trusted_before {
        super::output::warn(format_args!(
            "{} is not trusted, so its servers still start nothing; review it, then run `mcpvisor trust` in {}",
            file.display(),
            dir.display()
        ));
        return;
    }
    if !record.folders.contains_key(&folder_key(dir)) {
        record.trust(dir, BTreeMap::new(), today());
    }
    record.update_file(dir, name, &after);
    if let Err(error) = record.save(&record_file) {
        super::output::warn(format_args!("{error}; run `mcpvisor trust` in {} to use what was written", dir.display()));
    }
}
