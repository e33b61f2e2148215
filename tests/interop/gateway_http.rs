//! The official SDK clients against `mcpvisor serve --http` in front of the
//! demo server: the reference Python SDK (`mcp` 2.x, in the `initialize`
//! era and the 2026-07-28 era) and the TypeScript SDK (Streamable HTTP and
//! legacy HTTP+SSE): tools, progress, sampling round trips.
//!
//! Like tests/interop/servers_stdio.rs, every test is `#[ignore]`d and `.ci/run` runs
//! them with `MCPVISOR_INTEROP=1 cargo test --test interop gateway_http:: -- --ignored`
//! after `.ci/interop-setup` (a missing variable or package fails, never skips).

use std::path::Path;
use std::process::Command;

use crate::gateway_http_support::Gateway;
use crate::interop_support::installed;

/// Runs a client script, printing its checks; panics when one fails.
fn run_client(mut command: Command) {
    let output = command.output().expect("the client starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{stdout}");
    assert!(output.status.success(), "the client failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.lines().count() >= 3 && !stdout.contains("\"ok\": false") && !stdout.contains("\"ok\":false"), "{stdout}");
}

#[test]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
fn the_python_sdk_client_in_both_eras() {
    let python = installed("py").command;
    let gateway = Gateway::loopback();
    let mut command = Command::new(python);
    command.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/gateway_http_client.py")).arg(gateway.mcp());
    run_client(command);
}

#[test]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
fn the_typescript_sdk_client_over_streamable_http_and_sse() {
    let everything = installed("everything");
    let entry = everything.args.first().expect("server-everything's script");
    // DIR/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js → .../@modelcontextprotocol/sdk
    let scope = Path::new(entry).ancestors().nth(3).expect("the @modelcontextprotocol folder");
    let sdk = scope.join("sdk");
    assert!(sdk.join("dist/esm/client/index.js").exists(), "{}: the TypeScript SDK is missing; run .ci/interop-setup", sdk.display());
    let gateway = Gateway::loopback();
    let mut command = Command::new(everything.command);
    command.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/gateway_http_client.mjs")).arg(&gateway.base).arg(sdk);
    run_client(command);
}
