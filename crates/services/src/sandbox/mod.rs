//! Sandboxes for the processes mcpvisor starts (stdio servers and
//! `run_command`): Landlock filesystem and TCP rules with signals and
//! abstract UNIX sockets scoped, network, mount and IPC namespaces (a
//! private `/proc` and `/dev/shm`), no capabilities, rlimits, a memory and
//! pids cgroup, `no_new_privs` and a seccomp filter.
//!
//! Invariants:
//! - everything is prepared in the parent ([`prepare`]): the Landlock
//!   ruleset fd, the seccomp program, the cgroup and its `cgroup.procs`
//!   fds, the private temporary directory, the mount options. Between
//!   clone and exec the child only applies them with async-signal-safe
//!   system calls ([`Sandbox::apply`], run by the one spawn path);
//! - best effort by default: what the kernel cannot enforce is named in
//!   [`Sandbox::gaps`], and with `required = true` [`prepare`] refuses instead;
//! - what is reported as achieved is what the kernel enforces, never more
//!   (an allow-list of `host:port` is enforced by port only, and says so
//!   as a gap);
//! - the cgroup and the temporary directory are removed by [`Running::remove`]
//!   once the process group is gone; the private `/dev/shm` and IPC objects
//!   go with the namespaces when the sandbox's last process ends.

mod cgroup;
mod child;
mod kernel;
mod paths;
mod seccomp;

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

pub use cgroup::human_size;
pub use child::Step;
pub use kernel::landlock_abi;
pub use seccomp::DENIED_SYSCALLS;

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

/// `CAP_SETPCAP` and `CAP_SYS_ADMIN`, as bits of a capability set.
const CAP_SETPCAP: u64 = 1 << 8;
const CAP_SYS_ADMIN: u64 = 1 << 21;

/// A sandbox ready to be applied in one child ([`Sandbox::apply`]).
pub struct Sandbox {
    landlock: Option<OwnedFd>,
    seccomp: Option<Vec<libc::sock_filter>>,
    rlimits: Rlimits,
    namespace: Namespace,
    /// `unshare` flags: network, mount and IPC namespaces (0: none).
    unshare: libc::c_int,
    mounts: Option<child::Mounts>,
    last_capability: u32,
    /// Whether the bounding set can be emptied (CAP_SETPCAP).
    drop_bounding: bool,
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
    let capabilities = kernel::effective_capabilities();
    let admin = capabilities & CAP_SYS_ADMIN != 0;
    let mut gaps = Vec::new();
    let mut achieved = Vec::new();

    let tmp = paths::private_tmp(owner).map_err(|e| format!("cannot create its private temporary directory ({e})"))?;
    let (read, write) = paths::allowed(spec, program, args, cwd, &tmp, path_env);

    let (namespace, net_rules, network) = match &spec.network {
        Network::Any => (Namespace::Host, NetRules::Unhandled, "network: any".to_string()),
        Network::None if admin => (Namespace::Empty, none_rules(), "network: none (empty network namespace)".into()),
        Network::None => {
            gaps.push("network = \"none\" leaves UDP open: an empty network namespace needs CAP_SYS_ADMIN".into());
            (Namespace::Host, none_rules(), "network: none (Landlock TCP connect and bind)".into())
        }
        Network::Loopback if admin => (Namespace::Loopback, NetRules::Unhandled, "network: a private loopback (network namespace)".into()),
        Network::Loopback => {
            gaps.push("network = \"loopback\" needs a network namespace (CAP_SYS_ADMIN)".into());
            (Namespace::Host, NetRules::Unhandled, "network: not restricted".into())
        }
        Network::Allow(targets) => {
            let ports = spec.network.ports();
            let list = ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", ");
            gaps.push(format!("the hosts of {} are not enforced (the kernel enforces ports only) and UDP is open", targets.join(", ")));
            (
                Namespace::Host,
                NetRules::Ports { connect: ports, deny_bind: false },
                format!("network: TCP connect to ports {list} on any host"),
            )
        }
    };
    let landlock_net = !matches!(net_rules, NetRules::Unhandled) && abi >= kernel::LANDLOCK_NET_ABI;
    if !matches!(net_rules, NetRules::Unhandled) && !landlock_net && namespace == Namespace::Host {
        gaps.push(format!("network rules need Landlock ABI {} (this kernel: {abi})", kernel::LANDLOCK_NET_ABI));
    }
    let landlock = kernel::landlock_ruleset(&read, &write, &net_rules).map_err(|e| format!("cannot build its Landlock ruleset ({e})"))?;
    let landlock_on = abi > 0 && landlock.is_some();
    match (landlock_on, landlock_net) {
        (false, _) => gaps.push("filesystem rules need Landlock (this kernel has none)".into()),
        (true, true) => achieved.push(format!("landlock v{abi}: filesystem + network")),
        (true, false) => achieved.push(format!("landlock v{abi}: filesystem")),
    }
    achieved.push(network);
    if landlock_on && abi >= kernel::LANDLOCK_SCOPE_ABI {
        achieved.push("signals and abstract UNIX sockets scoped to the sandbox".into());
    } else {
        gaps.push(format!(
            "signals and abstract UNIX sockets reach processes outside the sandbox: scoping them needs Landlock ABI {} (Linux 6.12; this kernel: {abi})",
            kernel::LANDLOCK_SCOPE_ABI
        ));
    }
    let deny_unix_sockets = spec.network != Network::Any;
    let seccomp = seccomp::program(seccomp::Options { deny_unix_sockets });
    match &seccomp {
        Some(_) => {
            if deny_unix_sockets {
                achieved.push("UNIX sockets: none on disk (socket(AF_UNIX) refused; socketpair kept)".into());
            }
            achieved.push(format!(
                "seccomp: {} system calls denied, and {}; other ABIs refused",
                DENIED_SYSCALLS.len() + 1,
                seccomp::DENIED_WITH_ARGUMENTS
            ));
        }
        None => gaps.push(format!("no seccomp filter for {}", std::env::consts::ARCH)),
    }

    let read_only = paths::protected(&write, |name| std::env::var(name).ok());
    let (unshare, mounts) = namespaces(spec, namespace, admin, abi, read_only, &mut achieved, &mut gaps);
    let drop_bounding = capabilities & CAP_SETPCAP != 0;
    if capabilities != 0 && !drop_bounding {
        gaps.push("capabilities: the bounding set cannot be emptied without CAP_SETPCAP".into());
    } else {
        achieved.push("capabilities: none".into());
    }
    achieved.push("no_new_privs".into());

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
                    achieved.push(format!("address space {} (rlimit)", human_size(bytes)));
                    gaps.push(format!("memory is bound only by RLIMIT_AS (address space, not memory used): no cgroup ({why})"));
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
    let sandbox = Sandbox {
        landlock,
        seccomp,
        rlimits,
        namespace,
        unshare,
        mounts,
        last_capability: kernel::last_capability(),
        drop_bounding,
        cgroup,
        tmp,
        achieved: achieved.join("; "),
        gaps,
    };
    if spec.required && !sandbox.gaps.is_empty() {
        let gaps = sandbox.gaps.join("; ");
        sandbox.discard();
        return Err(format!("it is required (required = true) but this kernel or this process cannot enforce it: {gaps}; run mcpvisor where it can, or set required = false to start with what can be enforced"));
    }
    Ok(sandbox)
}

