//! Saved conversations of the agent: one JSON-lines file per conversation,
//! written as it goes, so a conversation can be listed and resumed.
//!
//! **Where**: `$XDG_DATA_HOME/mcpvisor/sessions/`, else
//! `~/.local/share/mcpvisor/sessions/` ([`SessionStore::default_location`]);
//! the directory is made readable by its owner only (0700), each file too
//! (0600).
//!
//! **Files**: `{id}.jsonl`, the id from [`SessionId`] (UTC creation time to
//! the millisecond and a random part), so file names sort by creation and
//! an id given by a user is checked before any path is built. Each line is
//! one [`Record`]: `started` first (id, time, model, working directory,
//! system prompt), then `message`s (user, assistant with its tool calls,
//! tool results), `summary` when older turns were summarised, and
//! `turn_ended` after each prompt.
//!
//! **Writing** ([`SessionWriter`]): each record is one `write` of one line
//! as soon as it happens; secrets are masked in every string value first
//! ([`crate::config::Redactor::json`]). Lines are not synced to the disk
//! one by one: a crash of the program loses at most the line being
//! written, a crash of the machine what the system had not yet written.
//! Two programs appending to one conversation at once are not prevented.
//!
//! **Reading** ([`SessionStore::load`]) is forgiving where it can be: an
//! incomplete last line (the writer stopped mid-line), a line that is not
//! JSON and a record type this version does not know are skipped, each
//! with a warning in [`SavedSession::warnings`] for the caller to show. A
//! file whose first record is not `started` is not a session and fails.
//! The messages are replayed as the model saw them: a `summary` replaces
//! the messages it covers by one user message ([`summary_message`]).

mod id;
mod record;
mod writer;

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Also dates the audit log's lines.
pub use id::{SessionId, EXAMPLE_ID, ID_LEN};
pub use record::{apply_summary, summary_message, Record, Started, SUMMARY_HEADING};
pub use writer::SessionWriter;

use crate::config::Redactor;
use crate::llm::chat::ChatMessage;
use record::Replay;

/// Extension of session files.
const EXTENSION: &str = "jsonl";

/// How many words of a conversation's first prompt a listing shows at most.
const FIRST_WORDS: usize = 12;

/// Why the session history could not be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    #[error("{id:?} is not a conversation id: {reason} (ids look like {EXAMPLE_ID})")]
    BadId { id: String, reason: String },

    #[error("there is no saved conversation {id} in {}", .dir.display())]
    NotFound { id: SessionId, dir: PathBuf },

    #[error("{}: not a saved conversation: {reason}", .path.display())]
    NotASession { path: PathBuf, reason: String },

    #[error("{}: cannot {action}: {reason}", .path.display())]
    Io { path: PathBuf, action: &'static str, reason: String },

    #[error("there is no directory for saved conversations: neither XDG_DATA_HOME nor HOME is set")]
    NoLocation,
}

/// What a new conversation starts with (its id and time are the store's).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewSession {
    pub model: String,
    pub cwd: Option<String>,
    pub system: Option<String>,
}

/// A conversation read back from its file.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedSession {
    pub id: SessionId,
    pub started: Started,
    /// The conversation as the model should see it now (summaries applied).
    pub messages: Vec<ChatMessage>,
    /// Lines that were skipped, and why.
    pub warnings: Vec<String>,
}

/// One conversation in a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInfo {
    pub id: SessionId,
    pub created_ms: u64,
    pub model: String,
    /// The first words of its first prompt (empty when it has none yet).
    pub first_words: String,
}

/// The saved conversations, newest first, and the files that could not be read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionListing {
    pub sessions: Vec<SessionInfo>,
    pub warnings: Vec<String>,
}

/// The directory of saved conversations.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionStore {
    dir: PathBuf,
}

impl SessionStore {
    /// A store in `dir` (created when the first conversation is).
    pub fn new(dir: impl Into<PathBuf>) -> SessionStore {
        SessionStore { dir: dir.into() }
    }

    /// `$XDG_DATA_HOME/mcpvisor/sessions`, else `~/.local/share/mcpvisor/sessions`.
    pub fn default_location() -> Result<SessionStore, SessionError> {
        let data = crate::user_dirs::data_dir(|name| std::env::var(name).ok()).ok_or(SessionError::NoLocation)?;
        Ok(SessionStore::new(data.join("sessions")))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of conversation `id` (which may not exist).
    pub fn path_of(&self, id: &SessionId) -> PathBuf {
        self.dir.join(format!("{id}.{EXTENSION}"))
    }

    /// Starts a new conversation: a new file holding its `started` record.
    pub fn create(&self, new: NewSession, redactor: Redactor) -> Result<SessionWriter, SessionError> {
        self.prepare_dir()?;
        // A random part already used in the same millisecond is drawn again.
        let mut attempts = 0;
        let created_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64);
        let (id, path, file) = loop {
            let id = SessionId::at(created_ms, fastrand::u32(..1 << 24));
            let path = self.path_of(&id);
            match OpenOptions::new().append(true).create_new(true).mode(0o600).open(&path) {
                Ok(file) => break (id, path, file),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempts < 16 => attempts += 1,
                Err(e) => return Err(SessionError::Io { path, action: "create it", reason: e.to_string() }),
            }
        };
        let started = Started { session_id: id.clone(), created_ms, model: new.model, cwd: new.cwd, system: new.system };
        let writer = SessionWriter::new(id, path, file, redactor);
        if let Err(error) = writer.append(&Record::Started(started)) {
            let _ = fs::remove_file(writer.path());
            return Err(error);
        }
        Ok(writer)
    }

