//! Every MCP configuration people already have (issue 18, item 3), in the
//! files as each tool writes them: project files (Gemini CLI's, Zed's,
//! Codex's, Claude Code's local scope) discovered by every command;
//! user-level files only listed by `import` (which changes nothing) and
//! copied by `import TOOL`; `--config` reading Codex's TOML and Claude
//! Code's `~/.claude.json` as those tools do; unmapped settings reported.

use crate::cli_support;

use crate::cli_support::{stderr, stdout, Sandbox, BIN};
use serde_json::{json, Value};

/// `~/.claude.json` with a user-scope server, and a local-scope one for the sandbox's project.
fn claude_json(sandbox: &Sandbox, local: Value) -> String {
    let project = sandbox.project.canonicalize().unwrap().display().to_string();
    json!({
        "numStartups": 3,
        "mcpServers": {"user-wide": {"type": "stdio", "command": "user-wide-server", "args": [], "env": {}}},
        "projects": {project: {"allowedTools": [], "mcpServers": local}, "/elsewhere": {"mcpServers": {"other": {"command": "x"}}}}
    })
    .to_string()
}

const CODEX: &str =
    "[mcp_servers.docs]\ncommand = \"npx\"\nargs = [\"-y\", \"docs-mcp\"]\nstartup_timeout_sec = 20\nenv_vars = [\"HTTP_PROXY\"]\n\n\
                     [mcp_servers.docs.env]\nDOCS_TOKEN = \"sekret-codex-123\"\n";