/// The namespaces to enter and the private mounts to make, with what they
/// achieve and what is left open without them.
fn namespaces(
    spec: &SandboxSpec,
    network: Namespace,
    admin: bool,
    abi: i64,
    read_only: Vec<PathBuf>,
    achieved: &mut Vec<String>,
    gaps: &mut Vec<String>,
) -> (libc::c_int, Option<child::Mounts>) {
    let net = if network == Namespace::Host { 0 } else { libc::CLONE_NEWNET };
    // Per-mount procfs options (hidepid on a mount of our own) since Linux 5.8.
    let proc = admin && abi > 0 && kernel::kernel_version() >= (5, 8);
    if proc {
        achieved.push("/proc: its own processes only".into());
    } else {
        gaps.push(
            "/proc shows every process's command line and status: a private /proc needs CAP_SYS_ADMIN, Landlock and Linux 5.8".into(),
        );
    }
    if !admin {
        gaps.push("/dev/shm and System V IPC are the host's (shared, and left behind): private ones need CAP_SYS_ADMIN".into());
        if !read_only.is_empty() {
            gaps.push(format!(
                "{} stay writable: keeping configuration files and .git read-only under a writable path needs a mount namespace (CAP_SYS_ADMIN); \
                 a project file written there still starts nothing until `mcpvisor trust`",
                names(&read_only)
            ));
        }
        return (net, None);
    }
    if !read_only.is_empty() {
        achieved.push(format!("read-only under writable paths: {}", names(&read_only)));
    }
    // A path with a NUL byte cannot be named to the kernel: it cannot have been found either.
    let read_only = read_only.iter().filter_map(|path| CString::new(path.as_os_str().as_encoded_bytes()).ok()).collect();
    let shm = Path::new("/dev/shm").is_dir().then(|| {
        let size = spec.memory.map(|bytes| format!(",size={bytes}")).unwrap_or_default();
        CString::new(format!("mode=1777{size}")).unwrap_or_default()
    });
    achieved.push("/dev/shm and IPC: private, freed with the sandbox".into());
    let mounts = child::Mounts {
        proc,
        shm,
        proc_rights: kernel::known_rights(kernel::read_rights(), abi),
        shm_rights: kernel::known_rights(kernel::write_rights(), abi),
        read_only,
    };
    (net | libc::CLONE_NEWNS | libc::CLONE_NEWIPC, Some(mounts))
}

/// The file names of `paths`, for `status` (`.git, .mcp.json`), at most six.
fn names(paths: &[PathBuf]) -> String {
    let mut shown: Vec<String> =
        paths.iter().take(6).map(|path| path.file_name().unwrap_or(path.as_os_str()).to_string_lossy().into_owned()).collect();
    if paths.len() > 6 {
        shown.push(format!("{} more", paths.len() - 6));
    }
    shown.join(", ")
}

fn none_rules() -> NetRules {
    NetRules::Ports { connect: Vec::new(), deny_bind: true }
}

impl Sandbox {
    /// The variable that points the process at its private temporary directory.
    pub fn tmpdir(&self) -> (OsString, OsString) {
        ("TMPDIR".into(), self.tmp.clone().into_os_string())
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
