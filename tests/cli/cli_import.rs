//! `import` of every editor's format, written by the tests as each editor
//! writes it, into mcpvisor's TOML; and `--config` reading such a file as is.

use crate::cli_support::{stderr, Sandbox};
use serde_json::Value;

/// Imports `file` (relative to the project) and answers the servers `list --json` then shows.
fn import(sandbox: &Sandbox, file: &str, text: &str) -> (Value, Vec<Value>) {
    sandbox.write(file, text);
    let (report, code) = sandbox.json(["import", file, "--json"]);
    assert_eq!(code, 0, "{report}");
    // The editor's file is moved out of the way: only the imported copy is listed.
    std::fs::remove_file(sandbox.project.join(file)).unwrap();
    let (list, _) = sandbox.json(["list", "--json"]);
    (report, list.as_array().unwrap().clone())
}

fn by_name<'a>(list: &'a [Value], name: &str) -> &'a Value {
    list.iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("{name} in {list:?}"))
}

#[test]
fn claude_desktop() {
    let sandbox = Sandbox::new();
    let (report, list) = import(
        &sandbox,
        "claude_desktop_config.json",
        r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"], "env": {"DEBUG": "1"}}}, "globalShortcut": "Ctrl+Space"}"#,
    );
    assert_eq!(report["format"], "Claude Desktop");
    let fs = by_name(&list, "fs");
    assert_eq!((fs["command"].as_str(), fs["args"][2].as_str(), fs["env"]["DEBUG"].as_str()), (Some("npx"), Some("/tmp"), Some("1")));
    assert_eq!(fs["source"], sandbox.user_file.display().to_string(), "it now lives in mcpvisor's user file");
}

#[test]
fn claude_code_with_remote_entries() {
    let sandbox = Sandbox::new();
    let (report, list) = import(
        &sandbox,
        ".mcp.json",
        r#"{"mcpServers": {
            "local": {"type": "stdio", "command": "server", "args": ["--port", "0"]},
            "remote": {"type": "http", "url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer ${API_TOKEN}"}},
            "legacy": {"type": "sse", "url": "https://old.example.com/sse"}
        }}"#,
    );
    assert_eq!((report["format"].as_str(), report["imported"].as_array().unwrap().len()), (Some("Claude Code"), 3));
    assert_eq!(by_name(&list, "remote")["transport"], "http");
    assert_eq!(by_name(&list, "remote")["headers"]["Authorization"], "***", "a header holding a reference among other text is masked");
    assert!(sandbox.user_file_text().contains("Bearer ${API_TOKEN}"), "the reference is kept, not expanded:\n{}", sandbox.user_file_text());
    assert_eq!(by_name(&list, "legacy")["transport"], "sse");
}

#[test]
fn cursor_variables_become_references() {
    let sandbox = Sandbox::new();
    let (report, list) = import(
        &sandbox,
        ".cursor/mcp.json",
        r#"{"mcpServers": {"gh": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": "${env:GH_TOKEN}"}}}}"#,
    );
    assert_eq!(report["format"], "Cursor");
    assert_eq!(by_name(&list, "gh")["env"]["GITHUB_TOKEN"], "${GH_TOKEN}");
}

#[test]
fn vs_code_inputs_cannot_be_prompted_for_so_that_server_is_skipped() {
    let sandbox = Sandbox::new();
    sandbox.write(
        ".vscode/mcp.json",
        r#"{ // VS Code allows comments
            "inputs": [{"type": "promptString", "id": "key", "password": true}],
            "servers": {
                "ok": {"type": "stdio", "command": "ok-server", "args": ["${workspaceFolder}/data"]},
                "prompted": {"command": "x", "env": {"KEY": "${input:key}"}},
            }
        }"#,
    );
    let (report, code) = sandbox.json(["import", ".vscode/mcp.json", "--json"]);
    assert_eq!(code, 2, "a server could not be imported: {report}");
    assert_eq!(report["format"], "VS Code");
    assert_eq!(report["imported"], serde_json::json!(["ok"]));
    assert!(report["skipped"][0]["reason"].as_str().unwrap().contains("${input:key}, which VS Code prompts for"), "{report}");
    let text = sandbox.user_file_text();
    assert!(text.contains(&format!("{}/data", sandbox.project.display())), "workspaceFolder is the folder holding .vscode: {text}");
}

#[test]
fn opencode_into_the_project_file() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "opencode.json",
        r#"{"$schema": "https://opencode.ai/config.json", "mcp": {
            "local": {"type": "local", "command": ["bun", "x", "my-server"], "environment": {"TOKEN": "{env:MY_TOKEN}"}, "enabled": false},
            "remote": {"type": "remote", "url": "https://mcp.example.com/mcp"}
        }}"#,
    );
    let (report, code) = sandbox.json(["import", "opencode.json", "--scope", "project", "--json"]);
    assert_eq!((code, report["format"].as_str()), (0, Some("OpenCode")), "{report}");
    let project_file = std::fs::read_to_string(sandbox.project.join(".mcpvisor.toml")).unwrap();
    assert!(project_file.contains("command = \"bun\"") && project_file.contains("TOKEN = \"${MY_TOKEN}\""), "{project_file}");
    assert!(project_file.contains("enabled = false"), "{project_file}");
    assert!(!sandbox.user_file.exists(), "the user file is not touched");
}

#[test]
fn importing_again_skips_servers_already_there() {
    let sandbox = Sandbox::new();
    sandbox.write(".mcp.json", r#"{"mcpServers": {"a": {"command": "a"}}}"#);
    sandbox.cmd(["import", ".mcp.json"]).assert().success();
    let before = sandbox.user_file_text();
    let output = sandbox.cmd(["import", ".mcp.json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(stderr(&output).contains("skipped `a`: already in"), "{}", stderr(&output));
    assert_eq!(sandbox.user_file_text(), before);
}

#[test]
fn config_reads_an_editors_file_as_it_is() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file("[servers.user_only]\ncommand = \"u\"\n");
    sandbox.write("elsewhere/team.json", r#"{"servers": {"team": {"command": "team-server"}}}"#);
    let (list, code) = sandbox.json(["--config", "elsewhere/team.json", "list", "--json"]);
    assert_eq!(code, 0);
    let names: Vec<&str> = list.as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["team"], "only that file is read; its format comes from its shape");
    assert_eq!(list[0]["origin"], "VS Code");
}

#[test]
fn an_unknown_file_is_a_clear_error() {
    let sandbox = Sandbox::new();
    sandbox.write("notes.json", r#"{"hello": 1}"#);
    let output = sandbox.cmd(["import", "notes.json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("not a known MCP configuration"), "{}", stderr(&output));
}
