//! Sandboxes for the processes mcpvisor starts (stdio servers and
//! `run_command`): Landlock filesystem and TCP rules, a network namespace,
//! rlimits, a memory and pids cgroup, `no_new_privs` and a seccomp filter.
//!
//! Invariants:
//! - everything is prepared in the parent ([`prepare`]): the Landlock
//!   ruleset fd, the seccomp program, the cgroup and its `cgroup.procs`
//!   fds, the private temporary directory. Between fork and exec the child
//!   only applies them with async-signal-safe system calls ([`Sandbox::install`]);
//! - best effort by default: what the kernel cannot enforce is named in
//!   [`Sandbox::gaps`], and with `required = true` [`prepare`] refuses instead;
//! - what is reported as achieved is what the kernel enforces, never more
//!   (an allow-list of `host:port` is enforced by port only);
//! - the cgroup and the temporary directory are removed by [`Running::remove`]
//!   once the process group is gone.

mod cgroup;
mod kernel;
mod paths;

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

pub use cgroup::human_size;
pub use kernel::{landlock_abi, DENIED_SYSCALLS};

use crate::config::{Network, SandboxSpec};
use cgroup::Cgroup;
use kernel::NetRules;

/// How the child's network is cut off.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Namespace {
    /// The host's network (Landlock rules may still apply).
    Host,
    /// A new network namespace with nothing in it.
    Empty,
    /// A new network namespace whose loopback is up.
    Loopback,
}

/// Resource limits applied with `setrlimit` in the child.
#[derive(Clone, Copy, Default)]
struct Rlimits {
    cpu_seconds: Option<u64>,
    open_files: Option<u64>,
    processes: Option<u64>,
    address_space: Option<u64>,
}

/// A sandbox ready to be installed on one `Command`.
pub struct Sandbox {
    landlock: Option<OwnedFd>,
    seccomp: Vec<libc::sock_filter>,
    rlimits: Rlimits,
    namespace: Namespace,
    cgroup: Option<Cgroup>,
    tmp: PathBuf,
    /// What the kernel enforces, as `status` shows it.
    pub achieved: String,
    /// What was asked for and is not enforced (empty when all is).
    pub gaps: Vec<String>,
}

