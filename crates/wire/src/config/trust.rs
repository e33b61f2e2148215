//! Which project folders the user trusts, and with which files.
//!
//! A project file (mcpvisor's `.mcpvisor.toml`, or another tool's file in
//! the project directory, [`super::discover::FOREIGN_PROJECT_FILES`]) can
//! make every command start a program: a cloned repository is hostile
//! until its folder is trusted. `mcpvisor trust DIR` records the folder and
//! the SHA-256 of each project file it has; a file is used only while its
//! digest is the recorded one.
//!
//! Invariants:
//! - a folder is keyed by its canonical path (symbolic links resolved), so
//!   reaching it through another path changes nothing;
//! - a file is trusted only when its folder is recorded *and* the bytes
//!   read now have the recorded digest: a changed or a new file is
//!   untrusted again, and the verdict says which of the two;
//! - the digest is taken of the very bytes that are parsed (no second read);
//! - the record is a private file (0600 in a 0700 directory) written
//!   atomically; a record that cannot be read trusts nothing and says why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

/// The record's file name in the state directory.
pub const TRUST_FILE: &str = "trusted-folders.json";

/// Where the record is: `$XDG_STATE_HOME/mcpvisor/trusted-folders.json`,
/// else under `~/.local/state`; `None` when not even `HOME` is set (then
/// no folder is trusted).
pub fn trust_file(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    crate::user_dirs::state_dir(env).map(|dir| dir.join(TRUST_FILE))
}

/// Whether project files are used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectTrust {
    /// Only those `mcpvisor trust` recorded in this file (`None`: no
    /// state directory, so none).
    Recorded(Option<PathBuf>),
    /// Every project file, as found: for an embedder or a caller that
    /// vouches for the folder itself.
    Everything,
}

/// Why a project file is not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Untrusted {
    /// Its folder was never trusted (or the trust was revoked).
    Folder,
    /// The folder is trusted, but this file was not there then.
    New,
    /// The folder is trusted, but this file changed since.
    Changed,
}

impl Untrusted {
    /// Why, in words, for a notice.
    pub fn reason(self) -> &'static str {
        match self {
            Untrusted::Folder => "this folder is not trusted",
            Untrusted::New => "new since the folder was trusted",
            Untrusted::Changed => "changed since the folder was trusted",
        }
    }
}

/// One trusted folder: when, and the digest of each project file then.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustedFolder {
    /// The day it was trusted (`YYYY-MM-DD`, UTC).
    pub trusted_on: String,
    /// Project file (relative to the folder) → `sha256:` and its hex digest.
    pub files: BTreeMap<String, String>,
}

/// Every trusted folder, as recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustedFolders {
    version: u32,
    pub folders: BTreeMap<PathBuf, TrustedFolder>,
}

const VERSION: u32 = 1;

/// `sha256:` and the hex SHA-256 of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    let hash = ring::digest::digest(&ring::digest::SHA256, bytes);
    let hex: String = hash.as_ref().iter().map(|byte| format!("{byte:02x}")).collect();
    format!("sha256:{hex}")
}

/// The folder as the record keys it: canonical when it exists, else as given.
pub fn folder_key(dir: &Path) -> PathBuf {
    dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf())
}

impl TrustedFolders {
    /// Reads the record; a missing file is an empty record.
    pub fn load(file: &Path) -> Result<TrustedFolders, ConfigError> {
        let Some(text) = super::file::read_optional(file)? else { return Ok(TrustedFolders::default()) };
        let record: TrustedFolders = serde_json::from_str(&text).map_err(|e| ConfigError::Syntax {
            file: file.into(),
            syntax: "JSON",
            message: format!(
                "{e}; the record of trusted folders is written by `mcpvisor trust`: remove the file and trust your folders again"
            ),
            cause: Some(crate::error::Cause::new(e)),
        })?;
        if record.version > VERSION {
            return Err(ConfigError::InvalidSetting {
                file: file.into(),
                field: "version".into(),
                message: format!("version {} was written by a newer mcpvisor; this one reads version {VERSION}", record.version),
            });
        }
        Ok(record)
    }

