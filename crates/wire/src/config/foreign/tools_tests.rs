//! The formats of Codex, Gemini CLI, Windsurf, Zed and Claude Code's
//! `~/.claude.json`, as each tool writes them (fixtures from each tool's
//! documentation and `… mcp add` output), and the keys reported as unmapped.

use super::*;
use crate::config::Auth;

fn each(path: &str, text: &str) -> (Format, Vec<Found>) {
    let (format, servers) = parse_each(Path::new(path), text, &BTreeMap::new()).unwrap();
    (format, servers.into_iter().map(Result::unwrap).collect())
}

fn named<'a>(found: &'a [Found], name: &str) -> &'a Found {
    found.iter().find(|f| f.config.name == name).unwrap_or_else(|| panic!("{name} in {found:?}"))
}

/// What `codex mcp add` writes, plus the documented keys of a remote server.
const CODEX: &str = r#"
model = "gpt-5-codex"

[mcp_servers.context7]
command = "npx"
args = ["-y", "@upstash/context7-mcp"]
startup_timeout_sec = 20
tool_timeout_sec = 45.5
enabled_tools = ["resolve-library-id", "get-library-docs"]
env_vars = ["HTTP_PROXY"]

[mcp_servers.context7.env]
LOG = "debug"
PRICE = "$5"

[mcp_servers.figma]
url = "https://mcp.figma.com/mcp"
bearer_token_env_var = "FIGMA_OAUTH_TOKEN"
http_headers = { "X-Figma-Region" = "us-east-1" }
env_http_headers = { "X-Api-Key" = "FIGMA_KEY" }
disabled_tools = ["delete_*"]
enabled = false
"#;

#[test]
fn codex_config_toml() {
    let (format, found) = each("/home/me/.codex/config.toml", CODEX);
    assert_eq!(format, Format::Codex);
    let context7 = named(&found, "context7");
    let c = &context7.config;
    assert_eq!((c.command.as_str(), c.args.as_slice()), ("npx", ["-y".to_string(), "@upstash/context7-mcp".to_string()].as_slice()));
    assert_eq!(c.env["LOG"], "debug");
    assert_eq!(c.env["PRICE"], "$5", "a lone `$` needs no escape");
    assert_eq!(c.timeouts.startup, Duration::from_secs(20));
    assert_eq!(c.timeouts.call, Duration::from_secs_f64(45.5));
    assert_eq!(c.tools.allow, ["resolve-library-id", "get-library-docs"]);
    assert_eq!(context7.unmapped, ["env_vars"], "reported, not dropped");
    let figma = named(&found, "figma");
    let f = &figma.config;
    assert_eq!((f.transport, f.url.as_deref()), (Transport::Http, Some("https://mcp.figma.com/mcp")));
    assert_eq!(f.auth, Some(Auth::Bearer { token: "${FIGMA_OAUTH_TOKEN}".into() }));
    assert_eq!(f.headers["X-Figma-Region"], "us-east-1");
    assert_eq!(f.headers["X-Api-Key"], "${FIGMA_KEY}");
    assert_eq!(f.tools.deny, ["delete_*"]);
    assert!(!f.enabled);
    assert!(figma.unmapped.is_empty());
}

#[test]
fn codex_is_told_by_content_and_literal_references_stay_literal() {
    let text = "[mcp_servers.x]\ncommand = \"run\"\nargs = [\"${NOT_A_REFERENCE}\"]\n";
    assert!(is_codex(Path::new("/anywhere/team.toml"), text));
    assert!(!is_codex(Path::new("/p/.mcpvisor.toml"), "[servers.x]\ncommand = \"run\"\n"));
    let (format, found) = each("/anywhere/team.toml", text);
    assert_eq!(format, Format::Codex);
    let expanded = found[0].config.expanded(|_| None).unwrap();
    assert_eq!(expanded.args, ["${NOT_A_REFERENCE}"], "Codex does not expand variables, so neither do we");
    let broken = parse(Path::new("/p/.codex/config.toml"), "[mcp_servers.x]\nargs = []\n", &BTreeMap::new()).unwrap_err().to_string();
    assert!(broken.contains("neither `command`") && broken.contains('x'), "{broken}");
}

/// `gemini mcp add` and the documented keys.
const GEMINI: &str = r#"{
  "theme": "Dracula",
  "mcpServers": {
    "git": { "command": "uvx", "args": ["mcp-server-git"], "cwd": "./repo", "timeout": 30000, "trust": true,
             "includeTools": ["git_status", "git_log"], "excludeTools": ["git_reset,git_push"], "description": "git" },
    "github": { "httpUrl": "https://api.githubcopilot.com/mcp/", "headers": { "Authorization": "Bearer $GITHUB_PAT" } },
    "events": { "url": "https://events.example.com/stream" }
  }
}"#;

