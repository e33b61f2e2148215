//! The seccomp filter of every sandbox, as plain BPF instructions built in
//! the parent (the child only loads them).
//!
//! Invariants:
//! - a system call of another architecture or ABI (i386 through `int 0x80`,
//!   x32 numbers with bit 30 set) never reaches the table below: the
//!   process is killed for a foreign architecture, an x32 number fails with
//!   EPERM;
//! - each refused call fails with EPERM (`clone3` with ENOSYS, so libc
//!   falls back to `clone`, whose flags the filter can read); everything
//!   else is allowed;
//! - arguments are compared on their low 32 bits, as the kernel reads them
//!   (`int` domain, `mode_t`, `unsigned int` ioctl request, and the
//!   namespace bits of the clone flags all sit there).

/// Why a system call is refused, as `status` and docs/security.md list them.
pub const DENIED_SYSCALLS: &[(&str, i64)] = &[
    // tracing and reading other processes
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("kcmp", libc::SYS_kcmp),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    // mounts, old and new API, and namespaces
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("open_tree", libc::SYS_open_tree),
    ("open_tree_attr", OPEN_TREE_ATTR),
    ("move_mount", libc::SYS_move_mount),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("setns", libc::SYS_setns),
    ("unshare", libc::SYS_unshare),
    // kernel code, modules, the machine
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
    ("quotactl", libc::SYS_quotactl),
    ("quotactl_fd", libc::SYS_quotactl_fd),
    ("syslog", libc::SYS_syslog),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    // raw kernel interfaces with a history of escapes
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("keyctl", libc::SYS_keyctl),
    #[cfg(target_arch = "x86_64")]
    ("iopl", libc::SYS_iopl),
    #[cfg(target_arch = "x86_64")]
    ("ioperm", libc::SYS_ioperm),
    #[cfg(target_arch = "x86_64")]
    ("modify_ldt", libc::SYS_modify_ldt),
    #[cfg(target_arch = "x86_64")]
    ("uselib", libc::SYS_uselib),
];

/// `open_tree_attr` (Linux 6.15), the same number on every architecture.
const OPEN_TREE_ATTR: i64 = 467;

/// Calls refused only with some arguments, for `status` and the docs.
pub const DENIED_WITH_ARGUMENTS: &str = "clone of namespaces, mknod of devices, ioctl TIOCSTI/TIOCLINUX";

/// Every namespace flag of `clone` and `unshare` (`CLONE_NEWTIME` only for
/// `unshare`: in `clone`'s flags that bit is part of the exit signal).
const NAMESPACES: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
/// x32 system calls are x86_64's with this bit set.
#[cfg(target_arch = "x86_64")]
const X32_BIT: u32 = 0x4000_0000;

const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_ALLOW: u32 = 0x7fff_0000;

// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
fn arg(index: u32) -> u32 {
    16 + 8 * index
}

/// What the filter adds to the plain list, by network rule.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Refuse `socket(AF_UNIX, ...)` (`socketpair` stays allowed): the
    /// UNIX sockets on disk are outside any network rule otherwise.
    pub deny_unix_sockets: bool,
}

/// Whether this architecture has a filter (else the sandbox names a gap).
pub const SUPPORTED: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

