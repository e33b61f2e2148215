//! The paths of the standard preset: what a sandboxed process may read and
//! write (docs/security.md, "Sandboxes").

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::config::SandboxSpec;

/// System directories, readable (and executable): not `/tmp`, not `/home`.
const SYSTEM: &[&str] = &[
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/bin",
    "/sbin",
    "/etc",
    "/opt",
    "/nix/store",
    "/snap",
    "/proc",
    "/sys",
    "/dev",
    "/run/systemd/resolve",
];
/// Devices a process writes to as a matter of course.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts", "/dev/shm", "/dev/ptmx"];
/// Under the home directory: installs of node and python tools, readable.
const HOME_READ: &[&str] = &[".nvm", ".volta", ".bun", ".local/bin", ".local/lib", ".npmrc", ".cargo/bin", ".deno"];
/// Under the home directory: the package caches of `npx` and `uvx`, writable.
const HOME_WRITE: &[&str] = &[".npm", ".cache", ".local/share/uv", ".local/share/pnpm"];

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A fresh directory only this process tree may use (mode 0700).
pub fn private_tmp(owner: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let safe: String = owner.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).take(64).collect();
    let base = std::env::var_os("TMPDIR").map(PathBuf::from).unwrap_or_else(|| "/tmp".into());
    let dir = base.join(format!("mcpvisor-sandbox-{safe}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(dir)
}

/// The readable and the writable paths: the preset's, then the spec's.
pub fn allowed(
    spec: &SandboxSpec,
    program: &str,
    args: &[String],
    cwd: &Path,
    tmp: &Path,
    path_env: Option<&OsStr>,
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let home = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute() && h != Path::new("/"));
    let mut read: Vec<PathBuf> = SYSTEM.iter().map(PathBuf::from).collect();
    read.extend(install_dir(program, path_env, home.as_deref()));
    // A script or directory named by absolute path in the arguments (`python3 /srv/server.py`),
    // and a script's own directory (its modules beside it), unless that is `/`, the home
    // directory or the shared temporary directory, which stay closed.
    let named: Vec<PathBuf> = args.iter().map(PathBuf::from).filter(|p| p.is_absolute() && p.exists()).collect();
    let shared =
        |dir: &Path| dir == Path::new("/") || home.as_deref() == Some(dir) || dir == Path::new("/tmp") || dir == std::env::temp_dir();
    read.extend(named.iter().filter(|p| p.is_file()).filter_map(|p| p.parent()).filter(|dir| !shared(dir)).map(Path::to_path_buf));
    read.extend(named);
    let mut write: Vec<PathBuf> = DEVICES.iter().map(PathBuf::from).collect();
    write.push(cwd.to_path_buf());
    write.push(tmp.to_path_buf());
    if let Some(home) = &home {
        read.extend(HOME_READ.iter().map(|p| home.join(p)));
        write.extend(HOME_WRITE.iter().map(|p| home.join(p)));
    }
    let expand = |p: &PathBuf| match (p.strip_prefix("~"), &home) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => p.clone(),
    };
    read.extend(spec.read.iter().map(expand));
    write.extend(spec.write.iter().map(expand));
    (read, write)
}

/// Entries of a project folder that configure a tool or run code later:
/// every tool's project files ([`crate::config::discover`]), Claude Code's
/// settings (hooks) and `.git` (hooks, config).
const PROJECT_ENTRIES: &[&str] = &[
    ".mcpvisor.toml",
    ".mcp.json",
    ".cursor",
    ".vscode",
    ".gemini",
    ".zed",
    ".codex",
    "opencode.json",
    "opencode.jsonc",
    ".claude",
    ".git",
];

/// What stays read-only even under a writable path: the project entries
/// of every writable folder, and the user-level files of mcpvisor (its
/// configuration, its record of trusted folders, its tool cache, its saved
/// conversations) and of the other tools, where a writable path covers
/// them. Only what exists (a bind mount needs a target), canonical, and
/// none inside another. `env` reads variables.
pub fn protected(write: &[PathBuf], env: impl Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let writable: Vec<PathBuf> = write.iter().filter_map(|dir| dir.canonicalize().ok()).filter(|dir| dir.is_dir()).collect();
    let mut candidates: Vec<PathBuf> = writable.iter().flat_map(|dir| PROJECT_ENTRIES.iter().map(move |entry| dir.join(entry))).collect();
    candidates.extend(crate::config::discover::user_file(&env).and_then(|file| file.parent().map(Path::to_path_buf)));
    candidates.extend(
        [crate::user_dirs::state_dir(&env), crate::user_dirs::cache_dir(&env), crate::user_dirs::data_dir(&env)].into_iter().flatten(),
    );
    candidates.extend(crate::config::sources::user_files(&env).into_iter().map(|(_, file)| file));
    let mut found: Vec<PathBuf> = candidates
        .iter()
        .filter_map(|path| path.canonicalize().ok())
        .filter(|path| writable.iter().any(|dir| path.starts_with(dir) && path != dir))
        .collect();
    found.sort();
    found.dedup();
    let outer: Vec<PathBuf> =
        found.iter().filter(|path| !found.iter().any(|other| other != *path && path.starts_with(other))).cloned().collect();
    outer
}

/// The prefix the program is installed under (`/usr/local` for
/// `/usr/local/bin/node`), or its own directory when that prefix would
/// be `/` or the home directory.
fn install_dir(program: &str, path_env: Option<&OsStr>, home: Option<&Path>) -> Option<PathBuf> {
    let found = if program.contains('/') {
        Some(PathBuf::from(program))
    } else {
        std::env::split_paths(path_env?).map(|dir| dir.join(program)).find(|candidate| candidate.is_file())
    }?;
    let real = found.canonicalize().ok()?;
    let bin = real.parent()?;
    match bin.parent() {
        Some(prefix) if prefix != Path::new("/") && Some(prefix) != home => Some(prefix.to_path_buf()),
        _ => Some(bin.to_path_buf()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_files_and_mcpvisors_own_stay_read_only_under_writable_paths() {
        let root = tempfile::tempdir().unwrap();
        let (home, project) = (root.path().join("home"), root.path().join("project"));
        for dir in [project.join(".git/hooks"), project.join(".vscode"), project.join("src"), home.join(".cache/mcpvisor/tools")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(project.join(".mcp.json"), "{}").unwrap();
        std::fs::write(home.join(".claude.json"), "{}").unwrap();
        let home_text = home.to_string_lossy().into_owned();
        let env = |name: &str| (name == "HOME").then(|| home_text.clone());
        let canonical = |path: PathBuf| path.canonicalize().unwrap();

        let found = protected(&[project.clone(), home.join(".cache"), root.path().join("missing")], env);
        let expected = [
            canonical(home.join(".cache/mcpvisor")),
            canonical(project.join(".git")),
            canonical(project.join(".mcp.json")),
            canonical(project.join(".vscode")),
        ];
        let mut expected = expected.to_vec();
        expected.sort();
        assert_eq!(found, expected, "not src/, not ~/.claude.json (home is not writable), not what does not exist");

        // A writable home covers the user-level files too, each once.
        let found = protected(std::slice::from_ref(&home), env);
        assert!(found.contains(&canonical(home.join(".claude.json"))), "{found:?}");
        assert!(found.contains(&canonical(home.join(".cache/mcpvisor"))), "{found:?}");
        assert!(!found.contains(&canonical(home.join(".cache/mcpvisor/tools"))), "inside another: {found:?}");
    }
}
