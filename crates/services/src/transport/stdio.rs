//! The stdio transport: a server as a child process.
//!
//! Invariants:
//! - the child leads its own process group, so the whole group (wrappers
//!   such as `npx`/`uvx` and everything they start) is signalled together;
//! - every child is reaped by its reaper task; when the leader exits, what is
//!   left of its group is killed, so nothing of a server outlives it;
//! - if the reaper task is dropped (the runtime torn down without a
//!   shutdown), the group is killed with SIGKILL on the way out;
//! - orphans: a server's children outlive it only as zombies, and only
//!   their new parent can reap them. With [`become_subreaper`] they are
//!   reparented to this process, and the reaper reaps the processes of the
//!   server's group that became ours (by waiting on the group, without
//!   scanning /proc), and nothing else: other children of an embedding
//!   program are never waited for here;
//! - a descendant that left the group (`setsid`) is out of reach of the
//!   group's signals; [`end_orphans`] ends such processes on shutdown, for
//!   a process that runs nothing but mcpvisor (see `RuntimeConfig::end_orphans`);
//! - a server dies with the thread that spawned it (`PR_SET_PDEATHSIG`), so
//!   a SIGKILLed mcpvisor leaves no server behind even if the server ignores
//!   EOF on stdin and SIGTERM;
//! - every server, sandboxed or not, is started the same way, without a
//!   fork (`spawn`: a `CLONE_VM | CLONE_VFORK` child, as `posix_spawn`
//!   makes it, which applies the sandbox before its exec), so starting one
//!   costs the same whatever our size, and every server gets the same exec
//!   rules, descriptors and reaping.

use std::ffi::OsString;
use std::time::Duration;

use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::watch;

use std::sync::{Arc, Mutex};

use super::ExitInfo;
use crate::config::ServerConfig;
use crate::error::ConnectError;
use crate::sandbox::SandboxStatus;

pub(crate) mod spawn;

/// Variables passed to a server unless `inherit_env` is set.
pub const SAFE_ENV: &[&str] = &["PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ"];

/// A started server process and its pipes.
pub struct StdioProcess {
    pub pid: u32,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
    pub group: ProcessGroup,
    pub exit: ExitWatch,
    /// What the sandbox enforces, for a sandboxed server.
    pub sandbox: Option<SandboxStatus>,
    /// Set before the exit is published: the sandbox limit the server hit.
    pub violation: Arc<Mutex<Option<String>>>,
}

/// Resolves once the process has exited and been reaped.
#[derive(Clone, Debug)]
pub struct ExitWatch(watch::Receiver<Option<ExitInfo>>);

impl ExitWatch {
    /// Watches `receiver`, which its sender sets once to the exit; a sender
    /// dropped without setting it means the peer was killed.
    pub(crate) fn new(receiver: watch::Receiver<Option<ExitInfo>>) -> Self {
        ExitWatch(receiver)
    }

    /// The exit, once known.
    pub fn get(&self) -> Option<ExitInfo> {
        *self.0.borrow()
    }

    /// Waits for the exit. If the reaper vanished without a status (runtime
    /// torn down), the process was killed with it: report that.
    pub async fn wait(mut self) -> ExitInfo {
        match self.0.wait_for(Option::is_some).await {
            Ok(exit) => exit.unwrap_or(KILLED),
            Err(_) => KILLED,
        }
    }
}

const KILLED: ExitInfo = ExitInfo { code: None, signal: Some(libc::SIGKILL) };

/// A process group, by id. Signalling a group that is gone is a no-op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessGroup(pub i32);

impl ProcessGroup {
    pub fn signal(self, signal: i32) {
        if self.0 > 0 {
            // SAFETY: killpg has no memory-safety preconditions; a negative or
            // zero id is excluded above (it would mean "our own group").
            unsafe {
                libc::killpg(self.0, signal);
            }
        }
    }
}

/// Kills the group with SIGKILL when dropped, unless disarmed.
struct KillOnDrop(Option<ProcessGroup>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(group) = self.0.take() {
            group.signal(libc::SIGKILL);
        }
    }
}

/// Makes this process the reaper of its descendants' orphans (Linux
/// `PR_SET_CHILD_SUBREAPER`), so the killed children of a server can be
/// reaped here instead of waiting on an init that may never reap them.
/// Returns whether it took effect.
pub fn become_subreaper() -> bool {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes a plain integer flag.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 }
}

/// One process as /proc tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcInfo {
    pub pid: i32,
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    /// CPU time used so far, user and system, in clock ticks.
    pub cpu_ticks: u64,
}

/// Every process of a group, from /proc (empty where /proc is not mounted).
pub fn group_members(group: ProcessGroup) -> Vec<ProcInfo> {
    all_processes().filter(|info| info.pgrp == group.0).collect()
}

