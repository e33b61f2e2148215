//! The editors' JSON(C) configuration readers (`config::foreign`): Claude
//! Desktop, Claude Code (and its `~/.claude.json` scopes), Cursor, VS Code,
//! OpenCode, Gemini CLI, Zed, Windsurf, and a file whose format
//! is told by its content; comments and trailing commas (JSONC) in all.
//! The input's first byte picks the file name; the rest is the file's text,
//! then after a NUL byte the text of the `.env` file `envFile` may name.
//!
//! Properties: never panics; the format follows the file name when it has
//! one; every server returned expands without panicking.
#![no_main]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mcpvisor_wire::config::foreign::{self, Format};

/// The workspace folder: a fresh directory of this fuzzing process.
fn workspace() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("mcpvisor-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(dir.join(".vscode")).expect("a scratch directory");
        std::fs::create_dir_all(dir.join(".cursor")).expect("a scratch directory");
        std::fs::create_dir_all(dir.join(".gemini")).expect("a scratch directory");
        std::fs::create_dir_all(dir.join(".zed")).expect("a scratch directory");
        dir
    })
}

const FILES: [&str; 11] = [
    "claude_desktop_config.json",
    ".mcp.json",
    ".cursor/mcp.json",
    ".vscode/mcp.json",
    "opencode.json",
    "opencode.jsonc",
    "servers.json",
    ".claude.json",
    ".gemini/settings.json",
    ".zed/settings.json",
    "mcp_config.json",
];

fuzz_target!(|data: &[u8]| {
    let Some((&file, rest)) = data.split_first() else { return };
    let (text, env_file) = match rest.iter().position(|&b| b == 0) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &[][..]),
    };
    let Ok(text) = std::str::from_utf8(text) else { return };
    let path = workspace().join(FILES[usize::from(file) % FILES.len()]);
    if text.contains("envFile") {
        std::fs::write(workspace().join(".env"), env_file).expect("writing the .env file");
    }
    let inputs = BTreeMap::from([("token".to_string(), "from-input".to_string())]);
    if let Ok((format, servers)) = foreign::parse_each(&path, text, &inputs) {
        if let Some(named) = Format::from_path(&path) {
            assert_eq!(format, named, "{path:?} was read as {}", format.name());
        }
        for server in servers.into_iter().flatten() {
            let _ = server.config.expanded(|name| (name.len() % 2 == 0).then(|| format!("value of {name}")));
        }
    }
});
