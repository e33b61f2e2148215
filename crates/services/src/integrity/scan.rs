//! Finds what a tool's texts may hide from the user and say to the model:
//! invisible and bidirectional Unicode, instructions aimed at the model
//! (the rules of `rules.toml`), references to other servers' tools
//! (shadowing) and URLs that can carry data out.
//!
//! Invariants:
//! - every text a tool shows a model is read: its title, its description,
//!   and every string (keys included) of its input and output schemas, to
//!   a depth of [`MAX_DEPTH`];
//! - a finding names the rule, the field (`description`,
//!   `inputSchema.properties.q.description`), a severity and a reason, and
//!   quotes at most [`EXCERPT_CHARS`] characters, invisible ones escaped;
//! - scanning never fails: a rule file that does not load (a bug, caught
//!   by the tests) leaves the Unicode and shadowing checks working.

use std::sync::LazyLock;

use regex::{Regex, RegexBuilder};
use serde::Serialize;
use serde_json::Value;

/// How much a finding matters (defined with the `[scan]` setting that names it).
pub use crate::config::Severity;

/// One thing found in one text of a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// The rule's id (`conceal`, `bidi-control`, `shadowing`, ...).
    pub rule: String,
    /// Where in the tool: `title`, `description`, or a schema path.
    pub field: String,
    pub reason: String,
    /// The text around the match, invisible characters shown as `<U+XXXX>`.
    pub excerpt: String,
}

/// A tool as the scanner reads it.
#[derive(Debug, Clone, Copy)]
pub struct ToolText<'a> {
    pub server: &'a str,
    pub name: &'a str,
    pub title: Option<&'a str>,
    pub description: Option<&'a str>,
    pub input_schema: Option<&'a Value>,
    pub output_schema: Option<&'a Value>,
}

/// Another server's tool, which a description naming it would shadow.
#[derive(Debug, Clone, Copy)]
pub struct OtherTool<'a> {
    pub server: &'a str,
    pub name: &'a str,
}

/// The deepest schema level read.
pub const MAX_DEPTH: usize = 32;
/// The most characters a finding quotes.
pub const EXCERPT_CHARS: usize = 120;

struct Rule {
    id: String,
    severity: Severity,
    reason: String,
    pattern: Regex,
}

static RULES: LazyLock<Result<Vec<Rule>, String>> = LazyLock::new(|| load_rules(include_str!("rules.toml")));

fn load_rules(text: &str) -> Result<Vec<Rule>, String> {
    let document: toml_edit::DocumentMut = text.parse().map_err(|error| format!("rules.toml: {error}"))?;
    let rules = document.get("rules").and_then(toml_edit::Item::as_array_of_tables).ok_or("rules.toml: no [[rules]]")?;
    rules
        .iter()
        .enumerate()
        .map(|(index, rule)| {
            let text =
                |key: &str| rule.get(key).and_then(toml_edit::Item::as_str).ok_or(format!("rules.toml: rule {index} has no `{key}`"));
            let id = text("id")?.to_string();
            let severity = text("severity")?.parse::<Severity>().map_err(|error| format!("rules.toml: rule `{id}`: {error}"))?;
            let pattern = RegexBuilder::new(text("pattern")?)
                .case_insensitive(true)
                .size_limit(1 << 20)
                .build()
                .map_err(|error| format!("rules.toml: rule `{id}`: {error}"))?;
            Ok(Rule { id, severity, reason: text("reason")?.to_string(), pattern })
        })
        .collect()
}

/// Whether the rule file loaded; its error when not.
pub fn rules_loaded() -> Result<usize, String> {
    RULES.as_ref().map(Vec::len).map_err(Clone::clone)
}

/// Everything found in `tool`'s texts; `others`: the tools of the other
/// servers, for shadowing. Sorted by severity, the highest first.
pub fn scan(tool: &ToolText, others: &[OtherTool]) -> Vec<Finding> {
    let mut texts: Vec<(String, &str)> = Vec::new();
    texts.extend(tool.title.map(|title| ("title".to_string(), title)));
    texts.extend(tool.description.map(|description| ("description".to_string(), description)));
    for (field, schema) in [("inputSchema", tool.input_schema), ("outputSchema", tool.output_schema)] {
        if let Some(schema) = schema {
            strings_of(schema, field.to_string(), 0, &mut texts);
        }
    }
    let mut findings = Vec::new();
    for (field, text) in &texts {
        unicode(field, text, &mut findings);
        patterns(field, text, &mut findings);
        if is_prose(field) {
            shadowing(tool, field, text, others, &mut findings);
        }
    }
    findings.sort_by(|a, b| b.severity.cmp(&a.severity).then_with(|| a.field.cmp(&b.field)));
    findings
}

/// Every string of `value` with its path, keys included.
fn strings_of<'v>(value: &'v Value, path: String, depth: usize, out: &mut Vec<(String, &'v str)>) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::String(text) => out.push((path, text)),
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                strings_of(item, format!("{path}[{index}]"), depth + 1, out);
            }
        }
        Value::Object(fields) => {
            for (key, field) in fields {
                let inner = format!("{path}.{key}");
                out.push((format!("{inner} (key)"), key));
                strings_of(field, inner, depth + 1, out);
            }
        }
        _ => {}
    }
}

