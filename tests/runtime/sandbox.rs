//! Sandboxed servers (crates/services/src/sandbox/): a hostile fixture server
//! (tests/fixtures/hostile_server.py) tries to read and write outside its
//! paths, reach a loopback port with `network = "none"`, fork 1,000
//! processes under `processes = 64`, allocate 4 GB under
//! `memory = "512MiB"` and call ptrace. Each attempt is blocked, and the
//! runtime (and, but for the memory case, the server) stays healthy. Each
//! case also runs unsandboxed to show the attempt would succeed without it.
//!
//! Needs Landlock ABI >= 4, root (network namespace) and writable memory
//! and pids cgroups: the CI machine has them.

use std::path::Path;

use crate::common::*;
use mcpvisor::config::{Network, SandboxSpec, ServerConfig};
use mcpvisor::restart::RestartPolicy;
use mcpvisor::{CallError, CallTool, Handle, ServerState};
use serde_json::{json, Value};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hostile_server.py");

/// The hostile server in working directory `cwd`, sandboxed by `spec` if given.
fn hostile(name: &str, cwd: &Path, spec: Option<SandboxSpec>) -> ServerConfig {
    let mut config = ServerConfig::stdio(name, "python3", [FIXTURE]);
    config.cwd = Some(cwd.to_path_buf());
    config.restart = RestartPolicy::Never;
    config.sandbox = spec;
    config
}

/// The tool's text, or the error's text.
async fn attempt(handle: &Handle, server: &str, tool: &str, arguments: Value) -> String {
    match handle.call(CallTool::new(format!("mcp__{server}__{tool}"), arguments)).await {
        Ok(result) => text(&result),
        Err(error) => format!("error: {error}"),
    }
}

