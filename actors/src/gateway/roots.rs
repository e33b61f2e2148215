//! Which roots the gateway's upstreams get, and who is told when the
//! client's change.
//!
//! The rule (docs/gateway.md, "Roots"): a server's configured `roots` are
//! what it gets; a server with none gets its client's roots when
//! [`ClientRoots::passes_through`] (over stdio, where one client is served;
//! over HTTP only with `--client-roots`), else an empty list, so it keeps
//! the directories it was started with. A server answered with the
//! client's roots (or with none while no client offered any) is recorded,
//! and gets `notifications/roots/list_changed` when a client first declares
//! roots or says its roots changed ([`ClientRoots::changed`]).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use futures::future::join_all;

use crate::handle::Handle;

/// Whether the client's roots reach the servers, and which servers asked
/// for them; clones share the record.
#[derive(Clone, Debug)]
pub struct ClientRoots {
    passes_through: bool,
    /// Servers that asked for the client's roots; bounded by the servers
    /// of the pool (a name is kept once, and removed servers' names are
    /// dropped at the next change).
    asked: Arc<Mutex<BTreeSet<String>>>,
}

impl Default for ClientRoots {
    /// Passing through: the gateway serves one client (stdio).
    fn default() -> Self {
        ClientRoots::new(true)
    }
}

impl ClientRoots {
    /// `passes_through`: servers without configured roots get the client's
    /// (else an empty list).
    pub fn new(passes_through: bool) -> ClientRoots {
        ClientRoots { passes_through, asked: Arc::default() }
    }

    pub fn passes_through(&self) -> bool {
        self.passes_through
    }

    /// Records that `server` asked for the client's roots.
    pub fn asked(&self, server: &str) {
        let mut asked = self.lock();
        if !asked.contains(server) {
            asked.insert(server.to_string());
        }
    }

    /// The client's roots arrived or changed: tells every server that asked
    /// (those still in the pool), so it asks again.
    pub async fn changed(&self, handle: &Handle) {
        if !self.passes_through {
            return;
        }
        let asked: Vec<String> = self.lock().iter().cloned().collect();
        let outcomes = join_all(asked.iter().map(|server| handle.roots_changed(server))).await;
        let removed = |outcome: &Result<(), crate::error::CallError>| matches!(outcome, Err(crate::error::CallError::UnknownServer { .. }));
        let gone: Vec<&String> = asked.iter().zip(&outcomes).filter(|(_, outcome)| removed(outcome)).map(|(name, _)| name).collect();
        if !gone.is_empty() {
            self.lock().retain(|name| !gone.contains(&name));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.asked.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
