//! `[agent] allow` and `deny` rules ([`ToolRule`]) matched against one
//! call, and what "allow always" on a command remembers.
//!
//! A command's **prefix** is its first word, with its second when that is
//! a plain lower-case word (a subcommand: `git diff`, `cargo test`,
//! `npm run`); `ls -la` has the prefix `ls`, `git diff HEAD~1` has
//! `git diff`. A **simple** command is one with no shell control: no
//! `;`, `&`, `|`, `<`, `>`, backquote, `$(`, newline or leading
//! `NAME=value`. Only a simple command matches an allow rule or a
//! remembered prefix (`git diff; rm -rf ~` is not a `git diff` command);
//! a deny rule matches when any piece of a compound command matches it,
//! past wrappers such as `sudo`, `env` or `xargs`. Deny rules on commands
//! guard against mistakes; they are no sandbox (`sh -c "rm x"` hides the
//! word).

use std::path::Path;

use rmcp::model::JsonObject;
use serde_json::Value;

use crate::builtin_tools::paths;
use crate::builtin_tools::{LIST_DIRECTORY, READ_FILE, RUN_COMMAND, WRITE_FILE};
use crate::config::ToolRule;
use crate::ToolEntry;

/// Characters after which a command is no longer one simple command.
const CONTROL: [char; 8] = [';', '&', '|', '<', '>', '`', '\n', '\r'];

/// Words that run the next words as a command.
const WRAPPERS: [&str; 9] = ["sudo", "env", "command", "exec", "nohup", "time", "xargs", "nice", "doas"];

/// The built-in server's name and where its relative paths start, to read a call's arguments.
#[derive(Debug, Clone, Copy)]
pub struct Builtin<'a> {
    pub server: &'a str,
    pub cwd: &'a Path,
}

/// Whether `rule` matches this call; `deny` makes a command rule match any piece of a compound command.
pub fn matches(rule: &ToolRule, entry: &ToolEntry, arguments: &JsonObject, builtin: Builtin, deny: bool) -> bool {
    let own_tool = (entry.server == builtin.server).then_some(&*entry.tool.name);
    let named = match own_tool {
        Some(tool) if rule.tool == tool => true,
        _ => crate::config::glob_match(&rule.tool, &entry.name),
    };
    let Some(wanted) = &rule.arguments else { return named };
    if !named || own_tool != Some(rule.tool.as_str()) {
        return false;
    }
    let text = |key: &str| arguments.get(key).and_then(Value::as_str);
    match rule.tool.as_str() {
        RUN_COMMAND => text("command").is_some_and(|command| command_matches(wanted, command, deny)),
        READ_FILE | WRITE_FILE | LIST_DIRECTORY => text("path").is_some_and(|path| {
            let real = paths::real(&paths::expand(builtin.cwd, path));
            let pattern = paths::expand(builtin.cwd, wanted);
            crate::config::glob_match(&pattern.to_string_lossy(), &real.to_string_lossy())
        }),
        _ => false,
    }
}

/// `wanted` is `PREFIX:*` (the command's words start with these) or a whole command.
fn command_matches(wanted: &str, command: &str, deny: bool) -> bool {
    let pieces = if deny {
        pieces(command)
    } else if is_simple(command) {
        vec![words(command)]
    } else {
        return false;
    };
    let wanted_words = words(wanted.strip_suffix(":*").unwrap_or(wanted));
    let whole = !wanted.ends_with(":*");
    let fits = |words: &[String]| match whole {
        true => words == wanted_words.as_slice(),
        false => words.starts_with(&wanted_words),
    };
    match deny {
        // Every word a piece may run: past each wrapper, assignment or flag before it.
        true => pieces
            .iter()
            .any(|piece| (0..piece.len()).take_while(|&at| at == 0 || is_wrapping(&piece[at - 1])).any(|at| fits(&piece[at..]))),
        false => pieces.iter().any(|piece| fits(piece)),
    }
}

/// A word after which the next words may still be the command run.
fn is_wrapping(word: &str) -> bool {
    WRAPPERS.contains(&word) || word.contains('=') || word.starts_with('-')
}

fn words(command: &str) -> Vec<String> {
    command.split_whitespace().map(str::to_string).collect()
}

/// Whether `command` is one simple command (see the module docs).
pub fn is_simple(command: &str) -> bool {
    !command.contains(CONTROL) && !command.contains("$(") && !command.split_whitespace().next().is_some_and(|word| word.contains('='))
}

/// The words of each command of a compound command; a deny rule is tried on each.
fn pieces(command: &str) -> Vec<Vec<String>> {
    let spaced = command.replace("$(", " ; ").replace(['(', ')', '{', '}'], " ; ");
    spaced.split(CONTROL).map(words).filter(|words| !words.is_empty()).collect()
}

