//! Finding tools in a large catalog by what they do: the ranking behind
//! `mcpvisor tools --search` and the agent's `search_tools` tool.
//!
//! **Words.** The query and each tool's name, server name, title and
//! description are cut into words: at every character that is not a letter
//! or digit (`_`, `-`, `.`, blanks, ...) and at camelCase humps
//! (`createIssue`, `HTTPServer`); compared in lowercase, after a light
//! stemming that makes `files`/`file`, `issues`/`issue`,
//! `created`/`create`/`creating` and `directories`/`directory` meet.
//! Common words (`a`, `the`, `to`, `tool`, ...) are dropped from the query
//! unless nothing else is left.
//!
//! **Score.** Each query word counts once, for the field where it matches
//! best: a whole word scores its field's weight (name 3, server 2, title 2,
//! description 1), the start of a word (at least 3 letters: `gith`) 70 %
//! of it, inside a word (at least 4 letters: `system` in `filesystem`)
//! 40 %. The sum is then scaled by the share of query words that matched
//! (a tool matching every word ranks above one matching some), and a bonus
//! goes to the share of the tool's name words that were asked for (so
//! `read a file` puts `read_file` before `read_multiple_files`). A query that is the tool's
//! name, its exposed name, or its name's words in order (`create issue`,
//! `createIssue` for `create_issue`) ranks first.
//!
//! A query word also matches a few synonyms (`send`/`post`,
//! `delete`/`remove`, `folder`/`directory`, ...: [`SYNONYMS`]) at 80 %.
//!
//! **Order.** Highest score first; ties by exposed name, so equal queries
//! over equal catalogs give equal answers. Tools that match no word are
//! left out; a query without any word lists the tools in catalog order.

use rmcp::model::Tool;

use crate::pool::{KeptTool, ToolEntry};

/// What a search reads of a tool: all but its schemas.
pub trait Searched {
    fn head(&self) -> &Tool;
}

impl Searched for Tool {
    fn head(&self) -> &Tool {
        self
    }
}

impl Searched for KeptTool {
    fn head(&self) -> &Tool {
        KeptTool::head(self)
    }
}

/// Weights of the fields a query word can match.
const NAME: f64 = 3.0;
const SERVER: f64 = 2.0;
const TITLE: f64 = 2.0;
const DESCRIPTION: f64 = 1.0;
/// How much a match at the start of a word, or inside one, is worth.
const PREFIX: f64 = 0.7;
const INSIDE: f64 = 0.4;
/// Bonus for a tool whose name words were all asked for (a share of it
/// for some of them).
const WHOLE_NAME: f64 = 1.5;
/// Score of an exact name match, above anything words can add up to.
const EXACT: f64 = 1000.0;

/// Words that mean the same to someone looking for a tool; a query word
/// also matches its synonyms, at [`SYNONYM`] of the score.
const SYNONYMS: [&[&str]; 12] = [
    &["send", "post"],
    &["delete", "remove"],
    &["find", "search", "lookup"],
    &["get", "fetch", "retrieve"],
    &["create", "make"],
    &["update", "edit", "modify", "change"],
    &["run", "execute", "exec"],
    &["directory", "folder"],
    &["repository", "repo"],
    &["screenshot", "capture"],
    &["page", "website", "webpage", "url"],
    &["open", "navigate", "visit", "browse"],
];
const SYNONYM: f64 = 0.8;

/// Query words that say nothing about a tool.
const STOP_WORDS: [&str; 40] = [
    "a", "an", "the", "to", "of", "for", "in", "on", "at", "by", "with", "from", "into", "about", "and", "or", "is", "are", "be", "it",
    "its", "this", "that", "my", "me", "i", "you", "your", "some", "any", "please", "can", "could", "would", "how", "what", "which",
    "tool", "tools", "mcp",
];

/// The tools that best match `query`, best first, at most `limit`.
pub fn search<'a, T: Searched>(query: &str, tools: &'a [ToolEntry<T>], limit: usize) -> Vec<&'a ToolEntry<T>> {
    let query = Query::new(query);
    if query.terms.is_empty() {
        return tools.iter().take(limit).collect();
    }
    let mut scored: Vec<(f64, &ToolEntry<T>)> = tools.iter().filter_map(|entry| Some((query.score(entry)?, entry))).collect();
    scored.sort_by(|(a, x), (b, y)| b.total_cmp(a).then_with(|| x.name.cmp(&y.name)));
    scored.into_iter().take(limit).map(|(_, entry)| entry).collect()
}

/// A query cut into stemmed words.
struct Query {
    /// The whole query, lowercase and trimmed, for exact name matches.
    whole: String,
    terms: Vec<String>,
    /// Per term: the words it matches (itself first) and what each is worth.
    alternatives: Vec<Vec<(String, f64)>>,
}

