//! The spawn path against real processes.

use std::os::unix::fs::PermissionsExt;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::ServerConfig;
use crate::error::{ConnectError, ExitInfo};
use crate::transport::stdio::{spawn as start, StdioProcess};

fn sh(script: &str) -> ServerConfig {
    ServerConfig::stdio("s", "sh", ["-c", script])
}

/// Writes `input` to the process, then reads all it wrote on stdout and
/// stderr (a little: no pipe fills) and waits for its exit.
async fn run(process: StdioProcess, input: &[u8]) -> (String, String, ExitInfo) {
    let StdioProcess { mut stdin, mut stdout, mut stderr, exit, .. } = process;
    stdin.write_all(input).await.unwrap();
    drop(stdin);
    let (mut out, mut err) = (String::new(), String::new());
    stdout.read_to_string(&mut out).await.unwrap();
    stderr.read_to_string(&mut err).await.unwrap();
    (out, err, exit.wait().await)
}

fn field<'a>(text: &'a str, name: &str) -> &'a str {
    text.lines().find_map(|line| line.strip_prefix(name)).map(str::trim).unwrap_or_else(|| panic!("no {name} in {text}"))
}

#[tokio::test]
async fn a_server_leads_its_group_with_no_signal_blocked_or_ignored_and_our_three_pipes() {
    let script = "grep -E '^(SigBlk|SigIgn):' /proc/self/status; echo pgrp=$(cut -d' ' -f5 /proc/$$/stat) pid=$$; \
                  read line; echo got=$line; echo to-stderr >&2";
    let (text, errors, exit) = run(start(&sh(script)).unwrap(), b"hello\n").await;
    assert_eq!(exit, ExitInfo { code: Some(0), signal: None }, "{text}");
    assert_eq!(field(&text, "SigBlk:"), "0000000000000000", "{text}");
    // Rust ignores SIGPIPE in this test process: the server gets the
    // default back, and keeps what we inherited ignored (as exec does).
    let ours = std::fs::read_to_string("/proc/self/status").unwrap();
    let ignored = |text: &str| u64::from_str_radix(field(text, "SigIgn:"), 16).unwrap();
    assert_ne!(ignored(&ours) & 1 << (libc::SIGPIPE - 1), 0, "{ours}");
    assert_eq!(ignored(&text), ignored(&ours) & !(1 << (libc::SIGPIPE - 1)), "{text}");
    let ids = field(&text, "pgrp=");
    let (group, pid) = ids.split_once(" pid=").unwrap();
    assert_eq!(group, pid, "{text}");
    assert_eq!(field(&text, "got="), "hello");
    assert_eq!(errors, "to-stderr\n");
}

#[tokio::test]
async fn exits_by_code_and_by_signal_are_reported() {
    let (_, _, exit) = run(start(&sh("exit 3")).unwrap(), b"").await;
    assert_eq!(exit, ExitInfo { code: Some(3), signal: None });
    let (_, _, exit) = run(start(&sh("kill -TERM $$")).unwrap(), b"").await;
    assert_eq!(exit, ExitInfo { code: None, signal: Some(libc::SIGTERM) });
}

#[tokio::test]
async fn the_program_is_found_on_the_servers_path_and_runs_in_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("where-am-i");
    std::fs::write(&script, "#!/bin/sh\npwd\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = tempfile::tempdir().unwrap();
    let path = format!("/nonexistent:{}:/usr/bin:/bin", dir.path().display());
    let mut config = ServerConfig::stdio("s", "where-am-i", Vec::<String>::new()).with_env("PATH", path);
    config.cwd = Some(work.path().to_path_buf());
    let (text, _, exit) = run(start(&config).unwrap(), b"").await;
    assert!(exit.is_clean(), "{exit}");
    assert_eq!(text.trim(), work.path().canonicalize().unwrap().to_str().unwrap());
}

#[tokio::test]
async fn a_missing_or_unrunnable_program_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let not_executable = dir.path().join("data");
    std::fs::write(&not_executable, "data").unwrap();
    // No `#!`: refused alike with and without a sandbox (no /bin/sh fallback).
    let no_shebang = dir.path().join("no-shebang");
    std::fs::write(&no_shebang, "echo ran\n").unwrap();
    std::fs::set_permissions(&no_shebang, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cases = [
        ("no-such-program-anywhere", "command not found"),
        (not_executable.to_str().unwrap(), "Permission denied"),
        (no_shebang.to_str().unwrap(), "#!/bin/sh"),
    ];
    for (program, reason_part) in cases {
        for sandbox in [None, Some(crate::config::SandboxSpec::default())] {
            let mut config = ServerConfig::stdio("s", program, Vec::<String>::new());
            config.sandbox = sandbox;
            match start(&config) {
                Err(ConnectError::Spawn { reason, cause, .. }) => {
                    assert!(reason.contains(reason_part), "{program}: {reason}");
                    assert!(cause.as_ref().and_then(crate::error::Cause::io_kind).is_some(), "{program}: the OS error is kept: {cause:?}");
                }
                Err(other) => panic!("{program}: {other}"),
                Ok(_) => panic!("{program} started"),
            }
        }
    }
}

/// Where the kernel ignores CLONE_PIDFD (before 5.2) the pidfd stays -1:
/// the child runs, is waited for by pid, and reaped.
#[tokio::test]
async fn without_a_pidfd_the_child_is_waited_for_by_pid_and_reaped() {
    let args = ["-c".to_string(), "read line; echo got $line; exit 7".to_string()];
    let env = [(std::ffi::OsString::from("PATH"), std::ffi::OsString::from("/usr/bin:/bin"))];
    let launch = super::Launch {
        program: "sh",
        args: &args,
        env: &env,
        cwd: None,
        stdin_piped: true,
        stderr_piped: true,
        die_with_thread: true,
        sandbox: None,
    };
    let spawned = super::spawn_with(&launch, super::Pidfd::Skip).unwrap();
    assert!(matches!(spawned.child.waiter, super::Waiter::Blocking));
    let pid = spawned.child.pid;
    let mut stdin = std::fs::File::from(spawned.stdin.unwrap());
    std::io::Write::write_all(&mut stdin, b"hello\n").unwrap();
    drop(stdin);
    let mut out = String::new();
    std::io::Read::read_to_string(&mut std::fs::File::from(spawned.stdout), &mut out).unwrap();
    assert_eq!(out, "got hello\n");
    let status = tokio::time::timeout(std::time::Duration::from_secs(10), spawned.child.wait()).await.unwrap().unwrap();
    assert_eq!(status.code(), Some(7));
    // Reaped: the pid is no child of ours any more.
    // SAFETY: a non-blocking waitpid on a pid we started.
    assert_eq!(unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) }, -1);
}

#[test]
fn the_child_stack_has_a_guard_page_below_it() {
    let stack = super::Stack::new(super::CHILD_STACK).unwrap();
    let base = stack.base as usize;
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let guard = maps.lines().find(|line| {
        let range = line.split_whitespace().next().unwrap_or("");
        usize::from_str_radix(range.split('-').next().unwrap_or(""), 16) == Ok(base)
    });
    let guard = guard.unwrap_or_else(|| panic!("no mapping at {base:#x}"));
    assert_eq!(guard.split_whitespace().nth(1), Some("---p"), "{guard}");
    assert!(stack.top() as usize > base + 4096 && (stack.top() as usize).is_multiple_of(16));
}
