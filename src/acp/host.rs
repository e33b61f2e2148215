//! The built-in tools' [`Host`] in an editor session: files through the
//! editor (`fs/read_text_file`, `fs/write_text_file`, so the agent reads
//! unsaved buffers and the editor sees its edits) and commands in the
//! editor's terminals (`terminal/create` … `terminal/release`, shown in
//! the tool call), each only when the editor offers it; the rest on this
//! machine ([`Local`]). Directory listings are always local: ACP has no
//! method for them.
//!
//! Invariants: a command's terminal is always released, and killed first
//! when the call is dropped (cancelled) or times out; before a write the
//! file's old text is kept in the [`Room`] for the tool call's diff.

use std::io;
use std::path::Path;
use std::sync::Arc;

use agent_client_protocol_schema::{
    CreateTerminalRequest, CreateTerminalResponse, KillTerminalRequest, ReadTextFileRequest, ReadTextFileResponse, ReleaseTerminalRequest,
    TerminalOutputRequest, TerminalOutputResponse, WaitForTerminalExitRequest, WaitForTerminalExitResponse, WriteTextFileRequest,
};
use futures::future::BoxFuture;
use serde_json::Value;

use super::room::Room;
use crate::builtin_tools::{CommandOutcome, CommandRequest, Entry, Host, HostError, Line, Lines, Local, Written};
use crate::protocol::{error_codes, ErrorObject};

/// What the editor said it can do (`clientCapabilities`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EditorOffers {
    pub read: bool,
    pub write: bool,
    pub terminal: bool,
}

pub struct EditorHost {
    pub room: Arc<Room>,
    pub offers: EditorOffers,
}

impl Host for EditorHost {
    fn read_lines<'a>(&'a self, path: &'a Path, first: usize, count: usize, max: usize) -> BoxFuture<'a, Result<Lines, HostError>> {
        Box::pin(async move {
            if !self.offers.read {
                return Local.read_lines(path, first, count, max).await;
            }
            let text = self.read_text(path).await?;
            if text.contains('\0') {
                return Err(HostError::Binary);
            }
            Ok(window(&text, first, count, max))
        })
    }

    fn write<'a>(&'a self, path: &'a Path, content: &'a str) -> BoxFuture<'a, Result<Written, HostError>> {
        Box::pin(async move {
            let before = match self.offers.read {
                true => self.read_text(path).await.ok(),
                false => tokio::fs::read_to_string(path).await.ok(),
            };
            let replaced = before.as_ref().map(|text| text.len() as u64);
            self.room.remember_before_write(path, before);
            if !self.offers.write {
                return Local.write(path, content).await;
            }
            let request = WriteTextFileRequest::new(self.room.session_id.clone(), path, content);
            let _: Value = self.room.peer.request("fs/write_text_file", &request).await.map_err(io_error)?;
            Ok(Written { replaced })
        })
    }

    fn list<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, Result<Vec<Entry>, HostError>> {
        Local.list(path)
    }

    fn run<'a>(&'a self, request: &'a CommandRequest) -> BoxFuture<'a, Result<CommandOutcome, HostError>> {
        if !self.offers.terminal {
            return Local.run(request);
        }
        Box::pin(self.run_in_terminal(request))
    }
}

impl EditorHost {
    async fn read_text(&self, path: &Path) -> Result<String, HostError> {
        let request = ReadTextFileRequest::new(self.room.session_id.clone(), path);
        let response: ReadTextFileResponse = self.room.peer.request("fs/read_text_file", &request).await.map_err(|error| {
            if error.code != super::peer::ANSWER_TOO_LARGE {
                return io_error(error);
            }
            let advice = "read a part of it with run_command (head, sed -n) instead";
            HostError::Io(io::Error::other(format!("{} (reading {} through fs/read_text_file); {advice}", error.message, path.display())))
        })?;
        Ok(response.content)
    }