/// What a character hides, if it hides anything.
fn hidden(c: char) -> Option<(Severity, &'static str, &'static str)> {
    let code = c as u32;
    match code {
        0xE0000..=0xE007F => {
            Some((Severity::High, "tag-characters", "Unicode tag characters: text the user cannot see but the model reads"))
        }
        0xE0100..=0xE01EF => {
            Some((Severity::High, "variation-selectors", "supplementary variation selectors, which can smuggle invisible text"))
        }
        0x202A..=0x202E | 0x2066..=0x2069 | 0x200E | 0x200F | 0x061C => {
            Some((Severity::High, "bidi-control", "a bidirectional control: the text shown is not the text read"))
        }
        0x200B | 0x200C | 0x2060..=0x2064 | 0xFEFF | 0x180E | 0x00AD | 0x034F | 0x115F | 0x1160 | 0x3164 => {
            Some((Severity::Medium, "invisible", "an invisible character, which can hide or split words"))
        }
        0xE000..=0xF8FF | 0xF0000..=0x10FFFF => {
            Some((Severity::Low, "private-use", "a private-use character, shown differently everywhere"))
        }
        _ if c.is_control() && !matches!(c, '\n' | '\r' | '\t') => {
            Some((Severity::Medium, "control-character", "a control character, which terminals and models read differently"))
        }
        _ => None,
    }
}

fn unicode(field: &str, text: &str, findings: &mut Vec<Finding>) {
    let mut seen: Vec<&str> = Vec::new();
    for (offset, c) in text.char_indices() {
        // A zero-width joiner inside an emoji sequence is how emoji are written.
        if c == '\u{200D}' {
            continue;
        }
        if let Some((severity, rule, reason)) = hidden(c) {
            if !seen.contains(&rule) {
                seen.push(rule);
                findings.push(finding(severity, rule, field, reason, text, offset));
            }
        }
    }
}

fn patterns(field: &str, text: &str, findings: &mut Vec<Finding>) {
    let Ok(rules) = RULES.as_ref() else { return };
    // Hidden characters must not split a phrase past the patterns.
    let visible: String = text.chars().filter(|c| hidden(*c).is_none() && *c != '\u{200D}').collect();
    for rule in rules {
        if let Some(found) = rule.pattern.find(&visible) {
            findings.push(finding(rule.severity, &rule.id, field, &rule.reason, &visible, found.start()));
        }
    }
}

/// Whether `field` is prose a model reads as such: the title, the
/// description, a schema's `description` or `title` (not its keys, types
/// or enum values, where a tool's name is a word like any other).
fn is_prose(field: &str) -> bool {
    matches!(field, "title" | "description") || field.ends_with(".description") || field.ends_with(".title")
}

/// Whether a tool's name is distinctive enough that prose naming it means
/// the tool, not the word: `send_email`, `get-page`, `readFile`.
fn distinctive(name: &str) -> bool {
    name.len() >= 4 && (name.contains('_') || name.contains('-') || name.chars().skip(1).any(char::is_uppercase))
}

/// A text that names another server's tool, as a word: `send_email`,
/// `mcp__mail__send_email` or `mail__send_email` (a plain word such as
/// `count` only in those exposed forms).
fn shadowing(tool: &ToolText, field: &str, text: &str, others: &[OtherTool], findings: &mut Vec<Finding>) {
    for other in others.iter().filter(|other| other.server != tool.server && other.name != tool.name) {
        let exposed = format!("{}__{}", other.server, other.name);
        let offset = match distinctive(other.name) {
            true => word_at(text, other.name),
            false => text.find(&exposed),
        };
        let Some(offset) = offset else { continue };
        let reason = format!(
            "names `{}` of server `{}`: a description that speaks of another server's tool can steer its use",
            other.name, other.server
        );
        let directive = ["instead", "always", "must", "before", "whenever", "every time", "do not use", "never use"];
        let lower = text.to_lowercase();
        let severity = if directive.iter().any(|word| lower.contains(word)) { Severity::High } else { Severity::Medium };
        findings.push(Finding { severity, rule: "shadowing".into(), field: field.to_string(), reason, excerpt: excerpt(text, offset) });
    }
}

/// Where `word` occurs in `text` not as part of a longer identifier.
fn word_at(text: &str, word: &str) -> Option<usize> {
    let identifier = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    text.match_indices(word).map(|(offset, _)| offset).find(|&offset| {
        let before = text[..offset].chars().next_back();
        let after = text[offset + word.len()..].chars().next();
        let prefixed = before.is_some_and(identifier) && !text[..offset].ends_with("__");
        !prefixed && !after.is_some_and(identifier)
    })
}

fn finding(severity: Severity, rule: &str, field: &str, reason: &str, text: &str, offset: usize) -> Finding {
    Finding { severity, rule: rule.to_string(), field: field.to_string(), reason: reason.to_string(), excerpt: excerpt(text, offset) }
}

/// Up to [`EXCERPT_CHARS`] characters from a little before `offset`, with
/// hidden characters written out.
fn excerpt(text: &str, offset: usize) -> String {
    let start = text[..offset].char_indices().rev().nth(20).map_or(0, |(index, _)| index);
    let mut shown = String::new();
    for c in text[start..].chars().take(EXCERPT_CHARS) {
        match hidden(c) {
            Some(_) => shown.push_str(&format!("<U+{:04X}>", c as u32)),
            None if c == '\n' => shown.push(' '),
            None => shown.push(c),
        }
    }
    shown
}
