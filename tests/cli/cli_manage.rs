//! `add`, `remove`, `enable`, `disable` and `list` against real files:
//! round trips keep what the user wrote, editors' files are never written.

use crate::cli_support::{demo_table, stderr, stdout, Sandbox};

const COMMENTED: &str =
    "# my MCP servers\n\n[servers.keep]  # the one I use daily\ncommand = \"keep-server\"  # installed by hand\nargs = [\"--fast\"]\n";

#[test]
fn add_list_remove_round_trip_keeps_unrelated_comments() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(COMMENTED);
    sandbox
        .cmd(["add", "fs", "--env", "LEVEL=debug", "--timeout", "2.5", "--restart", "on-failure", "--", "npx", "-y", "server-fs", "/tmp"])
        .assert()
        .success();
    let text = sandbox.user_file_text();
    assert!(text.starts_with(COMMENTED), "the existing text stays byte for byte:\n{text}");
    assert!(
        text.contains("[servers.fs]")
            && text.contains("LEVEL = \"debug\"")
            && text.contains("timeout = 2.5")
            && text.contains("restart = \"on-failure\""),
        "{text}"
    );

    let (list, code) = sandbox.json(["list", "--json"]);
    assert_eq!(code, 0);
    let fs = list.as_array().unwrap().iter().find(|s| s["name"] == "fs").expect("fs is listed");
    assert_eq!(fs["command"], "npx");
    assert_eq!(fs["args"], serde_json::json!(["-y", "server-fs", "/tmp"]));
    assert_eq!(
        (fs["origin"].as_str(), fs["restart"].as_str(), fs["timeout_secs"].as_f64()),
        (Some("mcpvisor"), Some("on-failure"), Some(2.5))
    );
    assert_eq!(fs["source"], sandbox.user_file.display().to_string());

    sandbox.cmd(["disable", "fs"]).assert().success();
    assert!(sandbox.user_file_text().contains("enabled = false"));
    let (list, _) = sandbox.json(["list", "--json"]);
    assert_eq!(list[1]["enabled"], false);
    sandbox.cmd(["enable", "fs"]).assert().success();
    assert!(!sandbox.user_file_text().contains("enabled = false"), "enabled is the default, so the key goes away");

    sandbox.cmd(["remove", "fs"]).assert().success();
    assert_eq!(sandbox.user_file_text(), COMMENTED, "removing what was added gives the file back as it was");
}

#[test]
fn add_refuses_a_name_already_in_the_file_and_needs_a_command_or_url() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(COMMENTED);
    let output = sandbox.cmd(["add", "keep", "--", "other"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).starts_with("error: ") && stderr(&output).contains("a server named `keep` is already there; remove it first"),
        "{}",
        stderr(&output)
    );
    let output = sandbox.cmd(["add", "nothing"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("mcpvisor add nothing -- COMMAND"), "{}", stderr(&output));
    assert_eq!(sandbox.user_file_text(), COMMENTED);
}

#[test]
fn remote_servers_are_stored_and_listed_with_their_secrets_redacted() {
    let sandbox = Sandbox::new();
    sandbox
        .cmd(["add", "web", "--url", "https://mcp.example.com/sse", "--header", "X-Api-Key: hunter2-key", "--bearer", "tok-abcdef"])
        .assert()
        .success();
    let text = sandbox.user_file_text();
    assert!(text.contains("transport = \"sse\"") && text.contains("https://mcp.example.com/sse"), "{text}");
    for args in [vec!["list"], vec!["list", "--json"], vec!["info", "web"], vec!["info", "web", "--json"]] {
        let output = sandbox.cmd(&args).output().unwrap();
        let shown = stdout(&output) + &stderr(&output);
        assert!(output.status.success(), "{args:?}: {shown}");
        assert!(!shown.contains("hunter2-key") && !shown.contains("tok-abcdef"), "{args:?} shows a secret: {shown}");
        assert!(args == ["list"] || shown.contains("***"), "{args:?} shows the secrets as masked: {shown}");
        assert!(shown.contains("https://mcp.example.com/sse"), "{args:?}: {shown}");
    }
    let (info, _) = sandbox.json(["info", "web", "--json"]);
    assert_eq!(
        (info["transport"].as_str(), info["headers"]["X-Api-Key"].as_str(), info["auth"].as_str()),
        (Some("sse"), Some("***"), Some("bearer ***"))
    );
}

