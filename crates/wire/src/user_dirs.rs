//! Where mcpvisor keeps what it writes for the user, as the XDG Base
//! Directory specification says: data (saved conversations) under
//! `$XDG_DATA_HOME/mcpvisor`, else `~/.local/share/mcpvisor`; caches (the
//! on-disk tool catalog) under `$XDG_CACHE_HOME/mcpvisor`, else
//! `~/.cache/mcpvisor`; state (the audit log of `serve`) under
//! `$XDG_STATE_HOME/mcpvisor`, else `~/.local/state/mcpvisor`. Empty variables count as unset and relative ones
//! are ignored, as the specification asks; `None` when not even `HOME` is set.
//!
//! Whatever may hold a capability (tokens, conversations, the audit log)
//! is written through [`ensure_private`] and [`open_private_append`]: files
//! 0600 in directories 0700.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Creates `dir` and its missing parents with mode 0700; an existing
/// `dir` that others may read or enter is made 0700 too (for mcpvisor's
/// own directories, never a directory the user named).
pub fn ensure_private(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    if std::fs::metadata(dir)?.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Opens `path` for appending, created 0600 with missing parent
/// directories 0700; an existing file that others may read is made 0600.
pub fn open_private_append(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    let file = OpenOptions::new().create(true).append(true).mode(0o600).open(path)?;
    if file.metadata()?.permissions().mode() & 0o077 != 0 {
        file.set_permissions(Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

/// `$XDG_DATA_HOME/mcpvisor`, else `$HOME/.local/share/mcpvisor`.
pub fn data_dir(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    mcpvisor_dir(env, "XDG_DATA_HOME", ".local/share")
}

/// `$XDG_CACHE_HOME/mcpvisor`, else `$HOME/.cache/mcpvisor`.
pub fn cache_dir(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    mcpvisor_dir(env, "XDG_CACHE_HOME", ".cache")
}

/// `$XDG_STATE_HOME/mcpvisor`, else `$HOME/.local/state/mcpvisor`.
pub fn state_dir(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    mcpvisor_dir(env, "XDG_STATE_HOME", ".local/state")
}

/// A path as the user (or a model) wrote it: `~` and `~/…` are the home
/// directory (`$HOME`, when set and not empty), anything else starts at
/// `base` (an absolute path stays itself). Lexical only. The one resolver
/// of the built-in tools (`builtin_tools::paths::expand`), the editor's
/// view of their calls and the agent's configured directories.
pub fn expand_home(base: &Path, written: &str) -> PathBuf {
    let home = std::env::var_os("HOME").filter(|home| !home.is_empty()).map(PathBuf::from);
    let rest = if written == "~" { Some("") } else { written.strip_prefix("~/") };
    match (rest, home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => base.join(written),
    }
}

fn mcpvisor_dir(env: impl Fn(&str) -> Option<String>, variable: &str, under_home: &str) -> Option<PathBuf> {
    let var = |name: &str| env(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    var(variable).filter(|dir| dir.is_absolute()).or_else(|| var("HOME").map(|home| home.join(under_home))).map(|dir| dir.join("mcpvisor"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn private_files_are_0600_in_0700_directories_even_when_they_were_not() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("a/b/log.jsonl");
        drop(open_private_append(&file).unwrap());
        assert_eq!((mode(&root.path().join("a")), mode(&root.path().join("a/b")), mode(&file)), (0o700, 0o700, 0o600));
        std::fs::set_permissions(&file, Permissions::from_mode(0o644)).unwrap();
        drop(open_private_append(&file).unwrap());
        assert_eq!(mode(&file), 0o600, "a file left readable by an older version is restricted");
        let open = root.path().join("open");
        DirBuilder::new().mode(0o755).create(&open).unwrap();
        ensure_private(&open).unwrap();
        assert_eq!(mode(&open), 0o700);
    }

    #[test]
    fn xdg_variables_win_over_home_unless_empty_or_relative() {
        assert_eq!(data_dir(env(&[("XDG_DATA_HOME", "/d"), ("HOME", "/h")])), Some("/d/mcpvisor".into()));
        assert_eq!(data_dir(env(&[("HOME", "/h")])), Some("/h/.local/share/mcpvisor".into()));
        assert_eq!(cache_dir(env(&[("XDG_CACHE_HOME", "/c"), ("HOME", "/h")])), Some("/c/mcpvisor".into()));
        assert_eq!(cache_dir(env(&[("XDG_CACHE_HOME", "rel"), ("HOME", "/h")])), Some("/h/.cache/mcpvisor".into()));
        assert_eq!(cache_dir(env(&[("XDG_CACHE_HOME", ""), ("HOME", "/h")])), Some("/h/.cache/mcpvisor".into()));
        assert_eq!(state_dir(env(&[("XDG_STATE_HOME", "/s"), ("HOME", "/h")])), Some("/s/mcpvisor".into()));
        assert_eq!(state_dir(env(&[("HOME", "/h")])), Some("/h/.local/state/mcpvisor".into()));
        assert_eq!(data_dir(env(&[])), None);
    }
}
