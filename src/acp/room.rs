//! What one ACP session's parts share: its id and peer, and the facts the
//! built-in tools' host learns while a call runs that the tool call's
//! updates show (a file's text before a write, the editor's terminal of a
//! command).
//!
//! A command's terminal is embedded in its tool call by whichever side
//! comes second, the relay registering the call or the host creating the
//! terminal (both under one lock), so the editor shows it while it runs
//! and keeps it after `terminal/release`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use agent_client_protocol_schema::{
    SessionId, SessionNotification, SessionUpdate, Terminal, ToolCallContent, ToolCallUpdate, ToolCallUpdateFields,
};

use super::peer::Peer;

pub struct Room {
    pub session_id: SessionId,
    pub peer: Peer,
    /// Where relative paths start.
    pub cwd: PathBuf,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The text a file had before the last write to it (`None`: it did not exist).
    before_write: HashMap<PathBuf, Option<String>>,
    /// Commands of running `run_command` calls → their call ids, oldest first.
    calls: HashMap<String, Vec<String>>,
    /// Commands whose terminal was created before their call was registered.
    terminals: HashMap<String, Vec<String>>,
    /// Call id → the terminal embedded in it.
    embedded: HashMap<String, String>,
}

impl Room {
    pub fn new(session_id: SessionId, peer: Peer, cwd: PathBuf) -> Room {
        Room { session_id, peer, cwd, state: Mutex::new(State::default()) }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn update(&self, update: SessionUpdate) {
        self.peer.notify("session/update", &SessionNotification::new(self.session_id.clone(), update));
    }

    pub fn remember_before_write(&self, path: &Path, text: Option<String>) {
        self.lock().before_write.insert(path.to_path_buf(), text);
    }

    /// The text `path` had before the call's write; `None` when unknown or new.
    pub fn before_write(&self, path: &Path) -> Option<String> {
        self.lock().before_write.remove(path).flatten()
    }

    /// A `run_command` call of `command` started.
    pub fn command_call(&self, command: &str, call_id: &str) {
        let mut state = self.lock();
        match take_first(&mut state.terminals, command) {
            Some(terminal) => self.embed(&mut state, call_id, terminal),
            None => state.calls.entry(command.to_string()).or_default().push(call_id.to_string()),
        }
    }

    /// The editor created `terminal` for `command`.
    pub fn command_terminal(&self, command: &str, terminal: &str) {
        let mut state = self.lock();
        match take_first(&mut state.calls, command) {
            Some(call_id) => self.embed(&mut state, &call_id, terminal.to_string()),
            None => state.terminals.entry(command.to_string()).or_default().push(terminal.to_string()),
        }
    }

    /// The call ended: forget what was waiting for it; the terminal
    /// embedded in it, if any.
    pub fn call_ended(&self, command: &str, call_id: &str) -> Option<String> {
        let mut state = self.lock();
        if let Some(ids) = state.calls.get_mut(command) {
            ids.retain(|id| id != call_id);
            if ids.is_empty() {
                state.calls.remove(command);
            }
        }
        state.embedded.remove(call_id)
    }

    fn embed(&self, state: &mut State, call_id: &str, terminal: String) {
        state.embedded.insert(call_id.to_string(), terminal.clone());
        let content = vec![ToolCallContent::Terminal(Terminal::new(terminal))];
        let fields = ToolCallUpdateFields::new().content(content);
        self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(call_id.to_string(), fields)));
    }
}

fn take_first(map: &mut HashMap<String, Vec<String>>, key: &str) -> Option<String> {
    let list = map.get_mut(key)?;
    let first = (!list.is_empty()).then(|| list.remove(0));
    if list.is_empty() {
        map.remove(key);
    }
    first
}
