//! The `mcpvisor` binary itself: the demo (the README's first command) and
//! the demo server's start-up faults.

use std::process::{Command, Stdio};

fn mcpvisor() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mcpvisor"))
}

#[test]
fn the_demo_reports_what_the_design_promises_and_exits_0() {
    let output = mcpvisor().args(["demo", "--json"]).output().expect("mcpvisor runs");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("--json prints JSON");
    assert!(output.status.success(), "exit {:?}, report {report:#}, stderr {}", output.status, String::from_utf8_lossy(&output.stderr));
    assert_eq!(report["ok"], true);
    let calls = report["calls"].as_array().unwrap();
    let killed: Vec<_> = calls.iter().filter(|c| c["call"].as_str().unwrap().starts_with("beta/sleep")).collect();
    assert_eq!(killed.len(), 3);
    for call in killed {
        let error = call["error"].as_str().unwrap();
        assert!(error.contains("server `beta` exited (killed by signal 9 (SIGKILL))") && error.contains("not resent"), "{error}");
    }
    let status = report["status"].as_array().unwrap();
    let beta = status.iter().find(|s| s["name"] == "beta").unwrap();
    assert_eq!((beta["state"].as_str(), beta["restarts"].as_u64()), (Some("connected"), Some(1)));
}

#[test]
fn the_demo_server_exits_at_start_up_when_asked() {
    let output = mcpvisor().args(["demo-server", "--exit-immediately", "5"]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(output.status.code(), Some(5));
    assert!(String::from_utf8_lossy(&output.stderr).contains("exiting at start-up with code 5"));
}

#[test]
fn usage_errors_exit_2() {
    let output = mcpvisor().arg("no-such-command").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn help_lists_every_command_of_the_command_line() {
    let output = mcpvisor().arg("--help").output().unwrap();
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for command in [
        "add",
        "remove",
        "enable",
        "disable",
        "list",
        "import",
        "status",
        "test",
        "info",
        "tools",
        "call",
        "resources",
        "read",
        "prompts",
        "prompt",
        "demo",
        "demo-server",
    ] {
        assert!(help.lines().any(|line| line.trim_start().starts_with(&format!("{command} "))), "`{command}` missing from:\n{help}");
    }
    for flag in ["--config <FILE>", "--json", "--verbose", "--quiet"] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}
