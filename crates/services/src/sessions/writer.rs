//! Appending records to one session file.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::{Record, SessionError, SessionId};
use crate::config::Redactor;

/// Appends the records of one conversation to its file, one JSON line
/// each, written with a single `write` as soon as it is appended (nothing
/// is buffered in the process, so a crash of the program loses at most the
/// line being written). Secrets known to its [`Redactor`], and those
/// recognised by their shape, are masked inside every string value before
/// the line is written: they never reach the disk.
#[derive(Debug)]
pub struct SessionWriter {
    id: SessionId,
    path: PathBuf,
    file: File,
    redactor: Redactor,
}

impl SessionWriter {
    pub(super) fn new(id: SessionId, path: PathBuf, file: File, redactor: Redactor) -> SessionWriter {
        SessionWriter { id, path, file, redactor }
    }

    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// The file written to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `record` as one line, its secrets masked.
    pub fn append(&self, record: &Record) -> Result<(), SessionError> {
        let mut value = serde_json::to_value(record).map_err(|e| self.error("encode a record for it", e.to_string()))?;
        self.redactor.json(&mut value);
        if let (Record::Started(started), Some(object)) = (record, value.as_object_mut()) {
            // The id names the file: it is never a secret, and must stay as it is.
            object.insert("session_id".into(), started.session_id.as_str().into());
        }
        let mut line = value.to_string();
        line.push('\n');
        self.write_raw(line.as_bytes())
    }

    /// Writes bytes as they are, in one call.
    pub(super) fn write_raw(&self, bytes: &[u8]) -> Result<(), SessionError> {
        (&self.file).write_all(bytes).map_err(|e| self.error("write to it", e.to_string()))
    }

    fn error(&self, action: &'static str, reason: String) -> SessionError {
        SessionError::Io { path: self.path.clone(), action, reason }
    }
}