#[test]
fn gemini_settings() {
    let (format, found) = each("/p/.gemini/settings.json", GEMINI);
    assert_eq!(format, Format::Gemini);
    let git = named(&found, "git");
    assert_eq!(git.config.timeouts.call, Duration::from_secs(30));
    assert_eq!(git.config.tools.allow, ["git_status", "git_log"]);
    assert_eq!(git.config.tools.deny, ["git_reset", "git_push"], "`gemini mcp add --exclude-tools a,b` writes one entry");
    assert_eq!(git.config.cwd.as_deref(), Some(Path::new("./repo")));
    assert_eq!(git.unmapped, ["trust"], "trust has no counterpart; description is harmless");
    let github = named(&found, "github");
    assert_eq!((github.config.transport, github.config.url.as_deref()), (Transport::Http, Some("https://api.githubcopilot.com/mcp/")));
    assert_eq!(named(&found, "events").config.transport, Transport::Sse, "Gemini's `url` is SSE");
}

#[test]
fn windsurf_and_zed() {
    let windsurf = r#"{"mcpServers": {
        "remote": { "serverUrl": "https://mcp.example.com/mcp", "headers": { "Authorization": "Bearer ${env:WS_TOKEN}" }, "disabledTools": ["drop"] },
        "local": { "command": "npx", "args": ["-y", "srv"], "disabled": true, "alwaysAllow": ["read"] }
    }}"#;
    let (format, found) = each("/home/me/.codeium/windsurf/mcp_config.json", windsurf);
    assert_eq!(format, Format::Windsurf);
    let remote = &named(&found, "remote").config;
    assert_eq!((remote.transport, remote.headers["Authorization"].as_str()), (Transport::Http, "Bearer ${WS_TOKEN}"));
    assert_eq!(remote.tools.deny, ["drop"]);
    let local = named(&found, "local");
    assert!(!local.config.enabled);
    assert_eq!(local.unmapped, ["alwaysAllow"]);

    let zed = r#"{
      // Zed's settings hold much else
      "theme": "One Dark",
      "context_servers": {
        "new-style": { "source": "custom", "command": "npx", "args": ["-y", "srv"], "env": { "K": "v" } },
        "old-style": { "command": { "path": "/usr/bin/srv", "args": ["run"], "env": {} }, "settings": { "x": 1 } },
        "remote": { "url": "https://mcp.example.com/mcp", "headers": { "X-Key": "k" }, "enabled": false },
      }
    }"#;
    let (format, found) = each("/p/.zed/settings.json", zed);
    assert_eq!(format, Format::Zed);
    assert_eq!((named(&found, "new-style").config.command.as_str(), named(&found, "new-style").config.env["K"].as_str()), ("npx", "v"));
    let old = named(&found, "old-style");
    assert_eq!((old.config.command.as_str(), old.config.args.as_slice()), ("/usr/bin/srv", ["run".to_string()].as_slice()));
    assert_eq!(old.unmapped, ["settings"]);
    assert!(!named(&found, "remote").config.enabled);
    let extension = r#"{"context_servers": {"pg": {"source": "extension", "settings": {}}}}"#;
    let (_, results) = parse_each(Path::new("/p/.zed/settings.json"), extension, &BTreeMap::new()).unwrap();
    let error = results.into_iter().next().unwrap().unwrap_err().to_string();
    assert!(error.contains("Zed extension"), "{error}");
}

/// `~/.claude.json` as Claude Code writes it: user scope at the top, local scope per project.
const CLAUDE_JSON: &str = r#"{
  "numStartups": 12,
  "mcpServers": { "everywhere": { "type": "stdio", "command": "user-server", "args": [], "env": {} } },
  "projects": {
    "/work/app": {
      "allowedTools": [],
      "mcpServers": { "mine": { "type": "http", "url": "https://mine.example.com/mcp", "headers": { "X": "y" } } },
      "enabledMcpjsonServers": []
    },
    "/work/other": { "mcpServers": { "theirs": { "command": "other" } } }
  }
}"#;

#[test]
fn claude_code_user_and_local_scopes() {
    let path = Path::new("/home/me/.claude.json");
    let (format, user) = each("/home/me/.claude.json", CLAUDE_JSON);
    assert_eq!(format, Format::ClaudeCode);
    assert_eq!(user.iter().map(|f| f.config.name.as_str()).collect::<Vec<_>>(), ["everywhere"]);
    let mut local = Vec::new();
    for_each_server_in(path, CLAUDE_JSON, &BTreeMap::new(), Section::ClaudeLocal(Path::new("/work/app")), |_, s| local.push(s.unwrap()))
        .unwrap();
    assert_eq!(local.iter().map(|f| f.config.name.as_str()).collect::<Vec<_>>(), ["mine"]);
    assert_eq!(local[0].config.transport, Transport::Http);
    let mut none = Vec::new();
    for_each_server_in(path, CLAUDE_JSON, &BTreeMap::new(), Section::ClaudeLocal(Path::new("/work/new")), |_, s| none.push(s)).unwrap();
    assert!(none.is_empty(), "a project Claude Code has no local servers for");
}
