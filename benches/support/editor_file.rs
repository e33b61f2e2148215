//! A generated Claude Code `.mcp.json` of many servers, for the memory
//! bench and tests of `list`: each server a typical `npx` entry (a command,
//! two arguments, one environment variable), about 95 bytes of text.

use std::path::Path;

/// Writes `dir/.mcp.json` with `servers` servers `s000000`, `s000001`, …; returns its size.
pub fn write_claude_code_file(dir: &Path, servers: usize) -> usize {
    let entries: Vec<String> = (0..servers)
        .map(|i| format!(r#""s{i:06}": {{"command": "npx", "args": ["@scope/server-fs", "/tmp"], "env": {{"LEVEL": "info"}}}}"#))
        .collect();
    let text = format!(r#"{{"mcpServers": {{{}}}}}"#, entries.join(", "));
    std::fs::write(dir.join(".mcp.json"), &text).expect("the editor file is written");
    text.len()
}
