//! Starting a server process without copying mcpvisor's address space.
//!
//! The standard library forks whenever a command has a `pre_exec` step, and
//! the parent-death signal (`PR_SET_PDEATHSIG`) needs one: the fork copies
//! the page tables of the whole runtime and makes every page it writes until
//! the child's exec a copy-on-write fault. Here the child is a `clone` with
//! `CLONE_VM | CLONE_VFORK`, as glibc's `posix_spawn` makes it: it shares
//! our memory, runs a fixed list of system calls on a stack of its own, and
//! execs; the calling thread is suspended until then.
//!
//! Invariants:
//! - everything the child needs (paths, argv, envp, descriptors) is made
//!   before the clone; the child allocates nothing, takes no lock, and calls
//!   only async-signal-safe functions;
//! - signals are blocked around the clone, and the child sets every caught
//!   signal to its default before unblocking them, so no handler of ours
//!   runs in the child on our shared memory;
//! - the child leads a new process group, gets SIGKILL when the spawning
//!   thread ends (checked against a parent that died before the `prctl`),
//!   and has exactly the three pipes as stdin/stdout/stderr (every other
//!   descriptor of ours is close-on-exec);
//! - a child that fails before its exec stores the errno and exits; the
//!   spawn then reaps it and reports the error, so no zombie is left;
//! - the pidfd names the child until it is reaped, so waiting on it can
//!   never reach a recycled pid.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// What to start: the program as configured, its arguments and environment,
/// and the working directory (`None`: ours).
pub(super) struct Launch<'a> {
    pub program: &'a str,
    pub args: &'a [String],
    pub env: &'a [(OsString, OsString)],
    pub cwd: Option<&'a Path>,
}

/// A started child: its pid, a pidfd for it, and our ends of its pipes.
pub(super) struct Spawned {
    pub pid: i32,
    pub pidfd: OwnedFd,
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

/// The child's stack: ample for the few calls it makes (glibc's
/// `posix_spawn` sizes its own from argv, about a page here).
const CHILD_STACK: usize = 64 * 1024;

/// Search path when the environment has no `PATH` (as `execvp`).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// Everything the child reads, made before the clone. Pointer arrays end
/// with a null pointer; `error` is the one thing the child writes.
struct Plan {
    /// Paths to exec in turn: the program itself, or each `PATH` entry joined with it.
    candidates: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    cwd: Option<CString>,
    /// Our ends in the child: stdin, stdout, stderr, all above 2.
    fds: [RawFd; 3],
    parent: libc::pid_t,
    error: AtomicI32,
}

/// Starts the program with piped stdio, as the standard library would with
/// `process_group(0)` and `env_clear()` plus `env`, and the parent-death
/// signal set, without a fork.
pub(super) fn spawn(launch: &Launch) -> io::Result<Spawned> {
    let argv_owned: Vec<CString> =
        std::iter::once(launch.program).chain(launch.args.iter().map(String::as_str)).map(c_string).collect::<io::Result<_>>()?;
    let env_owned: Vec<CString> =
        launch.env.iter().map(|(k, v)| c_string([k.as_bytes(), b"=", v.as_bytes()].concat())).collect::<io::Result<_>>()?;
    let cwd = launch.cwd.map(|dir| c_string(dir.as_os_str().as_bytes())).transpose()?;
    let (stdin_child, stdin) = pipe()?;
    let (stdout, stdout_child) = pipe()?;
    let (stderr, stderr_child) = pipe()?;
    let mut plan = Plan {
        candidates: candidates(launch.program, launch.env)?,
        argv: pointers(&argv_owned),
        envp: pointers(&env_owned),
        cwd,
        fds: [stdin_child.as_raw_fd(), stdout_child.as_raw_fd(), stderr_child.as_raw_fd()],
        parent: std::process::id() as libc::pid_t,
        error: AtomicI32::new(0),
    };
    let mut stack = vec![0u8; CHILD_STACK];
    // The stack grows down from its 16-byte aligned top.
    let top = ((stack.as_mut_ptr() as usize + CHILD_STACK) & !15) as *mut libc::c_void;
    let mut pidfd: libc::c_int = -1;
    // SAFETY: `plan`, `stack` and `pidfd` outlive the child's use of them:
    // CLONE_VFORK suspends this thread until the child has exec'd or exited.
    // The child runs `child_main` only (see its contract). All signals are
    // blocked around the clone and the old mask is restored after it.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD;
        let pid = libc::clone(child_main, top, flags, (&mut plan as *mut Plan).cast(), &mut pidfd as *mut libc::c_int);
        let clone_error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(clone_error);
        }
        pid
    };
    // SAFETY: CLONE_PIDFD stored a new descriptor that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    drop((stdin_child, stdout_child, stderr_child, stack));
    match plan.error.load(Ordering::Acquire) {
        0 => Ok(Spawned { pid, pidfd, stdin, stdout, stderr }),
        errno => {
            let mut status = 0;
            // SAFETY: the child exited before its exec; reap it (it is ours, by pid).
            unsafe { libc::waitpid(pid, &mut status, 0) };
            Err(io::Error::from_raw_os_error(errno))
        }
    }
}