/// Prepares the sandbox of `owner` (a server's name, or `run_command`),
/// running `program` with `args` in `cwd`. `Err` says why it cannot start:
/// a `required` sandbox the kernel cannot enforce, or a setup failure.
pub fn prepare(
    spec: &SandboxSpec,
    owner: &str,
    program: &str,
    args: &[String],
    cwd: &Path,
    path_env: Option<&OsStr>,
) -> Result<Sandbox, String> {
    let abi = landlock_abi();
    let admin = has_sys_admin();
    let mut gaps = Vec::new();
    let mut achieved = Vec::new();

    let tmp = paths::private_tmp(owner).map_err(|e| format!("cannot create its private temporary directory ({e})"))?;
    let (read, write) = paths::allowed(spec, program, args, cwd, &tmp, path_env);

    let (namespace, net_rules, network) = match &spec.network {
        Network::Any => (Namespace::Host, NetRules::Unhandled, "network: any".to_string()),
        Network::None if admin => (Namespace::Empty, none_rules(), "network: none (empty network namespace)".into()),
        Network::None => (Namespace::Host, none_rules(), "network: none (Landlock TCP connect and bind; UDP not restricted)".into()),
        Network::Loopback if admin => (Namespace::Loopback, NetRules::Unhandled, "network: a private loopback (network namespace)".into()),
        Network::Loopback => {
            gaps.push("network = \"loopback\" needs a network namespace (CAP_SYS_ADMIN)".into());
            (Namespace::Host, NetRules::Unhandled, "network: not restricted".into())
        }
        Network::Allow(targets) => {
            let ports = spec.network.ports();
            let list = ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", ");
            let text = format!("network: TCP connect to ports {list} on any host (hosts of {} not enforced)", targets.join(", "));
            (Namespace::Host, NetRules::Ports { connect: ports, deny_bind: false }, text)
        }
    };
    let landlock_net = !matches!(net_rules, NetRules::Unhandled) && abi >= kernel::LANDLOCK_NET_ABI;
    if !matches!(net_rules, NetRules::Unhandled) && !landlock_net && namespace == Namespace::Host {
        gaps.push(format!("network rules need Landlock ABI {} (this kernel: {abi})", kernel::LANDLOCK_NET_ABI));
    }
    let landlock = kernel::landlock_ruleset(&read, &write, &net_rules).map_err(|e| format!("cannot build its Landlock ruleset ({e})"))?;
    match (abi, landlock.is_some()) {
        (0, _) | (_, false) => gaps.push("filesystem rules need Landlock (this kernel has none)".into()),
        (abi, true) if landlock_net => achieved.push(format!("landlock v{abi}: filesystem + network")),
        (abi, true) => achieved.push(format!("landlock v{abi}: filesystem")),
    }
    achieved.push(network);
    achieved.push(format!("seccomp: {} system calls denied", DENIED_SYSCALLS.len()));
    achieved.push("no_new_privs".into());
    let seccomp = kernel::seccomp_program().map_err(|e| format!("cannot build its seccomp filter ({e})"))?;

    let mut rlimits =
        Rlimits { cpu_seconds: spec.cpu_seconds, open_files: spec.open_files, processes: spec.processes, address_space: None };
    let cgroup = match (spec.memory, spec.processes) {
        (None, None) => None,
        (memory, processes) => match Cgroup::create(owner, memory, processes) {
            Ok(cgroup) => {
                achieved.push(cgroup.describe());
                Some(cgroup)
            }
            Err(why) => {
                if let Some(bytes) = memory {
                    rlimits.address_space = Some(bytes);
                    achieved.push(format!("address space {} (rlimit; no cgroup: {why})", human_size(bytes)));
                }
                // SAFETY: geteuid has no preconditions.
                if processes.is_some() && unsafe { libc::geteuid() } == 0 {
                    gaps.push(format!("processes: RLIMIT_NPROC does not bind root and there is no pids cgroup ({why})"));
                }
                None
            }
        },
    };
    let limits: Vec<String> = [("cpu", spec.cpu_seconds.map(|s| format!("{s}s"))), ("open files", spec.open_files.map(|n| n.to_string()))]
        .into_iter()
        .filter_map(|(name, value)| Some(format!("{name} {}", value?)))
        .collect();
    if !limits.is_empty() {
        achieved.push(format!("rlimits: {}", limits.join(", ")));
    }
    let sandbox = Sandbox { landlock, seccomp, rlimits, namespace, cgroup, tmp, achieved: achieved.join("; "), gaps };
    if spec.required && !sandbox.gaps.is_empty() {
        let gaps = sandbox.gaps.join("; ");
        sandbox.discard();
        return Err(format!("it is required (required = true) but this kernel or this process cannot enforce it: {gaps}; run mcpvisor where it can, or set required = false to start with what can be enforced"));
    }
    Ok(sandbox)
}

fn none_rules() -> NetRules {
    NetRules::Ports { connect: Vec::new(), deny_bind: true }
}

/// Whether this process may make namespaces (`CAP_SYS_ADMIN` in CapEff).
fn has_sys_admin() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let caps = status.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok());
    caps.is_some_and(|caps| caps & (1 << 21) != 0)
}

