//! Every TOML example of the docs and the README, read as mcpvisor reads
//! a configuration file: a documented example that mcpvisor would refuse
//! (an unknown key, a bad value, a rule that does not compile) fails here,
//! and so does one that the published JSON Schema (docs/servers.schema.json)
//! would refuse in an editor. And every command line of their shell
//! blocks, as the shell splits it: an `mcpvisor` command clap would refuse
//! (a renamed flag, a gone subcommand), or a `cargo test --test NAME`
//! naming no test target, fails here too.

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

/// The Markdown files of docs/ and the README: each one's name from the
/// repository's root, and its text.
fn documented_files() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(root.join("docs")).unwrap().filter_map(Result::ok).map(|entry| entry.path()).collect();
    files.push(root.join("README.md"));
    files.sort();
    let markdown = files.into_iter().filter(|file| file.extension().is_some_and(|ext| ext == "md"));
    markdown.map(|file| (file.strip_prefix(root).unwrap_or(&file).display().to_string(), std::fs::read_to_string(&file).unwrap())).collect()
}

/// The ```toml blocks of the docs and the README, each with where it is.
fn documented_blocks() -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    for (name, text) in documented_files() {
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

/// The command lines of a Markdown file's shell blocks (```sh, ```bash,
/// ```console, ```shell), each with its line; `\` continuations joined,
/// a console block's output lines (no `$ `) left out.
fn shell_lines(text: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut open: Option<bool> = None; // Some(console?)
    let mut pending: Option<(usize, String)> = None;
    for (number, line) in text.lines().enumerate() {
        let fence = line.trim_start();
        match open {
            None if fence.starts_with("```") => {
                let language = fence.trim_start_matches('`');
                if ["sh", "bash", "shell", "console"].contains(&language) {
                    open = Some(language == "console");
                }
            }
            None => {}
            Some(_) if fence.starts_with("```") => open = None,
            Some(console) => {
                let command = match (console, pending.is_some()) {
                    (true, false) => match line.strip_prefix("$ ") {
                        Some(command) => command,
                        None => continue,
                    },
                    _ => line,
                };
                let (start, mut joined) = pending.take().unwrap_or((number + 1, String::new()));
                match command.strip_suffix('\\') {
                    Some(part) => {
                        joined.push_str(part);
                        pending = Some((start, joined));
                    }
                    None => {
                        joined.push_str(command);
                        lines.push((start, joined));
                    }
                }
            }
        }
    }
    lines
}

/// `line` as the shell splits it into words, and the commands it runs
/// (split at `&&`, `||`, `|`, `;` and `&`; a `#` comment dropped).
fn commands(line: &str) -> Vec<Vec<String>> {
    let mut commands = vec![Vec::new()];
    let mut word: Option<String> = None;
    let mut chars = line.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => word.get_or_insert_with(String::new).extend(chars.next()),
            (Some(_), c) => word.get_or_insert_with(String::new).push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, '\\') => word.get_or_insert_with(String::new).extend(chars.next()),
            (None, '#') if word.is_none() => break,
            (None, c) if c.is_whitespace() => commands.last_mut().unwrap().extend(word.take()),
            (None, '&' | '|' | ';') => {
                commands.last_mut().unwrap().extend(word.take());
                if chars.peek() == Some(&c) {
                    chars.next();
                }
                commands.push(Vec::new());
            }
            (None, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    commands.last_mut().unwrap().extend(word);
    commands.into_iter().filter(|command| !command.is_empty()).collect()
}

/// A documented command's problem: an `mcpvisor` command line clap
/// refuses, or a `cargo test --test NAME` naming no test target.
fn command_problem(words: &[String], root: &Path) -> Option<String> {
    let words: Vec<&str> = words.iter().map(String::as_str).skip_while(|word| is_assignment(word)).collect();
    match words.as_slice() {
        ["mcpvisor", ..] => {
            use clap::Parser;
            super::Cli::try_parse_from(&words)
                .err()
                .filter(|error| !matches!(error.kind(), clap::error::ErrorKind::DisplayHelp))
                .map(|error| format!("`{}` is refused: {}", words.join(" "), error.render().to_string().lines().next().unwrap_or_default()))
        }
        ["cargo", "test", rest @ ..] => {
            let target = rest.windows(2).find(|pair| pair[0] == "--test").map(|pair| pair[1])?;
            let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
            let declared = manifest.contains(&format!("name = \"{target}\""));
            let file = root.join("tests").join(format!("{target}.rs")).exists() || root.join("tests").join(target).join("main.rs").exists();
            (!declared && !file).then(|| format!("`cargo test --test {target}`: no test target `{target}`"))
        }
        _ => None,
    }
}

/// Whether `word` is a `NAME=value` prefix of a command.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

#[test]
fn every_documented_command_line_is_one_mcpvisor_and_cargo_accept() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (mut checked, mut problems) = (0, Vec::new());
    for (name, text) in documented_files() {
        for (line, command_line) in shell_lines(&text) {
            for words in commands(&command_line) {
                checked += usize::from(matches!(words.iter().find(|word| !is_assignment(word)).map(String::as_str), Some("mcpvisor")));
                if let Some(problem) = command_problem(&words, root) {
                    problems.push(format!("{name}:{line}: {problem}"));
                }
            }
        }
    }
    assert!(checked >= 30, "only {checked} documented mcpvisor command lines found");
    assert!(problems.is_empty(), "documented command lines that do not work as written:\n{}", problems.join("\n"));
}

#[test]
fn command_lines_are_split_as_the_shell_splits_them() {
    assert_eq!(
        commands(r#"A=1 mcpvisor call demo echo '{"text": "hi"}' --timeout 5 && mcpvisor list | jq . # done"#),
        vec![
            vec!["A=1", "mcpvisor", "call", "demo", "echo", r#"{"text": "hi"}"#, "--timeout", "5"],
            vec!["mcpvisor", "list"],
            vec!["jq", "."]
        ]
    );
    assert_eq!(commands(r#"mcpvisor agent -p "say \"hi\"" &"#), vec![vec!["mcpvisor", "agent", "-p", r#"say "hi""#]]);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let words = |line: &str| commands(line).remove(0);
    assert_eq!(command_problem(&words("mcpvisor list --json"), root), None);
    let refused = command_problem(&words("mcpvisor call demo echo --no-such-flag"), root).unwrap();
    assert!(refused.contains("--no-such-flag"), "{refused}");
    assert!(command_problem(&words("cargo test --test no_such_binary -- --ignored"), root).unwrap().contains("no_such_binary"));
    let console = "```console\n$ mcpvisor list \\\n  --json\noutput line\n```\n";
    assert_eq!(shell_lines(console), vec![(2, "mcpvisor list   --json".to_string())]);
}
