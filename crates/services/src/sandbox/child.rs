//! The sandbox's steps in the child, between clone and exec: join the
//! cgroup, set rlimits, enter new namespaces, mount a private `/proc` and
//! `/dev/shm`, drop every capability, set `no_new_privs`, restrict itself
//! with Landlock and load seccomp, in that order (each needs the rights
//! the next one takes away).
//!
//! Invariant: async-signal-safe system calls only, on data prepared in the
//! parent ([`super::prepare`]); nothing is allocated, no lock is taken.

use std::ffi::CStr;
use std::os::fd::AsRawFd;

use super::{Namespace, Rlimits, Sandbox};

/// A step of the sandbox in the child, named in the error when it fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Step {
    Cgroup = 1,
    Rlimits,
    Namespaces,
    Loopback,
    Mounts,
    Capabilities,
    NoNewPrivs,
    Landlock,
    Seccomp,
}

impl Step {
    /// Every step, in the order of their numbers.
    const ALL: [Step; 9] = [
        Step::Cgroup,
        Step::Rlimits,
        Step::Namespaces,
        Step::Loopback,
        Step::Mounts,
        Step::Capabilities,
        Step::NoNewPrivs,
        Step::Landlock,
        Step::Seccomp,
    ];

    /// The step numbered `n` (as stored by the child), if any.
    pub fn from_number(n: u8) -> Option<Step> {
        Step::ALL.into_iter().find(|step| *step as u8 == n)
    }

    /// What the step does, for an error message.
    pub fn describe(self) -> &'static str {
        match self {
            Step::Cgroup => "joining its cgroup",
            Step::Rlimits => "setting its rlimits",
            Step::Namespaces => "entering its namespaces",
            Step::Loopback => "bringing up its loopback",
            Step::Mounts => "mounting its private /proc and /dev/shm",
            Step::Capabilities => "dropping its capabilities",
            Step::NoNewPrivs => "setting no_new_privs",
            Step::Landlock => "restricting itself with Landlock",
            Step::Seccomp => "loading its seccomp filter",
        }
    }
}

/// The private mounts of a sandbox with a mount namespace.
pub(super) struct Mounts {
    /// Mount a fresh `/proc` with `hidepid=ptraceable` (Linux 5.8; unlike
    /// `hidepid=2` it spares no group): with Landlock, whose domain no
    /// process outside may be traced from, they are invisible.
    pub proc: bool,
    /// `tmpfs` options of the private `/dev/shm` (`None`: the host has none).
    pub shm: Option<std::ffi::CString>,
    /// Landlock rights on the new `/proc` and `/dev/shm` (their inodes are
    /// new, so the parent's rules for those paths do not cover them).
    pub proc_rights: u64,
    pub shm_rights: u64,
    /// Configuration files and `.git` under writable paths, bound
    /// read-only onto themselves ([`super::paths::protected`]).
    pub read_only: Vec<std::ffi::CString>,
}

/// `struct landlock_path_beneath_attr`.
#[repr(C, packed)]
struct PathBeneath {
    allowed_access: u64,
    parent_fd: i32,
}

/// `struct __user_cap_header_struct` and `__user_cap_data_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;
const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;

fn errno() -> libc::c_int {
    // SAFETY: reads this thread's errno.
    unsafe { *libc::__errno_location() }
}

fn check(step: Step, result: libc::c_long) -> Result<(), (Step, libc::c_int)> {
    if result < 0 {
        Err((step, errno()))
    } else {
        Ok(())
    }
}

impl Sandbox {
    /// Applies the sandbox to the calling process; on failure, the step and
    /// its errno.
    ///
    /// # Safety
    /// Only in a child between clone (or fork) and exec: it changes the
    /// calling process's namespaces, mounts, credentials and filters.
    pub(crate) unsafe fn apply(&self) -> Result<(), (Step, libc::c_int)> {
        for fd in self.cgroup.iter().flat_map(|c| c.join_fds()) {
            check(Step::Cgroup, libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) as libc::c_long)?;
        }
        apply_rlimits(&self.rlimits).map_err(|e| (Step::Rlimits, e))?;
        if self.unshare != 0 {
            check(Step::Namespaces, libc::unshare(self.unshare) as libc::c_long)?;
        }
        if self.namespace == Namespace::Loopback {
            loopback_up().map_err(|e| (Step::Loopback, e))?;
        }
        if let Some(mounts) = &self.mounts {
            private_mounts(mounts, self.landlock.as_ref().map(AsRawFd::as_raw_fd)).map_err(|e| (Step::Mounts, e))?;
        }
        drop_capabilities(self.last_capability, self.drop_bounding).map_err(|e| (Step::Capabilities, e))?;
        check(Step::NoNewPrivs, libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as libc::c_long)?;
        if let Some(fd) = &self.landlock {
            check(Step::Landlock, libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32))?;
        }
        if let Some(filter) = &self.seccomp {
            let program = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr().cast_mut() };
            let loaded = libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &program as *const libc::sock_fprog);
            check(Step::Seccomp, loaded as libc::c_long)?;
        }
        Ok(())
    }
}

