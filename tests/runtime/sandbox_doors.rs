//! The doors of a sandbox (issue 30): each probe of tests/fixtures/doors.py
//! runs as a real server process started by `stdio::spawn`, once without a
//! sandbox (the door is there: the attempt works) and once with one (it is
//! refused). UNIX sockets on disk, abstract sockets, signals to processes
//! outside, other processes' /proc, capabilities and device nodes,
//! /dev/shm left behind, descriptors inherited, and the system calls of
//! the kernel's attack surface.
//!
//! Needs root (CAP_SYS_ADMIN: namespaces), Landlock ABI >= 6 and
//! x86_64: the CI machine has them.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use mcpvisor::config::{Network, SandboxSpec, ServerConfig};
use mcpvisor::error::ExitInfo;
use mcpvisor::transport::stdio;
use tokio::io::AsyncReadExt;

const DOORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/doors.py");

/// Runs `doors.py probe args` in `cwd`, sandboxed by `spec` if given, and
/// returns its one line of output (`ok: ...` or `refused: ...`).
async fn probe(spec: Option<SandboxSpec>, cwd: &Path, probe: &str, args: &[&str]) -> String {
    let (out, exit) = attempt(spec, cwd, probe, args).await;
    assert!(exit.is_clean(), "{probe} {args:?}: {exit} {out}");
    out
}

/// As [`probe`], with the way the process ended.
async fn attempt(spec: Option<SandboxSpec>, cwd: &Path, probe: &str, args: &[&str]) -> (String, ExitInfo) {
    let argv: Vec<String> = [DOORS, probe].iter().chain(args).map(|s| s.to_string()).collect();
    let mut config = ServerConfig::stdio("doors", "python3", argv);
    config.cwd = Some(cwd.to_path_buf());
    config.sandbox = spec;
    let process = stdio::spawn(&config).unwrap_or_else(|e| panic!("{probe}: {e}"));
    let stdio::StdioProcess { stdin, mut stdout, mut stderr, exit, .. } = process;
    drop(stdin);
    let (mut out, mut err) = (String::new(), String::new());
    stdout.read_to_string(&mut out).await.unwrap();
    stderr.read_to_string(&mut err).await.unwrap();
    let exit = exit.wait().await;
    (format!("{}{}", out.trim(), err.trim()), exit)
}

fn sandbox(network: Network) -> Option<SandboxSpec> {
    Some(SandboxSpec { network, ..SandboxSpec::default() })
}

fn refused(outcome: &str, errno: &str) -> bool {
    outcome.starts_with(&format!("refused: [{errno}]"))
}

#[tokio::test]
async fn a_unix_socket_on_disk_is_out_of_reach_of_every_restricted_network() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let target = path.to_str().unwrap();
    let work = tempfile::tempdir().unwrap();
    assert_eq!(probe(None, work.path(), "unix-connect", &[target]).await, format!("ok: connected to {target}"));
    assert!(probe(sandbox(Network::Any), work.path(), "unix-connect", &[target]).await.starts_with("ok:"), "network = any");
    let allow = Network::Allow(vec!["127.0.0.1:443".into()]);
    for network in [Network::None, Network::Loopback, allow] {
        let outcome = probe(sandbox(network.clone()), work.path(), "unix-connect", &[target]).await;
        assert!(refused(&outcome, "EPERM"), "{network:?}: {outcome}");
        // A pair of connected sockets, as node and python make for their children, still works.
        assert_eq!(probe(sandbox(network), work.path(), "socketpair", &[]).await, "ok: socketpair carries x");
    }
}

#[tokio::test]
async fn an_abstract_socket_outside_the_sandbox_is_out_of_reach() {
    use std::os::linux::net::SocketAddrExt;
    let name = format!("mcpvisor-doors-{}", std::process::id());
    let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind_addr(&address).unwrap();
    let work = tempfile::tempdir().unwrap();
    assert_eq!(probe(None, work.path(), "abstract-connect", &[&name]).await, format!("ok: connected to @{name}"));
    // network = "any": no seccomp rule on sockets, the Landlock scope alone.
    let outcome = probe(sandbox(Network::Any), work.path(), "abstract-connect", &[&name]).await;
    assert!(refused(&outcome, "EPERM"), "{outcome}");
}

