use super::*;
use std::fs;

fn no_inputs() -> BTreeMap<String, String> {
    BTreeMap::new()
}

fn read(path: &str, text: &str) -> (Format, Vec<ServerConfig>) {
    parse(Path::new(path), text, &no_inputs()).unwrap()
}

fn error(path: &str, text: &str) -> String {
    parse(Path::new(path), text, &no_inputs()).unwrap_err().to_string()
}

const CLAUDE_CODE: &str = r#"{
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": { "GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}", "RETRIES": 3 }
    },
    "api": { "type": "http", "url": "${API_BASE_URL:-https://api.example.com}/mcp", "headers": { "Authorization": "Bearer ${API_KEY}" } },
    "events": { "type": "sse", "url": "https://events.example.com/sse" },
    "local": { "type": "stdio", "command": "/opt/server", "cwd": "/srv", "oauth": { "clientId": "ignored" } }
  }
}"#;

#[test]
fn claude_code() {
    let (format, servers) = read("/p/.mcp.json", CLAUDE_CODE);
    assert_eq!(format, Format::ClaudeCode);
    let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["api", "events", "github", "local"]);
    let api = ServerConfig::remote("api", Transport::Http, "${API_BASE_URL:-https://api.example.com}/mcp")
        .with_header("Authorization", "Bearer ${API_KEY}");
    assert_eq!(servers[0], api);
    assert_eq!(servers[1], ServerConfig::remote("events", Transport::Sse, "https://events.example.com/sse"));
    let github = ServerConfig::stdio("github", "npx", ["-y", "@modelcontextprotocol/server-github"])
        .with_env("GITHUB_PERSONAL_ACCESS_TOKEN", "${GITHUB_TOKEN}")
        .with_env("RETRIES", "3");
    assert_eq!(servers[2], github);
    assert_eq!(servers[3].cwd, Some(PathBuf::from("/srv")));
}

#[test]
fn claude_desktop_by_name_and_disabled_entries() {
    let text = r#"{"mcpServers": {"fs": {"command": "npx", "args": ["x"], "disabled": true}}, "globalShortcut": "Ctrl+Space"}"#;
    let (format, servers) = read("/home/me/.config/Claude/claude_desktop_config.json", text);
    assert_eq!(format, Format::ClaudeDesktop);
    assert!(!servers[0].enabled);
}

#[test]
fn cursor_urls_without_type_and_editor_variables() {
    let text = r#"{
      "mcpServers": {
        "remote": { "url": "https://mcp.example.com/mcp", "headers": { "X-Key": "${env:EXAMPLE_KEY}" } },
        "legacy": { "url": "https://old.example.com/sse/" },
        "local": { "command": "${userHome}/bin/srv", "args": ["${workspaceFolder}/data", "${workspaceFolderBasename}", "${HOME}"], "env": { "TOKEN": "${env:MY_TOKEN}" } }
      }
    }"#;
    let (format, servers) = read("/work/proj/.cursor/mcp.json", text);
    assert_eq!(format, Format::Cursor);
    assert_eq!(servers[0].transport, Transport::Sse, "a /sse path without type means sse");
    assert_eq!(servers[1].args, ["/work/proj/data", "proj", "${HOME}"]);
    assert_eq!(servers[1].command, "${HOME}/bin/srv");
    assert_eq!(servers[1].env["TOKEN"], "${MY_TOKEN}");
    assert_eq!(servers[2].transport, Transport::Http);
    assert_eq!(servers[2].headers["X-Key"], "${EXAMPLE_KEY}");
}

const VSCODE: &str = r#"{
  // Workspace MCP servers
  "inputs": [
    { "type": "promptString", "id": "perplexity-key", "description": "Perplexity API Key", "password": true },
  ],
  "servers": {
    "perplexity": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "server-perplexity-ask"],
      "env": { "PERPLEXITY_API_KEY": "${input:perplexity-key}" }, /* prompted */
    },
    "fetch": { "type": "http", "url": "http://localhost:3000/mcp", "headers": { "X-Env": "${env:STAGE}" } },
  },
}"#;

#[test]
fn vscode_inputs_are_an_error_unless_given() {
    let message = error("/w/.vscode/mcp.json", VSCODE);
    assert_eq!(
        message,
        "/w/.vscode/mcp.json: server \"perplexity\": env.PERPLEXITY_API_KEY uses ${input:perplexity-key}, which VS Code prompts for and mcpvisor cannot; \
         replace it with ${ENV_VAR} and set that variable, or pass the input's value"
    );
    let inputs = BTreeMap::from([("perplexity-key".to_string(), "pplx-${x}".to_string())]);
    let (format, servers) = parse(Path::new("/w/.vscode/mcp.json"), VSCODE, &inputs).unwrap();
    assert_eq!(format, Format::VsCode);
    assert_eq!(servers[0].headers["X-Env"], "${STAGE}");
    let expanded = servers[1].expanded(|_| None).unwrap();
    assert_eq!(expanded.env["PERPLEXITY_API_KEY"], "pplx-${x}", "input values are taken literally");
}