/// Sets the configured rlimits.
unsafe fn apply_rlimits(limits: &Rlimits) -> Result<(), libc::c_int> {
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
            if libc::setrlimit(resource, &limit) != 0 {
                return Err(errno());
            }
        }
    }
    Ok(())
}

/// Brings `lo` up in a fresh network namespace.
unsafe fn loopback_up() -> Result<(), libc::c_int> {
    let socket = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    if socket < 0 {
        return Err(errno());
    }
    let mut request: libc::ifreq = std::mem::zeroed();
    request.ifr_name[0] = b'l' as libc::c_char;
    request.ifr_name[1] = b'o' as libc::c_char;
    request.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_LOOPBACK | libc::IFF_RUNNING) as libc::c_short;
    let result = libc::ioctl(socket, libc::SIOCSIFFLAGS, &request as *const libc::ifreq);
    let error = errno();
    libc::close(socket);
    if result < 0 {
        Err(error)
    } else {
        Ok(())
    }
}

/// In the new mount namespace: nothing propagates back to the host, a
/// fresh `/proc` that shows only what Landlock lets this process trace,
/// a `/dev/shm` of its own (freed with the namespace, its pages charged
/// to the cgroup joined above), configuration files and `.git` read-only
/// under writable paths, and Landlock rules for the new mounts.
unsafe fn private_mounts(mounts: &Mounts, landlock: Option<libc::c_int>) -> Result<(), libc::c_int> {
    let c = |bytes: &'static [u8]| CStr::from_bytes_with_nul(bytes).map(CStr::as_ptr).unwrap_or(std::ptr::null());
    let mount = |source: *const libc::c_char, target: &'static [u8], kind: *const libc::c_char, flags, data: *const libc::c_char| {
        if libc::mount(source, c(target), kind, flags, data.cast()) != 0 {
            return Err(errno());
        }
        Ok(())
    };
    mount(std::ptr::null(), b"/\0", std::ptr::null(), libc::MS_REC | libc::MS_PRIVATE, std::ptr::null())?;
    let plain = libc::MS_NOSUID | libc::MS_NODEV;
    if mounts.proc {
        mount(c(b"proc\0"), b"/proc\0", c(b"proc\0"), plain | libc::MS_NOEXEC, c(b"hidepid=ptraceable\0"))?;
    }
    if let Some(options) = &mounts.shm {
        mount(c(b"tmpfs\0"), b"/dev/shm\0", c(b"tmpfs\0"), plain, options.as_ptr())?;
    }
    for path in &mounts.read_only {
        let path = path.as_ptr();
        // Gone since it was found: nothing to keep read-only.
        if libc::mount(path, path, std::ptr::null(), libc::MS_BIND | libc::MS_REC, std::ptr::null()) != 0 {
            match errno() {
                libc::ENOENT => continue,
                error => return Err(error),
            }
        }
        let read_only = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | plain;
        if libc::mount(std::ptr::null(), path, std::ptr::null(), read_only, std::ptr::null()) != 0 {
            return Err(errno());
        }
    }
    let Some(ruleset) = landlock else { return Ok(()) };
    let rules: [(&'static [u8], bool, u64); 2] =
        [(b"/proc\0", mounts.proc, mounts.proc_rights), (b"/dev/shm\0", mounts.shm.is_some(), mounts.shm_rights)];
    for (path, mounted, rights) in rules {
        if !mounted || rights == 0 {
            continue;
        }
        let fd = libc::open(c(path), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(errno());
        }
        let rule = PathBeneath { allowed_access: rights, parent_fd: fd };
        let added = libc::syscall(libc::SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule as *const PathBeneath, 0u32);
        let error = errno();
        libc::close(fd);
        if added != 0 {
            return Err(error);
        }
    }
    Ok(())
}

/// Empties every capability set: the bounding set (so an exec as root
/// gains nothing back; needs CAP_SETPCAP), the ambient set, and the
/// effective, permitted and inheritable sets.
unsafe fn drop_capabilities(last: u32, bounding: bool) -> Result<(), libc::c_int> {
    if bounding {
        for capability in 0..=last {
            if libc::prctl(libc::PR_CAPBSET_DROP, capability as libc::c_ulong, 0, 0, 0) != 0 && errno() != libc::EINVAL {
                return Err(errno());
            }
        }
        let locked = libc::SECBIT_NOROOT | libc::SECBIT_NOROOT_LOCKED;
        if libc::prctl(libc::PR_SET_SECUREBITS, locked as libc::c_ulong, 0, 0, 0) != 0 {
            return Err(errno());
        }
    }
    // EINVAL: a kernel before 4.3 has no ambient set.
    if libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong, 0, 0, 0) != 0 && errno() != libc::EINVAL {
        return Err(errno());
    }
    let header = CapHeader { version: CAPABILITY_VERSION_3, pid: 0 };
    let none = [CapData { effective: 0, permitted: 0, inheritable: 0 }; 2];
    if libc::syscall(libc::SYS_capset, &header as *const CapHeader, none.as_ptr()) != 0 {
        return Err(errno());
    }
    Ok(())
}