/// The program, or `None` on an architecture without a filter.
pub fn program(options: Options) -> Option<Vec<libc::sock_filter>> {
    if !SUPPORTED {
        return None;
    }
    let mut p = Program::default();
    p.load(ARCH);
    p.jump(libc::BPF_JEQ, AUDIT_ARCH, 1, 0);
    p.ret(RET_KILL_PROCESS);
    p.load(NR);
    #[cfg(target_arch = "x86_64")]
    {
        p.jump(libc::BPF_JGE, X32_BIT, 0, 1);
        p.ret(RET_ERRNO | libc::EPERM as u32);
    }
    for (_, number) in DENIED_SYSCALLS {
        p.deny(*number, libc::EPERM);
    }
    p.deny(libc::SYS_clone3, libc::ENOSYS);
    // clone(flags, ...) and unshare(flags) with a namespace bit.
    p.deny_if(libc::SYS_clone, 0, &[Test::AnyBit(NAMESPACES)]);
    p.deny_if(libc::SYS_unshare, 0, &[Test::AnyBit(NAMESPACES | libc::CLONE_NEWTIME as u32)]);
    // Device nodes: mknod(path, mode, dev) and mknodat(dirfd, path, mode, dev).
    let devices = [Test::Masked(libc::S_IFMT, libc::S_IFCHR), Test::Masked(libc::S_IFMT, libc::S_IFBLK)];
    #[cfg(target_arch = "x86_64")]
    p.deny_if(libc::SYS_mknod, 1, &devices);
    p.deny_if(libc::SYS_mknodat, 2, &devices);
    // Typing into the terminal mcpvisor runs in, through /dev/tty.
    p.deny_if(libc::SYS_ioctl, 1, &[Test::Equal(libc::TIOCSTI as u32), Test::Equal(libc::TIOCLINUX as u32)]);
    if options.deny_unix_sockets {
        p.deny_if(libc::SYS_socket, 0, &[Test::Equal(libc::AF_UNIX as u32)]);
    }
    p.ret(RET_ALLOW);
    Some(p.0)
}

/// A test on one argument's low 32 bits.
enum Test {
    Equal(u32),
    /// `(arg & mask) == value`.
    Masked(u32, u32),
    /// `arg & mask != 0`.
    AnyBit(u32),
}

#[derive(Default)]
struct Program(Vec<libc::sock_filter>);

impl Program {
    fn push(&mut self, code: u32, k: u32, jt: u8, jf: u8) {
        self.0.push(libc::sock_filter { code: code as u16, jt, jf, k });
    }

    fn load(&mut self, offset: u32) {
        self.push(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, offset, 0, 0);
    }

    fn jump(&mut self, op: u32, k: u32, jt: u8, jf: u8) {
        self.push(libc::BPF_JMP | op | libc::BPF_K, k, jt, jf);
    }

    fn ret(&mut self, value: u32) {
        self.push(libc::BPF_RET | libc::BPF_K, value, 0, 0);
    }

    /// `nr == number` → errno. Expects the number in A; leaves it there.
    fn deny(&mut self, number: i64, errno: i32) {
        self.jump(libc::BPF_JEQ, number as u32, 0, 1);
        self.ret(RET_ERRNO | errno as u32);
    }

