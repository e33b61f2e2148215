//! The command line with remote servers: `call`, `test` and `status`
//! against a Streamable HTTP server and an HTTP+SSE one on loopback, with
//! credentials from the environment.

use crate::cli_support::{stderr, stdout, Sandbox};
use crate::http_fixture::{Fixture, Flavour};

/// A sandbox whose user file has `web` at the fixture's URL, with a bearer token from `$WEB_TOKEN`.
fn with_remote(fixture: &Fixture, transport: &str) -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&format!(
        "[servers.web]\ntransport = \"{transport}\"\nurl = \"{}\"\nauth = {{ type = \"bearer\", token = \"${{WEB_TOKEN}}\" }}\n",
        fixture.url()
    ));
    sandbox
}

/// A fixture taking only `Bearer {token}`, and a sandbox calling it `web`.
fn token_protected(flavour: Flavour, token: &str) -> (Fixture, Sandbox) {
    let fixture = Fixture::start(flavour);
    fixture.knobs().token = Some(format!("Bearer {token}"));
    let sandbox = with_remote(&fixture, "http");
    (fixture, sandbox)
}

#[test]
fn call_test_and_status_work_on_a_remote_server() {
    let (fixture, sandbox) = token_protected(Flavour::Events, "t0ken-from-env");
    let output = sandbox.cmd(["call", "web", "echo", "--arg", "text=over http"]).env("WEB_TOKEN", "t0ken-from-env").output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "over http\n");

    let output = sandbox.cmd(["test", "web"]).env("WEB_TOKEN", "t0ken-from-env").output().unwrap();
    let shown = stdout(&output);
    assert!(output.status.success(), "{shown}{}", stderr(&output));
    assert!(shown.contains("connect") && shown.contains(&fixture.url()) && shown.contains("over streamable-http"), "{shown}");
    assert!(shown.contains("session session-"), "the session is named: {shown}");

    let output = sandbox.cmd(["status", "--json"]).env("WEB_TOKEN", "t0ken-from-env").output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let status: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let web = &status[0];
    assert_eq!((web["state"].as_str(), web["remote"]["url"].as_str()), (Some("connected"), Some(fixture.url().as_str())), "{web}");
    assert!(!status.to_string().contains("t0ken-from-env"), "no secret in the status: {status}");
}

#[test]
fn a_refused_token_is_reported_as_needing_auth() {
    let (_fixture, sandbox) = token_protected(Flavour::Json, "right");
    let output = sandbox.cmd(["call", "web", "echo", "--arg", "text=x"]).env("WEB_TOKEN", "wrong-s3cret").output().unwrap();
    assert_eq!(output.status.code(), Some(3), "a connection error: {}", stderr(&output));
    let said = stderr(&output);
    assert!(said.contains("needs authorisation") || said.contains("needs_auth"), "{said}");
    assert!(!said.contains("wrong-s3cret"), "{said}");
    let output = sandbox.cmd(["status"]).env("WEB_TOKEN", "wrong-s3cret").output().unwrap();
    let said = format!("{}{}", stdout(&output), stderr(&output));
    assert!(said.contains("needs_auth") && said.contains("check the values of its `auth`"), "status says what to change: {said}");
    assert!(!said.contains("mcpvisor auth web"), "static credentials are not logged in to: {said}");
}

#[test]
fn an_http_sse_server_is_called_through_the_cli() {
    let fixture = Fixture::start(Flavour::LegacySse);
    let sandbox = with_remote(&fixture, "sse");
    let output = sandbox.cmd(["call", "web", "echo", "--arg", "text=over sse"]).env("WEB_TOKEN", "unused").output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "over sse\n");
}