#[test]
fn vscode_one_bad_server_does_not_hide_the_others() {
    let (_, servers) = parse_each(Path::new("/w/.vscode/mcp.json"), VSCODE, &no_inputs()).unwrap();
    assert!(servers[0].is_ok());
    assert!(matches!(&servers[1], Err(ConfigError::PromptedInput { id, .. }) if id == "perplexity-key"));
}

#[test]
fn env_files_are_read_relative_to_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join(".vscode")).unwrap();
    fs::write(dir.path().join(".env"), "API_KEY=abc\nLEVEL=file\nPRICE=$5 ${NOT_A_REF}\n").unwrap();
    let path = dir.path().join(".vscode/mcp.json");
    let text = r#"{"servers": {"s": {"command": "x", "envFile": "${workspaceFolder}/.env", "env": {"LEVEL": "inline"}}}}"#;
    let (_, servers) = parse(&path, text, &no_inputs()).unwrap();
    let env = servers[0].expanded(|_| None).unwrap().env;
    assert_eq!(env["API_KEY"], "abc");
    assert_eq!(env["LEVEL"], "inline", "env wins over envFile");
    assert_eq!(env["PRICE"], "$5 ${NOT_A_REF}", "envFile values are literal");

    let missing = r#"{"servers": {"s": {"command": "x", "envFile": "missing.env"}}}"#;
    let message = parse(&path, missing, &no_inputs()).unwrap_err().to_string();
    assert!(message.contains("server \"s\": `envFile` names ") && message.contains("missing.env, which does not exist"), "{message}");
    fs::write(dir.path().join("bad.env"), "OK=1\nSECRET_LINE\n").unwrap();
    let bad = r#"{"servers": {"s": {"command": "x", "envFile": "bad.env"}}}"#;
    let message = parse(&path, bad, &no_inputs()).unwrap_err().to_string();
    assert!(message.contains("line 2 is not NAME=value") && !message.contains("SECRET_LINE"), "{message}");
}

#[test]
fn editor_only_variables_are_errors() {
    let text = r#"{"servers": {"s": {"command": "x", "args": ["${config:python.path}"]}}}"#;
    let message = error("/w/.vscode/mcp.json", text);
    assert!(message.contains("server \"s\": `args[0]` uses ${config:python.path}, which only the editor can resolve"), "{message}");
}

#[test]
fn opencode_both_shapes() {
    let old = r#"{
      "$schema": "https://opencode.ai/config.json",
      "mcp": {
        "fs": { "type": "local", "command": ["npx", "-y", "server-fs", "{env:HOME}/docs"], "environment": { "LEVEL": "debug" }, "enabled": false, "timeout": 10000 },
        "context7": { "type": "remote", "url": "https://mcp.context7.com/mcp", "headers": { "CONTEXT7_API_KEY": "{env:CONTEXT7_API_KEY}" } }
      }
    }"#;
    let (format, servers) = read("/p/opencode.json", old);
    assert_eq!(format, Format::OpenCode);
    let context7 = ServerConfig::remote("context7", Transport::Http, "https://mcp.context7.com/mcp");
    assert_eq!(servers[0], context7.with_header("CONTEXT7_API_KEY", "${CONTEXT7_API_KEY}"));
    let mut fs = ServerConfig::stdio("fs", "npx", ["-y", "server-fs", "${HOME}/docs"]).with_env("LEVEL", "debug");
    fs.enabled = false;
    fs.timeouts.startup = Duration::from_secs(10);
    assert_eq!(servers[1], fs);

    let new = r#"{"mcp": {"servers": {"fs": {"type": "local", "command": ["fs-server"], "disabled": true}}}}"#;
    let (_, servers) = read("/p/opencode.jsonc", new);
    assert_eq!(servers.len(), 1);
    assert_eq!((servers[0].name.as_str(), servers[0].command.as_str(), servers[0].enabled), ("fs", "fs-server", false));

    let named_servers = r#"{"mcp": {"servers": {"type": "local", "command": ["s"]}}}"#;
    assert_eq!(read("/p/opencode.json", named_servers).1[0].name, "servers", "an old-shape server named servers");
}