/// What "allow always" on `command` remembers: its prefix when it is a
/// simple command, else the whole command.
pub fn remembered_form(command: &str) -> String {
    if !is_simple(command) {
        return command.trim().to_string();
    }
    let mut words = command.split_whitespace();
    let first = words.next().unwrap_or_default();
    match words.next() {
        Some(second) if is_subcommand(second) => format!("{first} {second}:*"),
        _ => format!("{first}:*"),
    }
}

/// A plain lower-case word: `diff`, `run`, `build-std`; not `-la`, `x.txt`, `src/`.
fn is_subcommand(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_lowercase()) && word.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Whether `command` is covered by what [`remembered_form`] kept.
pub fn remembered_covers(kept: &str, command: &str) -> bool {
    match kept.ends_with(":*") {
        true => command_matches(kept, command, false),
        false => kept == command.trim(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::Tool;
    use std::sync::Arc;

    fn entry(server: &str, tool: &str) -> ToolEntry {
        let tool = Tool::new(tool.to_string(), "", Arc::new(Default::default()));
        ToolEntry { name: crate::naming::exposed_name(server, &tool.name), server: server.into(), tool }
    }

    fn command(text: &str) -> JsonObject {
        serde_json::json!({ "command": text }).as_object().cloned().unwrap()
    }

    fn builtin() -> Builtin<'static> {
        Builtin { server: "builtin", cwd: Path::new("/w") }
    }

    #[test]
    fn command_rules_match_prefixes_of_simple_commands_and_deny_any_piece() {
        let rule = |text: &str| ToolRule::parse(text).unwrap();
        let run = entry("builtin", "run_command");
        let allows = |r: &str, c: &str| matches(&rule(r), &run, &command(c), builtin(), false);
        let denies = |r: &str, c: &str| matches(&rule(r), &run, &command(c), builtin(), true);
        assert!(allows("run_command(git diff:*)", "git diff HEAD"));
        assert!(allows("run_command(git diff:*)", "git  diff"));
        assert!(!allows("run_command(git diff:*)", "git status"));
        assert!(!allows("run_command(git diff:*)", "git diff; rm -rf ~"), "a compound command is not allowed by a prefix");
        assert!(!allows("run_command(git diff:*)", "git diff $(rm -rf ~)"));
        assert!(!allows("run_command(git diff:*)", "git diff > ~/.bashrc"));
        assert!(!allows("run_command(git diff:*)", "git difftool"), "words, not characters");
        assert!(allows("run_command(make)", "make") && !allows("run_command(make)", "make install"));
        assert!(denies("run_command(rm:*)", "rm -rf /"));
        assert!(denies("run_command(rm:*)", "ls && rm -rf /"));
        assert!(denies("run_command(rm:*)", "echo $(sudo rm x)"));
        assert!(denies("run_command(rm:*)", "FOO=1 env -i rm x"));
        assert!(denies("run_command(sudo:*)", "sudo rm x"), "a wrapper can be denied itself");
        assert!(!denies("run_command(rm:*)", "echo rm"));
        assert!(matches(&rule("run_command"), &run, &command("anything"), builtin(), false));
        assert!(!matches(&rule("run_command(ls:*)"), &entry("other", "run_command"), &command("ls"), builtin(), false));
        assert!(matches(&rule("mcp__time__*"), &entry("time", "now"), &JsonObject::new(), builtin(), false));
        assert!(!matches(&rule("mcp__time__*"), &entry("timer", "now"), &JsonObject::new(), builtin(), false));
    }

    #[test]
    fn allow_always_remembers_the_prefix_of_a_simple_command_else_the_command() {
        assert_eq!(remembered_form("git diff HEAD"), "git diff:*");
        assert_eq!(remembered_form("ls -la"), "ls:*");
        assert_eq!(remembered_form("cat notes.txt"), "cat:*");
        assert_eq!(remembered_form("make && make install"), "make && make install");
        assert!(remembered_covers("git diff:*", "git diff --stat"));
        assert!(!remembered_covers("git diff:*", "git status"));
        assert!(!remembered_covers("git diff:*", "git diff | sh"));
        assert!(remembered_covers("make && make install", " make && make install "));
    }

    #[test]
    fn path_rules_match_where_the_path_really_leads() {
        let read = entry("builtin", "read_file");
        let rule = ToolRule::parse("read_file(/w/docs/*)").unwrap();
        let path = |p: &str| serde_json::json!({ "path": p }).as_object().cloned().unwrap();
        assert!(matches(&rule, &read, &path("docs/a.md"), builtin(), false));
        assert!(!matches(&rule, &read, &path("docs/../secret"), builtin(), false));
    }

    #[test]
    fn the_tools_rules_name_are_the_built_in_ones() {
        assert_eq!(crate::config::agent::ARGUMENT_TOOLS, [RUN_COMMAND, READ_FILE, WRITE_FILE, LIST_DIRECTORY]);
    }
}