    /// Writes the record atomically, 0600 in a 0700 directory.
    pub fn save(&self, file: &Path) -> Result<(), ConfigError> {
        if let Some(dir) = file.parent() {
            crate::user_dirs::ensure_private(dir).map_err(|e| ConfigError::io(dir, "create the directory", e))?;
        }
        let record = TrustedFolders { version: VERSION, folders: self.folders.clone() };
        let text = serde_json::to_string_pretty(&record).map_err(|e| ConfigError::io(file, "write it", e))?;
        super::file::write_atomically(file, &(text + "\n"))
    }

    /// Whether `bytes`, read from `relative` in `dir`, may be used.
    pub fn verdict(&self, dir: &Path, relative: &str, bytes: &[u8]) -> Result<(), Untrusted> {
        let folder = self.folders.get(&folder_key(dir)).ok_or(Untrusted::Folder)?;
        match folder.files.get(relative) {
            None => Err(Untrusted::New),
            Some(recorded) if *recorded == digest(bytes) => Ok(()),
            Some(_) => Err(Untrusted::Changed),
        }
    }

    /// Records `dir` with these files (relative name, digest), replacing
    /// what was recorded for it.
    pub fn trust(&mut self, dir: &Path, files: BTreeMap<String, String>, today: String) {
        self.folders.insert(folder_key(dir), TrustedFolder { trusted_on: today, files });
    }

    /// Records the new digest of one file of a folder that is trusted
    /// (after mcpvisor itself wrote it at the user's command).
    pub fn update_file(&mut self, dir: &Path, relative: &str, bytes: &[u8]) {
        if let Some(folder) = self.folders.get_mut(&folder_key(dir)) {
            folder.files.insert(relative.into(), digest(bytes));
        }
    }

    /// Forgets `dir`; whether it was recorded.
    pub fn revoke(&mut self, dir: &Path) -> bool {
        self.folders.remove(&folder_key(dir)).is_some() || self.folders.remove(dir).is_some()
    }
}

impl ProjectTrust {
    /// The record this policy consults: `None` for [`ProjectTrust::Everything`].
    pub fn record(&self) -> Result<Option<TrustedFolders>, ConfigError> {
        match self {
            ProjectTrust::Everything => Ok(None),
            ProjectTrust::Recorded(Some(file)) => TrustedFolders::load(file).map(Some),
            ProjectTrust::Recorded(None) => Ok(Some(TrustedFolders::default())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_file_is_trusted_only_with_its_folder_and_its_recorded_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let mut record = TrustedFolders::default();
        assert_eq!(record.verdict(dir.path(), ".mcp.json", b"{}"), Err(Untrusted::Folder));
        record.trust(dir.path(), BTreeMap::from([(".mcp.json".to_string(), digest(b"{}"))]), "2026-11-28".into());
        assert_eq!(record.verdict(dir.path(), ".mcp.json", b"{}"), Ok(()));
        assert_eq!(record.verdict(dir.path(), ".mcp.json", b"{ }"), Err(Untrusted::Changed));
        assert_eq!(record.verdict(dir.path(), ".cursor/mcp.json", b"{}"), Err(Untrusted::New));
        // The same folder through a symbolic link.
        let link = dir.path().with_extension("link");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        assert_eq!(record.verdict(&link, ".mcp.json", b"{}"), Ok(()));
        std::fs::remove_file(&link).unwrap();
        assert!(record.revoke(dir.path()));
        assert_eq!(record.verdict(dir.path(), ".mcp.json", b"{}"), Err(Untrusted::Folder));
    }

    #[test]
    fn the_record_is_private_and_read_back_and_a_broken_one_says_what_to_do() {
        let state = tempfile::tempdir().unwrap();
        let file = state.path().join("mcpvisor").join(TRUST_FILE);
        let mut record = TrustedFolders::default();
        record.trust(Path::new("/srv/project"), BTreeMap::from([(".mcp.json".into(), digest(b"x"))]), "2026-11-28".into());
        record.save(&file).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(file.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(TrustedFolders::load(&file).unwrap().folders, record.folders);
        std::fs::write(&file, "{ not json").unwrap();
        let error = TrustedFolders::load(&file).unwrap_err().to_string();
        assert!(error.contains("mcpvisor trust") && error.contains(TRUST_FILE), "{error}");
        assert_eq!(TrustedFolders::load(&state.path().join("none.json")).unwrap(), TrustedFolders::default());
    }

    #[test]
    fn digests_are_sha256() {
        assert_eq!(digest(b""), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