#[test]
fn opencode_errors() {
    let message = error("opencode.json", r#"{"mcp": {"fs": {"type": "local", "command": "npx fs"}}}"#);
    assert_eq!(message, "opencode.json: server \"fs\": `command` must be an array of strings");
    let message = error("opencode.json", r#"{"mcp": {"fs": {"type": "local", "command": []}}}"#);
    assert!(message.contains("`command` must be a non-empty array: the program, then its arguments"), "{message}");
    let message = error("opencode.json", r#"{"mcp": {"fs": {"type": "docker"}}}"#);
    assert!(message.contains("`type` is \"docker\"; expected \"local\" or \"remote\""), "{message}");
    let message = error("opencode.json", r#"{"mcp": {"r": {"type": "remote", "url": "https://x", "headers": {"K": "{file:~/.key}"}}}}"#);
    assert!(message.contains("`headers.K` uses {file:~/.key}, which mcpvisor does not read"), "{message}");
}

#[test]
fn detection_by_shape_and_file_level_errors() {
    assert_eq!(Format::detect(&serde_json::json!({"mcpServers": {}})), Some(Format::ClaudeCode));
    assert_eq!(Format::detect(&serde_json::json!({"servers": {}})), Some(Format::VsCode));
    assert_eq!(Format::detect(&serde_json::json!({"mcp": {}})), Some(Format::OpenCode));
    assert_eq!(Format::detect(&serde_json::json!({"other": {}})), None);
    assert_eq!(Format::detect(&serde_json::json!([])), None);
    assert_eq!(read("/tmp/exported.json", r#"{"servers": {"s": {"command": "x"}}}"#).0, Format::VsCode);

    assert_eq!(read("/p/opencode.json", r#"{"theme": "dark"}"#), (Format::OpenCode, vec![]), "a named file without servers");
    let message = error("/tmp/other.json", r#"{"theme": "dark"}"#);
    assert!(
        message.starts_with(
            "/tmp/other.json: not a known MCP configuration (it has none of the keys mcpServers, servers, mcp or context_servers)"
        ),
        "{message}"
    );
    assert!(error(".mcp.json", "{\"mcpServers\": ").starts_with(".mcp.json: not valid JSON: EOF while parsing"));
    assert_eq!(error(".mcp.json", "[1]"), ".mcp.json: not valid JSON: the top level must be an object");
    assert_eq!(
        error(".mcp.json", r#"{"mcpServers": []}"#),
        ".mcp.json: not valid Claude Code: `mcpServers` must be an object with one entry per server"
    );
}

#[test]
fn server_level_errors_name_server_and_field() {
    let cases = [
        (r#"{"s": 1}"#, "server \"s\": `s` must be an object with the server's settings"),
        (r#"{"s": {}}"#, "server \"s\": `s` has neither `command` (a local server) nor `url` (a remote one)"),
        (
            r#"{"s": {"type": "websocket", "url": "wss://x"}}"#,
            "server \"s\": `type` is \"websocket\"; expected \"stdio\", \"http\" or \"sse\"",
        ),
        (r#"{"s": {"command": "x", "args": ["a", 2]}}"#, "server \"s\": `args[1]` must be a string"),
        (r#"{"s": {"command": "x", "env": {"A": []}}}"#, "server \"s\": `env.A` must be a string"),
        (r#"{"s": {"type": "http", "url": "ftp://x"}}"#, "`url` must be an http:// or https:// URL"),
        (r#"{"s": {"type": "stdio", "url": "https://x"}}"#, "`command` is empty"),
    ];
    for (servers, expected) in cases {
        let message = error(".mcp.json", &format!(r#"{{"mcpServers": {servers}}}"#));
        assert!(message.starts_with(".mcp.json: "), "{message}");
        assert!(message.contains(expected), "{servers}: {message}");
    }
}

#[test]
fn editors_oauth_clients_become_oauth_auth() {
    let cursor = r#"{ "mcpServers": { "hub": { "url": "https://hub.example/mcp",
        "auth": { "CLIENT_ID": "cursor-client", "CLIENT_SECRET": "${env:HUB_SECRET}", "scopes": ["read", "write"] } } } }"#;
    let (_, servers) = read("/p/.cursor/mcp.json", cursor);
    let expected = OAuthConfig {
        client_id: Some("cursor-client".into()),
        client_secret: Some("${HUB_SECRET}".into()),
        scopes: vec!["read".into(), "write".into()],
        ..OAuthConfig::default()
    };
    assert_eq!(servers[0].auth, Some(Auth::OAuth(expected.clone())));

    let opencode = r#"{ "mcp": {
        "hub": { "type": "remote", "url": "https://hub.example/mcp", "oauth": { "clientId": "cursor-client", "clientSecret": "{env:HUB_SECRET}", "scope": "read write" } },
        "plain": { "type": "remote", "url": "https://plain.example/mcp", "oauth": false } } }"#;
    let (_, servers) = read("/p/opencode.json", opencode);
    assert_eq!(servers[0].auth, Some(Auth::OAuth(expected)));
    assert_eq!(servers[1].auth, None);

    let message = error("/p/.cursor/mcp.json", r#"{ "mcpServers": { "hub": { "url": "https://h/mcp", "auth": { "CLIENT_ID": 7 } } } }"#);
    assert!(message.contains("server \"hub\"") && message.contains("`auth.CLIENT_ID` must be a string"), "{message}");
    let message = error("/p/opencode.json", r#"{ "mcp": { "hub": { "url": "https://h/mcp", "oauth": { "clientSecret": "s" } } } }"#);
    assert!(message.contains("`oauth.clientId` is missing"), "{message}");
}