    async fn run_in_terminal(&self, request: &CommandRequest) -> Result<CommandOutcome, HostError> {
        let session = self.room.session_id.clone();
        let create = CreateTerminalRequest::new(session.clone(), "sh")
            .args(vec!["-c".into(), request.command.clone()])
            .cwd(request.cwd.clone())
            .output_byte_limit(request.output_limit as u64);
        let created: CreateTerminalResponse = self.room.peer.request("terminal/create", &create).await.map_err(io_error)?;
        let terminal = created.terminal_id;
        let mut guard = Release { room: self.room.clone(), terminal: terminal.to_string(), kill: true };
        self.room.command_terminal(&request.command, &terminal.0);
        let wait = WaitForTerminalExitRequest::new(session.clone(), terminal.clone());
        let waited = tokio::time::timeout(
            request.timeout,
            self.room.peer.request::<_, WaitForTerminalExitResponse>("terminal/wait_for_exit", &wait),
        );
        let (exit, timed_out) = match waited.await {
            Ok(exit) => (Some(exit.map_err(io_error)?.exit_status), false),
            Err(_) => {
                let kill = KillTerminalRequest::new(session.clone(), terminal.clone());
                let _: Result<Value, _> = self.room.peer.request("terminal/kill", &kill).await;
                (None, true)
            }
        };
        guard.kill = false;
        let output: TerminalOutputResponse =
            self.room.peer.request("terminal/output", &TerminalOutputRequest::new(session, terminal)).await.map_err(io_error)?;
        let status = exit.or(output.exit_status);
        let cut = if output.truncated { 1 } else { 0 };
        Ok(CommandOutcome {
            output: output.output,
            cut,
            code: status.as_ref().and_then(|s| s.exit_code).map(|code| code as i32),
            signal: status.as_ref().and_then(|s| s.signal.as_deref()).and_then(signal_number),
            timed_out,
        })
    }
}

/// Releases the terminal when the command's future ends, killing it first
/// if the command did not finish (the call was cancelled).
struct Release {
    room: Arc<Room>,
    terminal: String,
    kill: bool,
}

impl Drop for Release {
    fn drop(&mut self) {
        let (room, terminal, kill) = (self.room.clone(), self.terminal.clone(), self.kill);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move {
            let session = room.session_id.clone();
            if kill {
                let _: Result<Value, _> =
                    room.peer.request("terminal/kill", &KillTerminalRequest::new(session.clone(), terminal.clone())).await;
            }
            let _: Result<Value, _> = room.peer.request("terminal/release", &ReleaseTerminalRequest::new(session, terminal)).await;
        });
    }
}

/// Lines `first..first+count` (1-based) of `text`, each cut to `max` bytes.
fn window(text: &str, first: usize, count: usize, max: usize) -> Lines {
    let all: Vec<&str> = text.lines().collect();
    if first > 1 && first > all.len() {
        return Lines { lines: Vec::new(), past_end: Some(all.len()), more: false };
    }
    let lines = all
        .iter()
        .skip(first - 1)
        .take(count)
        .map(|line| {
            let mut end = line.len().min(max);
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            Line { text: line[..end].to_string(), cut: line.len() - end }
        })
        .collect();
    Lines { lines, past_end: None, more: all.len() > first - 1 + count }
}

/// The editor's error as the tools explain it: "not found" keeps its kind.
fn io_error(error: ErrorObject) -> HostError {
    let kind = match error.code {
        error_codes::RESOURCE_NOT_FOUND => io::ErrorKind::NotFound,
        _ if error.message.to_ascii_lowercase().contains("not found") => io::ErrorKind::NotFound,
        _ => io::ErrorKind::Other,
    };
    HostError::Io(io::Error::new(kind, format!("the editor answered: {}", error.message)))
}

fn signal_number(name: &str) -> Option<i32> {
    let bare = name.trim_start_matches("SIG");
    let known = [("HUP", 1), ("INT", 2), ("QUIT", 3), ("KILL", 9), ("SEGV", 11), ("PIPE", 13), ("ALRM", 14), ("TERM", 15)];
    known.iter().find(|(n, _)| *n == bare).map(|(_, number)| *number).or_else(|| bare.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_of_the_editor_text_counts_lines_like_the_local_reader() {
        let lines = window("one\ntwo\nthree\n", 2, 1, 2);
        assert_eq!(lines.lines, vec![Line { text: "tw".into(), cut: 1 }]);
        assert!(lines.more);
        assert_eq!(window("a\n", 5, 10, 100).past_end, Some(1));
        assert!(window("", 1, 10, 100).lines.is_empty());
        assert_eq!(window("é", 1, 1, 1).lines[0], Line { text: String::new(), cut: 2 });
    }
}