/// Waits for the exit of a child [`spawn`] started, and reaps it.
pub(super) async fn wait(pid: i32, pidfd: OwnedFd) -> io::Result<ExitStatus> {
    // A pidfd is readable once its process has exited.
    // SAFETY: an `OwnedFd` is an open descriptor that stays open, and the
    // same, until the `AsyncFd` that owns it is dropped.
    let pidfd = unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) }.map_err(io::Error::from)?;
    loop {
        let mut ready = pidfd.readable().await?;
        let mut status = 0;
        // SAFETY: waitpid on our own child, which only this wait reaps
        // (its pidfd keeps the pid from being recycled until then).
        match unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } {
            0 => ready.clear_ready(),
            reaped if reaped == pid => return Ok(ExitStatus::from_raw(status)),
            _ => return Err(io::Error::last_os_error()),
        }
    }
}

/// The child, between clone and exec. Contract: async-signal-safe calls
/// only, no allocation, no unwinding; reads `plan`, writes `plan.error`.
extern "C" fn child_main(plan: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `plan` is the parent's `Plan`, alive and untouched while the
    // parent thread is suspended (CLONE_VFORK); every pointer in it is a
    // valid NUL-terminated string or array ending in null.
    unsafe {
        let plan = &*(plan as *const Plan);
        let fail = |errno: libc::c_int| -> ! {
            plan.error.store(errno.max(1), Ordering::Release);
            libc::_exit(127)
        };
        let errno = || *libc::__errno_location();
        // Handlers of ours must not run here; ignored signals stay ignored
        // across exec, except SIGPIPE, which the standard library also resets.
        for signal in 1..libc::SIGRTMAX() + 1 {
            let mut action: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut action) == 0
                && (action.sa_sigaction != libc::SIG_IGN || signal == libc::SIGPIPE)
                && action.sa_sigaction != libc::SIG_DFL
            {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
        }
        if libc::setpgid(0, 0) != 0 {
            fail(errno());
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
            fail(errno());
        }
        // The parent may have died before the prctl: then no signal will come.
        if libc::getppid() != plan.parent {
            fail(libc::ESRCH);
        }
        for (target, fd) in plan.fds.iter().enumerate() {
            if libc::dup2(*fd, target as libc::c_int) < 0 {
                fail(errno());
            }
        }
        if let Some(dir) = &plan.cwd {
            if libc::chdir(dir.as_ptr()) != 0 {
                fail(errno());
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        // As execvp: a missing or unusable entry moves on to the next; a
        // denied one is reported if nothing later runs.
        let mut reported = libc::ENOENT;
        for path in &plan.candidates {
            libc::execve(path.as_ptr(), plan.argv.as_ptr(), plan.envp.as_ptr());
            match errno() {
                libc::EACCES => reported = libc::EACCES,
                libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
                other => fail(other),
            }
        }
        fail(reported)
    }
}

/// The paths to try: the program itself when it names a path, else each
/// entry of the child's `PATH` (ours when it has none, as the standard
/// library does) joined with it.
fn candidates(program: &str, env: &[(OsString, OsString)]) -> io::Result<Vec<CString>> {
    if program.contains('/') {
        return Ok(vec![c_string(program)?]);
    }
    if program.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    }
    let search = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.clone()).or_else(|| std::env::var_os("PATH"));
    let search = search.unwrap_or_else(|| DEFAULT_PATH.into());
    search
        .as_bytes()
        .split(|b| *b == b':')
        .map(|dir| {
            let dir: &OsStr = OsStr::from_bytes(if dir.is_empty() { b"." } else { dir });
            c_string(Path::new(dir).join(program).as_os_str().as_bytes())
        })
        .collect()
}

fn c_string(bytes: impl Into<Vec<u8>>) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the program, an argument, the environment or the directory")
    })
}

fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings.iter().map(|s| s.as_ptr()).chain(std::iter::once(std::ptr::null())).collect()
}

/// A close-on-exec pipe (read end, write end), both above 2 so that the
/// child's `dup2` onto 0..=2 never overwrites one of them.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both are new descriptors owned by nothing else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((above_stdio(read)?, above_stdio(write)?))
}

fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC duplicates a descriptor we own into a new one (> 2).
    let moved = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if moved < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(moved) })
}

#[cfg(test)]
mod tests {
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
        let cases = [("no-such-program-anywhere", "command not found"), (not_executable.to_str().unwrap(), "Permission denied")];
        for (program, reason_part) in cases {
            match start(&ServerConfig::stdio("s", program, Vec::<String>::new())) {
                Err(ConnectError::Spawn { reason, .. }) => assert!(reason.contains(reason_part), "{program}: {reason}"),
                Err(other) => panic!("{program}: {other}"),
                Ok(_) => panic!("{program} started"),
            }
        }
    }
}
