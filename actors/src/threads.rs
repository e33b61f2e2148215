//! [`ConnectionThreads`]: the arbiters upstream connections run on, off the
//! runtime's own thread.
//!
//! Each is an arbiter of the same actix System (a thread with its own
//! current-thread tokio runtime, timers, I/O and child-process reaping). A
//! connection lives whole on one: its actor, its codec and the tasks that
//! read and write its process's pipes. Invariants:
//! - the Hub owns the pool and is the only one that starts connections on
//!   it; supervision is unchanged (an actix `Supervisor` restarts the actor
//!   in place, on the same arbiter, and dropping the Hub's strong address
//!   ends it there);
//! - servers are spread round robin, in the order they are added, so `N`
//!   servers on `T` threads put at most `ceil(N/T)` on one; a thread is
//!   started only when a server needs it, so there are never more threads
//!   than servers have been added;
//! - each thread is named `mcpvisor-conn-N` (N from 1), as `top -H`,
//!   `perf` and `/proc/PID/task/*/comm` show it;
//! - with no threads (`count == 0`) every connection stays on the thread
//!   that runs the Hub, as before this pool existed;
//! - the Hub's shutdown stops the threads once its connections are
//!   stopped and waits for them ([`ConnectionThreads::close`],
//!   [`stop_and_join`]), so what a connection owned (pipes, its process's
//!   handles) is gone when the shutdown resolves; a pool dropped without
//!   that (the Hub ended by its System) stops its threads without waiting.

use std::time::Duration;

use actix_rt::{Arbiter, ArbiterHandle};

/// What each connection thread's name starts with.
pub const THREAD_NAME: &str = "mcpvisor-conn";

/// The pool the Hub starts its connections on.
pub struct ConnectionThreads {
    /// How many arbiters to start at most (0: none, the Hub's thread serves).
    count: usize,
    /// The arbiters started so far.
    arbiters: Vec<Arbiter>,
    next: usize,
}

impl ConnectionThreads {
    /// A pool of at most `count` threads, each started when a connection needs it.
    pub fn new(count: usize) -> ConnectionThreads {
        ConnectionThreads { count, arbiters: Vec::new(), next: 0 }
    }

    /// The arbiter for the next connection, or `None`: the current thread
    /// (no pool, or not one of its threads could be started).
    pub fn pick(&mut self) -> Option<ArbiterHandle> {
        let turn = self.next % self.count.max(1);
        if turn == self.arbiters.len() && self.count > 0 {
            self.start(turn + 1);
        }
        let handle = self.arbiters.get(turn)?.handle();
        self.next = self.next.wrapping_add(1);
        Some(handle)
    }

    /// Hands over the threads, for [`stop_and_join`] once their connections
    /// are stopped; a connection started afterwards runs on the current thread.
    pub fn close(&mut self) -> Vec<Arbiter> {
        self.count = 0;
        std::mem::take(&mut self.arbiters)
    }

    /// Starts thread `number` (from 1); one that cannot be started ends
    /// the pool's growth: the next servers go round the threads there are,
    /// or stay on the Hub's thread if there are none.
    fn start(&mut self, number: usize) {
        match Arbiter::try_new() {
            Ok(arbiter) => {
                arbiter.spawn_fn(move || name_this_thread(&format!("{THREAD_NAME}-{number}")));
                self.arbiters.push(arbiter);
            }
            Err(error) => {
                tracing::warn!("could not start connection thread {number} ({error}); the servers share the threads there are");
                self.count = self.arbiters.len();
                self.next = 0;
            }
        }
    }
}

impl Drop for ConnectionThreads {
    fn drop(&mut self) {
        stop_all(&self.arbiters);
    }
}

/// Stops `arbiters` and waits for their threads off the current one, at
/// most `deadline` (a thread still busy then is left to end with the
/// process, and the log says so). `what` names the threads in that line.
pub fn stop_and_join(arbiters: Vec<Arbiter>, deadline: Duration, what: &'static str) -> impl std::future::Future<Output = ()> {
    stop_all(&arbiters);
    async move {
        if arbiters.is_empty() {
            return;
        }
        let joined = tokio::task::spawn_blocking(move || arbiters.into_iter().map(Arbiter::join).filter(Result::is_err).count());
        match tokio::time::timeout(deadline, joined).await {
            Ok(Ok(0)) => {}
            Ok(Ok(panicked)) => tracing::warn!("{panicked} {what} threads ended in a panic"),
            Ok(Err(_)) | Err(_) => tracing::warn!("{what} threads still ran {deadline:?} after they were told to stop"),
        }
    }
}

/// Tells `arbiters` to stop, without waiting.
pub fn stop_all(arbiters: &[Arbiter]) {
    for arbiter in arbiters {
        arbiter.stop();
    }
}

/// Names the calling thread for the kernel (at most 15 bytes are kept);
/// a name that cannot be set is left as it was.
fn name_this_thread(name: &str) {
    let Ok(name) = std::ffi::CString::new(name) else { return };
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of which it keeps
    // at most 16 bytes; `name` outlives the call.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0);
    }
}
