//! The one path resolver of the built-in tools, which the confirmation
//! policy and the editor's view of a call (`acp::tool_view`) use too, and
//! the [`Workspace`] the file tools may read in without asking.
//!
//! - [`expand`]: a path as the model wrote it, as the tools take it:
//!   `~` and `~/…` are the home directory, a relative path starts at the
//!   working directory. Lexical only: what the model asked for.
//! - [`real`]: where that path really leads: `.` and `..` folded, every
//!   symlink of its longest existing part followed (a path that does not
//!   exist yet resolves through its existing parents). Decisions are taken
//!   on this path, so `notes/../../x` and a symlink out of the workspace
//!   are judged where they land.
//!
//! The check and the use are two steps: a file swapped for a symlink
//! between them is read where it now points. The policy is a guard against
//! a model's choices, not a sandbox against a process racing it.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// `path` as the tools take it (see the module docs): the one resolver,
/// kept in layer 1 so the configuration's directories read the same way.
pub use crate::user_dirs::expand_home as expand;

/// Where `path` (absolute) leads: symlinks followed, `.` and `..` folded.
pub fn real(path: &Path) -> PathBuf {
    /// Symlinks followed at most, as the kernel's ELOOP bounds them.
    const MAX_LINKS: usize = 40;
    let mut resolved = PathBuf::from("/");
    // What is left to walk, the next part last.
    let mut parts: Vec<OsString> = Vec::new();
    push_parts(&mut parts, path);
    let mut links = 0;
    while let Some(part) = parts.pop() {
        match part.to_str() {
            Some("/") => resolved = PathBuf::from("/"),
            Some(".") => {}
            Some("..") => {
                resolved.pop();
            }
            _ => {
                let next = resolved.join(&part);
                match std::fs::read_link(&next) {
                    // A relative target continues from the link's directory.
                    Ok(target) if links < MAX_LINKS => {
                        links += 1;
                        push_parts(&mut parts, &target);
                    }
                    _ => resolved = next,
                }
            }
        }
    }
    resolved
}

/// Pushes the components of `path` onto `parts` so that the first is popped first.
fn push_parts(parts: &mut Vec<OsString>, path: &Path) {
    let components: Vec<OsString> = path
        .components()
        .map(|component| match component {
            Component::RootDir | Component::Prefix(_) => OsString::from("/"),
            Component::CurDir => OsString::from("."),
            Component::ParentDir => OsString::from(".."),
            Component::Normal(name) => name.to_os_string(),
        })
        .collect();
    parts.extend(components.into_iter().rev());
}

/// The directories the built-in file tools read in without asking, and
/// mcpvisor's own stores, which they never touch. Every path is kept real.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workspace {
    roots: Vec<PathBuf>,
    protected: Vec<PathBuf>,
}

impl Workspace {
    /// `roots` (absolute); mcpvisor's stores of this environment are protected.
    pub fn new(roots: impl IntoIterator<Item = PathBuf>) -> Workspace {
        let roots = roots.into_iter().map(|root| real(&root)).collect();
        let protected = own_stores(|name| std::env::var(name).ok()).iter().map(|store| real(store)).collect();
        Workspace { roots, protected }
    }

    /// The workspace's roots, real.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Whether `path` (real) is inside a root.
    pub fn contains(&self, path: &Path) -> bool {
        self.roots.iter().any(|root| path.starts_with(root))
    }

    /// The store `path` (real) is in, if it is in one of mcpvisor's.
    pub fn protected(&self, path: &Path) -> Option<&Path> {
        self.protected.iter().find(|store| path.starts_with(store)).map(PathBuf::as_path)
    }
}

/// mcpvisor's own stores: OAuth tokens (`$XDG_CONFIG_HOME/mcpvisor/tokens`),
/// saved conversations (the data directory) and the audit log (the state
/// directory); see `crate::user_dirs` and [`crate::oauth::TokenStore`].
pub fn own_stores(env: impl Fn(&str) -> Option<String> + Copy) -> Vec<PathBuf> {
    let tokens = crate::oauth::TokenStore::user(env).map(|store| store.dir().to_path_buf());
    [tokens, crate::user_dirs::data_dir(env), crate::user_dirs::state_dir(env)].into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_follows_symlinks_and_folds_dots_even_past_the_end_of_what_exists() {
        let root = tempfile::tempdir().unwrap();
        let base = real(root.path());
        std::fs::create_dir_all(base.join("work/sub")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        std::os::unix::fs::symlink(base.join("outside"), base.join("work/link")).unwrap();
        std::os::unix::fs::symlink("../outside", base.join("work/rel")).unwrap();
        std::os::unix::fs::symlink("loop", base.join("work/loop")).unwrap();
        assert_eq!(real(&base.join("work/sub/../../outside/x")), base.join("outside/x"));
        assert_eq!(real(&base.join("work/link/new/file")), base.join("outside/new/file"));
        assert_eq!(real(&base.join("work/rel/./y")), base.join("outside/y"));
        assert_eq!(real(Path::new("/../..")), PathBuf::from("/"));
        let _ = real(&base.join("work/loop/x")); // ends
        let workspace = Workspace { roots: vec![base.join("work")], protected: vec![base.join("work/store")] };
        assert!(workspace.contains(&real(&base.join("work/sub/f"))));
        assert!(!workspace.contains(&real(&base.join("work/link/f"))), "a symlink out of the workspace is outside");
        assert!(!workspace.contains(&base.join("workshop")), "a sibling with the same prefix is outside");
        assert!(workspace.protected(&base.join("work/store/tokens.json")).is_some());
    }

    #[test]
    fn expand_takes_home_and_relative_paths() {
        let home = PathBuf::from(std::env::var("HOME").unwrap_or_default());
        if home.as_os_str().is_empty() {
            return;
        }
        assert_eq!(expand(Path::new("/w"), "~/.ssh/id"), home.join(".ssh/id"));
        assert_eq!(expand(Path::new("/w"), "~"), home);
        assert_eq!(expand(Path::new("/w"), "a/b"), PathBuf::from("/w/a/b"));
        assert_eq!(expand(Path::new("/w"), "/etc/passwd"), PathBuf::from("/etc/passwd"));
        assert_eq!(expand(Path::new("/w"), "~user/x"), PathBuf::from("/w/~user/x"));
    }
}