    /// `nr == number` and any of `tests` on argument `index` → EPERM, else
    /// allowed. Expects the number in A; leaves it there when `nr` differs.
    fn deny_if(&mut self, number: i64, index: u32, tests: &[Test]) {
        let mut body = Program::default();
        body.load(arg(index));
        for test in tests {
            // Each test ends in `deny` when it holds, else falls through to the next.
            match *test {
                Test::Equal(value) => body.jump(libc::BPF_JEQ, value, 0, 1),
                Test::AnyBit(mask) => body.jump(libc::BPF_JSET, mask, 0, 1),
                Test::Masked(mask, value) => {
                    body.push(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K, mask, 0, 0);
                    body.jump(libc::BPF_JEQ, value, 0, 2);
                    body.ret(RET_ERRNO | libc::EPERM as u32);
                    body.load(arg(index));
                    continue;
                }
            }
            body.ret(RET_ERRNO | libc::EPERM as u32);
        }
        body.ret(RET_ALLOW);
        let skip = u8::try_from(body.0.len()).expect("a rule of a few instructions");
        self.jump(libc::BPF_JEQ, number as u32, 0, skip);
        self.0.extend(body.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the program on one call, as the kernel would (the subset of
    /// BPF the builder emits).
    fn run(program: &[libc::sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let word = |offset: u32| -> u32 {
            match offset {
                NR => nr,
                ARCH => arch,
                o => {
                    let index = ((o - 16) / 8) as usize;
                    (args[index] >> (if (o - 16) % 8 == 0 { 0 } else { 32 })) as u32
                }
            }
        };
        let (mut pc, mut a) = (0usize, 0u32);
        loop {
            let i = program[pc];
            let code = i.code as u32;
            pc += 1;
            match code & 0x07 {
                c if c == libc::BPF_LD => a = word(i.k),
                c if c == libc::BPF_ALU => a &= i.k,
                c if c == libc::BPF_RET => return i.k,
                _ => {
                    let taken = match code & 0xf0 {
                        op if op == libc::BPF_JEQ => a == i.k,
                        op if op == libc::BPF_JGE => a >= i.k,
                        op if op == libc::BPF_JSET => a & i.k != 0,
                        op => panic!("unexpected jump {op:#x}"),
                    };
                    pc += if taken { i.jt } else { i.jf } as usize;
                }
            }
        }
    }

    #[test]
    // The ioctl request type is c_ulong here and c_int on other libcs.
    #[allow(clippy::unnecessary_cast)]
    fn the_filter_refuses_what_it_lists_and_allows_the_rest() {
        let program = program(Options { deny_unix_sockets: true }).unwrap();
        let call = |nr: i64, args: [u64; 6]| run(&program, AUDIT_ARCH, nr as u32, args);
        let eperm = RET_ERRNO | libc::EPERM as u32;
        assert_eq!(call(libc::SYS_getpid, [0; 6]), RET_ALLOW);
        for (name, nr) in DENIED_SYSCALLS {
            assert_eq!(call(*nr, [0; 6]), eperm, "{name}");
        }
        assert_eq!(call(libc::SYS_clone3, [0; 6]), RET_ERRNO | libc::ENOSYS as u32);
        assert_eq!(call(libc::SYS_clone, [libc::SIGCHLD as u64, 0, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(call(libc::SYS_clone, [(libc::CLONE_NEWUSER | libc::SIGCHLD) as u64, 0, 0, 0, 0, 0]), eperm);
        let device = |kind: u32| [0, 0, (kind | 0o600) as u64, 0, 0, 0];
        assert_eq!(call(libc::SYS_mknodat, device(libc::S_IFCHR)), eperm);
        assert_eq!(call(libc::SYS_mknodat, device(libc::S_IFBLK)), eperm);
        assert_eq!(call(libc::SYS_mknodat, device(libc::S_IFIFO)), RET_ALLOW);
        // The kernel reads the request as 32 bits: high bits do not hide it.
        assert_eq!(call(libc::SYS_ioctl, [0, (1 << 32) | libc::TIOCSTI as u64, 0, 0, 0, 0]), eperm);
        assert_eq!(call(libc::SYS_ioctl, [0, libc::TIOCGWINSZ as u64, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(call(libc::SYS_socket, [libc::AF_UNIX as u64, 1, 0, 0, 0, 0]), eperm);
        assert_eq!(call(libc::SYS_socket, [libc::AF_INET as u64, 1, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(call(libc::SYS_socketpair, [libc::AF_UNIX as u64, 1, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(run(&program, 0x4000_0003, libc::SYS_getpid as u32, [0; 6]), RET_KILL_PROCESS, "i386");
        #[cfg(target_arch = "x86_64")]
        assert_eq!(run(&program, AUDIT_ARCH, X32_BIT | libc::SYS_getpid as u32, [0; 6]), eperm, "x32");
        let open = program_without_unix();
        assert_eq!(run(&open, AUDIT_ARCH, libc::SYS_socket as u32, [libc::AF_UNIX as u64, 1, 0, 0, 0, 0]), RET_ALLOW);
    }

    fn program_without_unix() -> Vec<libc::sock_filter> {
        program(Options { deny_unix_sockets: false }).unwrap()
    }
}