impl Sandbox {
    /// Sets the private temporary directory and adds the `pre_exec` step
    /// that applies the sandbox (after any step already added).
    pub fn install(&self, command: &mut tokio::process::Command) {
        command.env("TMPDIR", &self.tmp);
        let landlock: Option<RawFd> = self.landlock.as_ref().map(AsRawFd::as_raw_fd);
        let cgroups: Vec<RawFd> = self.cgroup.as_ref().map(Cgroup::join_fds).unwrap_or_default();
        let seccomp = self.seccomp.clone();
        let rlimits = self.rlimits;
        let namespace = self.namespace;
        // SAFETY: the closure runs in the child between fork and exec. It
        // reads only what it owns, allocates nothing, and calls only
        // async-signal-safe system calls (write, setrlimit, unshare, socket,
        // ioctl, close, prctl, syscall).
        unsafe {
            command.pre_exec(move || {
                for fd in &cgroups {
                    check(libc::write(*fd, b"0".as_ptr().cast(), 1) as libc::c_int)?;
                }
                apply_rlimits(&rlimits)?;
                match namespace {
                    Namespace::Host => {}
                    Namespace::Empty => check(libc::unshare(libc::CLONE_NEWNET))?,
                    Namespace::Loopback => {
                        check(libc::unshare(libc::CLONE_NEWNET))?;
                        loopback_up()?;
                    }
                }
                check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
                if let Some(fd) = landlock {
                    check(libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) as libc::c_int)?;
                }
                let program = libc::sock_fprog { len: seccomp.len() as u16, filter: seccomp.as_ptr().cast_mut() };
                check(libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &program as *const libc::sock_fprog))?;
                Ok(())
            });
        }
    }

    /// The process has been spawned: the descriptors the child needed are
    /// closed; what must be cleaned up later is kept.
    pub fn spawned(mut self) -> Running {
        if let Some(cgroup) = self.cgroup.as_mut() {
            cgroup.spawned();
        }
        Running { cgroup: self.cgroup, tmp: self.tmp, achieved: self.achieved, gaps: self.gaps }
    }

    /// Gives back what was prepared, for a process that will not start.
    fn discard(self) {
        let running = self.spawned();
        if let Some(cgroup) = running.cgroup {
            cgroup.remove_now();
        }
        let _ = std::fs::remove_dir_all(&running.tmp);
    }
}

/// A sandbox whose process runs.
#[derive(Debug)]
pub struct Running {
    cgroup: Option<Cgroup>,
    tmp: PathBuf,
    pub achieved: String,
    pub gaps: Vec<String>,
}

impl Running {
    /// Which limit the process tree hit, as a sentence starting `sandbox:`.
    pub fn violation(&self) -> Option<String> {
        self.cgroup.as_ref()?.violation()
    }

    /// Kills what is left of the tree in the cgroup, removes the cgroup
    /// and the private temporary directory.
    pub async fn remove(self) {
        if let Some(cgroup) = self.cgroup {
            cgroup.remove().await;
        }
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

/// What a running process's sandbox achieved, and the limit it hit once
/// it has ended; shared between the reaper and the status.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SandboxStatus {
    /// What the kernel enforces, e.g. `landlock v7: filesystem + network; ...`.
    pub achieved: String,
    /// What was asked for and is not enforced.
    pub gaps: Vec<String>,
    /// The last limit a run of the process hit (`sandbox: ...`).
    pub violation: Option<String>,
}

fn check(result: libc::c_int) -> std::io::Result<()> {
    if result < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Sets the configured rlimits; async-signal-safe.
unsafe fn apply_rlimits(limits: &Rlimits) -> std::io::Result<()> {
    let pairs = [
        // SIGXCPU at the limit, SIGKILL 5 s later.
        (libc::RLIMIT_CPU, limits.cpu_seconds.map(|s| (s, s.saturating_add(5)))),
        (libc::RLIMIT_NOFILE, limits.open_files.map(|n| (n, n))),
        (libc::RLIMIT_NPROC, limits.processes.map(|n| (n, n))),
        (libc::RLIMIT_AS, limits.address_space.map(|n| (n, n))),
    ];
    for (resource, value) in pairs {
        if let Some((soft, hard)) = value {
            let limit = libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: hard as libc::rlim_t };
            check(libc::setrlimit(resource, &limit))?;
        }
    }
    Ok(())
}

/// Brings `lo` up in a fresh network namespace; async-signal-safe.
unsafe fn loopback_up() -> std::io::Result<()> {
    let socket = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    check(socket)?;
    let mut request: libc::ifreq = std::mem::zeroed();
    request.ifr_name[0] = b'l' as libc::c_char;
    request.ifr_name[1] = b'o' as libc::c_char;
    request.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_LOOPBACK | libc::IFF_RUNNING) as libc::c_short;
    let result = libc::ioctl(socket, libc::SIOCSIFFLAGS, &request as *const libc::ifreq);
    libc::close(socket);
    check(result)
}
