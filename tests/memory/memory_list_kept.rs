//! `mcpvisor list` on a Claude Code `.mcp.json` of 20,000 servers: loading
//! the configuration peaks at no more than 5 times the file's size, and
//! what it keeps is less (an editor's servers are kept as the text of the
//! object holding them and parsed when used), and every server kept parses
//! back to what the file says. Its tests hold `crate::alone_blocking()`:
//! the binary's global allocator counts the whole heap.

use mcpvisor::config::{load_all, Locations, ProjectTrust, Scope};

use crate::counting_alloc;
use crate::editor_file;

const SERVERS: usize = 20_000;

#[test]
fn loading_an_editor_file_holds_a_small_multiple_of_it() {
    let _alone = crate::alone_blocking();
    let dir = tempfile::tempdir().unwrap();
    let size = editor_file::write_claude_code_file(dir.path(), SERVERS);
    let no_user_file = dir.path().join("none.toml").to_string_lossy().into_owned();
    let env = |name: &str| (name == "MCPVISOR_CONFIG").then(|| no_user_file.clone());

    let before = counting_alloc::reset_peak();
    // The folder is trusted: this measures loading, not the trust check.
    let locations = Locations { trust: ProjectTrust::Everything, ..Locations::new(Some(dir.path()), env) };
    let loaded = locations.load().unwrap();
    let kept = counting_alloc::live().saturating_sub(before);
    let peak = counting_alloc::peak().saturating_sub(before);
    eprintln!("kept {kept} bytes (peak {peak}) for a {size}-byte file");
    // Parsed servers were kept before: 28 times the file at the peak (docs/benchmarks.md).
    assert!(peak <= 5 * size, "loading peaks at {peak} bytes for a {size}-byte file");
    assert!(kept <= 3 * size, "loading keeps {kept} bytes for a {size}-byte file");

    assert_eq!(loaded.servers.len(), SERVERS);
    assert!(loaded.skipped.is_empty(), "{:?}", loaded.skipped);
    let server = loaded.get("s000007").expect("s000007 is loaded");
    assert_eq!(*server.source, *dir.path().join(".mcp.json"));
    let config = server.config().unwrap();
    assert_eq!((config.name.as_str(), config.command.as_str(), config.scope), ("s000007", "npx", Scope::Project));
    assert_eq!(config.args, ["@scope/server-fs", "/tmp"]);
    assert_eq!(config.env.get("LEVEL").map(String::as_str), Some("info"));
}

/// `~/.claude.json` holds much besides one project's servers (its history
/// can be megabytes): only the object of the project's servers is kept.
#[test]
fn a_large_claude_json_keeps_only_the_projects_servers() {
    let _alone = crate::alone_blocking();
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("app");
    std::fs::create_dir_all(&project).unwrap();
    let history: Vec<String> = (0..20_000).map(|i| format!(r#"{{"display": "prompt number {i} of a long history"}}"#)).collect();
    let servers = r#"{"gh": {"command": "gh-mcp", "args": ["--read-only"]}}"#;
    let text = format!(r#"{{"projects": {{{:?}: {{"history": [{}], "mcpServers": {servers}}}}}}}"#, project.display(), history.join(", "));
    std::fs::write(home.path().join(".claude.json"), &text).unwrap();
    let home_dir = home.path().to_string_lossy().into_owned();
    let env = |name: &str| (name == "HOME").then(|| home_dir.clone());

    let before = counting_alloc::live();
    let loaded = load_all(Some(&project), env).unwrap();
    let kept = counting_alloc::live().saturating_sub(before);
    eprintln!("kept {kept} bytes of a {}-byte ~/.claude.json", text.len());
    assert!(kept < 16 * 1024, "{kept} bytes kept for one server of a {}-byte file", text.len());
    let config = loaded.get("gh").expect("the project's server is loaded").config().unwrap();
    assert_eq!((config.command.as_str(), config.args.as_slice()), ("gh-mcp", &["--read-only".to_string()][..]));
}
