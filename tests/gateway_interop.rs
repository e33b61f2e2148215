//! The reference Python SDK client (`mcp` 2.x, tests/interop/gateway_client.py)
//! connected to `mcpvisor serve` over stdio in front of two demo servers:
//! tools, progress, prompts, completion, resources and subscriptions, logs,
//! sampling, elicitation and roots round trips, an unknown tool,
//! cancellation, and list_changed after an upstream is SIGKILLed.
//!
//! `#[ignore]`d like tests/interop.rs: `.ci/run` runs it with
//! `MCPVISOR_INTEROP=1 cargo test --test gateway_interop -- --ignored`,
//! after `.ci/interop-setup` installed the SDK (the `py` server's Python).

mod common;
mod gateway_support;
mod interop_support;

use gateway_support::{demo_table, BIN};

#[test]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
fn the_python_sdk_client_uses_the_gateway() {
    let python = interop_support::installed("py").command;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("servers.toml");
    std::fs::write(&config, [demo_table("demo", &[]), demo_table("other", &[])].concat()).unwrap();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/gateway_client.py");
    let output = std::process::Command::new(python).arg(script).arg(BIN).arg(&config).output().expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the Python client failed:\n{stdout}\n{stderr}");
    assert!(stdout.lines().last().is_some_and(|line| line.starts_with("ok ") && line.ends_with(" checks")), "{stdout}");
}