/// The sandboxed server still answers.
async fn still_healthy(handle: &Handle, server: &str) {
    assert_eq!(status_of(handle, server).await.state, ServerState::Connected);
    assert_eq!(attempt(handle, server, "echo", json!({"text": "alive"})).await, "alive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_and_writing_outside_its_paths_is_denied() {
    let (work, elsewhere) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let secret = elsewhere.path().join("secret.txt");
    std::fs::write(&secret, "s3cret").unwrap();
    std::fs::write(work.path().join("mine.txt"), "mine").unwrap();
    let handle = start(vec![hostile("boxed", work.path(), Some(SandboxSpec::default())), hostile("open", work.path(), None)]).await;

    let read = json!({"path": secret});
    assert_eq!(attempt(&handle, "open", "read", read.clone()).await, "read: s3cret");
    let denied = attempt(&handle, "boxed", "read", read).await;
    assert!(denied.contains("Permission denied"), "{denied}");
    assert_eq!(attempt(&handle, "boxed", "read", json!({"path": work.path().join("mine.txt")})).await, "read: mine");

    let outside = elsewhere.path().join("dropped.txt");
    let denied = attempt(&handle, "boxed", "write", json!({"path": outside})).await;
    assert!(denied.contains("Permission denied") && !outside.exists(), "{denied}");
    let inside = work.path().join("out.txt");
    assert!(attempt(&handle, "boxed", "write", json!({"path": inside})).await.starts_with("wrote"));
    assert!(inside.exists());

    let status = status_of(&handle, "boxed").await;
    assert!(status.stderr_tail.iter().any(|l| l.contains("Permission denied")), "the server's own EACCES text: {:?}", status.stderr_tail);
    let sandbox = status.sandbox.expect("a sandboxed server reports its sandbox");
    assert!(sandbox.achieved.starts_with("landlock v") && sandbox.achieved.contains(": filesystem;"), "{}", sandbox.achieved);
    assert!(status_of(&handle, "open").await.sandbox.is_none());
    still_healthy(&handle, "boxed").await;
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_none_cannot_reach_a_loopback_port() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let work = tempfile::tempdir().unwrap();
    let none = SandboxSpec { network: Network::None, ..SandboxSpec::default() };
    let handle =
        start(vec![hostile("offline", work.path(), Some(none)), hostile("online", work.path(), Some(SandboxSpec::default()))]).await;
    let target = json!({"port": port});
    assert_eq!(attempt(&handle, "online", "connect", target.clone()).await, format!("connected to 127.0.0.1:{port}"));
    let refused = attempt(&handle, "offline", "connect", target).await;
    assert!(refused.starts_with("refused"), "{refused}");
    let achieved = status_of(&handle, "offline").await.sandbox.unwrap().achieved;
    assert!(achieved.contains("filesystem + network") && achieved.contains("network: none"), "{achieved}");
    still_healthy(&handle, "offline").await;
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allow_list_lets_its_ports_through_and_loopback_is_the_servers_own() {
    let (allowed, other) = (std::net::TcpListener::bind("127.0.0.1:0").unwrap(), std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    let (allowed, other) = (allowed.local_addr().unwrap().port(), other.local_addr().unwrap().port());
    let work = tempfile::tempdir().unwrap();
    let listed = SandboxSpec { network: Network::Allow(vec![format!("127.0.0.1:{allowed}")]), ..SandboxSpec::default() };
    let private = SandboxSpec { network: Network::Loopback, ..SandboxSpec::default() };
    let handle = start(vec![hostile("listed", work.path(), Some(listed)), hostile("private", work.path(), Some(private))]).await;
    assert_eq!(attempt(&handle, "listed", "connect", json!({"port": allowed})).await, format!("connected to 127.0.0.1:{allowed}"));
    let refused = attempt(&handle, "listed", "connect", json!({"port": other})).await;
    assert!(refused.starts_with("refused"), "a port not on the list: {refused}");
    let achieved = status_of(&handle, "listed").await.sandbox.unwrap().achieved;
    assert!(achieved.contains(&allowed.to_string()), "status names the ports it enforces: {achieved}");
    // A private loopback: the host's listeners are not there.
    let host = attempt(&handle, "private", "connect", json!({"port": allowed})).await;
    assert!(host.starts_with("refused"), "the host's loopback is not the server's: {host}");
    still_healthy(&handle, "listed").await;
    still_healthy(&handle, "private").await;
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_forks_stop_at_the_process_limit() {
    let work = tempfile::tempdir().unwrap();
    let limited = SandboxSpec { processes: Some(64), ..SandboxSpec::default() };
    let handle = start(vec![hostile("forker", work.path(), Some(limited))]).await;
    let outcome = attempt(&handle, "forker", "fork", json!({"count": 1000})).await;
    let forked: usize = outcome.strip_prefix("forked ").and_then(|r| r.split(',').next()?.parse().ok()).expect(&outcome);
    assert!(forked < 64 && outcome.contains("refused"), "{outcome}");
    let achieved = status_of(&handle, "forker").await.sandbox.unwrap().achieved;
    assert!(achieved.contains("64 processes"), "{achieved}");
    still_healthy(&handle, "forker").await;
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_gigabytes_under_a_512mib_limit_end_the_server_and_name_the_limit() {
    let work = tempfile::tempdir().unwrap();
    let limited = SandboxSpec { memory: Some(512 << 20), ..SandboxSpec::default() };
    let handle = start(vec![hostile("hog", work.path(), Some(limited)), hostile("neighbour", work.path(), None)]).await;
    match handle.call(CallTool::new("mcp__hog__allocate", json!({"megabytes": 4096}))).await {
        Err(CallError::ServerExited { exit, .. }) => assert_eq!(exit.signal, Some(libc::SIGKILL), "{exit:?}"),
        other => panic!("expected the server to be killed, got {other:?}"),
    }
    let status = wait_status(&handle, "hog", |s| matches!(s.state, ServerState::Failed { .. })).await;
    let named = "sandbox: its memory limit (512MiB) was reached";
    assert!(status.stderr_tail.iter().any(|l| l.starts_with(named)), "{:?}", status.stderr_tail);
    assert!(status.sandbox.unwrap().violation.unwrap().starts_with(named));
    // The runtime and its other servers carry on.
    still_healthy(&handle, "neighbour").await;
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seccomp_refuses_ptrace() {
    let work = tempfile::tempdir().unwrap();
    let handle = start(vec![hostile("tracer", work.path(), Some(SandboxSpec::default())), hostile("free", work.path(), None)]).await;
    assert_eq!(attempt(&handle, "free", "ptrace", json!({})).await, "ptrace allowed");
    assert_eq!(attempt(&handle, "tracer", "ptrace", json!({})).await, "ptrace refused: Operation not permitted");
    still_healthy(&handle, "tracer").await;
    handle.shutdown().await;
}

/// `run_command` under `[agent.sandbox]`: the shell's output for `command`.
async fn run(handle: &Handle, command: &str) -> String {
    attempt(handle, "builtin", "run_command", json!({ "command": command })).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_command_is_held_by_the_agent_sandbox() {
    use mcpvisor::builtin_tools::{self, BuiltinSettings};
    let (work, elsewhere) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let secret = elsewhere.path().join("secret.txt");
    std::fs::write(&secret, "s3cret").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let spec = SandboxSpec { network: Network::None, processes: Some(64), memory: Some(512 << 20), ..SandboxSpec::default() };
    let settings = BuiltinSettings { command_sandbox: Some(spec), ..BuiltinSettings::new(work.path()) };
    let handle = start_in_process(vec![builtin_tools::server(settings)], vec![]).await;

    let read = run(&handle, &format!("cat {}", secret.display())).await;
    assert!(read.contains("Permission denied") && !read.contains("s3cret"), "{read}");
    let write = run(&handle, &format!("echo x > {}/dropped", elsewhere.path().display())).await;
    assert!(write.contains("Permission denied") && !elsewhere.path().join("dropped").exists(), "{write}");
    assert!(run(&handle, "echo mine > mine.txt && cat mine.txt").await.contains("mine"));
    let connect = format!("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=2)'");
    assert!(run(&handle, &connect).await.contains("Error"), "a connection to a loopback port must fail");
    let forks = "python3 -c '\nimport os, time\nn = 0\ntry:\n    for _ in range(1000):\n        if os.fork() == 0:\n            time.sleep(30); os._exit(0)\n        n += 1\nexcept OSError as e:\n    print(\"forked\", n, \"refused:\", e)\n'";
    let forked = run(&handle, forks).await;
    assert!(forked.contains("refused: [Errno 11]"), "{forked}");
    let hog = run(&handle, "python3 -c 'b = b\"x\" * (4 << 30)'").await;
    assert!(hog.contains("[sandbox: its memory limit (512MiB) was reached"), "{hog}");
    // The agent's tools carry on.
    assert!(run(&handle, "echo still here").await.contains("still here"));
    handle.shutdown().await;
}

/// `mcpvisor status --json` of `config`, run with CAP_SYS_ADMIN dropped
/// (util-linux's `setpriv`), so a network namespace cannot be made.
fn status_without_sys_admin(config: &Path) -> Value {
    let output = std::process::Command::new("setpriv")
        .args(["--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", env!("CARGO_BIN_EXE_mcpvisor"), "--config"])
        .arg(config)
        .args(["status", "--json"])
        .output()
        .expect("setpriv (util-linux) runs");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)))
}

#[test]
fn a_required_sandbox_the_process_cannot_enforce_refuses_to_start_and_a_best_effort_one_names_its_gap() {
    let dir = tempfile::tempdir().unwrap();
    let table = |required: bool| {
        format!(
            "[servers.demo]\ncommand = {:?}\nargs = [\"demo-server\"]\n\n[servers.demo.sandbox]\nnetwork = \"loopback\"\nrequired = {required}\n",
            env!("CARGO_BIN_EXE_mcpvisor")
        )
    };
    let required = dir.path().join("required.toml");
    std::fs::write(&required, table(true)).unwrap();
    let status = status_without_sys_admin(&required);
    let demo = &status[0];
    assert_eq!(demo["state"], "failed", "{demo}");
    let error = demo.to_string();
    assert!(error.contains("required = true") && error.contains("CAP_SYS_ADMIN"), "{error}");

    let best_effort = dir.path().join("best_effort.toml");
    std::fs::write(&best_effort, table(false)).unwrap();
    let status = status_without_sys_admin(&best_effort);
    let demo = &status[0];
    assert_eq!(demo["state"], "connected", "{demo}");
    let gaps = demo["sandbox"]["gaps"].to_string();
    assert!(gaps.contains("loopback"), "what could not be enforced is named: {demo}");
}
