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
//!   reparented to this process, and the reaper reaps every process of the
//!   server's group that became ours, and nothing else (other children of
//!   an embedding program are never waited for here).

use std::ffi::OsString;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

use super::ExitInfo;
use crate::config::ServerConfig;
use crate::error::ConnectError;

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
}

/// Resolves once the process has exited and been reaped.
#[derive(Clone, Debug)]
pub struct ExitWatch(watch::Receiver<Option<ExitInfo>>);

impl ExitWatch {
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
}

/// Every process of a group, from /proc (empty where /proc is not mounted).
pub fn group_members(group: ProcessGroup) -> Vec<ProcInfo> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(proc_info)
        .filter(|info| info.pgrp == group.0)
        .collect()
}

/// Reads `/proc/PID/stat`: `pid (comm) state ppid pgrp ...`, where comm may
/// itself hold spaces and parentheses, hence the search for the last `)`.
pub fn proc_info(pid: i32) -> Option<ProcInfo> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut rest = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    let pgrp = rest.next()?.parse().ok()?;
    Some(ProcInfo { pid, state, ppid, pgrp })
}

/// Reaps the group's processes that were reparented to us, for a bounded
/// time while SIGKILL takes effect.
async fn reap_orphans(group: ProcessGroup) {
    let me = std::process::id() as i32;
    for _ in 0..50 {
        let ours: Vec<ProcInfo> = group_members(group).into_iter().filter(|p| p.ppid == me).collect();
        if ours.is_empty() {
            return;
        }
        for orphan in ours {
            let mut status = 0;
            // SAFETY: waitpid on a specific pid of our own children, non-blocking.
            unsafe {
                libc::waitpid(orphan.pid, &mut status, libc::WNOHANG);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
    let mut command = Command::new(&config.command);
    command
        .args(&config.args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(cwd) = &config.cwd {
        command.current_dir(cwd);
    }
    let mut child = command.spawn().map_err(|e| ConnectError::Spawn {
        server: config.name.clone(),
        command: config.command.clone(),
        reason: match e.kind() {
            std::io::ErrorKind::NotFound => "command not found".to_string(),
            _ => e.to_string(),
        },
        path: env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.to_string_lossy().into_owned()).unwrap_or_default(),
    })?;
    let (Some(pid), Some(stdin), Some(stdout), Some(stderr)) = (child.id(), child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        unreachable!("a just-spawned child with piped stdio has a pid and all three pipes")
    };
    let group = ProcessGroup(pid as i32);
    let (tx, rx) = watch::channel(None);
    tokio::spawn(async move {
        let mut guard = KillOnDrop(Some(group));
        let exit = match child.wait().await {
            Ok(status) => ExitInfo::from_status(status),
            Err(_) => KILLED,
        };
        // The leader is gone: nothing else of its group may outlive it.
        guard.0 = None;
        group.signal(libc::SIGKILL);
        reap_orphans(group).await;
        let _ = tx.send(Some(exit));
    });
    Ok(StdioProcess { pid, stdin, stdout, stderr, group, exit: ExitWatch(rx) })
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