#[tokio::test]
async fn a_signal_to_a_process_outside_the_sandbox_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let mut sibling = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sibling.id().to_string();
    let ours = std::process::id().to_string();
    // Signal 0 asks only whether the signal would be allowed: safe to send to ourselves.
    assert!(refused(&probe(sandbox(Network::Any), work.path(), "kill", &[&ours, "0"]).await, "EPERM"));
    let outcome = probe(sandbox(Network::Any), work.path(), "kill", &[&pid, "9"]).await;
    assert!(refused(&outcome, "EPERM"), "{outcome}");
    assert!(sibling.try_wait().unwrap().is_none(), "the sibling survived");
    assert_eq!(probe(None, work.path(), "kill", &[&pid, "9"]).await, format!("ok: signal 9 sent to {pid}"));
    assert!(sibling.wait().unwrap().code().is_none(), "killed without a sandbox");
}

#[tokio::test]
async fn no_process_outside_the_sandbox_can_be_read_in_proc() {
    let work = tempfile::tempdir().unwrap();
    let pid = std::process::id();
    let files = ["environ", "cmdline", "maps", "status"].map(|f| format!("/proc/{pid}/{f}"));
    let fd = format!("/proc/{pid}/fd");
    for file in &files {
        assert!(probe(None, work.path(), "read", &[file]).await.starts_with("ok: read"), "{file} without a sandbox");
        let outcome = probe(sandbox(Network::Any), work.path(), "read", &[file]).await;
        assert!(refused(&outcome, "ENOENT"), "{file}: {outcome}");
    }
    assert!(probe(None, work.path(), "list", &[&fd]).await.starts_with("ok: listed"));
    assert!(refused(&probe(sandbox(Network::Any), work.path(), "list", &[&fd]).await, "ENOENT"));
    // Its own /proc works, as node and python need it.
    assert!(probe(sandbox(Network::Any), work.path(), "read", &["/proc/self/status"]).await.starts_with("ok: read"));
    assert!(probe(sandbox(Network::Any), work.path(), "list", &["/proc/self/fd"]).await.starts_with("ok: listed"));
}

#[tokio::test]
async fn a_sandboxed_root_has_no_capability_and_makes_no_device() {
    let work = tempfile::tempdir().unwrap();
    let open = probe(None, work.path(), "capabilities", &[]).await;
    assert!(!open.contains("CapEff:0000000000000000"), "root keeps its capabilities without a sandbox: {open}");
    let boxed = probe(sandbox(Network::Any), work.path(), "capabilities", &[]).await;
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(boxed.contains(&format!("{set}:0000000000000000")), "{set}: {boxed}");
    }
    let device = |name: &str| work.path().join(name).to_str().unwrap().to_string();
    assert_eq!(probe(None, work.path(), "mknod", &[&device("open")]).await, "ok: made a block device");
    let outcome = probe(sandbox(Network::Any), work.path(), "mknod", &[&device("boxed")]).await;
    assert!(refused(&outcome, "EPERM") && !work.path().join("boxed").exists(), "{outcome}");
}

#[tokio::test]
async fn dev_shm_is_private_and_bounded_by_the_memory_limit() {
    let work = tempfile::tempdir().unwrap();
    let name = |who: &str| PathBuf::from(format!("/dev/shm/mcpvisor-doors-{who}-{}", std::process::id()));
    let (open, boxed) = (name("open"), name("boxed"));
    assert_eq!(probe(None, work.path(), "shm-write", &[open.to_str().unwrap(), "1"]).await, "ok: wrote 1 MiB");
    assert!(open.exists(), "without a sandbox, a file in /dev/shm outlives its process");
    std::fs::remove_file(&open).unwrap();
    assert_eq!(probe(sandbox(Network::Any), work.path(), "shm-write", &[boxed.to_str().unwrap(), "1"]).await, "ok: wrote 1 MiB");
    assert!(!boxed.exists(), "the sandbox's /dev/shm is its own, gone with it");
    let limited = SandboxSpec { memory: Some(32 << 20), ..SandboxSpec::default() };
    // The pages count against the memory limit: the kernel kills the writer
    // (or the tmpfs, as large as the limit, fills first).
    let (outcome, exit) = attempt(Some(limited), work.path(), "shm-write", &[boxed.to_str().unwrap(), "64"]).await;
    assert!(exit.signal == Some(libc::SIGKILL) || refused(&outcome, "ENOSPC"), "64 MiB in /dev/shm under 32 MiB: {exit} {outcome}");
    assert!(!boxed.exists());
}

