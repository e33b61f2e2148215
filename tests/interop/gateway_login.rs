//! The official TypeScript SDK as the client of a per-caller login (issue
//! 35, item 2): `mcpvisor serve --http` in front of the OAuth fixture as
//! `gh` with `auth = { type = "oauth", per_caller = true }`. The SDK's first
//! call fails with its `UrlElicitationRequiredError` (-32042), the script
//! follows the URL (the fixture approves without a person), hears
//! `notifications/elicitation/complete`, and its next call reaches `gh` as
//! its caller's login (tests/interop/gateway_login_client.mjs).
//!
//! `#[ignore]`d like every interop test: `.ci/run` runs them with
//! `MCPVISOR_INTEROP=1` after `.ci/interop-setup`.

use std::path::Path;
use std::process::Command;

use crate::gateway_http_support::ALICE;
use crate::interop_support::installed;
use crate::oauth_server::start_login_gateway;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn the_typescript_sdk_completes_a_url_elicitation_login() {
    let everything = installed("everything");
    let entry = everything.args.first().expect("server-everything's script");
    // DIR/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js → .../@modelcontextprotocol/sdk
    let sdk = Path::new(entry).ancestors().nth(3).expect("the @modelcontextprotocol folder").join("sdk");
    assert!(sdk.join("dist/esm/client/index.js").exists(), "{}: the TypeScript SDK is missing; run .ci/interop-setup", sdk.display());
    let setup = start_login_gateway().await;
    setup.fixture.approve_as("alice-at-gh");
    let mut command = tokio::process::Command::from(Command::new(everything.command));
    command.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/gateway_login_client.mjs"));
    command.arg(&setup.gateway.base).arg(ALICE).arg(&sdk).arg("alice-at-gh");
    let output = tokio::time::timeout(std::time::Duration::from_secs(120), command.output()).await.expect("the client ends").unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{stdout}");
    assert!(output.status.success(), "the client failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(!stdout.contains("\"ok\":false"), "{stdout}");
    for check in ["UrlElicitationRequiredError", "following the URL logs in", "elicitation/complete", "as the caller's login"] {
        assert!(stdout.lines().any(|line| line.contains(check) && line.contains("\"ok\":true")), "no passed check `{check}`: {stdout}");
    }
}
