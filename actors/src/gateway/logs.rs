//! Servers' log messages across the two eras.
//!
//! - A handshake-era session has one level: what its `logging/setLevel`
//!   named, else [`DEFAULT_LEVEL`] (a handshake-era server that was never
//!   told a level sends what it likes, which in practice is everything).
//!   Its tool calls take that level upstream as their own
//!   `_meta["io.modelcontextprotocol/logLevel"]` (a 2026-07-28 server logs
//!   only for requests that ask), and the pool's log messages reach it at
//!   or above that level ([`SessionLevel::passes`]).
//! - A 2026-07-28 request has no session: a `tools/call` whose `_meta`
//!   names a level gets the called server's messages at or above it on its
//!   own stream ([`RequestLogs`]), whichever era the server speaks.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::handle::Handle;
use crate::operation::LogLevel;
use crate::protocol::methods;
use crate::protocol::session::{META_LOG_LEVEL, META_PROTOCOL_VERSION};
use crate::server::outbox::Frame;
use crate::Event;

/// The level of a handshake-era session that never sent `logging/setLevel`.
pub const DEFAULT_LEVEL: LogLevel = LogLevel::Debug;

/// A handshake-era session's log level, shared by the work of its requests.
#[derive(Clone, Debug)]
pub struct SessionLevel(Arc<Mutex<LogLevel>>);

impl Default for SessionLevel {
    fn default() -> SessionLevel {
        SessionLevel(Arc::new(Mutex::new(DEFAULT_LEVEL)))
    }
}

impl SessionLevel {
    pub fn get(&self) -> LogLevel {
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn set(&self, level: LogLevel) {
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = level;
    }

    /// Whether a message at `level` (as a server wrote it) reaches the
    /// session. A level no client could have asked about is passed on.
    pub fn passes(&self, level: &str) -> bool {
        parse(level).is_none_or(|level| level >= self.get())
    }
}

/// The params of the `notifications/message` a client gets for a server's
/// message: the server's name is the `logger`.
pub fn message(server: &str, level: &str, data: &Value) -> Value {
    json!({"level": level, "logger": server, "data": data})
}

fn parse(level: &str) -> Option<LogLevel> {
    serde_json::from_value(json!(level)).ok()
}

/// A 2026-07-28 request's own logs: it declared
/// `_meta["io.modelcontextprotocol/logLevel"]`, so the called server's
/// `notifications/message` at or above that level go on its stream while
/// it is open (the runtime does not say which request a server logged
/// for: a server's messages during the request are all sent).
pub struct RequestLogs {
    pub level: LogLevel,
    events: crate::handle::Events,
}

impl RequestLogs {
    /// The logs `params` (a `tools/call`'s) asks for, if it is a 2026-07-28
    /// request that names a level.
    pub fn of(params: &Value, handle: &Handle) -> Option<RequestLogs> {
        let level = params.get("_meta")?.get(META_LOG_LEVEL)?;
        if !is_modern(params) {
            return None;
        }
        let level = serde_json::from_value(level.clone()).ok()?;
        Some(RequestLogs { level, events: handle.subscribe() })
    }

    /// The next event, or never when the request asked for no logs.
    pub async fn next(logs: &mut Option<RequestLogs>) -> Option<Event> {
        match logs {
            Some(logs) => logs.events.recv().await,
            None => std::future::pending().await,
        }
    }

    /// The messages already received.
    pub fn drain(&mut self, server: &str) -> Vec<Frame> {
        let mut messages = Vec::new();
        while let Ok(event) = self.events.try_recv() {
            messages.extend(self.message(server, event));
        }
        messages
    }

    /// `event` as the request's log message, when it is one of `server`'s at the level asked.
    pub fn message(&self, server: &str, event: Event) -> Option<Frame> {
        let Event::Log { server: from, level, data, .. } = event else { return None };
        (from == server && parse(&level).is_some_and(|parsed| parsed >= self.level))
            .then(|| Frame::notification(methods::LOG_MESSAGE, &message(&from, &level, &data)))
    }
}

/// Whether `params` belong to a 2026-07-28 request (its `_meta` names the version).
pub fn is_modern(params: &Value) -> bool {
    params.get("_meta").and_then(|meta| meta.get(META_PROTOCOL_VERSION)).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_hears_its_level_and_above_and_levels_it_cannot_read() {
        let level = SessionLevel::default();
        assert!(level.passes("debug"), "the default hears everything");
        level.set(LogLevel::Warning);
        assert!(!level.passes("info") && level.passes("warning") && level.passes("emergency"));
        assert!(level.passes("loud"), "a level no client could filter by is passed on");
        assert!(!level.clone().passes("notice"), "clones share the level");
    }
}
