//! mcpvisor's own environment block, emptied once it has been read.
//!
//! The kernel shows a process's environment as it was at exec, from the
//! block at the top of its stack, to whoever may read
//! `/proc/PID/environ`: a server's scrubbed environment is worth little if
//! the serve token, the keys and the model key can be read from ours.
//! [`empty_initial_block`] moves every variable to the heap (the C
//! library's `setenv` makes a copy and repoints `environ`), then zeroes
//! the original block: lookups keep working, `/proc/PID/environ` reads
//! zeros.
//!
//! Invariants:
//! - it runs first in `main`, before any thread exists (`setenv` is not
//!   thread-safe);
//! - the block is zeroed only after every `environ` entry was checked to
//!   point outside it, so no lookup can ever read a zeroed string;
//! - where anything is unexpected (no `/proc`, an unreadable `stat`, an
//!   entry still in the block), the block is left as it was: a weaker
//!   guarantee, never a broken environment.

/// Where the block is: `env_start` and `env_end` of `/proc/self/stat`
/// (fields 50 and 51, counted after the command name, which may hold spaces).
fn initial_block() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    // Fields from the third (state) on; env_start is the 50th of the line.
    let mut fields = after_name.split_whitespace().skip(47);
    let start = fields.next()?.parse().ok()?;
    let end = fields.next()?.parse().ok()?;
    (start < end).then_some((start, end))
}

/// Moves the environment to the heap and zeroes the block the kernel
/// shows; returns whether it did. Call it first in `main`.
pub fn empty_initial_block() -> bool {
    let Some((start, end)) = initial_block() else { return false };
    for (name, value) in std::env::vars_os() {
        // A fresh heap copy of each; the same value, so nothing changes for lookups.
        std::env::set_var(&name, &value);
    }
    extern "C" {
        static environ: *const *const libc::c_char;
    }
    // SAFETY: no other thread exists yet (see the invariants), so `environ`
    // is not changed while it is read; it is the C library's null-terminated
    // array of pointers to `NAME=value` strings.
    let outside = unsafe {
        let mut entry = environ;
        let mut all_outside = !entry.is_null();
        while all_outside && !(*entry).is_null() {
            let at = *entry as usize;
            all_outside = !(start..end).contains(&at);
            entry = entry.add(1);
        }
        all_outside
    };
    if !outside {
        return false;
    }
    // SAFETY: [start, end) is this process's initial environment block, part
    // of its (writable) main stack; nothing points into it any more (checked
    // above), and no other thread runs.
    unsafe { std::ptr::write_bytes(start as *mut u8, 0, end - start) };
    true
}
