use std::path::Path;

use super::*;
use crate::pool::ServerState;
use rmcp::model::Tool;

fn config(name: &str) -> ServerConfig {
    ServerConfig::stdio(name, "server-binary", ["--flag"])
}

fn entry(server: &str, tool: &str) -> ToolEntry {
    ToolEntry {
        name: naming::exposed_name(server, tool),
        server: server.into(),
        tool: Tool::new(tool.to_string(), format!("{tool} things"), rmcp::model::JsonObject::new()),
    }
}

fn status(name: &str, state: ServerState) -> ServerStatus {
    ServerStatus::new(name, state)
}

#[test]
fn a_saved_listing_is_loaded_back_while_fresh() {
    let dir = tempfile::tempdir().unwrap();
    let cache = CatalogCache::new(dir.path());
    let tools = [entry("fs", "read_file"), entry("other", "x"), entry("fs", "write_file")];
    cache.save(&config("fs"), &tools).unwrap();
    let listing = cache.load(&config("fs"), DEFAULT_MAX_AGE).unwrap().expect("fresh");
    let names: Vec<(&str, &str, &str)> = listing.tools.iter().map(|t| (t.name.as_str(), t.server.as_str(), t.tool.name())).collect();
    assert_eq!(
        names,
        [("mcp__fs__read_file", "fs", "read_file"), ("mcp__fs__write_file", "fs", "write_file")],
        "the server's own tools only"
    );
    assert_eq!(listing.tools[0].tool.tool(), tools[0].tool, "the whole MCP tool");
    assert!(cache.load(&config("fs"), Duration::ZERO).unwrap().is_none(), "older than the maximum age");
    assert!(cache.load(&config("absent"), DEFAULT_MAX_AGE).unwrap().is_none());
}

#[test]
fn an_edited_configuration_does_not_use_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let cache = CatalogCache::new(dir.path());
    cache.save(&config("fs"), &[entry("fs", "read_file")]).unwrap();
    let edits = [
        config("fs").with_env("ROOT", "/srv"),
        ServerConfig { args: vec!["--other".into()], ..config("fs") },
        ServerConfig { enabled: false, ..config("fs") },
    ];
    for edited in edits {
        assert_ne!(fingerprint(&edited), fingerprint(&config("fs")));
        assert!(cache.load(&edited, DEFAULT_MAX_AGE).unwrap().is_none(), "{edited:?}");
    }
}

#[test]
fn the_fingerprint_sees_variables_through_their_values_and_holds_no_secret() {
    let path = std::env::var("PATH").unwrap_or_default();
    let by_reference = config("fs").with_env("SEARCH_PATH", "${PATH}");
    assert_eq!(fingerprint(&by_reference), fingerprint(&config("fs").with_env("SEARCH_PATH", path)), "a variable counts by its value");
    let secret = "hunter2-very-secret-value";
    let with_secret = config("fs").with_env("TOKEN", secret);
    let dir = tempfile::tempdir().unwrap();
    let cache = CatalogCache::new(dir.path());
    cache.save(&with_secret, &[entry("fs", "read_file")]).unwrap();
    let text = std::fs::read_to_string(cache.path_of("fs")).unwrap();
    assert!(!text.contains(secret) && !text.contains("server-binary"), "{text}");
}

#[test]
fn a_corrupt_entry_is_an_error_to_show_and_is_replaced_by_the_next_listing() {
    let dir = tempfile::tempdir().unwrap();
    let cache = CatalogCache::new(dir.path());
    std::fs::write(cache.path_of("fs"), "{\"format\": 1, \"tools\": [tru").unwrap();
    let error = cache.load(&config("fs"), DEFAULT_MAX_AGE).unwrap_err();
    assert!(error.to_string().contains("not a tool cache entry"), "{error}");
    assert!(error.to_string().contains(&cache.path_of("fs").display().to_string()), "{error}");
    cache.save(&config("fs"), &[entry("fs", "read_file")]).unwrap();
    assert!(cache.load(&config("fs"), DEFAULT_MAX_AGE).unwrap().is_some());
}

#[test]
fn file_names_are_safe_and_tell_apart_names_that_read_alike() {
    let cache = CatalogCache::new("/cache");
    for name in ["../../etc/passwd", "a/b", "a b", ".", "", &"x".repeat(300)] {
        let path = cache.path_of(name);
        assert_eq!(path.parent(), Some(Path::new("/cache")), "{name:?} -> {path:?}");
        let file = path.file_name().unwrap().to_str().unwrap();
        assert!(!file.starts_with('.'), "{file}");
        assert!(file.len() < 100, "{file}");
    }
    assert_ne!(cache.path_of("a b"), cache.path_of("a_b"));
}

#[test]
fn save_all_keeps_connected_servers_only() {
    let dir = tempfile::tempdir().unwrap();
    let cache = CatalogCache::new(dir.path());
    let configs = [config("up"), config("empty"), config("down")];
    let statuses = [
        status("up", ServerState::Connected),
        status("empty", ServerState::Connected),
        status("down", ServerState::Failed { error: "exited".into(), stderr_tail: Vec::new(), retry_in: None, cause: None }),
    ];
    let errors = cache.save_all(&configs, &statuses, &[entry("up", "t")]);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(cache.load(&config("up"), DEFAULT_MAX_AGE).unwrap().unwrap().tools.len(), 1);
    assert_eq!(cache.load(&config("empty"), DEFAULT_MAX_AGE).unwrap().unwrap().tools.len(), 0, "connected without tools");
    assert!(cache.load(&config("down"), DEFAULT_MAX_AGE).unwrap().is_none(), "a failed start caches nothing");
}

#[test]
fn an_unwritable_cache_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("blocker"), "").unwrap();
    let cache = CatalogCache::new(dir.path().join("blocker/tools"));
    let errors = cache.save_all::<Tool>(&[config("up")], &[status("up", ServerState::Connected)], &[]);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].path, cache.path_of("up"));
}