fn all_processes() -> impl Iterator<Item = ProcInfo> {
    let entries = std::fs::read_dir("/proc").into_iter().flatten();
    entries.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok()).filter_map(proc_info)
}

/// Reads `/proc/PID/stat`: `pid (comm) state ppid pgrp ...`, where comm may
/// itself hold spaces and parentheses, hence the search for the last `)`.
pub fn proc_info(pid: i32) -> Option<ProcInfo> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the name, 0-based: state 0, ppid 1, pgrp 2, utime 11, stime 12 (proc(5)'s fields 3, 4, 5, 14, 15).
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    let ppid = fields.get(1)?.parse().ok()?;
    let pgrp = fields.get(2)?.parse().ok()?;
    let cpu_ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ProcInfo { pid, state, ppid, pgrp, cpu_ticks })
}

/// How often, and how far apart, a killed group is waited for.
const REAP_ROUNDS: usize = 50;
const REAP_PAUSE: Duration = Duration::from_millis(20);

/// Reaps the processes of the group (whose leader is already reaped) that
/// were reparented to us, for a bounded time while SIGKILL takes effect.
/// `waitpid(-pgid)` waits only for our own children in that group, so it
/// needs no /proc scan and never touches an embedding program's children.
pub(crate) async fn reap_group(group: ProcessGroup) {
    for _ in 0..REAP_ROUNDS {
        loop {
            let mut status = 0;
            // SAFETY: waitpid on a process group id (> 0, so -id is a group), non-blocking.
            let reaped = unsafe { libc::waitpid(-group.0, &mut status, libc::WNOHANG) };
            match reaped {
                0 => break,          // ours in the group, still dying
                pid if pid > 0 => {} // one reaped: look for the next
                _ => return,         // ECHILD: nothing of the group is ours any more
            }
        }
        tokio::time::sleep(REAP_PAUSE).await;
    }
}

/// Ends every child of this process and reaps it, repeating as their own
/// children are reparented here; returns how many were ended. Only for a
/// process whose every child at this point is a server's orphan (all
/// servers stopped, the process a subreaper, nothing else spawning): it
/// waits for children it did not start. Blocking: run it off the actor
/// thread.
pub fn end_orphans() -> usize {
    let me = std::process::id() as i32;
    let mut ended = 0;
    for _ in 0..REAP_ROUNDS {
        let orphans: Vec<ProcInfo> = all_processes().filter(|p| p.ppid == me).collect();
        if orphans.is_empty() {
            break;
        }
        for orphan in &orphans {
            tracing::warn!(pid = orphan.pid, "ending a process left behind by a server (it had left its server's process group)");
            // SAFETY: kill/killpg have no memory-safety preconditions; the
            // pid is a child of ours (> 0), and its group is signalled only
            // when it leads it (a group made by `setsid`).
            unsafe {
                if orphan.pgrp == orphan.pid {
                    libc::killpg(orphan.pid, libc::SIGKILL);
                }
                libc::kill(orphan.pid, libc::SIGKILL);
            }
        }
        for orphan in orphans {
            ended += usize::from(reap_child(orphan.pid));
        }
    }
    ended
}

/// Waits (bounded) for one killed child; returns whether it was reaped.
fn reap_child(pid: i32) -> bool {
    for _ in 0..REAP_ROUNDS {
        let mut status = 0;
        // SAFETY: waitpid on one pid of our own children, non-blocking.
        match unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } {
            0 => std::thread::sleep(REAP_PAUSE),
            reaped => return reaped == pid,
        }
    }
    false
}

/// The environment a server starts with.
fn environment(config: &ServerConfig) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = if config.inherit_env {
        std::env::vars_os().collect()
    } else {
        SAFE_ENV.iter().filter_map(|k| std::env::var_os(k).map(|v| (OsString::from(k), v))).collect()
    };
    for (k, v) in &config.env {
        env.retain(|(key, _)| key != k.as_str());
        env.push((k.into(), v.into()));
    }
    env
}

