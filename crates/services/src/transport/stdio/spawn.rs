//! The one way mcpvisor starts a process (every stdio server, sandboxed or
//! not, and `run_command`), without copying mcpvisor's address space.
//!
//! A fork copies the page tables of the whole runtime and makes every page
//! it writes until the child's exec a copy-on-write fault. Here the child
//! is a `clone` with `CLONE_VM | CLONE_VFORK`, as glibc's `posix_spawn`
//! makes it: it shares our memory, runs a fixed list of system calls on a
//! stack of its own, and execs; the calling thread is suspended until then.
//!
//! Invariants:
//! - everything the child needs (paths, argv, envp, descriptors, the
//!   sandbox's rules) is made before the clone; the child allocates
//!   nothing, takes no lock, and calls only async-signal-safe functions;
//! - signals are blocked around the clone, and the child sets every caught
//!   signal to its default before unblocking them, so no handler of ours
//!   runs in the child on our shared memory;
//! - the child leads a new process group, gets SIGKILL when the spawning
//!   thread ends if asked (checked against a parent that died before the
//!   `prctl`), applies its sandbox, and keeps exactly descriptors 0, 1 and 2
//!   (`close_range` from 3: a descriptor mcpvisor inherited without
//!   close-on-exec reaches no server);
//! - its stack is a mapping of its own with a guard page below it, so an
//!   overflow faults instead of writing over our heap;
//! - exec as `posix_spawn` does, not as `execvp`: a file the kernel cannot
//!   run (ENOEXEC, a script without `#!`) is an error, never handed to
//!   `/bin/sh`;
//! - a child that fails before its exec stores the errno (and the sandbox
//!   step) and exits; the spawn then reaps it and reports the error;
//! - the pidfd names the child until it is reaped, so waiting on it can
//!   never reach a recycled pid. A kernel without `CLONE_PIDFD` (before
//!   5.2) leaves it at -1: the child is then waited for by a blocking
//!   `waitpid` on a thread of its own, the only reaper of that pid.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use crate::sandbox::{Sandbox, Step};

/// What to start: the program as configured, its arguments and environment,
/// the working directory (`None`: ours), its stdio and its sandbox.
pub(crate) struct Launch<'a> {
    pub program: &'a str,
    pub args: &'a [String],
    pub env: &'a [(OsString, OsString)],
    pub cwd: Option<&'a Path>,
    /// stdin: a pipe (`true`) or /dev/null.
    pub stdin_piped: bool,
    /// stderr: a pipe of its own (`true`) or the stdout pipe (interleaved).
    pub stderr_piped: bool,
    /// SIGKILL when the spawning thread ends (`PR_SET_PDEATHSIG`): only
    /// from a thread that lives as long as the process should.
    pub die_with_thread: bool,
    pub sandbox: Option<&'a Sandbox>,
}

/// A started child: how to wait for it, and our ends of its pipes.
pub(crate) struct Spawned {
    pub child: Child,
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: Option<OwnedFd>,
}

/// Whether to ask the kernel for a pidfd; tests skip it to take the path
/// of a kernel that ignores `CLONE_PIDFD`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pidfd {
    Ask,
    #[cfg_attr(not(test), allow(dead_code))]
    Skip,
}

/// The child's stack: ample for the few calls it makes (glibc's
/// `posix_spawn` sizes its own from argv, about a page here).
const CHILD_STACK: usize = 64 * 1024;

/// Search path when the environment has no `PATH` (as `execvp`).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// Everything the child reads, made before the clone. Pointer arrays end
/// with a null pointer; `error` and `step` are the only things the child writes.
struct Plan<'a> {
    /// Paths to exec in turn: the program itself, or each `PATH` entry joined with it.
    candidates: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    cwd: Option<CString>,
    /// What becomes the child's stdin, stdout and stderr, all above 2.
    fds: [RawFd; 3],
    parent: libc::pid_t,
    die_with_thread: bool,
    sandbox: Option<&'a Sandbox>,
    /// Descriptors below this are closed one by one where `close_range`
    /// is missing (Linux before 5.9): our `RLIMIT_NOFILE`.
    fd_limit: libc::c_uint,
    error: AtomicI32,
    /// The sandbox step that failed (0: none).
    step: AtomicU8,
}