#[test]
fn project_scope_writes_the_project_file_which_wins() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&demo_table("shared", &[]));
    sandbox.cmd(["add", "shared", "--scope", "project", "--disabled", "--", "project-server"]).assert().success();
    let project_file = std::fs::read_to_string(sandbox.project.join(".mcpvisor.toml")).unwrap();
    assert!(project_file.contains("command = \"project-server\"") && project_file.contains("enabled = false"), "{project_file}");
    let (list, _) = sandbox.json(["list", "--json"]);
    let shared = &list[0];
    assert_eq!(
        (shared["command"].as_str(), shared["scope"].as_str(), shared["enabled"].as_bool()),
        (Some("project-server"), Some("project"), Some(false))
    );
    assert_eq!(shared["overrides"][0], sandbox.user_file.display().to_string());

    // Without --scope, remove acts on the definition in effect: the project's.
    sandbox.cmd(["remove", "shared"]).assert().success().stderr(predicates::str::contains("`shared` is still defined in"));
    assert!(!std::fs::read_to_string(sandbox.project.join(".mcpvisor.toml")).unwrap().contains("shared"));
    assert!(sandbox.user_file_text().contains("[servers.shared]"));
}

#[test]
fn servers_of_editors_files_are_never_edited() {
    let sandbox = Sandbox::new();
    let claude = r#"{"mcpServers": {"gh": {"command": "gh-server"}}}"#;
    let file = sandbox.write(".mcp.json", claude);
    sandbox.trust();
    for verb in ["remove", "enable", "disable"] {
        let output = sandbox.cmd([verb, "gh"]).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{verb}");
        let error = stderr(&output);
        assert!(error.contains(".mcp.json (Claude Code), which mcpvisor reads but never edits"), "{error}");
        assert!(error.contains("mcpvisor import") && error.contains("--scope project"), "says what to do: {error}");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), claude);
    let output = sandbox.cmd(["--config", ".mcp.json", "add", "x", "--", "y"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("never an editor's"), "{}", stderr(&output));

    // The advice works: import into the project's file, then disable.
    sandbox.cmd(["import", ".mcp.json", "--scope", "project"]).assert().success();
    sandbox.cmd(["disable", "gh"]).assert().success();
    let (list, _) = sandbox.json(["list", "--json"]);
    assert_eq!((list[0]["enabled"].as_bool(), list[0]["origin"].as_str()), (Some(false), Some("mcpvisor")));
}

#[test]
fn with_nothing_configured_the_built_in_demo_is_listed_and_cannot_be_removed() {
    let sandbox = Sandbox::new();
    let (list, code) = sandbox.json(["list", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(
        (list[0]["name"].as_str(), list[0]["origin"].as_str(), list[0]["args"][0].as_str()),
        (Some("demo"), Some("built-in"), Some("demo-server"))
    );
    let output = sandbox.cmd(["remove", "demo"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("built-in demo server"), "{}", stderr(&output));
    assert!(!sandbox.user_file.exists(), "nothing was written");
}

#[test]
fn json_errors_go_to_stdout_as_json_and_stderr_as_one_line() {
    let sandbox = Sandbox::new();
    let (value, code) = sandbox.json(["info", "nope", "--json"]);
    assert_eq!(code, 2);
    assert_eq!(value["error"]["exit_code"], 2);
    assert!(value["error"]["message"].as_str().unwrap().contains("no server named `nope`"));
    let output = sandbox.cmd(["info", "nope"]).output().unwrap();
    assert!(stdout(&output).is_empty());
    assert_eq!(stderr(&output).lines().count(), 1);
}

#[test]
fn info_shows_the_supervision_of_the_file_and_the_defaults() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(
        "[servers.tuned]\ncommand = \"x\"\nintensity = 2\nperiod = \"30s\"\nbackoff = { initial = \"1s\", max = \"8s\" }\ncooldown = false\nlimits = { rate = 10, concurrent = 4, tools = { slow = { concurrent = 1 } } }\n\n[servers.plain]\ncommand = \"y\"\n",
    );
    let output = sandbox.cmd(["info", "tuned"]).output().unwrap();
    assert!(stdout(&output).contains("at most 2 restarts in 30s, backoff 1s doubling to 8s, then no cool-down"), "{}", stdout(&output));
    let shown = stdout(&output);
    assert!(shown.contains("10/s (burst = rate), 4 at once") && shown.contains("slow: 1 at once"), "{shown}");
    let (tuned, _) = sandbox.json(["info", "tuned", "--json"]);
    assert_eq!(tuned["limits"]["server"], serde_json::json!({"rate": 10.0, "burst": null, "concurrent": 4}));
    assert_eq!(tuned["limits"]["tools"]["slow"]["concurrent"], 1);
    assert_eq!(
        tuned["supervision"],
        serde_json::json!({"intensity": 2, "period": "30s", "backoff": {"initial": "1s", "max": "8s"}, "cooldown": null})
    );
    let (plain, _) = sandbox.json(["info", "plain", "--json"]);
    assert_eq!(
        plain["supervision"],
        serde_json::json!({"intensity": 5, "period": "1m", "backoff": {"initial": "100ms", "max": "30s"}, "cooldown": {"initial": "30s", "max": "10m"}})
    );
}