    /// Reads conversation `id` back.
    pub fn load(&self, id: &SessionId) -> Result<SavedSession, SessionError> {
        let path = self.path_of(id);
        let mut bytes = Vec::new();
        match File::open(&path).and_then(|mut file| file.read_to_end(&mut bytes)) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(SessionError::NotFound { id: id.clone(), dir: self.dir.clone() })
            }
            Err(e) => return Err(SessionError::Io { path, action: "read it", reason: e.to_string() }),
        }
        let mut replay = Replay::default();
        let mut lines = bytes.split(|byte| *byte == b'\n').enumerate().peekable();
        while let Some((index, line)) = lines.next() {
            // The piece after the last newline is a line the writer did not finish.
            replay.line(index + 1, line, lines.peek().is_some());
        }
        let not_a_session = |reason: &str| SessionError::NotASession { path: path.clone(), reason: reason.into() };
        let started = replay.started.ok_or_else(|| not_a_session("it has no `started` record"))?;
        if started.session_id != *id {
            return Err(not_a_session(&format!("its `started` record names conversation {}", started.session_id)));
        }
        Ok(SavedSession { id: id.clone(), started, messages: replay.messages, warnings: replay.warnings })
    }

    /// Reads conversation `id` back and opens its file to go on with it.
    pub fn resume(&self, id: &SessionId, redactor: Redactor) -> Result<(SavedSession, SessionWriter), SessionError> {
        let saved = self.load(id)?;
        let path = self.path_of(id);
        let file = OpenOptions::new().read(true).append(true).open(&path).map_err(|e| SessionError::Io {
            path: path.clone(),
            action: "open it",
            reason: e.to_string(),
        })?;
        let ends_mid_line =
            ends_without_newline(&file).map_err(|e| SessionError::Io { path: path.clone(), action: "read it", reason: e })?;
        let writer = SessionWriter::new(id.clone(), path, file, redactor);
        if ends_mid_line {
            // Ends the torn line, so the next record starts a line of its own.
            writer.write_raw(b"\n")?;
        }
        Ok((saved, writer))
    }

    /// The most recent conversation (by id), if there is one.
    pub fn latest(&self) -> Result<Option<SessionId>, SessionError> {
        Ok(self.ids()?.pop())
    }

    /// The saved conversations, newest first.
    pub fn list(&self) -> Result<SessionListing, SessionError> {
        let mut listing = SessionListing::default();
        for id in self.ids()?.into_iter().rev() {
            match self.info(&id) {
                Ok(info) => listing.sessions.push(info),
                Err(error) => listing.warnings.push(error.to_string()),
            }
        }
        Ok(listing)
    }

    /// The ids of the files in the directory, oldest first; other files are ignored.
    fn ids(&self) -> Result<Vec<SessionId>, SessionError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(SessionError::Io { path: self.dir.clone(), action: "list it", reason: e.to_string() }),
        };
        let mut ids: Vec<SessionId> = entries
            .filter_map(|entry| {
                let name = entry.ok()?.file_name();
                let stem = name.to_str()?.strip_suffix(&format!(".{EXTENSION}"))?.to_string();
                SessionId::parse(&stem).ok().filter(|id| id.as_str() == stem)
            })
            .collect();
        ids.sort();
        Ok(ids)
    }

    /// A listing's line for `id`: read up to its first user message only.
    fn info(&self, id: &SessionId) -> Result<SessionInfo, SessionError> {
        let path = self.path_of(id);
        let io = |e: std::io::Error| SessionError::Io { path: path.clone(), action: "read it", reason: e.to_string() };
        let mut reader = BufReader::new(File::open(&path).map_err(io)?);
        let mut replay = Replay::default();
        let mut line = Vec::new();
        let mut number = 0;
        while replay.messages.is_empty() {
            line.clear();
            if reader.read_until(b'\n', &mut line).map_err(io)? == 0 {
                break;
            }
            number += 1;
            let complete = line.ends_with(b"\n");
            replay.line(number, &line, complete);
            if replay.started.is_none() {
                break;
            }
        }
        let started =
            replay.started.ok_or_else(|| SessionError::NotASession { path: path.clone(), reason: "it has no `started` record".into() })?;
        let first_words = replay.messages.iter().find_map(first_words).unwrap_or_default();
        Ok(SessionInfo { id: id.clone(), created_ms: started.created_ms, model: started.model, first_words })
    }

    /// Creates the directory (0700), or makes an existing one private.
    fn prepare_dir(&self) -> Result<(), SessionError> {
        crate::user_dirs::ensure_private(&self.dir).map_err(|e| SessionError::Io {
            path: self.dir.clone(),
            action: "create it",
            reason: e.to_string(),
        })
    }
}

/// The first [`FIRST_WORDS`] words of a user message's text.
fn first_words(message: &ChatMessage) -> Option<String> {
    let ChatMessage::User { content } = message else { return None };
    let text: Vec<&str> = content.iter().filter_map(|part| part.text()).collect();
    let words: Vec<&str> = text.iter().flat_map(|text| text.split_whitespace()).collect();
    let mut shown = words.iter().take(FIRST_WORDS).copied().collect::<Vec<_>>().join(" ");
    if words.len() > FIRST_WORDS {
        shown.push_str(" …");
    }
    Some(shown)
}

/// Whether the file is not empty and its last byte is not a newline.
fn ends_without_newline(file: &File) -> Result<bool, String> {
    use std::os::unix::fs::FileExt;
    let length = file.metadata().map_err(|e| e.to_string())?.len();
    if length == 0 {
        return Ok(false);
    }
    let mut last = [0u8];
    file.read_exact_at(&mut last, length - 1).map_err(|e| e.to_string())?;
    Ok(last[0] != b'\n')
}

#[cfg(test)]
mod tests;