#[tokio::test]
async fn a_descriptor_we_leak_reaches_no_server() {
    // A descriptor without close-on-exec, as an embedding program may leave one.
    // SAFETY: open returns a new descriptor that the OwnedFd below owns.
    let leaked = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY) };
    assert!(leaked > 2);
    // SAFETY: a new descriptor owned by nothing else.
    let leaked = unsafe { OwnedFd::from_raw_fd(leaked) };
    let number = leaked.as_raw_fd().to_string();
    let inherited = std::process::Command::new("python3").args([DOORS, "fd", &number]).output().unwrap();
    assert!(String::from_utf8_lossy(&inherited.stdout).starts_with("ok: descriptor"), "a plain fork and exec inherits it");
    let work = tempfile::tempdir().unwrap();
    for spec in [None, sandbox(Network::Any)] {
        let outcome = probe(spec.clone(), work.path(), "fd", &[&number]).await;
        assert!(refused(&outcome, "EBADF"), "sandboxed: {}: {outcome}", spec.is_some());
    }
}

#[tokio::test]
async fn the_kernels_attack_surface_is_refused_by_seccomp() {
    let work = tempfile::tempdir().unwrap();
    for door in ["io_uring", "setns", "unshare", "fsopen"] {
        assert!(probe(None, work.path(), door, &[]).await.starts_with("ok:"), "{door} works without a sandbox");
        let outcome = probe(sandbox(Network::Any), work.path(), door, &[]).await;
        assert!(refused(&outcome, "EPERM"), "{door}: {outcome}");
    }
    // x32 numbers: ENOSYS from a kernel without x32, EPERM from the filter.
    let open = probe(None, work.path(), "x32-getpid", &[]).await;
    assert!(!refused(&open, "EPERM"), "{open}");
    assert!(refused(&probe(sandbox(Network::Any), work.path(), "x32-getpid", &[]).await, "EPERM"));
}

#[tokio::test]
async fn a_required_allow_list_refuses_to_start_naming_the_hosts_it_cannot_enforce() {
    let allow = Network::Allow(vec!["api.github.com:443".into()]);
    let mut config = ServerConfig::stdio("listed", "python3", [DOORS, "socketpair"]);
    config.sandbox = Some(SandboxSpec { network: allow.clone(), required: true, ..SandboxSpec::default() });
    let refused = stdio::spawn(&config).err().expect("a required allow-list refuses to start").to_string();
    assert!(refused.contains("required = true") && refused.contains("api.github.com:443 are not enforced"), "{refused}");
    // Best effort: it starts, and says what it does not enforce.
    config.sandbox = sandbox(allow);
    let process = stdio::spawn(&config).unwrap();
    let gaps = process.sandbox.as_ref().unwrap().gaps.join("; ");
    assert!(gaps.contains("api.github.com:443 are not enforced"), "{gaps}");
    assert!(process.exit.wait().await.is_clean());
}

#[tokio::test]
async fn configuration_files_and_git_stay_read_only_under_a_writable_working_directory() {
    // A cloned repository as the server's working directory: every tool's project files, and .git.
    let project = tempfile::tempdir().unwrap();
    let root = project.path();
    for dir in [".git/hooks", ".vscode", "src"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::write(root.join(".mcp.json"), "{}").unwrap();
    std::fs::write(root.join(".mcpvisor.toml"), "").unwrap();
    let hostile = r#"{"mcpServers": {"x": {"command": "sh", "args": ["-c", "id > /tmp/owned"]}}}"#;
    let attempts: [(&str, &str); 4] = [
        (".mcp.json", hostile),
        (".mcpvisor.toml", "[servers.x]\ncommand = \"sh\"\n"),
        (".vscode/mcp.json", hostile),
        (".git/hooks/post-checkout", "#!/bin/sh\nid > /tmp/owned\n"),
    ];
    for (file, text) in attempts {
        let path = root.join(file);
        let path = path.to_str().unwrap();
        let outcome = probe(sandbox(Network::Any), root, "write", &[path, text]).await;
        assert!(refused(&outcome, "EROFS"), "{file}: {outcome}");
    }
    let ordinary = root.join("src/notes.txt");
    let outcome = probe(sandbox(Network::Any), root, "write", &[ordinary.to_str().unwrap(), "fine"]).await;
    assert!(outcome.starts_with("ok:"), "the rest of the working directory is writable: {outcome}");
    assert_eq!(std::fs::read_to_string(root.join(".mcp.json")).unwrap(), "{}", "the file is unchanged");

    // Without a sandbox, the door: the same writes go through.
    for (file, text) in attempts {
        let path = root.join(file);
        let outcome = probe(None, root, "write", &[path.to_str().unwrap(), text]).await;
        assert!(outcome.starts_with("ok:"), "{file} without a sandbox: {outcome}");
    }
}
