//! The floor of a process in the middle of a stdio MCP session: starts the
//! command it is given and copies bytes both ways (its stdin to the child's,
//! the child's stdout to its own) with no parsing, framing or routing. A
//! gateway over stdio can at best match it: the same pipes, processes and
//! wake-ups, none of the work. `benches/gateway/run.sh` row `relay-stdio`.
//!
//! `stdio-relay COMMAND [ARGS...]`; exits with the child's status once the
//! child has closed its stdout.

use std::io;
use std::process::{Command, Stdio};

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(program) = args.next() else {
        eprintln!("usage: stdio-relay COMMAND [ARGS...]");
        std::process::exit(2);
    };
    let mut child = match Command::new(&program).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("stdio-relay: cannot start {}: {e}", program.to_string_lossy());
            std::process::exit(2);
        }
    };
    let (mut to_child, mut from_child) = (child.stdin.take().expect("piped"), child.stdout.take().expect("piped"));
    // std's `io::copy` moves pipe to pipe with `splice` where it can: no copy through user space.
    std::thread::spawn(move || {
        let _ = io::copy(&mut io::stdin().lock(), &mut to_child);
        // Dropping the child's stdin tells it the session is over.
    });
    let _ = io::copy(&mut from_child, &mut io::stdout().lock());
    // The child closed its stdout: the upstream thread may still wait on our stdin, and ends with us.
    let status = child.wait().map(|s| s.code().unwrap_or(1)).unwrap_or(1);
    std::process::exit(status);
}
