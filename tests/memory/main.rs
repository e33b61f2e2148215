//! The memory tests, one binary (issue 32: one link of the crate per theme,
//! not one per file). The global allocator of `counting_alloc` counts the
//! heap of the whole process, so every test here holds [`alone`] for its
//! whole run: the binary's tests take turns, as each did alone in its own
//! binary before.

#[path = "../common/mod.rs"]
mod common;
#[path = "../../benches/support/counting_alloc.rs"]
mod counting_alloc;
#[path = "../../benches/support/editor_file.rs"]
mod editor_file;
#[path = "../../benches/support/many_tools.rs"]
mod many_tools;

mod memory_bound;
mod memory_catalog_kept;
mod memory_gateway_names;
mod memory_list_kept;
mod memory_many_tools;

/// Held by each test of this binary for its whole run: the heap is counted
/// for the whole process. A tokio mutex, so async tests hold it across
/// awaits; it does not poison, so one failed test does not fail the next.
static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits for the other tests of this binary to finish (async tests).
pub async fn alone() -> tokio::sync::MutexGuard<'static, ()> {
    ALONE.lock().await
}

/// [`alone`] for a test that runs outside a runtime.
pub fn alone_blocking() -> tokio::sync::MutexGuard<'static, ()> {
    ALONE.blocking_lock()
}

/// Waits until the heap live above `base` is at most `bound` bytes (a
/// runtime has let go of what it held while reading a listing), asking every
/// 10 ms for at most 30 s; the bytes live above `base` then. Fails naming
/// `what` with the last count.
pub async fn settled_within(base: usize, bound: usize, what: &str) -> usize {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let live = counting_alloc::live().saturating_sub(base);
        if live <= bound {
            return live;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}: {live} bytes are still live after 30 s, over {bound}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
