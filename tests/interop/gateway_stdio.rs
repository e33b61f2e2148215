//! The reference SDK clients connected to `mcpvisor serve` over stdio in
//! front of two demo servers: the Python SDK (`mcp` 2.x,
//! tests/interop/gateway_client.py) and the TypeScript SDK
//! (`@modelcontextprotocol/sdk`, tests/interop/gateway_client.mjs). Each
//! covers tools, progress, prompts, completion, resources and a
//! subscription, logs, sampling, elicitation and roots round trips, an
//! unknown tool, cancellation, and list_changed after an upstream is
//! SIGKILLed. tests/interop/era_logs_client.py checks logs and progress
//! across the eras, in front of a Python server of each SDK line (1.x in
//! the handshake era, 2.x at 2026-07-28): a handshake-era client of either
//! line, and the 2.x client at 2026-07-28.
//!
//! `#[ignore]`d like tests/interop/servers_stdio.rs: `.ci/run` runs them with
//! `MCPVISOR_INTEROP=1 cargo test --test interop gateway_stdio:: -- --ignored`,
//! after `.ci/interop-setup` installed the SDKs (the Python of the `py`
//! server; the TypeScript SDK in `DIR/ts-client`).

use crate::interop_support;

use std::path::{Path, PathBuf};

use crate::gateway_support::{demo_table, BIN};

/// Runs `program script args... BIN CONFIG` in front of two demo servers
/// and checks it ends with `ok N checks`.
fn run_client(program: &str, script: &str, args: &[&str]) {
    run_client_of(&[demo_table("demo", &[]), demo_table("other", &[])].concat(), program, script, args);
}

/// [`run_client`] with CONFIG holding `servers`.
fn run_client_of(servers: &str, program: &str, script: &str, args: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("servers.toml");
    std::fs::write(&config, servers).unwrap();
    let script = interop_script(script);
    // The gateway's default audit log goes to the test's directory, not the user's.
    let output = std::process::Command::new(program)
        .arg(script)
        .args(args)
        .arg(BIN)
        .arg(&config)
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .output()
        .expect("the client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the client failed:\n{stdout}\n{stderr}");
    assert!(stdout.lines().last().is_some_and(|line| line.starts_with("ok ") && line.ends_with(" checks")), "{stdout}");
}

fn interop_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop").join(name)
}

#[test]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
fn the_python_sdk_client_uses_the_gateway() {
    run_client(&interop_support::installed("py").command, "gateway_client.py", &[]);
}

#[test]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
fn the_typescript_sdk_client_uses_the_gateway() {
    let node = interop_support::installed("everything").command;
    let dir = std::env::var("MCPVISOR_INTEROP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/mcpvisor-interop"));
    let sdk = dir.join("ts-client/node_modules/@modelcontextprotocol/sdk");
    assert!(sdk.join("package.json").exists(), "{} is missing: run .ci/interop-setup {} again", sdk.display(), dir.display());
    run_client(&node, "gateway_client.mjs", &[&sdk.to_string_lossy()]);
}

/// tests/interop/era_logs_client.py's two servers over stdio: `py1` on the
/// Python SDK's 1.x line (handshake era), `py2` on its 2.x line (2026-07-28);
/// with the Python of each SDK line (1.x, 2.x).
fn era_servers() -> (String, String, String) {
    let (sdk1, sdk2) = (interop_support::installed("fastmcp-http").command, interop_support::installed("py").command);
    let table = |name: &str, python: &str, script: &str, args: &[&str]| {
        let args: Vec<String> = std::iter::once(interop_script(script).display().to_string())
            .chain(args.iter().map(|arg| arg.to_string()))
            .map(|arg| format!("{arg:?}"))
            .collect();
        format!("[servers.{name}]\ncommand = {python:?}\nargs = [{}]\n", args.join(", "))
    };
    let servers = table("py1", &sdk1, "fastmcp_server.py", &["stdio"]) + &table("py2", &sdk2, "modern_server.py", &[]);
    (servers, sdk1, sdk2)
}

#[test]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
fn a_handshake_era_python_sdk_1x_client_hears_logs_and_progress_of_both_eras() {
    let (servers, sdk1, _) = era_servers();
    run_client_of(&servers, &sdk1, "era_logs_client.py", &["handshake"]);
}

#[test]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
fn a_handshake_era_python_sdk_2x_client_hears_logs_and_progress_of_both_eras() {
    let (servers, _, sdk2) = era_servers();
    run_client_of(&servers, &sdk2, "era_logs_client.py", &["handshake"]);
}

#[test]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
fn a_2026_python_sdk_client_hears_logs_and_progress_of_both_eras() {
    let (servers, _, sdk2) = era_servers();
    run_client_of(&servers, &sdk2, "era_logs_client.py", &["2026"]);
}
