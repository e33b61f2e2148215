//! `mcpvisor scan` against real stdio servers: a server whose tool hides
//! the rug pull of issue 34 in its description and schema is reported
//! (exit 1, each finding with its rule), a plain one is not (exit 0).

use crate::cli_support::{python_fixture_table, stderr, stdout, Sandbox};

fn two_servers() -> Sandbox {
    let sandbox = Sandbox::new();
    let plain = python_fixture_table("plain", "tools_only_server.py", &[]);
    let poisoned = python_fixture_table("tickets", "tools_only_server.py", &["--poisoned"]);
    sandbox.write_user_file(&format!("{plain}\n{poisoned}"));
    sandbox
}

#[test]
fn a_poisoned_tool_is_reported_with_its_rules_and_fails_the_scan() {
    let sandbox = two_servers();
    let (findings, code) = sandbox.json(["--json", "scan"]);
    assert_eq!(code, 1, "a high finding fails the scan: {findings}");
    let findings = findings.as_array().unwrap();
    let of = |tool: &str| findings.iter().filter(|f| f["tool"] == tool).map(|f| f["rule"].as_str().unwrap()).collect::<Vec<_>>();
    let lookup = of("lookup");
    for rule in ["secret-file", "conceal", "before-use", "invisible", "url-with-data"] {
        assert!(lookup.contains(&rule), "{rule} missing from {lookup:?}");
    }
    assert!(findings.iter().all(|f| f["server"] == "tickets"), "only the poisoned server's tools: {findings:?}");
    let schema = findings.iter().find(|f| f["rule"] == "invisible").unwrap();
    assert_eq!(schema["field"], "inputSchema.properties.q.description");
    assert!(schema["excerpt"].as_str().unwrap().contains("<U+200B>"), "{schema}");

    let output = sandbox.cmd(["scan"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let shown = stdout(&output);
    assert!(shown.contains("tickets/lookup") && shown.contains("conceal"), "{shown}");
    assert!(stderr(&output).contains("at high or above"), "{}", stderr(&output));
}

#[test]
fn a_plain_server_scans_clean_and_fail_on_sets_the_bar() {
    let sandbox = two_servers();
    let output = sandbox.cmd(["scan", "--server", "plain"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert!(stdout(&output).contains("no findings in"), "{}", stdout(&output));
    let refused = sandbox.cmd(["scan", "--fail-on", "severe"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "a bad severity is a usage error");
    assert!(stderr(&refused).contains("low, medium or high"), "{}", stderr(&refused));
}

/// `[scan] withhold = "high"`: the poisoned `lookup` is withheld like a
/// changed pinned tool (not offered, a call refused naming the finding and
/// what to do, named in `status`), its server's `echo` works; a server's
/// own `withhold = "off"` overrides the file's.
#[test]
fn scan_withhold_keeps_a_flagged_tool_from_being_offered_or_called() {
    let sandbox = Sandbox::new();
    let poisoned = python_fixture_table("tickets", "tools_only_server.py", &["--poisoned"]);
    sandbox.write_user_file(&format!("[scan]\nwithhold = \"high\"\n\n{poisoned}"));
    let (tools, code) = sandbox.json(["--json", "tools"]);
    assert_eq!(code, 0, "{tools}");
    let names: Vec<&str> = tools.as_array().unwrap().iter().map(|tool| tool["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["echo"], "the flagged tool is not offered");
    let refused = sandbox.cmd(["call", "tickets", "lookup", "--arg", "q=1"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(message.contains("`lookup` of server `tickets` is withheld: the scanner found high"), "{message}");
    assert!(message.contains("mcpvisor scan --server tickets") && message.contains("withhold"), "{message}");
    let echoed = sandbox.cmd(["call", "tickets", "echo", "--arg", "text=still here"]).output().unwrap();
    assert_eq!(stdout(&echoed).trim(), "still here", "{}", stderr(&echoed));
    let (statuses, _) = sandbox.json(["--json", "status"]);
    assert_eq!(statuses[0]["withheld"], serde_json::json!(["lookup"]), "{statuses}");
    assert!(statuses[0]["warnings"].to_string().contains("`lookup` is withheld: the scanner found high"), "{statuses}");

    sandbox.write_user_file(&format!("[scan]\nwithhold = \"high\"\n\n{poisoned}withhold = \"off\"\n"));
    let (tools, _) = sandbox.json(["--json", "tools"]);
    assert_eq!(tools.as_array().unwrap().len(), 2, "the server's own setting wins: {tools}");
}