impl Query {
    fn new(text: &str) -> Query {
        let all = words(text);
        let meaningful: Vec<String> = all.iter().filter(|word| !STOP_WORDS.contains(&word.as_str())).cloned().collect();
        let chosen = if meaningful.is_empty() { all } else { meaningful };
        let mut terms: Vec<String> = chosen.iter().map(|word| stem(word)).collect();
        terms.dedup();
        let alternatives = terms.iter().map(|term| alternatives(term)).collect();
        Query { whole: text.trim().to_lowercase(), terms, alternatives }
    }

    /// The tool's score, or `None` when no query word matches it.
    fn score<T: Searched>(&self, entry: &ToolEntry<T>) -> Option<f64> {
        let tool = entry.tool.head();
        let name = stems(&tool.name);
        let title_text = [tool.title.as_deref(), tool.annotations.as_ref().and_then(|a| a.title.as_deref())];
        let fields = [
            (NAME, name.clone()),
            (SERVER, stems(&entry.server)),
            (TITLE, title_text.iter().flatten().flat_map(|title| stems(title)).collect()),
            (DESCRIPTION, tool.description.as_deref().map(stems).unwrap_or_default()),
        ];
        let mut sum = 0.0;
        let mut matched = 0;
        for alternatives in &self.alternatives {
            let best = alternatives
                .iter()
                .flat_map(|(term, worth)| fields.iter().map(move |(weight, words)| worth * weight * best_match(term, words)))
                .fold(0.0, f64::max);
            if best > 0.0 {
                sum += best;
                matched += 1;
            }
        }
        if matched == 0 {
            return None;
        }
        let coverage = matched as f64 / self.terms.len() as f64;
        let asked = |word: &String| self.alternatives.iter().flatten().any(|(term, _)| term == word);
        let name_asked = if name.is_empty() { 0.0 } else { name.iter().filter(|word| asked(word)).count() as f64 / name.len() as f64 };
        let exact = self.whole == tool.name.to_lowercase() || self.whole == entry.name.to_lowercase() || self.terms == name;
        Some(sum * (1.0 + coverage) + WHOLE_NAME * name_asked + if exact { EXACT } else { 0.0 })
    }
}

/// How well `term` matches the best of `words`: 1 whole, [`PREFIX`] at a
/// word's start, [`INSIDE`] within one, 0 not at all.
fn best_match(term: &str, words: &[String]) -> f64 {
    let quality = |word: &String| {
        if word == term {
            1.0
        } else if term.len() >= 3 && word.starts_with(term) {
            PREFIX
        } else if term.len() >= 4 && word.contains(term) {
            INSIDE
        } else {
            0.0
        }
    };
    words.iter().map(quality).fold(0.0, f64::max)
}

/// `term` (worth 1) and its stemmed synonyms (worth [`SYNONYM`]).
fn alternatives(term: &str) -> Vec<(String, f64)> {
    let mut found = vec![(term.to_string(), 1.0)];
    for group in SYNONYMS {
        let stems: Vec<String> = group.iter().map(|word| stem(word)).collect();
        if stems.iter().any(|word| word == term) {
            found.extend(stems.into_iter().filter(|word| word != term).map(|word| (word, SYNONYM)));
        }
    }
    found
}

/// The stemmed words of `text`.
fn stems(text: &str) -> Vec<String> {
    words(text).iter().map(|word| stem(word)).collect()
}

/// `text` cut at non-alphanumeric characters and camelCase humps, in lowercase.
fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (at, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            flush(&mut current, &mut words);
            continue;
        }
        let previous = at.checked_sub(1).map(|i| chars[i]);
        let next = chars.get(at + 1);
        let hump = c.is_uppercase()
            && previous
                .is_some_and(|p| p.is_lowercase() || p.is_ascii_digit() || (p.is_uppercase() && next.is_some_and(|n| n.is_lowercase())));
        if hump {
            flush(&mut current, &mut words);
        }
        current.extend(c.to_lowercase());
    }
    flush(&mut current, &mut words);
    words
}

fn flush(current: &mut String, words: &mut Vec<String>) {
    if !current.is_empty() {
        words.push(std::mem::take(current));
    }
}

/// A light English stemmer: plural `s`/`ies`, `ing`, `ed`, a final `e`.
/// Query and tools are stemmed alike, so only consistency matters.
fn stem(word: &str) -> String {
    let mut stem = word.to_string();
    let len = stem.chars().count();
    if len > 4 && stem.ends_with("ies") {
        stem.truncate(stem.len() - 3);
        stem.push('y');
    } else if len > 3 && stem.ends_with('s') && !["ss", "us", "is"].iter().any(|end| stem.ends_with(end)) {
        stem.pop();
    }
    let len = stem.chars().count();
    if len > 6 && stem.ends_with("ing") {
        stem.truncate(stem.len() - 3);
    } else if len > 4 && stem.ends_with("ed") {
        stem.truncate(stem.len() - 2);
    }
    if stem.chars().count() > 3 && stem.ends_with('e') {
        stem.pop();
    }
    stem
}

#[cfg(test)]
mod tests;