/// Starts the program as [`Launch`] says, in a new process group, without a fork.
pub(crate) fn spawn(launch: &Launch) -> io::Result<Spawned> {
    spawn_with(launch, Pidfd::Ask)
}

fn spawn_with(launch: &Launch, pidfd_mode: Pidfd) -> io::Result<Spawned> {
    let argv_owned: Vec<CString> =
        std::iter::once(launch.program).chain(launch.args.iter().map(String::as_str)).map(c_string).collect::<io::Result<_>>()?;
    let env_owned: Vec<CString> =
        launch.env.iter().map(|(k, v)| c_string([k.as_bytes(), b"=", v.as_bytes()].concat())).collect::<io::Result<_>>()?;
    let cwd = launch.cwd.map(|dir| c_string(dir.as_os_str().as_bytes())).transpose()?;
    let (stdin_child, stdin) = match launch.stdin_piped {
        true => pipe().map(|(read, write)| (read, Some(write)))?,
        false => (dev_null()?, None),
    };
    let (stdout, stdout_child) = pipe()?;
    let (stderr_child, stderr) = match launch.stderr_piped {
        true => pipe().map(|(read, write)| (Some(write), Some(read)))?,
        false => (None, None),
    };
    let stderr_fd = stderr_child.as_ref().unwrap_or(&stdout_child).as_raw_fd();
    let mut plan = Plan {
        candidates: candidates(launch.program, launch.env)?,
        argv: pointers(&argv_owned),
        envp: pointers(&env_owned),
        cwd,
        fds: [stdin_child.as_raw_fd(), stdout_child.as_raw_fd(), stderr_fd],
        parent: std::process::id() as libc::pid_t,
        die_with_thread: launch.die_with_thread,
        sandbox: launch.sandbox,
        fd_limit: fd_limit(),
        error: AtomicI32::new(0),
        step: AtomicU8::new(0),
    };
    let stack = Stack::new(CHILD_STACK)?;
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
        let pidfd_flag = if pidfd_mode == Pidfd::Ask { libc::CLONE_PIDFD } else { 0 };
        let flags = libc::CLONE_VM | libc::CLONE_VFORK | pidfd_flag | libc::SIGCHLD;
        let pid = libc::clone(child_main, stack.top(), flags, (&mut plan as *mut Plan).cast(), &mut pidfd as *mut libc::c_int);
        let clone_error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(clone_error);
        }
        pid
    };
    // A kernel before 5.2 ignores CLONE_PIDFD and leaves -1: wait by pid.
    let waiter = match pidfd {
        // SAFETY: CLONE_PIDFD stored a new descriptor that nothing else owns.
        fd if fd >= 0 => Waiter::Pidfd(unsafe { OwnedFd::from_raw_fd(fd) }),
        _ => Waiter::Blocking,
    };
    drop((stdin_child, stdout_child, stderr_child, stack));
    match plan.error.load(Ordering::Acquire) {
        0 => Ok(Spawned { child: Child { pid, waiter }, stdin, stdout, stderr }),
        errno => {
            let mut status = 0;
            // SAFETY: the child exited before its exec; reap it (it is ours, by pid).
            unsafe { libc::waitpid(pid, &mut status, 0) };
            let error = io::Error::from_raw_os_error(errno);
            match Step::from_number(plan.step.load(Ordering::Acquire)) {
                Some(step) => Err(io::Error::new(error.kind(), format!("{error}, while {}", step.describe()))),
                None => Err(error),
            }
        }
    }
}

/// How a child is waited for.
enum Waiter {
    /// Its pidfd becomes readable when it exits.
    Pidfd(OwnedFd),
    /// No pidfd (Linux before 5.2): a blocking `waitpid` on a thread.
    Blocking,
}

/// A started child, until it is reaped.
pub(crate) struct Child {
    pub pid: i32,
    waiter: Waiter,
}

