//! What is left of servers once mcpvisor is gone: a descendant that left
//! its server's process group with `setsid`, a server that ignores EOF and
//! SIGTERM under a SIGKILLed mcpvisor, and how a bad working directory is
//! reported. Every test runs real processes (the CLI binary and a Python
//! fixture, `tests/processes/stubborn_server.py`).

use crate::cli_support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cli_support::Sandbox;
use crate::common::*;
use mcpvisor::config::ServerConfig;
use mcpvisor::ServerState;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/processes/stubborn_server.py");

/// A sandbox whose only server is the fixture with `flags`, writing into the returned directory.
fn stubborn(flags: &[&str]) -> (Sandbox, PathBuf) {
    let sandbox = Sandbox::new();
    let dir = sandbox.home.join("fixture");
    std::fs::create_dir_all(&dir).unwrap();
    let args: Vec<String> = [FIXTURE, dir.to_str().unwrap()].into_iter().chain(flags.iter().copied()).map(|a| format!("{a:?}")).collect();
    sandbox.write_user_file(&format!("[servers.stubborn]\ncommand = \"python3\"\nargs = [{}]\nera = \"legacy\"\n", args.join(", ")));
    (sandbox, dir)
}

/// Waits (at most 20 s) for the fixture to write `name`, and reads it.
fn wait_for_file(dir: &Path, name: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(text) = std::fs::read_to_string(dir.join(name)) {
            return text;
        }
        assert!(Instant::now() < deadline, "the fixture never wrote {name}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether `pid` is gone (or dead and waiting to be reaped) within 20 s.
fn ends(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        match alive(pid) {
            None => return true,
            Some(info) if info.state == 'Z' => return true,
            Some(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    false
}

/// Kills what a failed assertion would otherwise leave running.
struct KillOnDrop(Vec<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for pid in &self.0 {
            kill(*pid, libc::SIGKILL);
        }
    }
}

#[test]
fn a_descendant_that_left_its_group_with_setsid_does_not_outlive_the_cli() {
    let (sandbox, dir) = stubborn(&[]);
    let output = sandbox.std_cmd(["call", "stubborn", "spawn_detached"]).output().unwrap();
    assert!(output.status.success(), "{}", cli_support::stderr(&output));
    let detached: u32 = wait_for_file(&dir, "detached.pid").trim().parse().unwrap();
    let _cleanup = KillOnDrop(vec![detached]);
    assert_ne!(alive(detached).map(|p| p.pgrp), Some(wait_for_file(&dir, "server.pid").trim().parse().unwrap()));
    assert!(ends(detached), "the setsid descendant {detached} outlived the CLI: {:?}", alive(detached));
}

#[test]
fn a_server_ignoring_eof_and_sigterm_dies_with_a_sigkilled_cli() {
    let (sandbox, dir) = stubborn(&["--ignore-term", "--ignore-eof"]);
    let mut cli = sandbox.std_cmd(["call", "stubborn", "hang"]).stdout(std::process::Stdio::null()).spawn().unwrap();
    let server: u32 = wait_for_file(&dir, "server.pid").trim().parse().unwrap();
    let _cleanup = KillOnDrop(vec![server]);
    wait_for_file(&dir, "hanging");
    kill(cli.id(), libc::SIGKILL);
    cli.wait().unwrap();
    assert!(ends(server), "the server {server} outlived its SIGKILLed parent: {:?}", alive(server));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_working_directory_is_reported_as_such() {
    let mut config = demo("nowhere", &[]);
    config.cwd = Some("/nonexistent/mcpvisor-test-dir".into());
    let mut file = ServerConfig::stdio("file", env!("CARGO_BIN_EXE_mcpvisor"), ["demo-server"]);
    file.cwd = Some(FIXTURE.into());
    let handle = start(vec![config, file]).await;
    for (server, problem) in [("nowhere", "does not exist"), ("file", "is not a directory")] {
        let ServerState::Failed { error, .. } = status_of(&handle, server).await.state else { panic!("{server} did not fail") };
        assert!(error.contains("working directory") && error.contains(problem), "{error}");
        assert!(!error.contains("command not found"), "{error}");
    }
    handle.shutdown().await;
}

/// What an embedding program gets: mcpvisor waits only for its servers'
/// groups, so the program's own children keep their exit status for it,
/// and (without `end_orphans`) its own orphans survive a shutdown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedding_programs_own_children_and_orphans_are_left_to_it() {
    let handle = start(vec![demo("crasher", &[])]).await;
    let mut own = std::process::Command::new("sh").args(["-c", "exit 7"]).spawn().unwrap();
    let orphaner = std::process::Command::new("sh").args(["-c", "sleep 60 >/dev/null 2>&1 & echo $!"]).output().unwrap();
    let orphan: u32 = String::from_utf8_lossy(&orphaner.stdout).trim().parse().unwrap();
    let _cleanup = KillOnDrop(vec![orphan]);
    wait_status(&handle, "crasher", |_| alive(own.id()).is_some_and(|p| p.state == 'Z')).await;

    // A server exits and its group is reaped while our child waits, unreaped.
    let _ = handle.call_tool("mcp__crasher__crash", None).await;
    wait_connected_with_restarts(&handle, "crasher", 1).await;
    handle.shutdown().await;

    assert_eq!(own.wait().unwrap().code(), Some(7), "the program's child kept its exit status");
    assert!(alive(orphan).is_some_and(|p| p.state != 'Z'), "the program's orphan was ended: {:?}", alive(orphan));
}