/// Starts the server. Must run inside a tokio runtime (the reaper is a task).
pub fn spawn(config: &ServerConfig) -> Result<StdioProcess, ConnectError> {
    let env = environment(config);
    if let Some(cwd) = &config.cwd {
        // Checked here because a missing directory makes spawn fail with
        // NotFound, which reads as a missing command.
        let problem = match std::fs::metadata(cwd) {
            Ok(meta) if meta.is_dir() => None,
            Ok(_) => Some("is not a directory".to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some("does not exist".to_string()),
            Err(e) => Some(format!("cannot be used ({e})")),
        };
        if let Some(problem) = problem {
            let cwd = cwd.display().to_string();
            return Err(ConnectError::WorkingDirectory { server: config.name.clone(), command: config.command.clone(), cwd, problem });
        }
    }
    let path = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.clone());
    let spawn_error = |reason: String, cause: std::io::Error| ConnectError::Spawn {
        server: config.name.clone(),
        command: config.command.clone(),
        reason,
        path: path.as_ref().map(|v| v.to_string_lossy().into_owned()).unwrap_or_default(),
        cause: Some(crate::error::Cause::new(cause)),
    };
    let sandbox = match &config.sandbox {
        None => None,
        Some(spec) => {
            let cwd = config.cwd.clone().or_else(|| std::env::current_dir().ok()).unwrap_or_else(|| "/".into());
            let sandbox = crate::sandbox::prepare(spec, &config.name, &config.command, &config.args, &cwd, path.as_deref())
                .map_err(|reason| ConnectError::Sandbox { server: config.name.clone(), reason })?;
            Some(sandbox)
        }
    };
    let mut env = env;
    if let Some(sandbox) = &sandbox {
        let (key, value) = sandbox.tmpdir();
        env.retain(|(k, _)| *k != key);
        env.push((key, value));
    }
    let launch = spawn::Launch {
        program: &config.command,
        args: &config.args,
        env: &env,
        cwd: config.cwd.as_deref(),
        stdin_piped: true,
        stderr_piped: true,
        die_with_thread: true,
        sandbox: sandbox.as_ref(),
    };
    let started = start(&launch);
    let sandbox = sandbox.map(crate::sandbox::Sandbox::spawned);
    let started = started.and_then(|started| match started {
        Started { pid, stdin: Some(stdin), stdout, stderr: Some(stderr), child } => Ok((pid, stdin, stdout, stderr, child)),
        Started { child, .. } => {
            ProcessGroup(child.pid).signal(libc::SIGKILL);
            child.reap_in_background();
            Err(std::io::Error::other("a server started without its stdin or stderr pipe"))
        }
    });
    let (pid, stdin, stdout, stderr, child) = match started {
        Ok(started) => started,
        Err(e) => {
            let reason = match (e.kind(), e.raw_os_error(), &sandbox) {
                (std::io::ErrorKind::NotFound, _, _) => "command not found".to_string(),
                (_, Some(libc::ENOEXEC), _) => {
                    "not a program this system can run (a script needs a first line such as #!/bin/sh)".to_string()
                }
                (_, _, Some(_)) => format!("{e} (while applying its sandbox, or starting it)"),
                _ => e.to_string(),
            };
            if let Some(sandbox) = sandbox {
                tokio::spawn(sandbox.remove());
            }
            return Err(spawn_error(reason, e));
        }
    };
    let group = ProcessGroup(pid as i32);
    let (tx, rx) = watch::channel(None);
    let status = sandbox.as_ref().map(|s| SandboxStatus { achieved: s.achieved.clone(), gaps: s.gaps.clone(), violation: None });
    let violation = Arc::new(Mutex::new(None));
    let violation_of_run = violation.clone();
    tokio::spawn(async move {
        let mut guard = KillOnDrop(Some(group));
        let exit = child.wait().await.map(ExitInfo::from_status).unwrap_or(KILLED);
        // The leader is gone: nothing else of its group may outlive it.
        guard.0 = None;
        group.signal(libc::SIGKILL);
        reap_group(group).await;
        if let Some(sandbox) = sandbox {
            *violation_of_run.lock().unwrap_or_else(|e| e.into_inner()) = sandbox.violation();
            sandbox.remove().await;
        }
        let _ = tx.send(Some(exit));
    });
    Ok(StdioProcess { pid, stdin, stdout, stderr, group, exit: ExitWatch::new(rx), sandbox: status, violation })
}

/// A just-started process: its pid, our ends of its pipes (stdin and
/// stderr as [`spawn::Launch`] asked), and how to wait for it.
pub(crate) struct Started {
    pub pid: u32,
    pub stdin: Option<ChildStdin>,
    pub stdout: ChildStdout,
    pub stderr: Option<ChildStderr>,
    pub child: spawn::Child,
}

