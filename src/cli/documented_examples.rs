//! Every TOML example of the docs and the README, read as mcpvisor reads
//! a configuration file: a documented example that mcpvisor would refuse
//! (an unknown key, a bad value, a rule that does not compile) fails here.

use std::path::Path;

use crate::config::native;

/// The ```toml blocks of a Markdown file, each with the line it starts on.
fn toml_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (number, line) in text.lines().enumerate() {
        match (&mut open, line.trim_start()) {
            (None, fence) if fence.starts_with("```toml") => open = Some((number + 1, String::new())),
            (Some(_), fence) if fence.starts_with("```") => blocks.extend(open.take()),
            (Some((_, block)), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// Reads `text` as a configuration file: servers, `[agent]`, `[serve]`
/// (its policy compiled), `[audit]` and `[telemetry]`.
fn read(path: &Path, text: &str) -> Result<(), String> {
    native::parse_with_agent(path, text).map_err(|e| e.to_string())?;
    native::parse_audit(path, text).map_err(|e| e.to_string())?;
    native::parse_telemetry(path, text).map_err(|e| e.to_string())?;
    if let Some(serve) = native::parse_serve(path, text).map_err(|e| e.to_string())? {
        if let Some(policy) = &serve.policy {
            crate::policy::Policy::compile(policy, path).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

#[test]
fn every_documented_toml_example_is_a_configuration_mcpvisor_accepts() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(root.join("docs")).unwrap().filter_map(Result::ok).map(|entry| entry.path()).collect();
    files.push(root.join("README.md"));
    files.sort();
    let mut read_blocks = 0;
    let mut problems = Vec::new();
    for file in files.iter().filter(|file| file.extension().is_some_and(|ext| ext == "md")) {
        let text = std::fs::read_to_string(file).unwrap();
        for (line, block) in toml_blocks(&text) {
            read_blocks += 1;
            if let Err(problem) = read(file, &block) {
                problems.push(format!("{}:{line}: {problem}", file.strip_prefix(root).unwrap_or(file).display()));
            }
        }
    }
    assert!(read_blocks >= 10, "only {read_blocks} TOML examples found");
    assert!(problems.is_empty(), "documented examples mcpvisor refuses:\n{}", problems.join("\n"));
}