impl Child {
    /// Waits for the exit and reaps the process. If this future is dropped
    /// first (the caller kills the group), the child is still reaped, on a
    /// thread of its own, so a torn-down runtime leaves no zombie.
    pub async fn wait(self) -> io::Result<ExitStatus> {
        let pid = self.pid;
        match self.waiter {
            Waiter::Pidfd(pidfd) => {
                let mut reaper = ReapOnDrop(Some(pid));
                let exit = wait_pidfd(pid, pidfd).await;
                reaper.0 = None;
                exit
            }
            // The blocking wait goes on when this future is dropped: it reaps alone.
            Waiter::Blocking => tokio::task::spawn_blocking(move || wait_blocking(pid)).await.map_err(io::Error::other)?,
        }
    }

    /// Reaps the child (being killed) on a thread of its own; for a child
    /// that will never be waited for.
    pub fn reap_in_background(self) {
        match self.waiter {
            Waiter::Pidfd(_) => reap_in_background(self.pid),
            Waiter::Blocking => drop(tokio::task::spawn_blocking(move || wait_blocking(self.pid))),
        }
    }
}

async fn wait_pidfd(pid: i32, pidfd: OwnedFd) -> io::Result<ExitStatus> {
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

fn wait_blocking(pid: i32) -> io::Result<ExitStatus> {
    loop {
        let mut status = 0;
        // SAFETY: a blocking waitpid on one child of ours, its only reaper.
        match unsafe { libc::waitpid(pid, &mut status, 0) } {
            reaped if reaped == pid => return Ok(ExitStatus::from_raw(status)),
            _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => continue,
            _ => return Err(io::Error::last_os_error()),
        }
    }
}

/// Reaps a child whose pidfd wait was dropped.
struct ReapOnDrop(Option<i32>);

impl Drop for ReapOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0.take() {
            reap_in_background(pid);
        }
    }
}

/// Waits for `pid` (ours, being killed) on a short-lived thread of its own.
fn reap_in_background(pid: i32) {
    let _ = std::thread::Builder::new().name("mcpvisor-reap".into()).spawn(move || wait_blocking(pid));
}

/// The child's stack: an anonymous mapping whose lowest page is
/// inaccessible, so that running off its end faults.
struct Stack {
    base: *mut libc::c_void,
    len: usize,
}

impl Stack {
    fn new(size: usize) -> io::Result<Stack> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let len = size + page;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK;
        // SAFETY: a new anonymous mapping, aliasing nothing.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Stack { base, len };
        // SAFETY: the lowest page of the mapping just made.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The top of the stack (it grows down), 16-byte aligned.
    fn top(&self) -> *mut libc::c_void {
        (self.base as usize + self.len) as *mut libc::c_void
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, used by no one any more.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// The child, between clone and exec. Contract: async-signal-safe calls
/// only, no allocation, no unwinding; reads `plan`, writes `plan.error`
/// and `plan.step`.
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
        if plan.die_with_thread {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                fail(errno());
            }
            // The parent may have died before the prctl: then no signal will come.
            if libc::getppid() != plan.parent {
                fail(libc::ESRCH);
            }
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
        if let Some(sandbox) = plan.sandbox {
            if let Err((step, errno)) = sandbox.apply() {
                plan.step.store(step as u8, Ordering::Release);
                fail(errno);
            }
        }
        // Exactly stdin, stdout and stderr reach the program.
        if libc::syscall(libc::SYS_close_range, 3u32, libc::c_uint::MAX, 0u32) != 0 {
            for fd in 3..plan.fd_limit as libc::c_int {
                libc::close(fd);
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        // As execvp: a missing or unusable entry moves on to the next; a
        // denied one is reported if nothing later runs. ENOEXEC ends the
        // search (no shell fallback, as posix_spawn).
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

/// Our `RLIMIT_NOFILE` soft limit, the bound of descriptor numbers.
fn fd_limit() -> libc::c_uint {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit fills the struct it is given.
    match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } {
        0 => limit.rlim_cur.min(1 << 20) as libc::c_uint,
        _ => 1024,
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

/// /dev/null for reading, above 2.
fn dev_null() -> io::Result<OwnedFd> {
    above_stdio(std::fs::File::open("/dev/null")?.into())
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
mod tests;
