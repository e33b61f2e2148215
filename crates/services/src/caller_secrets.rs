//! The file of each caller's secrets, read when a per-caller server
//! starts a caller's process (`per_caller = { secrets = "..." }`):
//!
//! ```toml
//! [issuer.alice]          # a token of the gateway's issuer whose `sub` is alice
//! GITHUB_TOKEN = "ghp_…"
//! [key.ci-bot]            # the named key ci-bot of [serve]
//! GITHUB_TOKEN = "ghp_…"
//! ```
//!
//! Invariants: the file is read only if no one but its owner may read it
//! (mode 0600 or stricter), and at most [`MAX_FILE`] of it; a caller gets
//! its own table and nothing else; no error holds a value of it.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The largest secrets file read.
pub const MAX_FILE: u64 = 1 << 20;

/// The secrets of `caller_key` (`issuer:SUBJECT` or `key:NAME`, see
/// `Identity::caller_key`) in `path`; none when it has no table there.
/// `Err` says what is wrong with the file (never a value of it) and what to do.
pub fn for_caller(path: &Path, caller_key: &str) -> Result<BTreeMap<String, String>, String> {
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read the callers' secrets file {shown} ({e})"))?;
    let metadata = file.metadata().map_err(|e| format!("cannot read the callers' secrets file {shown} ({e})"))?;
    let mode = metadata.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!("the callers' secrets file {shown} may be read by others (mode {mode:03o}); run `chmod 600 {shown}`"));
    }
    if metadata.len() > MAX_FILE {
        return Err(format!("the callers' secrets file {shown} is larger than {MAX_FILE} bytes"));
    }
    let mut text = String::new();
    file.take(MAX_FILE).read_to_string(&mut text).map_err(|e| format!("cannot read the callers' secrets file {shown} ({e})"))?;
    let document: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        let line = e.span().map_or(1, |span| text[..span.start.min(text.len())].lines().count().max(1));
        format!("the callers' secrets file {shown} is not valid TOML (line {line})")
    })?;
    let Some((kind, name)) = caller_key.split_once(':') else { return Ok(BTreeMap::new()) };
    let Some(table) = document.get(kind).and_then(|kinds| kinds.get(name)) else { return Ok(BTreeMap::new()) };
    let Some(table) = table.as_table_like() else {
        return Err(format!("in the callers' secrets file {shown}, [{kind}.{name}] is not a table of NAME = \"value\""));
    };
    table
        .iter()
        .map(|(key, value)| match value.as_str() {
            Some(text) => Ok((key.to_owned(), text.to_owned())),
            None => Err(format!("in the callers' secrets file {shown}, [{kind}.{name}] {key} is not a string")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str, mode: u32) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("caller-secrets.toml");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        (dir, path)
    }

    #[test]
    fn each_caller_gets_its_own_table() {
        let (_dir, path) =
            file("[issuer.alice]\nT = \"a-secret\"\n[key.alice]\nT = \"key-secret\"\n[issuer.\"b@x.org\"]\nT = \"b\"\n", 0o600);
        assert_eq!(for_caller(&path, "issuer:alice").unwrap()["T"], "a-secret");
        assert_eq!(for_caller(&path, "key:alice").unwrap()["T"], "key-secret", "a named key is not the issuer's subject");
        assert_eq!(for_caller(&path, "issuer:b@x.org").unwrap()["T"], "b");
        assert!(for_caller(&path, "issuer:carol").unwrap().is_empty());
    }

    #[test]
    fn a_file_others_may_read_or_a_bad_one_is_refused_without_its_values() {
        let (_dir, path) = file("[issuer.alice]\nT = \"a-secret\"\n", 0o644);
        let error = for_caller(&path, "issuer:alice").unwrap_err();
        assert!(error.contains("mode 644") && error.contains("chmod 600"), "{error}");
        let (_dir, path) = file("[issuer.alice]\nT = \"a-secret\n", 0o600);
        let error = for_caller(&path, "issuer:alice").unwrap_err();
        assert!(error.contains("not valid TOML") && !error.contains("a-secret"), "{error}");
        let (_dir, path) = file("[issuer.alice]\nT = 5\n", 0o600);
        assert!(for_caller(&path, "issuer:alice").unwrap_err().contains("T is not a string"));
    }
}
