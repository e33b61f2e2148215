//! Path helpers for `when` rules: `path.clean(p)` and `path.within(p, dir)`.
//!
//! A rule written as `arguments.path.startsWith("/srv/public/")` lets
//! `/srv/public/../private/key` through, since the server resolves what
//! the rule only compared. These helpers judge the path as a POSIX path is
//! resolved, lexically.
//!
//! Invariants:
//! - `clean` is lexical (no file system is read): repeated `/` collapse,
//!   `.` segments go, `..` removes the segment before it and stays at the
//!   root of an absolute path; the empty path is `.`; the answer has no
//!   trailing `/` but the root's;
//! - `within(p, dir)` is true only when the cleaned `p` is the cleaned
//!   `dir` or below it, both absolute or both relative, and neither holds
//!   a NUL; a relative path is never within an absolute directory (the
//!   server's working directory is unknown here);
//! - what no lexical check can know, a symbolic link below `dir` that
//!   points out of it, is the server's to refuse (docs/gateway.md).

use cel::common::types::{CelBool, CelString};
use cel::Env;

/// `path.clean(string) -> string`.
pub const CLEAN: &str = "path.clean";
/// `path.within(string, string) -> bool`.
pub const WITHIN: &str = "path.within";

/// Adds the helpers to `env`.
pub fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    cel::add_overload!(env, fn clean_value: (CelString) -> CelString, name = "path.clean", id = "path_clean_string")?;
    cel::add_overload!(env, fn within_value: (CelString, CelString) -> CelBool, name = "path.within", id = "path_within_string_string")
}

fn clean_value(path: &CelString<'_>) -> CelString<'static> {
    CelString::from(clean(path.inner()))
}

fn within_value(path: &CelString<'_>, dir: &CelString<'_>) -> CelBool {
    CelBool::from(within(path.inner(), dir.inner()))
}

/// `path` with its `.`, `..` and repeated `/` resolved lexically.
pub fn clean(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut kept: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => match kept.last() {
                Some(&last) if last != ".." => {
                    kept.pop();
                }
                _ if absolute => {}
                _ => kept.push(".."),
            },
            segment => kept.push(segment),
        }
    }
    match (absolute, kept.is_empty()) {
        (true, _) => format!("/{}", kept.join("/")),
        (false, true) => ".".to_string(),
        (false, false) => kept.join("/"),
    }
}

/// Whether `path` is `dir` or below it, lexically.
pub fn within(path: &str, dir: &str) -> bool {
    if path.contains('\0') || dir.contains('\0') || path.starts_with('/') != dir.starts_with('/') {
        return false;
    }
    let (path, dir) = (clean(path), clean(dir));
    if !dir.starts_with('/') && (dir == ".." || dir.starts_with("../") || path == ".." || path.starts_with("../")) {
        return false;
    }
    match dir.as_str() {
        "/" => true,
        "." => true,
        dir => path == dir || path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/')),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_resolves_dots_and_slashes_lexically() {
        for (given, cleaned) in [
            ("/srv/public/../private/secrets.txt", "/srv/private/secrets.txt"),
            ("/srv//public/./a", "/srv/public/a"),
            ("/../../etc/passwd", "/etc/passwd"),
            ("/", "/"),
            ("", "."),
            ("a/../..", ".."),
            ("./a/", "a"),
            ("/srv/public/", "/srv/public"),
        ] {
            assert_eq!(clean(given), cleaned, "{given}");
        }
    }

    #[test]
    fn within_holds_only_for_the_directory_and_below() {
        assert!(within("/srv/public/a.txt", "/srv/public"));
        assert!(within("/srv/public", "/srv/public/"));
        assert!(within("/srv/public/./x/../y", "/srv/public"));
        assert!(!within("/srv/public/../private/secrets.txt", "/srv/public"));
        assert!(!within("/srv/publicity", "/srv/public"));
        assert!(!within("srv/public/a", "/srv/public"), "a relative path is never within an absolute directory");
        assert!(!within("/srv/public/a\0", "/srv/public"));
        assert!(!within("../x", "."));
        assert!(within("a/b", "a"));
        assert!(within("/anything", "/"));
    }
}