fn names(list: &Value) -> Vec<String> {
    list.as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn project_files_and_claude_codes_local_scope_are_discovered_but_user_files_are_not() {
    let sandbox = Sandbox::new();
    cli_support::write(
        &sandbox.home.join(".claude.json"),
        &claude_json(&sandbox, json!({"mine": {"type": "stdio", "command": "local-server"}})),
    );
    cli_support::write(&sandbox.home.join(".codex/config.toml"), CODEX);
    sandbox.write(".mcp.json", r#"{"mcpServers": {"mine": {"command": "project-server"}, "shared": {"command": "shared-server"}}}"#);
    sandbox.write(
        ".gemini/settings.json",
        r#"{"mcpServers": {"gh": {"httpUrl": "https://api.example.com/mcp/", "timeout": 5000, "trust": true, "excludeTools": ["delete"]}}}"#,
    );
    sandbox.write(".zed/settings.json", "{ // Zed\n \"context_servers\": {\"zed-one\": {\"command\": \"zed-server\", \"args\": []}} }");
    sandbox.write(".codex/config.toml", "[mcp_servers.codex-project]\ncommand = \"codex-project-server\"\n");
    sandbox.trust();

    let (list, code) = sandbox.json(["list", "--json"]);
    assert_eq!(code, 0, "{list}");
    let mut found = names(&list);
    found.sort();
    assert_eq!(found, ["codex-project", "gh", "mine", "shared", "zed-one"], "no user-level server is merged: {list}");
    let mine = list.as_array().unwrap().iter().find(|s| s["name"] == "mine").unwrap();
    assert_eq!(mine["command"], "local-server", "Claude Code's local scope wins over .mcp.json: {mine}");
    let gh = list.as_array().unwrap().iter().find(|s| s["name"] == "gh").unwrap();
    assert_eq!((gh["transport"].as_str(), gh["origin"].as_str()), (Some("http"), Some("Gemini CLI")), "{gh}");
}

#[test]
fn import_alone_lists_every_source_and_changes_nothing() {
    let sandbox = Sandbox::new();
    let claude = claude_json(&sandbox, json!({"mine": {"type": "stdio", "command": "local-server", "env": {"K": "sekret-local-456"}}}));
    cli_support::write(&sandbox.home.join(".claude.json"), &claude);
    cli_support::write(&sandbox.home.join(".codex/config.toml"), CODEX);
    cli_support::write(&sandbox.home.join(".gemini/settings.json"), r#"{"mcpServers": {"g": {"command": "g", "trust": true}}}"#);
    cli_support::write(
        &sandbox.home.join(".codeium/windsurf/mcp_config.json"),
        r#"{"mcpServers": {"w": {"serverUrl": "https://w.example/mcp"}}}"#,
    );
    sandbox.write(".mcp.json", r#"{"mcpServers": {"p": {"command": "p"}}}"#);

    let output = sandbox.cmd(["import", "--json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("valid JSON");
    assert_eq!(report["changed"], false);
    let rows: Vec<(String, String, Vec<String>)> = report["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let servers = s["servers"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect();
            (s["name"].as_str().unwrap().to_string(), s["scope"].as_str().unwrap().to_string(), servers)
        })
        .collect();
    let expect = |name: &str, scope: &str, servers: &[&str]| {
        let servers: Vec<String> = servers.iter().map(|s| s.to_string()).collect();
        assert!(rows.contains(&(name.into(), scope.into(), servers.clone())), "{name} {scope} {servers:?} in {rows:?}");
    };
    expect("claude-code", "user", &["user-wide"]);
    expect("claude-code", "local", &["mine"]);
    expect("codex", "user", &["docs"]);
    expect("gemini", "user", &["g"]);
    expect("windsurf", "user", &["w"]);
    expect("claude-code", "project", &["p"]);
    let codex = report["sources"].as_array().unwrap().iter().find(|s| s["name"] == "codex").unwrap();
    assert_eq!(codex["unmapped"]["docs"], json!(["env_vars"]), "{codex}");
    for text in [stdout(&output), stderr(&output)] {
        assert!(!text.contains("sekret"), "no secret is printed: {text}");
    }
    assert!(!sandbox.user_file.exists(), "nothing was written");
    assert_eq!(std::fs::read_to_string(sandbox.home.join(".claude.json")).unwrap(), claude);

    let text = sandbox.cmd(["import"]).output().unwrap();
    let text = stdout(&text);
    assert!(text.contains("Codex") && text.contains("local") && text.contains("Nothing was changed"), "{text}");
}

#[test]
fn import_a_tool_by_name_maps_its_settings_and_reports_the_rest() {
    let sandbox = Sandbox::new();
    cli_support::write(&sandbox.home.join(".codex/config.toml"), CODEX);
    let output = sandbox.cmd(["import", "codex", "--json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!((report["format"].as_str(), report["imported"].clone()), (Some("Codex"), json!(["docs"])));
    assert_eq!(report["unmapped"]["docs"], json!(["env_vars"]));
    let written = sandbox.user_file_text();
    assert!(written.contains("[servers.docs]") && written.contains("docs-mcp") && written.contains("startup_timeout = 20"), "{written}");

    let warned = sandbox.cmd(["import", "codex", "--scope", "project"]).output().unwrap();
    assert!(stderr(&warned).contains("`env_vars`") && !stderr(&warned).contains("sekret"), "{}", stderr(&warned));

    let missing = sandbox.cmd(["import", "zed"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("no Zed configuration") && stderr(&missing).contains("zed/settings.json"), "{}", stderr(&missing));
}

#[test]
fn config_reads_codex_toml_and_every_claude_code_scope() {
    let sandbox = Sandbox::new();
    let codex = sandbox.home.join(".codex/config.toml");
    cli_support::write(&codex, CODEX);
    let (list, code) = sandbox.json(["--config", codex.to_str().unwrap(), "list", "--json"]);
    assert_eq!(code, 0, "a Codex file is not taken for mcpvisor's own TOML: {list}");
    assert_eq!((names(&list), list[0]["origin"].as_str()), (vec!["docs".to_string()], Some("Codex")));
    let refused = sandbox.cmd(["--config", codex.to_str().unwrap(), "add", "x", "--", "y"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "mcpvisor never edits Codex's file");
    assert_eq!(std::fs::read_to_string(&codex).unwrap(), CODEX);

    let claude = sandbox.home.join(".claude.json");
    cli_support::write(&claude, &claude_json(&sandbox, json!({"both": {"command": "local-wins"}})));
    sandbox.write(".mcp.json", r#"{"mcpServers": {"both": {"command": "project-loses"}, "team": {"command": "team"}}}"#);
    sandbox.trust();
    let (list, code) = sandbox.json(["--config", claude.to_str().unwrap(), "list", "--json"]);
    assert_eq!(code, 0, "{list}");
    let mut found = names(&list);
    found.sort();
    assert_eq!(found, ["both", "team", "user-wide"], "user, project and local scopes: {list}");
    let both = list.as_array().unwrap().iter().find(|s| s["name"] == "both").unwrap();
    assert_eq!(both["command"], "local-wins");
}

#[test]
fn status_reports_settings_that_have_no_counterpart() {
    let sandbox = Sandbox::new();
    let settings = json!({"mcpServers": {"demo": {"command": BIN, "args": ["demo-server"], "trust": true, "includeTools": ["echo"]}}});
    sandbox.write(".gemini/settings.json", &settings.to_string());
    sandbox.trust();
    let (status, code) = sandbox.json(["status", "--json"]);
    assert_eq!(code, 0, "{status}");
    let demo = &status[0];
    assert_eq!((demo["state"].as_str(), demo["unmapped"].clone()), (Some("connected"), json!(["trust"])), "{status}");
    let text = stdout(&sandbox.cmd(["status"]).output().unwrap());
    assert!(text.contains("Gemini CLI's settings trust have no counterpart"), "{text}");
}

/// A file of tests/fixtures/tool_configs (written by the tools themselves:
/// .ci/tool-config-fixtures), with the sandbox's project for `@PROJECT@`.
fn written_by_the_tool(sandbox: &Sandbox, name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tool_configs").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.replace("@PROJECT@", &sandbox.project.canonicalize().unwrap().display().to_string())
}

fn server<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array().unwrap().iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("no {name} in {list}"))
}

#[test]
fn the_files_claude_code_codex_and_gemini_cli_write_are_read_as_they_mean() {
    let sandbox = Sandbox::new();
    cli_support::write(&sandbox.home.join(".claude.json"), &written_by_the_tool(&sandbox, "claude.json"));
    cli_support::write(&sandbox.home.join(".codex/config.toml"), &written_by_the_tool(&sandbox, "codex.toml"));
    cli_support::write(&sandbox.home.join(".gemini/settings.json"), &written_by_the_tool(&sandbox, "gemini-user.json"));
    sandbox.write(".mcp.json", &written_by_the_tool(&sandbox, "mcp.json"));
    sandbox.write(".gemini/settings.json", &written_by_the_tool(&sandbox, "gemini-project.json"));
    sandbox.trust();

    // Project and local scopes are discovered; user files are not merged.
    let (list, code) = sandbox.json(["list", "--json"]);
    assert_eq!(code, 0, "{list}");
    let mut found = names(&list);
    found.sort();
    assert_eq!(found, ["fs", "gfs", "time"], "{list}");
    assert_eq!(server(&list, "fs")["origin"], "Claude Code", "`claude mcp add` (local scope) is discovered");
    let gfs = server(&list, "gfs");
    assert_eq!(gfs["tools"], json!({"allow": ["read_file", "list_directory"], "deny": ["write_file"]}), "{gfs}");
    assert_eq!(gfs["timeout_secs"], 15.0, "{gfs}");

    // `import` alone names every source, user ones included, and changes nothing.
    let output = sandbox.cmd(["import", "--json"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let mut listed: Vec<String> = report["sources"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["servers"].as_array().unwrap().clone())
        .map(|n| n.to_string())
        .collect();
    listed.sort();
    assert_eq!(listed.len(), 9, "fs time web events docs remote ghttp gsse gfs: {report}");
    assert!(!sandbox.user_file_text().contains("[servers"), "nothing was written");

    // Each tool's servers, imported, mean what the tool meant.
    for tool in ["claude-code", "codex", "gemini"] {
        let output = sandbox.cmd(["import", tool]).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{tool}: {}", stderr(&output));
    }
    let (list, code) = sandbox.json(["list", "--json"]);
    assert_eq!(code, 0, "{list}");
    for (name, transport) in [("web", "http"), ("events", "sse"), ("remote", "http"), ("ghttp", "http"), ("gsse", "sse"), ("docs", "stdio")]
    {
        assert_eq!(server(&list, name)["transport"], transport, "{name}: {list}");
    }
    let written = sandbox.user_file_text();
    assert!(written.contains("${REMOTE_TOKEN}"), "Codex's bearer_token_env_var becomes a reference: {written}");
    assert!(written.contains("${WEB_TOKEN}") && written.contains("${GEMINI_KEY}"), "references stay references: {written}");
}
