//! Ctrl-C during a command stops the servers it started: they run in
//! their own process groups, so the terminal's SIGINT does not reach them.

use std::time::{Duration, Instant};

use crate::cli_support::{stderr, Sandbox, BIN};

/// Pids of live processes whose command line holds `marker` as an argument
/// (not their environment: mcpvisor empties its own environment block).
fn processes_with(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z'));
            !zombie && cmdline.split(|b| *b == 0).any(|arg| arg == marker.as_bytes())
        })
        .collect()
}

fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

#[test]
fn ctrl_c_stops_the_servers_and_exits_130() {
    let sandbox = Sandbox::new();
    let requests = tempfile::NamedTempFile::new().unwrap();
    let log = requests.path().to_str().unwrap();
    // The request log's path is this test's own: it marks the server's process.
    let marker = log.to_string();
    sandbox.write_user_file(&format!("[servers.slow]\ncommand = {BIN:?}\nargs = [\"demo-server\", \"--request-log\", {log:?}]\n"));
    let child = sandbox
        .std_cmd(["call", "slow", "sleep", "--arg", "ms=60000"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_for(Duration::from_secs(10), || processes_with(&marker).len() == 1), "the server started");
    let call_received = || std::fs::read_to_string(requests.path()).unwrap_or_default().lines().any(|l| l == "tools/call sleep");
    assert!(wait_for(Duration::from_secs(10), call_received), "the server received the call");
    // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", stderr(&output));
    assert!(stderr(&output).starts_with("error: interrupted by Ctrl-C (SIGINT); the servers were stopped"), "{}", stderr(&output));
    assert!(processes_with(&marker).is_empty(), "no server outlives the command");
}
