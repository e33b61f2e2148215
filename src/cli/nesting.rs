//! A gateway never starts itself, directly or through a chain.
//!
//! Two guards, because either alone can be fooled:
//!
//! - **Its own entry.** A configured stdio server whose program is this very
//!   executable (the same file, however it is named: a path, a symbolic or
//!   hard link, or a bare name found on `PATH`) with `serve` among its
//!   arguments is this gateway. Clients are told to add `mcpvisor serve` to
//!   their `.mcp.json`, and `serve` reads that same file, so such an entry is
//!   common; it is left out with a warning (and shown by `status`).
//! - **The depth.** Every server a `serve` starts gets
//!   [`DEPTH_VAR`] = its own depth + 1 in its environment. A `serve` at depth
//!   [`MAX_DEPTH`] or more refuses to start, whatever its configuration says,
//!   so a chain through wrappers (`sh -c`, `npx`, another copy of the
//!   binary) ends after a few levels instead of forking without end.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::config::{ServerConfig, Transport};

use super::output::Failure;

/// The environment variable that tells a `serve` how many gateways started it.
pub const DEPTH_VAR: &str = "MCPVISOR_GATEWAY_DEPTH";

/// A `serve` this many gateways deep refuses to start.
pub const MAX_DEPTH: u32 = 3;

/// This process's depth: 0 when no gateway started it. A value that is not
/// a number counts as the bound: something marked us, and it was not us.
pub fn depth(env: impl Fn(&str) -> Option<String>) -> u32 {
    match env(DEPTH_VAR) {
        None => 0,
        Some(text) if text.trim().is_empty() => 0,
        Some(text) => text.trim().parse().unwrap_or(MAX_DEPTH),
    }
}

/// Refuses a `serve` at [`MAX_DEPTH`] or deeper, naming the variable and the fix.
pub fn check_depth(depth: u32) -> Result<(), Failure> {
    if depth < MAX_DEPTH {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "this `mcpvisor serve` was started by {depth} gateways in a chain ({DEPTH_VAR}={depth}); a gateway that starts gateways \
         is bounded at {MAX_DEPTH} levels so that a configuration listing the gateway itself cannot fork without end. \
         Remove the entry that runs `mcpvisor serve` (directly or through a wrapper) from the configuration of the gateway above"
    )))
}

/// The environment a `serve` at `depth` gives each server it starts.
pub fn mark_child(config: &mut ServerConfig, depth: u32) {
    if config.transport == Transport::Stdio {
        config.env.insert(DEPTH_VAR.into(), depth.saturating_add(1).to_string());
    }
}

/// Why `config` is this gateway itself, if it is: a stdio server whose
/// program is `own_exe` and whose arguments hold `serve`. `lookup` expands
/// `${VAR}` references first; relative programs are found from the server's
/// `cwd` (else `base`), bare names on `PATH`.
pub fn runs_this_gateway(config: &ServerConfig, own_exe: &Path, base: &Path, lookup: impl Fn(&str) -> Option<String>) -> bool {
    if config.transport != Transport::Stdio || !config.args.iter().any(|arg| arg.contains("serve")) {
        return false;
    }
    let config = config.expanded(&lookup).unwrap_or_else(|_| config.clone());
    if !config.args.iter().any(|arg| arg == "serve") {
        return false;
    }
    let base = match &config.cwd {
        Some(cwd) if cwd.is_absolute() => cwd.clone(),
        Some(cwd) => base.join(cwd),
        None => base.to_path_buf(),
    };
    program_path(&config.command, &base, lookup("PATH").as_deref()).is_some_and(|program| same_file(&program, own_exe))
}

/// Where `command` is: a path (from `base` when relative) or a name on `path`.
fn program_path(command: &str, base: &Path, path: Option<&str>) -> Option<PathBuf> {
    if command.is_empty() {
        return None;
    }
    if command.contains('/') {
        return Some(base.join(command));
    }
    std::env::split_paths(path?).map(|dir| base.join(dir).join(command)).find(|candidate| candidate.is_file())
}

/// The same file on disk (device and inode), whatever the paths say.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn depth_comes_from_the_environment_and_garbage_counts_as_the_bound() {
        assert_eq!(depth(no_env), 0);
        assert_eq!(depth(|_| Some("2".into())), 2);
        assert_eq!(depth(|_| Some(" ".into())), 0);
        assert_eq!(depth(|_| Some("lots".into())), MAX_DEPTH);
        assert!(check_depth(MAX_DEPTH - 1).is_ok());
        let refused = check_depth(MAX_DEPTH).unwrap_err().message;
        assert!(refused.contains(DEPTH_VAR) && refused.contains("Remove the entry"), "{refused}");
    }

    #[test]
    fn children_are_marked_one_deeper() {
        let mut config = ServerConfig::stdio("s", "x", Vec::<String>::new());
        mark_child(&mut config, 1);
        assert_eq!(config.env[DEPTH_VAR], "2");
        let mut remote = ServerConfig::remote("r", Transport::Http, "https://x/mcp");
        mark_child(&mut remote, 0);
        assert!(remote.env.is_empty(), "a remote server has no environment");
    }

    #[test]
    fn the_own_entry_is_recognised_by_file_not_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("mcpvisor");
        std::fs::write(&exe, "binary").unwrap();
        let link = dir.path().join("bin/gw");
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&exe, &link).unwrap();
        let other = dir.path().join("other");
        std::fs::write(&other, "another binary").unwrap();
        let path = dir.path().join("bin").to_string_lossy().into_owned();
        let env = |name: &str| match name {
            "PATH" => Some(path.clone()),
            "GW" => Some(exe.to_string_lossy().into_owned()),
            _ => None,
        };
        let serve = |command: &str, args: &[&str]| ServerConfig::stdio("gw", command, args.iter().copied());
        let own = |config: &ServerConfig| runs_this_gateway(config, &exe, dir.path(), env);
        assert!(own(&serve(&exe.to_string_lossy(), &["serve"])));
        assert!(own(&serve("./mcpvisor", &["--config", "x.json", "serve"])), "relative to the project");
        assert!(own(&serve("gw", &["serve"])), "a name on PATH, through a link");
        assert!(own(&serve("${GW}", &["serve"])), "references expanded");
        assert!(!own(&serve(&exe.to_string_lossy(), &["demo-server"])), "another command of the same binary");
        assert!(!own(&serve(&other.to_string_lossy(), &["serve"])), "another program's serve");
        assert!(!own(&serve("missing", &["serve"])));
        assert!(!own(&ServerConfig::remote("r", Transport::Http, "https://x/mcp")));
    }
}
