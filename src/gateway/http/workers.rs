//! [`Workers`]: the threads `serve --http --workers N` serves its HTTP
//! connections and their sessions on.
//!
//! Worker 0 is the runtime's own thread (the actix System's arbiter, where
//! the hub, the registry and every upstream connection live); workers 1 to
//! N-1 are arbiters of the same System, each a thread with its own
//! current-thread tokio runtime. Invariants:
//! - an accepted connection is served whole on one worker, chosen round
//!   robin; the sessions its requests open start on that worker too
//!   ([`super::pool::PoolGateway`]), so a call crosses a thread once on its
//!   way to its server's connection actor and once back, never per hop;
//! - a connection given to a worker that has stopped (only while the
//!   gateway stops) is closed unserved;
//! - with one worker nothing is spread: every task stays on the thread that
//!   accepted it, as before workers existed;
//! - [`Workers::stop`] ends every arbiter it started and waits for its
//!   thread, at most for its deadline (a thread still busy then is left to
//!   end with the process, and says so in the log).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_rt::{Arbiter, ArbiterHandle};
use futures::future::BoxFuture;

use super::Spawner;
use crate::actors::threads::{stop_all, stop_and_join};

/// Most workers one gateway starts (the bound of `--workers` and `[serve] workers`).
pub use crate::config::MAX_WORKERS;

/// The arbiters connections are spread over.
pub struct Workers {
    /// Where tasks go; index 0 is the arbiter `start` ran on.
    handles: Vec<ArbiterHandle>,
    /// The arbiters started here, to stop and join (emptied by `stop`).
    started: Mutex<Vec<Arbiter>>,
    next: AtomicUsize,
}

impl Workers {
    /// The current arbiter and `count - 1` new ones (`count` clamped to
    /// 1..=[`MAX_WORKERS`]). Call it on an arbiter of the System the
    /// workers join (the runtime's thread: `hub::Spawn` runs there).
    pub fn start_here(count: usize) -> std::io::Result<Workers> {
        let count = count.clamp(1, MAX_WORKERS);
        let here = actix_rt::Arbiter::try_current().ok_or_else(|| std::io::Error::other("workers start on an actix arbiter"))?;
        let mut started = Vec::with_capacity(count - 1);
        for _ in 1..count {
            match Arbiter::try_new() {
                Ok(arbiter) => started.push(arbiter),
                Err(error) => {
                    stop_all(&started);
                    return Err(error);
                }
            }
        }
        let handles = std::iter::once(here).chain(started.iter().map(Arbiter::handle)).collect();
        Ok(Workers { handles, started: Mutex::new(started), next: AtomicUsize::new(0) })
    }

    /// How many threads serve (the runtime's own included).
    pub fn count(&self) -> usize {
        self.handles.len()
    }

    /// Where the front spawns each connection's task: the next worker,
    /// round robin; `None` with one worker (the accepting thread serves).
    pub fn spawner(self: &Arc<Self>) -> Option<Spawner> {
        if self.handles.len() < 2 {
            return None;
        }
        let workers = self.clone();
        Some(Arc::new(move |task: BoxFuture<'static, ()>| workers.spawn(task)))
    }

    fn spawn(&self, task: BoxFuture<'static, ()>) {
        let turn = self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len();
        if !self.handles[turn].spawn(task) {
            // Only while stopping: the task, and so its connection, is dropped (closed).
            tracing::debug!("a gateway worker had stopped: an HTTP connection was closed unserved");
        }
    }

    /// Stops the arbiters started here and waits for their threads, at most `deadline`.
    pub async fn stop(&self, deadline: Duration) {
        let started = std::mem::take(&mut *self.started.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
        stop_and_join(started, deadline, "gateway worker").await;
    }
}
