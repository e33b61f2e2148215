//! What the command line draws on a terminal: a spinner per starting
//! server and a progress bar for a tool's progress, on stderr only. The
//! binary runs with its stderr on a pseudo-terminal and its stdout on a
//! pipe, as in `mcpvisor call ... > out.txt`.

use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Stdio;

use crate::cli_support::{demo_table, Sandbox};

/// A pseudo-terminal of 24×120: (the side the program writes to, the side we read).
fn pty() -> (OwnedFd, File) {
    let (mut controller, mut device) = (0, 0);
    let size = libc::winsize { ws_row: 24, ws_col: 120, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: openpty writes two descriptors into the given integers; name and termios may be null.
    let status = unsafe { libc::openpty(&mut controller, &mut device, std::ptr::null_mut(), std::ptr::null(), &size) };
    assert_eq!(status, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened by openpty and are owned here alone.
    unsafe { (OwnedFd::from_raw_fd(device), File::from_raw_fd(controller)) }
}

/// Runs `command` with stderr on a fresh pseudo-terminal: (its output, what it drew there).
fn run_on_terminal(mut command: std::process::Command) -> (std::process::Output, String) {
    let (device, mut terminal) = pty();
    let child = command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::from(device)).spawn().expect("mcpvisor runs");
    drop(command); // our copy of the terminal's device side closes, so reading ends when the child exits
    let reader = std::thread::spawn(move || {
        let mut drawn = Vec::new();
        let mut buffer = [0u8; 4096];
        // EIO once the child has exited and the device side is closed.
        while let Ok(n @ 1..) = terminal.read(&mut buffer) {
            drawn.extend_from_slice(&buffer[..n]);
        }
        String::from_utf8_lossy(&drawn).into_owned()
    });
    let output = child.wait_with_output().unwrap();
    (output, reader.join().unwrap())
}

#[test]
fn spinners_and_the_progress_bar_go_to_a_terminal_stderr_and_stdout_stays_clean() {
    let sandbox = Sandbox::new();
    let (output, drawn) = run_on_terminal(sandbox.std_cmd(["call", "demo", "progress", "--arg", "steps=4", "--arg", "ms=300"]));
    assert!(output.status.success(), "terminal output:\n{drawn}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "done 4 steps\n", "stdout holds only the result");
    assert!(drawn.contains("✓ demo connected (27 tools)"), "the spinner ends with the server's state:\n{drawn:?}");
    assert!(
        drawn.contains("demo/progress") && drawn.contains("step 2 of 4") && drawn.contains('%'),
        "a progress bar was drawn:\n{drawn:?}"
    );
}

#[test]
fn many_servers_starting_are_counted_on_one_line_instead_of_a_spinner_each() {
    let sandbox = Sandbox::new();
    let tables: Vec<String> = (1..=12).map(|i| demo_table(&format!("s{i}"), &[])).collect();
    sandbox.write_user_file(&tables.join("\n"));
    let (output, drawn) = run_on_terminal(sandbox.std_cmd(["status"]));
    assert!(output.status.success(), "terminal output:\n{drawn}");
    assert!(drawn.contains("✓ 12 of 12 servers connected"), "one counting line:\n{drawn:?}");
    assert!(!drawn.contains("✓ s1 "), "no spinner per server:\n{drawn:?}");
}
