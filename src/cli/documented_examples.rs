//! Every TOML example of the docs and the README, read as mcpvisor reads
//! a configuration file: a documented example that mcpvisor would refuse
//! (an unknown key, a bad value, a rule that does not compile) fails here,
//! and so does one that the published JSON Schema (docs/servers.schema.json)
//! would refuse in an editor.

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
    let blocks = documented_blocks();
    assert!(blocks.len() >= 10, "only {} TOML examples found", blocks.len());
    let problems: Vec<String> = blocks
        .iter()
        .filter_map(|(place, block)| {
            read(Path::new(place.split(':').next().unwrap_or_default()), block).err().map(|e| format!("{place}: {e}"))
        })
        .collect();
    assert!(problems.is_empty(), "documented examples mcpvisor refuses:\n{}", problems.join("\n"));
}

/// The ```toml blocks of the docs and the README, each with where it is.
fn documented_blocks() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(root.join("docs")).unwrap().filter_map(Result::ok).map(|entry| entry.path()).collect();
    files.push(root.join("README.md"));
    files.sort();
    let mut blocks = Vec::new();
    for file in files.iter().filter(|file| file.extension().is_some_and(|ext| ext == "md")) {
        let text = std::fs::read_to_string(file).unwrap();
        let name = file.strip_prefix(root).unwrap_or(file).display().to_string();
        blocks.extend(toml_blocks(&text).into_iter().map(|(line, block)| (format!("{name}:{line}"), block)));
    }
    blocks
}

/// `text` as the JSON value a schema validator checks.
fn as_json(text: &str) -> serde_json::Value {
    let document: toml_edit::DocumentMut = text.parse().unwrap();
    crate::config::de::from_node(crate::config::de::Node::Table(document.as_table()), "", &[]).unwrap()
}

#[test]
fn every_documented_toml_example_is_valid_under_the_published_schema() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let schema: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(root.join("docs/servers.schema.json")).unwrap()).unwrap();
    let (mut schemas, mut compiler) = (boon::Schemas::new(), boon::Compiler::new());
    compiler.add_resource("file:///servers.schema.json", schema).unwrap();
    let index = compiler.compile("file:///servers.schema.json", &mut schemas).unwrap();
    let blocks = documented_blocks();
    assert!(blocks.len() >= 10, "only {} TOML examples found", blocks.len());
    let problems: Vec<String> = blocks
        .iter()
        .filter_map(|(place, block)| schemas.validate(&as_json(block), index).err().map(|error| format!("{place}: {error:#}")))
        .collect();
    assert!(problems.is_empty(), "documented examples the schema refuses:\n{}", problems.join("\n"));
    for wrong in ["[servers.x]\ncomand = \"y\"\n", "[servers.x]\ntimeout = \"60\"\n", "[server.x]\ncommand = \"y\"\n"] {
        assert!(schemas.validate(&as_json(wrong), index).is_err(), "the schema takes {wrong:?}");
    }
}
