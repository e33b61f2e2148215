//! Reading and replacing configuration files.
//!
//! Writes are atomic (a temporary file in the same directory, then a
//! rename), so a crash never leaves half a file. A symbolic link is
//! followed and its target replaced, so dotfile managers keep their links.
//! An existing file keeps its permissions; a new one is created readable
//! by its owner only (0600), because it may hold tokens.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::ConfigError;

fn io_error(file: &Path, action: &'static str, error: io::Error) -> ConfigError {
    ConfigError::io(file, action, error)
}

/// The file's text, or `None` if it does not exist.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, ConfigError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(io_error(path, "read it", error)),
    }
}

/// Replaces the file's contents with `text`, creating its directory if needed.
#[doc(hidden)]
pub fn write_atomically(path: &Path, text: &str) -> Result<(), ConfigError> {
    let target = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let dir = match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir).map_err(|error| io_error(&dir, "create the directory", error))?;
    let file_name = target.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let temporary = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
    let written = write_new(&temporary, text, fs::metadata(&target).ok().map(|meta| meta.permissions()))
        .and_then(|()| fs::rename(&temporary, &target));
    written.map_err(|error| {
        let _ = fs::remove_file(&temporary);
        io_error(path, "write it", error)
    })
}

fn write_new(path: &Path, text: &str, permissions: Option<fs::Permissions>) -> io::Result<()> {
    let mut file = fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    if let Some(permissions) = permissions {
        file.set_permissions(permissions)?;
    }
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn missing_file_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_optional(&dir.path().join("nope.toml")).unwrap(), None);
    }

    #[test]
    fn unreadable_path_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let error = read_optional(dir.path()).unwrap_err();
        assert!(matches!(&error, ConfigError::Io { file, .. } if file == dir.path()), "{error}");
        assert!(crate::error::Cause::find::<std::io::Error>(&error).is_some(), "the OS error is kept: {error:?}");
    }

    #[test]
    fn writes_create_directories_with_private_permissions_and_keep_existing_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/servers.toml");
        write_atomically(&path, "one").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "one");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);

        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        write_atomically(&path, "two").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o640);
        let leftovers: Vec<_> = fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
    }

    #[test]
    fn symbolic_links_are_followed() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.toml");
        let link = dir.path().join("link.toml");
        fs::write(&real, "old").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_atomically(&link, "new").unwrap();
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
    }
}