/// Starts a process ([`spawn::spawn`]) and joins its pipes to the reactor.
/// Must run inside a tokio runtime.
pub(crate) fn start(launch: &spawn::Launch) -> std::io::Result<Started> {
    let spawn::Spawned { child, stdin, stdout, stderr } = spawn::spawn(launch)?;
    // From here on the child runs: if a pipe cannot join the reactor, end it.
    let pipes = (|| {
        Ok::<_, std::io::Error>((
            stdin.map(|fd| ChildStdin::from_std(std::process::ChildStdin::from(fd))).transpose()?,
            ChildStdout::from_std(std::process::ChildStdout::from(stdout))?,
            stderr.map(|fd| ChildStderr::from_std(std::process::ChildStderr::from(fd))).transpose()?,
        ))
    })();
    match pipes {
        Ok((stdin, stdout, stderr)) => Ok(Started { pid: child.pid as u32, stdin, stdout, stderr, child }),
        Err(e) => {
            ProcessGroup(child.pid).signal(libc::SIGKILL);
            child.reap_in_background();
            Err(e)
        }
    }
}

/// Stops a server whose stdin the caller has already closed: waits `grace`
/// for it to exit, sends SIGTERM to its group, waits `grace` again, then
/// SIGKILL. Returns once the process is reaped.
pub async fn shutdown(group: ProcessGroup, exit: ExitWatch, grace: Duration) -> ExitInfo {
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        if let Ok(info) = tokio::time::timeout(grace, exit.clone().wait()).await {
            return info;
        }
        group.signal(signal);
    }
    exit.wait().await
}

/// Longest stderr line kept whole; longer lines are cut with a marker.
pub const MAX_LOG_LINE: usize = 4096;

/// Splits a server's stderr into lines. Never fails on content: invalid
/// UTF-8 is replaced, over-long lines are cut, so a noisy server cannot end
/// the stream or grow memory.
#[derive(Debug, Default)]
pub struct LogLines {
    /// Bytes of the current line already dropped for length.
    dropped: usize,
}

impl tokio_util::codec::Decoder for LogLines {
    type Item = String;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut bytes::BytesMut) -> Result<Option<String>, std::io::Error> {
        use bytes::Buf;
        match buf.iter().position(|b| *b == b'\n') {
            Some(end) => {
                let line = buf.split_to(end + 1);
                let text = String::from_utf8_lossy(&line[..end]).trim_end_matches('\r').to_string();
                Ok(Some(self.finish(text)))
            }
            None if buf.len() > MAX_LOG_LINE => {
                let keep = if self.dropped == 0 { MAX_LOG_LINE } else { 0 };
                if keep > 0 {
                    let text = String::from_utf8_lossy(&buf[..keep]).into_owned();
                    self.dropped = buf.len() - keep;
                    buf.clear();
                    return Ok(Some(format!("{text}… (line cut)")));
                }
                self.dropped += buf.len();
                buf.advance(buf.len());
                Ok(None)
            }
            None => Ok(None),
        }
    }

    fn decode_eof(&mut self, buf: &mut bytes::BytesMut) -> Result<Option<String>, std::io::Error> {
        if let Some(line) = self.decode(buf)? {
            return Ok(Some(line));
        }
        if buf.is_empty() {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(&buf.split()).into_owned();
        Ok(Some(self.finish(text)))
    }
}

impl LogLines {
    /// The end of a line whose head may already have been emitted as cut.
    fn finish(&mut self, text: String) -> String {
        if std::mem::take(&mut self.dropped) > 0 {
            format!("… {}", text.chars().rev().take(200).collect::<Vec<_>>().into_iter().rev().collect::<String>())
        } else {
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::codec::Decoder;

    #[test]
    fn log_lines_survive_bad_bytes_and_long_lines() {
        let mut lines = LogLines::default();
        let mut buf = bytes::BytesMut::from(&b"ok\r\n\xff\xfebad\n"[..]);
        assert_eq!(lines.decode(&mut buf).unwrap().as_deref(), Some("ok"));
        assert_eq!(lines.decode(&mut buf).unwrap().as_deref(), Some("\u{fffd}\u{fffd}bad"));
        buf.extend_from_slice(&vec![b'y'; MAX_LOG_LINE * 3]);
        let cut = lines.decode(&mut buf).unwrap().unwrap();
        assert!(cut.ends_with("(line cut)") && cut.len() < MAX_LOG_LINE + 32);
        buf.extend_from_slice(b"tail\n");
        assert_eq!(lines.decode(&mut buf).unwrap().as_deref(), Some("… tail"));
        buf.extend_from_slice(b"last");
        assert_eq!(lines.decode_eof(&mut buf).unwrap().as_deref(), Some("last"));
    }

    #[test]
    fn environment_is_the_safe_set_plus_configured() {
        let config = ServerConfig::stdio("s", "true", Vec::<String>::new()).with_env("FOO", "bar");
        let env = environment(&config);
        assert!(env.iter().all(|(k, _)| k == "FOO" || SAFE_ENV.iter().any(|s| k == *s)));
        assert!(env.contains(&("FOO".into(), "bar".into())));
    }
}
