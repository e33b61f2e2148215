//! The seam between the built-in tools and the machine: every file read,
//! file write, directory listing and command goes through a [`Host`]. The
//! tools own what the model sees (numbering, caps, sentences, advice); a
//! host owns only the access. [`super::Local`] is this machine; an editor
//! integration (ACP's `fs/read_text_file`, `fs/write_text_file`,
//! `terminal/create`) can put its own in its place with
//! [`super::server_on`].

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::future::BoxFuture;

/// Where the built-in tools read, write and run. Paths are absolute
/// (the tools resolve them first). Dropping a returned future cancels the
/// operation; for [`Host::run`] it must end what the command started.
pub trait Host: Send + Sync + 'static {
    /// Up to `count` lines of a UTF-8 text file from line `first` (1-based),
    /// each cut to at most `max_line_bytes` bytes.
    fn read_lines<'a>(
        &'a self,
        path: &'a Path,
        first: usize,
        count: usize,
        max_line_bytes: usize,
    ) -> BoxFuture<'a, Result<Lines, HostError>>;

    /// Writes `content` to `path`, creating its parent directories, so that
    /// a reader sees the old content or the new, never a mix.
    fn write<'a>(&'a self, path: &'a Path, content: &'a str) -> BoxFuture<'a, Result<Written, HostError>>;

    /// The entries of a directory, in any order.
    fn list<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, Result<Vec<Entry>, HostError>>;

    /// Runs a shell command to its end or its time-out.
    fn run<'a>(&'a self, request: &'a CommandRequest) -> BoxFuture<'a, Result<CommandOutcome, HostError>>;
}

/// Lines read from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lines {
    pub lines: Vec<Line>,
    /// The file has no line `first`: it has only this many.
    pub past_end: Option<usize>,
    /// More lines follow the last one returned.
    pub more: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub text: String,
    /// Bytes cut from its end to keep it within `max_line_bytes`.
    pub cut: usize,
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// The size of the file it replaced; `None` when it created the file.
    pub replaced: Option<u64>,
}

/// One entry of a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub is_dir: bool,
}

/// A command to run with `sh -c`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRequest {
    pub command: String,
    pub cwd: PathBuf,
    pub timeout: Duration,
    /// Output bytes kept at most (its head and its tail).
    pub output_limit: usize,
    /// The command's whole environment: nothing else is inherited.
    pub env: Vec<(OsString, OsString)>,
    /// The sandbox the command runs in (`[agent.sandbox]`); `None`: none.
    pub sandbox: Option<crate::config::SandboxSpec>,
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutcome {
    /// Its stdout and stderr together, as UTF-8 (invalid bytes replaced),
    /// with a marker where the middle was cut.
    pub output: String,
    /// Output bytes cut from the middle.
    pub cut: usize,
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// It was still running at its time-out and was ended.
    pub timed_out: bool,
}

/// Why a host could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("it holds NUL bytes, so it looks like a binary file")]
    Binary,
    #[error("line {line} is not valid UTF-8")]
    NotUtf8 { line: usize },
}
