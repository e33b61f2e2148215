//! The directory: where each server's connection is, shared by the Hub and
//! every `Handle`, so that a call or operation by server name goes
//! straight to the connection's mailbox instead of through the Hub's.
//!
//! Invariants:
//! - only the Hub writes it, in the same handler step that changes its own
//!   table (a server is listed here exactly while the Hub has its slot), so
//!   a lookup finds what the Hub's `ToServer` would have routed to;
//! - it holds connections weakly: the Hub keeps the only strong address, so
//!   removing a server still ends its actor;
//! - a lookup that finds nothing is not an answer: the caller asks the Hub,
//!   whose reply (unknown server, runtime stopped) stays the one source of
//!   those errors;
//! - a server that acts as each caller is listed with its [`Callers`]: its
//!   tool calls go there, to the caller's own connection.

use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use actix::{Addr, WeakAddr};

use super::callers::Callers;
use super::connection::Connection;

type Entry = (WeakAddr<Connection>, Option<Arc<Callers>>);

/// Server name → its connection. Cheap to clone: clones share one table.
#[derive(Clone, Default)]
#[doc(hidden)]
pub struct Directory(Arc<RwLock<HashMap<Box<str>, Entry>>>);

impl Directory {
    /// The connection of `server`, if the Hub has it and it still runs.
    pub(crate) fn connection(&self, server: &str) -> Option<Addr<Connection>> {
        self.read().get(server).and_then(|(connection, _)| connection.upgrade())
    }

    /// The callers of `server`, if it acts as each caller.
    pub(crate) fn callers(&self, server: &str) -> Option<Arc<Callers>> {
        self.read().get(server).and_then(|(_, callers)| callers.clone())
    }

    pub(super) fn insert(&self, server: &str, connection: WeakAddr<Connection>, callers: Option<Arc<Callers>>) {
        self.write().insert(server.into(), (connection, callers));
    }

    pub(super) fn remove(&self, server: &str) {
        self.write().remove(server);
    }

    pub(super) fn clear(&self) {
        self.write().clear();
    }

    // A panic elsewhere while the lock was held leaves a whole table: each write is one map operation.
    fn read(&self) -> RwLockReadGuard<'_, HashMap<Box<str>, Entry>> {
        self.0.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<Box<str>, Entry>> {
        self.0.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
