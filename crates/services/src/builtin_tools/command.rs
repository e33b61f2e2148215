//! `run_command` on this machine: `sh -c` in a process group of its own,
//! stdin from /dev/null, stdout and stderr captured together and capped.
//!
//! Invariants:
//! - nothing of the command's group outlives the call: when the shell
//!   exits, what is left of its group (background jobs) is killed; at the
//!   time-out the group gets SIGTERM, then SIGKILL [`TERM_GRACE`] later;
//!   when the call is cancelled (its future dropped) the group is killed
//!   at once. Killed processes that became ours (this process may be a
//!   subreaper) are reaped, so none is left as a zombie;
//! - memory held for the output is at most `output_limit` bytes: its
//!   head and its tail are kept, the middle is counted and cut.
//!
//! A process that leaves the group (`setsid`) escapes these signals, as it
//! escapes a terminal's; its output is waited for [`DRAIN`] at most.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::ChildStdout;

use super::host::{CommandOutcome, CommandRequest, HostError};
use crate::transport::stdio::spawn::Launch;
use crate::transport::stdio::{reap_group, start, ProcessGroup, Started};

/// Between SIGTERM and SIGKILL at a time-out.
pub const TERM_GRACE: Duration = Duration::from_secs(2);
/// After the shell exits, how long the output may take to end.
pub const DRAIN: Duration = Duration::from_secs(1);

/// Kills the command's whole group when dropped (the call ended or was
/// cancelled) and reaps what of it became ours.
struct GroupGuard(ProcessGroup);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.0.signal(libc::SIGKILL);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(reap_group(self.0));
        }
    }
}

pub(super) async fn run(request: &CommandRequest) -> Result<CommandOutcome, HostError> {
    let sandbox = match &request.sandbox {
        Some(spec) => {
            let path = std::env::var_os("PATH");
            let sandbox = crate::sandbox::prepare(spec, "run_command", "sh", &[], &request.cwd, path.as_deref())
                .map_err(|why| std::io::Error::other(format!("sandbox: {why}")))?;
            Some(sandbox)
        }
        None => None,
    };
    let mut env = request.env.clone();
    if let Some(sandbox) = &sandbox {
        let (key, value) = sandbox.tmpdir();
        env.retain(|(k, _)| *k != key);
        env.push((key, value));
    }
    let args = ["-c".to_string(), request.command.clone()];
    // stderr joins the stdout pipe, so the two interleave in the order
    // written. Not tied to the spawning thread: a call may run on any.
    let launch = Launch {
        program: "sh",
        args: &args,
        env: &env,
        cwd: Some(&request.cwd),
        stdin_piped: false,
        stderr_piped: false,
        die_with_thread: false,
        sandbox: sandbox.as_ref(),
    };
    let spawned = start(&launch);
    let sandbox = SandboxGuard(sandbox.map(crate::sandbox::Sandbox::spawned));
    let Started { pid, mut stdout, child, .. } = spawned?;
    let group = ProcessGroup(pid as i32);
    let _guard = GroupGuard(group);
    let mut output = Capture::new(request.output_limit);
    let mut reading = true;
    let ended = async {
        let mut exit = std::pin::pin!(child.wait());
        match tokio::time::timeout(request.timeout, &mut exit).await {
            Ok(status) => (status, false),
            Err(_) => {
                group.signal(libc::SIGTERM);
                if let Ok(status) = tokio::time::timeout(TERM_GRACE, &mut exit).await {
                    return (status, true);
                }
                group.signal(libc::SIGKILL);
                (exit.await, true)
            }
        }
    };
    tokio::pin!(ended);
    let (status, timed_out) = loop {
        tokio::select! {
            ended = &mut ended => break ended,
            more = output.read_from(&mut stdout), if reading => reading = more,
        }
    };
    group.signal(libc::SIGKILL);
    let _ = tokio::time::timeout(DRAIN, async {
        while reading {
            reading = output.read_from(&mut stdout).await;
        }
    })
    .await;
    let status = status?;
    let (mut text, cut) = output.finish();
    reap_group(group).await;
    if let Some(violation) = sandbox.finish().await {
        text = format!("{text}\n[{violation}]");
    }
    let exit = crate::transport::ExitInfo::from_status(status);
    Ok(CommandOutcome { output: text, cut, code: exit.code, signal: exit.signal, timed_out })
}

/// Removes the command's sandbox (cgroup, temporary directory) when the
/// call ends, or in the background when it is cancelled.
struct SandboxGuard(Option<crate::sandbox::Running>);

impl SandboxGuard {
    /// The limit the command hit, once it has ended; removes the sandbox.
    async fn finish(mut self) -> Option<String> {
        let running = self.0.take()?;
        let violation = running.violation();
        running.remove().await;
        violation
    }
}

impl Drop for SandboxGuard {
    fn drop(&mut self) {
        if let (Some(running), Ok(runtime)) = (self.0.take(), tokio::runtime::Handle::try_current()) {
            runtime.spawn(running.remove());
        }
    }
}

/// The head and the tail of an output, the middle counted.
struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    half: usize,
    cut: usize,
    buf: Vec<u8>,
}

impl Capture {
    fn new(limit: usize) -> Self {
        Capture { head: Vec::new(), tail: VecDeque::new(), half: limit / 2, cut: 0, buf: vec![0; 8192] }
    }

    /// Reads once; returns whether the output may go on.
    async fn read_from(&mut self, stdout: &mut ChildStdout) -> bool {
        match stdout.read(&mut self.buf).await {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                let buf = std::mem::take(&mut self.buf);
                self.push(&buf[..n]);
                self.buf = buf;
                true
            }
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        let to_head = bytes.len().min(self.half - self.head.len().min(self.half));
        self.head.extend_from_slice(&bytes[..to_head]);
        bytes = &bytes[to_head..];
        self.tail.extend(bytes);
        let excess = self.tail.len().saturating_sub(self.half);
        self.tail.drain(..excess);
        self.cut += excess;
    }

    /// The output as text with a marker where it was cut, and the bytes cut.
    fn finish(mut self) -> (String, usize) {
        let head = String::from_utf8_lossy(&self.head);
        let tail = String::from_utf8_lossy(self.tail.make_contiguous());
        match self.cut {
            0 => (format!("{head}{tail}"), 0),
            cut => (format!("{head}\n[... {cut} bytes of output cut here ...]\n{tail}"), cut),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_the_head_and_the_tail() {
        let mut capture = Capture::new(8);
        for chunk in [&b"abc"[..], b"defgh", b"ijklmnop", b"q"] {
            capture.push(chunk);
        }
        assert_eq!(capture.finish(), ("abcd\n[... 9 bytes of output cut here ...]\nnopq".to_string(), 9));
        let mut small = Capture::new(8);
        small.push(b"short");
        assert_eq!(small.finish(), ("short".to_string(), 0));
    }
}
