//! The kernel's parts of a sandbox that are built in the parent before
//! the clone: a Landlock ruleset (as a file descriptor), what the kernel
//! offers (Landlock ABI, its version, our capabilities).

use std::os::fd::OwnedFd;
use std::path::PathBuf;

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, BitFlags, NetPort, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError, Scope, ABI,
};

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
/// Landlock ABI from which signals and abstract UNIX sockets are scoped.
pub const LANDLOCK_SCOPE_ABI: i64 = 6;
/// The newest ABI this code asks for; older kernels get what they have.
const ABI_WANTED: ABI = ABI::V7;

/// What a ruleset restricts on the network.
pub enum NetRules {
    /// Nothing (`network = "any"`).
    Unhandled,
    /// TCP connect to these ports only; bind is denied when `deny_bind`.
    Ports { connect: Vec<u16>, deny_bind: bool },
}

/// Rights on a readable path.
pub fn read_rights() -> BitFlags<AccessFs> {
    AccessFs::from_read(ABI_WANTED)
}

/// Rights on a writable path: everything but making device nodes.
pub fn write_rights() -> BitFlags<AccessFs> {
    AccessFs::from_all(ABI_WANTED) & !(AccessFs::MakeBlock | AccessFs::MakeChar)
}

/// Rights the ruleset handles (denied wherever no rule grants them).
fn handled_rights() -> BitFlags<AccessFs> {
    AccessFs::from_all(ABI_WANTED)
}

/// The handled rights this kernel knows, as `landlock_add_rule` accepts
/// them (a rule naming a right the ruleset does not handle is refused).
pub fn known_rights(rights: BitFlags<AccessFs>, abi: i64) -> u64 {
    let known = match abi {
        0 => BitFlags::empty(),
        abi => AccessFs::from_all(ABI::from(abi as i32)),
    };
    (rights & known).bits()
}

/// A Landlock ruleset ready for `landlock_restrict_self`, signals and
/// abstract UNIX sockets scoped to the sandbox where the kernel can;
/// `None` where the kernel has no Landlock.
pub fn landlock_ruleset(read: &[PathBuf], write: &[PathBuf], net: &NetRules) -> Result<Option<OwnedFd>, RulesetError> {
    let mut ruleset = Ruleset::default().handle_access(handled_rights())?.scope(Scope::from_all(ABI_WANTED))?;
    if let NetRules::Ports { deny_bind, .. } = net {
        let access = if *deny_bind { AccessNet::ConnectTcp | AccessNet::BindTcp } else { AccessNet::ConnectTcp.into() };
        ruleset = ruleset.handle_access(access)?;
    }
    let mut created =
        ruleset.create()?.add_rules(path_beneath_rules(read, read_rights()))?.add_rules(path_beneath_rules(write, write_rights()))?;
    if let NetRules::Ports { connect, .. } = net {
        for port in connect {
            created = created.add_rule(NetPort::new(*port, AccessNet::ConnectTcp))?;
        }
    }
    Ok(created.into())
}

/// This process's effective capabilities (`CapEff` of /proc/self/status).
pub fn effective_capabilities() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok()).unwrap_or(0)
}

/// The highest capability number this kernel knows.
pub fn last_capability() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(63)
}

/// The running kernel's (major, minor) version, from `uname`.
pub fn kernel_version() -> (u32, u32) {
    // SAFETY: uname fills the zeroed struct it is given.
    let release = unsafe {
        let mut name: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut name) != 0 {
            return (0, 0);
        }
        std::ffi::CStr::from_ptr(name.release.as_ptr()).to_string_lossy().into_owned()
    };
    let mut numbers = release.split(|c: char| !c.is_ascii_digit()).map(|n| n.parse().unwrap_or(0));
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
}
