//! The kernel's parts of a sandbox, built in the parent before fork: a
//! Landlock ruleset (as a file descriptor) and a seccomp BPF program (as
//! plain instructions). The child only applies them ([`super::apply`]).

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

use landlock::{path_beneath_rules, Access, AccessFs, AccessNet, NetPort, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError, ABI};
use seccompiler::{SeccompAction, SeccompFilter};

/// The Landlock ABI this kernel offers (0: none), from
/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`.
pub fn landlock_abi() -> i64 {
    // SAFETY: with a null attribute and size 0, the VERSION flag only asks
    // the kernel for a number; nothing is read or written.
    let version = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32) };
    version.max(0)
}

/// Landlock ABI from which TCP bind/connect rules exist.
pub const LANDLOCK_NET_ABI: i64 = 4;

/// What a ruleset restricts on the network.
pub enum NetRules {
    /// Nothing (`network = "any"`).
    Unhandled,
    /// TCP connect to these ports only; bind is denied when `deny_bind`.
    Ports { connect: Vec<u16>, deny_bind: bool },
}

/// A Landlock ruleset ready for `landlock_restrict_self`; `None` where the
/// kernel has no Landlock.
pub fn landlock_ruleset(read: &[PathBuf], write: &[PathBuf], net: &NetRules) -> Result<Option<OwnedFd>, RulesetError> {
    let abi = ABI::V7;
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(abi))?;
    if let NetRules::Ports { deny_bind, .. } = net {
        let access = if *deny_bind { AccessNet::ConnectTcp | AccessNet::BindTcp } else { AccessNet::ConnectTcp.into() };
        ruleset = ruleset.handle_access(access)?;
    }
    let mut created = ruleset
        .create()?
        .add_rules(path_beneath_rules(read, AccessFs::from_read(abi)))?
        .add_rules(path_beneath_rules(write, AccessFs::from_all(abi)))?;
    if let NetRules::Ports { connect, .. } = net {
        for port in connect {
            created = created.add_rule(NetPort::new(*port, AccessNet::ConnectTcp))?;
        }
    }
    Ok(created.into())
}

/// System calls no MCP server needs, answered with EPERM: tracing other
/// processes, mounting, loading kernel code or modules, rebooting, swap,
/// the kernel keyring and raw kernel interfaces.
pub const DENIED_SYSCALLS: &[(&str, i64)] = &[
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("open_tree", libc::SYS_open_tree),
    ("move_mount", libc::SYS_move_mount),
    ("fsopen", libc::SYS_fsopen),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("bpf", libc::SYS_bpf),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("acct", libc::SYS_acct),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("keyctl", libc::SYS_keyctl),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
];

/// The seccomp program: every call in [`DENIED_SYSCALLS`] fails with EPERM,
/// everything else is allowed. Plain instructions (no pointers), so the
/// child can load them without allocating.
pub fn seccomp_program() -> Result<Vec<libc::sock_filter>, seccompiler::BackendError> {
    let rules = DENIED_SYSCALLS.iter().map(|(_, number)| (*number, Vec::new())).collect::<BTreeMap<_, _>>();
    let arch = std::env::consts::ARCH.try_into()?;
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)?;
    let program: seccompiler::BpfProgram = filter.try_into()?;
    Ok(program.into_iter().map(|i| libc::sock_filter { code: i.code, jt: i.jt, jf: i.jf, k: i.k }).collect())
}
