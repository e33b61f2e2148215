//! The architecture test's reader: which module of the workspace names
//! which, from the sources alone (no compiler, no extra crate).
//!
//! Nodes are the top-level modules of each crate (`config`, `gateway`, ...)
//! and the modules of the actors crate (`actors` for its lib.rs,
//! `actors::hub`, ...), as `../shared/tools/module_loops.py` draws them. The
//! lower crates' modules are named in the crates above as their own
//! (`crate::protocol` in the actors is `mcpvisor_wire::protocol`), so a
//! path means one module whichever crate it is read in. An arrow A -> B
//! means a non-test file of A names B through a path rooted at `crate::`,
//! at a crate of the workspace (`mcpvisor_wire::`, ...) (in a `use`, a
//! `use crate::{...}` group, an expression, or a doc link: a doc link
//! pointing up is an arrow too) or at `super::`/`self::`; a name the root
//! crate re-exports (`crate::Handle`) counts for the module it comes from.
//! Strings, plain comments, `#[cfg(test)]` items, files named `tests.rs`
//! and files mounted by a `#[cfg(test)] mod` are not read.
//!
//! The layers come from ONE table: the rows `| module | layer | ... |` of
//! docs/architecture.md. The compiler enforces them between crates (a crate
//! depends only on the crates below it); this reader checks that each module
//! lives in its layer's crate and that no modules form a loop.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One source file: its path from the repository root (`crates/wire/src/config/mod.rs`) and its text.
pub struct Source {
    pub path: String,
    pub text: String,
}

/// A module graph: arrows with one example file each.
#[derive(Debug, Default)]
pub struct Graph {
    pub modules: BTreeSet<String>,
    /// The layer of the crate each module's files live in (`CRATES`).
    pub homes: BTreeMap<String, u8>,
    pub arrows: BTreeMap<(String, String), String>,
}

/// What the check found; empty when the tree keeps its layers.
#[derive(Debug, Default, PartialEq)]
pub struct Findings {
    /// `(from, to, example file)` for every arrow into a higher layer.
    pub upward: Vec<(String, String, String)>,
    /// Strongly connected sets of more than one module, each sorted.
    pub loops: Vec<Vec<String>>,
    /// Modules the layer table does not place.
    pub unplaced: Vec<String>,
    /// Rows of the layer table that name no module.
    pub unknown_rows: Vec<String>,
    /// `(module, its row's layer, the layer of the crate it lives in)` where the two differ.
    pub misplaced: Vec<(String, u8, u8)>,
}

/// The workspace's crates, bottom up: the folder of each one's sources, the
/// name code calls it by, and its layer.
pub const CRATES: &[(&str, &str, u8)] = &[
    ("crates/wire/src", "mcpvisor_wire", 1),
    ("crates/services/src", "mcpvisor_services", 2),
    ("actors/src", "mcpvisor_actors", 3),
    ("src", "mcpvisor", 4),
];

/// The crate a file belongs to (its `CRATES` row).
pub fn crate_of(path: &str) -> Option<&'static (&'static str, &'static str, u8)> {
    CRATES.iter().find(|(dir, _, _)| path.starts_with(&format!("{dir}/")))
}

/// Reads every `.rs` file of every crate of `root`'s workspace.
pub fn read_tree(root: &Path) -> Vec<Source> {
    let mut sources = Vec::new();
    for (top, _, _) in CRATES {
        read_dir(root, &root.join(top), &mut sources);
    }
    sources.sort_by(|a, b| a.path.cmp(&b.path));
    sources
}

fn read_dir(root: &Path, dir: &Path, sources: &mut Vec<Source>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|error| panic!("cannot read {}: {error}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        let kind = std::fs::symlink_metadata(&path).expect("file metadata").file_type();
        if kind.is_dir() {
            read_dir(root, &path, sources);
        } else if kind.is_file() && path.extension().is_some_and(|ext| ext == "rs") {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
            let relative = path.strip_prefix(root).expect("under the root").to_string_lossy().replace('\\', "/");
            sources.push(Source { path: relative, text });
        }
    }
}

/// The module path of a file (`actors/src/connection/calls.rs` -> `actors::connection::calls`,
/// `crates/wire/src/config/mod.rs` -> `config`); `None` for the roots of the crates below
/// the actors (their modules' list and nothing else), `src/lib.rs` and `src/main.rs` (the
/// facade and the binary, on top).
pub fn module_path(path: &str) -> Option<Vec<String>> {
    let (dir, name, _) = crate_of(path)?;
    let stem = path.strip_prefix(&format!("{dir}/"))?.strip_suffix(".rs")?;
    let mut parts: Vec<String> = stem.split('/').map(str::to_owned).collect();
    if *name == "mcpvisor_actors" {
        parts.insert(0, "actors".into());
        if parts.len() == 2 && parts[1] == "lib" {
            parts.pop();
        }
    } else if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        return None;
    }
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    Some(parts)
}

/// The graph node of a module path: `actors::X` for the actors, the top-level module otherwise.
fn node_of(path: &[String]) -> Option<String> {
    match path {
        [] => None,
        [first, second, ..] if first == "actors" => Some(format!("actors::{second}")),
        [first, ..] => Some(first.clone()),
    }
}

/// The layer table: module -> layer, from the rows `| [`module`] | N name | ... |` of `lib_rs`'s crate doc.
pub fn layer_table(text: &str) -> BTreeMap<String, u8> {
    let mut table = BTreeMap::new();
    for line in text.lines() {
        // A Markdown table, in a file or in a crate doc.
        let line = line.trim_start();
        let row = line.strip_prefix("//!").unwrap_or(line).trim();
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        // "| a | b | c |" splits into ["", a, b, c, ""].
        if cells.len() < 4 || !cells[0].is_empty() {
            continue;
        }
        let module: String = cells[1].chars().filter(|c| !matches!(c, '[' | ']' | '`')).collect();
        let Some(layer) = cells[2].chars().next().and_then(|c| c.to_digit(10)) else { continue };
        table.insert(module, layer as u8);
    }
    table
}

/// The layer of a node: its own row, else its top-level module's (`actors::hub` -> `actors`).
pub fn layer_of(node: &str, table: &BTreeMap<String, u8>) -> Option<u8> {
    table.get(node).or_else(|| table.get(node.split("::").next()?)).copied()
}

/// Names the crate root re-exports (`pub use handle::{Handle, Runtime}`), with the path they come from.
fn root_exports(lib_rs: &str) -> BTreeMap<String, Vec<String>> {
    let scanned = scan(lib_rs);
    let mut exports = BTreeMap::new();
    let mut rest = scanned.code.as_str();
    while let Some(at) = rest.find("pub use ") {
        rest = &rest[at + "pub use ".len()..];
        let end = rest.find(';').unwrap_or(rest.len());
        for path in parse_use_tree(&rest[..end]) {
            let Some(name) = path.last().cloned() else { continue };
            // The lower crates' modules are the root's own: `mcpvisor_wire::config` is `config`.
            let path = absolute(&path, &[], false, &BTreeSet::new()).unwrap_or(path);
            exports.insert(name, path);
        }
    }
    exports
}

/// Builds the graph of `sources` (which must include `src/lib.rs` for the table and the re-exports).
pub fn graph(sources: &[Source]) -> Graph {
    let lib_rs = sources.iter().find(|s| s.path == "src/lib.rs").map(|s| s.text.as_str()).unwrap_or("");
    let exports = root_exports(lib_rs);
    let test_only = test_only_files(sources);
    // The actors' own top-level modules: `crate::hub` read in the actors is `actors::hub`.
    let actors_modules: BTreeSet<String> = sources
        .iter()
        .filter_map(|source| module_path(&source.path))
        .filter(|p| p.len() >= 2 && p[0] == "actors")
        .map(|p| p[1].clone())
        .collect();
    let mut graph = Graph::default();
    for source in sources {
        let Some(here) = module_path(&source.path) else { continue };
        if source.path.ends_with("/tests.rs") || test_only.contains(&source.path) || scan(&source.text).code.contains("#![cfg(test)]") {
            continue;
        }
        let Some(from) = node_of(&here) else { continue };
        graph.modules.insert(from.clone());
        if let Some((_, _, layer)) = crate_of(&source.path) {
            graph.homes.insert(from.clone(), *layer);
        }
        let in_actors = crate_of(&source.path).is_some_and(|(_, name, _)| *name == "mcpvisor_actors");
        for path in references(&source.text) {
            let Some(absolute) = absolute(&path, &here, in_actors, &actors_modules) else { continue };
            let resolved = match absolute.first().and_then(|first| exports.get(first)) {
                Some(exported) => exported.iter().chain(&absolute[1..]).cloned().collect(),
                None => absolute,
            };
            let Some(to) = node_of(&resolved) else { continue };
            // A parent naming its children (actors/src/lib.rs re-exporting them) is containment, not an import.
            if to == from || to.starts_with(&format!("{from}::")) || !resolved[0].starts_with(|c: char| c.is_ascii_lowercase()) {
                continue;
            }
            graph.arrows.entry((from.clone(), to)).or_insert_with(|| source.path.clone());
        }
    }
    // Arrows to names that are no module of the tree (`crate::some_macro`) are dropped.
    let known = graph.modules.clone();
    graph.arrows.retain(|(_, to), _| known.contains(to));
    graph
}

/// `crate::a::b` -> `[a, b]` (`[actors, a, b]` in the actors crate when `a` is one of
/// its own modules); `mcpvisor_wire::a` -> `[a]`, `mcpvisor_actors::a` -> `[actors, a]`;
/// `super::x` and `self::x` are resolved against the file's module `here`.
fn absolute(path: &[String], here: &[String], in_actors: bool, actors_modules: &BTreeSet<String>) -> Option<Vec<String>> {
    let actors = || vec!["actors".to_string()];
    let (mut base, mut rest): (Vec<String>, &[String]) = match path.first()?.as_str() {
        "crate" | "$crate" if in_actors && path.get(1).is_some_and(|first| actors_modules.contains(first)) => (actors(), &path[1..]),
        "crate" | "$crate" if in_actors && path.len() == 1 => (actors(), &path[1..]),
        "crate" | "$crate" | "mcpvisor_wire" | "mcpvisor_services" | "mcpvisor" => (Vec::new(), &path[1..]),
        "mcpvisor_actors" => (actors(), &path[1..]),
        "self" => (here.to_vec(), &path[1..]),
        "super" => (here.to_vec(), path),
        _ => return None,
    };
    while rest.first().is_some_and(|s| s == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// Files mounted only for tests: `#[cfg(test)] mod x;` (or with `#[path = "..."]`) names them.
fn test_only_files(sources: &[Source]) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    for source in sources {
        let scanned = scan(&source.text);
        let dir = source.path.rsplit_once('/').map(|(dir, _)| dir).unwrap_or("");
        let stem = source.path.rsplit('/').next().unwrap_or("").trim_end_matches(".rs");
        // Children of a non-mod.rs file `dir/x.rs` live in `dir/x/`.
        let child_dir = if matches!(stem, "mod" | "lib" | "main") { dir.to_owned() } else { format!("{dir}/{stem}") };
        for range in test_only_ranges(&scanned.code) {
            let item = &source.text[range];
            let Some(name) = declared_module(item) else { continue };
            match path_attribute(item) {
                Some(path) => files.insert(format!("{dir}/{path}")),
                None => files.insert(format!("{child_dir}/{name}.rs")) | files.insert(format!("{child_dir}/{name}/mod.rs")),
            };
        }
    }
    files
}

/// `mod name;` at the end of an item's text.
fn declared_module(item: &str) -> Option<&str> {
    let before = item.trim_end().strip_suffix(';')?;
    let name = before.rsplit(char::is_whitespace).next()?;
    before.trim_end_matches(name).trim_end().ends_with("mod").then_some(name)
}

fn path_attribute(item: &str) -> Option<&str> {
    let after = &item[item.find("#[path")?..];
    let start = after.find('"')? + 1;
    let end = start + after[start..].find('"')?;
    Some(&after[start..end])
}

/// A file's text with strings and comments blanked (same byte offsets), and its doc comments apart.
pub struct Scanned {
    pub code: String,
    pub docs: Vec<(usize, String)>,
}

/// Blanks string and character literals and comments to spaces (newlines kept), so that braces and
/// `crate::` inside them are not read; doc comments (`///`, `//!`, `/** */`, `/*! */`) are kept apart.
pub fn scan(text: &str) -> Scanned {
    let bytes = text.as_bytes();
    let mut code = bytes.to_vec();
    let mut docs = Vec::new();
    let blank = |code: &mut Vec<u8>, from: usize, to: usize| {
        for byte in &mut code[from..to.min(bytes.len())] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    };
    let ident = |at: usize| at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_');
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        let end = if rest.starts_with(b"//") {
            let end = i + rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            let is_doc = (rest.starts_with(b"///") && !rest.starts_with(b"////")) || rest.starts_with(b"//!");
            if is_doc {
                docs.push((i, text[i + 3..end].to_owned()));
            }
            end
        } else if rest.starts_with(b"/*") {
            let (mut depth, mut j) = (0usize, i);
            while j < bytes.len() {
                if bytes[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if bytes[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            if (rest.starts_with(b"/**") && !rest.starts_with(b"/**/")) || rest.starts_with(b"/*!") {
                docs.push((i, text[i + 3..j.saturating_sub(2).max(i + 3)].to_owned()));
            }
            j
        } else if bytes[i] == b'"' {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            j + 1
        } else if (bytes[i] == b'r' || rest.starts_with(b"br")) && (i == 0 || !ident(i - 1)) && raw_string_start(rest).is_some() {
            let (open, hashes) = raw_string_start(rest).expect("checked");
            let closing: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
            let body = i + open;
            body + bytes[body..]
                .windows(closing.len())
                .position(|w| w == closing.as_slice())
                .map_or(bytes.len() - body, |p| p + closing.len())
        } else if bytes[i] == b'\'' {
            char_literal_end(text, i).unwrap_or(i + 1)
        } else {
            i += 1;
            continue;
        };
        if end > i + 1 || bytes[i] != b'\'' {
            blank(&mut code, i, end);
        }
        i = end.max(i + 1);
    }
    Scanned { code: String::from_utf8(code).expect("blanking keeps UTF-8"), docs }
}

/// `r"`, `r#"`, `br##"`...: the length of the opening and the number of `#`.
fn raw_string_start(rest: &[u8]) -> Option<(usize, usize)> {
    let after_r = if rest.starts_with(b"br") { 2 } else { 1 };
    let hashes = rest[after_r..].iter().take_while(|&&b| b == b'#').count();
    (rest.get(after_r + hashes) == Some(&b'"')).then_some((after_r + hashes + 1, hashes))
}

/// The end of a character literal at `at` (`'x'`, `'\n'`, `'\u{1F600}'`); `None` for a lifetime (`'a`).
fn char_literal_end(text: &str, at: usize) -> Option<usize> {
    let rest = &text[at + 1..];
    if let Some(escaped) = rest.strip_prefix('\\') {
        // Skip the escaped character itself: `'\''` ends at its fourth byte.
        let first = escaped.chars().next()?;
        return escaped[first.len_utf8()..].find('\'').map(|p| at + 2 + first.len_utf8() + p + 1);
    }
    let first = rest.chars().next()?;
    rest[first.len_utf8()..].starts_with('\'').then(|| at + 1 + first.len_utf8() + 1)
}

/// Byte ranges of the items under `#[cfg(test)]` in blanked `code`: the attribute, any further
/// attributes, and the item up to its `;` or its closing brace.
pub fn test_only_ranges(code: &str) -> Vec<std::ops::Range<usize>> {
    let bytes = code.as_bytes();
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("#[cfg(test)]") {
        let start = from + found;
        let (mut depth, mut j, mut end) = (0i32, start, code.len());
        while j < bytes.len() {
            match bytes[j] {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => {
                    end = j + 1;
                    break;
                }
                b'{' if depth == 0 => {
                    end = matching_brace(bytes, j);
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        ranges.push(start..end);
        from = end.max(start + 1);
    }
    ranges
}

fn matching_brace(bytes: &[u8], open: usize) -> usize {
    let mut depth = 0;
    for (j, &byte) in bytes.iter().enumerate().skip(open) {
        match byte {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
    }
    bytes.len()
}

/// Every path a file names from `crate::`, `$crate::`, `super::` or `self::` (groups expanded),
/// in code and in doc comments, outside `#[cfg(test)]` items.
pub fn references(text: &str) -> BTreeSet<Vec<String>> {
    let scanned = scan(text);
    let skipped = test_only_ranges(&scanned.code);
    let live = |at: usize| !skipped.iter().any(|range| range.contains(&at));
    let mut paths = BTreeSet::new();
    let mut collect = |part: &str, links_only: bool| {
        for (at, _) in part.match_indices("::") {
            let before = &part[..at];
            let root_start = before.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$')).map_or(0, |p| p + 1);
            let root = &before[root_start..];
            let is_root = matches!(root, "crate" | "$crate" | "self" | "super")
                || CRATES.iter().any(|(_, name, _)| *name == root && *name != "mcpvisor");
            // `super::super::x` is read once, from its first segment.
            let continues = before[..root_start].trim_end().ends_with("::");
            if is_root && !continues && (!links_only || is_link(&before[..root_start])) {
                let end = path_end(part, root_start);
                paths.extend(parse_use_tree(&part[root_start..end]));
            }
        }
    };
    let mut code = scanned.code.clone();
    for range in &skipped {
        code.replace_range(range.clone(), &" ".repeat(range.len()));
    }
    collect(&code, false);
    for (at, doc) in &scanned.docs {
        if live(*at) {
            collect(doc, true);
        }
    }
    paths
}

/// Whether a doc path that follows `before` is a link (``[`crate::x`]``, `[text](crate::x)`,
/// `[text]: crate::x`), which rustdoc resolves; a path only mentioned in backticks is prose.
fn is_link(before: &str) -> bool {
    let before = before.strip_suffix('`').unwrap_or(before);
    before.ends_with('[') || before.ends_with("](") || before.trim_end().ends_with("]:")
}

/// Where a path (with any `{...}` groups) starting at `start` ends.
fn path_end(text: &str, start: usize) -> usize {
    let mut depth = 0;
    for (j, c) in text[start..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return start + j,
            '}' => depth -= 1,
            c if depth == 0 && !(c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == ':') => return start + j,
            _ => {}
        }
    }
    text.len()
}

/// `a::{b, c::{d, e as f}, self}` -> `[a, b]`, `[a, c, d]`, `[a, c, e]`, `[a]`.
pub fn parse_use_tree(tree: &str) -> Vec<Vec<String>> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or("");
        let segments: Vec<String> = path.split("::").map(str::trim).filter(|s| !s.is_empty() && *s != "*").map(str::to_owned).collect();
        return if segments.is_empty() { Vec::new() } else { vec![segments] };
    };
    let prefix: Vec<String> = tree[..open].split("::").map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
    let close = tree.rfind('}').unwrap_or(tree.len());
    let mut out = Vec::new();
    for branch in split_top_level(&tree[open + 1..close]) {
        if branch.trim() == "self" {
            out.push(prefix.clone());
            continue;
        }
        for tail in parse_use_tree(branch) {
            out.push(prefix.iter().cloned().chain(tail).collect());
        }
    }
    out
}

fn split_top_level(body: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (j, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&body[start..j]);
                start = j + 1;
            }
            _ => {}
        }
    }
    parts.push(&body[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// Upward arrows, loops, unplaced modules and stray table rows of `graph` under `table`.
pub fn check(graph: &Graph, table: &BTreeMap<String, u8>) -> Findings {
    let mut findings = Findings::default();
    for ((from, to), file) in &graph.arrows {
        if let (Some(low), Some(high)) = (layer_of(from, table), layer_of(to, table)) {
            if high > low {
                findings.upward.push((from.clone(), to.clone(), file.clone()));
            }
        }
    }
    findings.unplaced = graph.modules.iter().filter(|m| layer_of(m, table).is_none()).cloned().collect();
    findings.unknown_rows = table.keys().filter(|row| !graph.modules.contains(*row)).cloned().collect();
    findings.loops = strongly_connected(graph);
    for (module, home) in &graph.homes {
        match layer_of(module, table) {
            Some(layer) if layer != *home => findings.misplaced.push((module.clone(), layer, *home)),
            _ => {}
        }
    }
    findings
}

/// Tarjan's strongly connected sets with more than one module, each sorted, in a stable order.
fn strongly_connected(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'a> {
        next: BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        sets: Vec<Vec<String>>,
    }
    fn visit<'a>(walk: &mut Walk<'a>, v: &'a str) {
        let number = walk.index.len();
        walk.index.insert(v, number);
        walk.low.insert(v, number);
        walk.stack.push(v);
        for w in walk.next.get(v).cloned().unwrap_or_default() {
            if !walk.index.contains_key(w) {
                visit(walk, w);
                let low = walk.low[v].min(walk.low[w]);
                walk.low.insert(v, low);
            } else if walk.stack.contains(&w) {
                let low = walk.low[v].min(walk.index[w]);
                walk.low.insert(v, low);
            }
        }
        if walk.low[v] == walk.index[v] {
            let at = walk.stack.iter().rposition(|&w| w == v).expect("on the stack");
            let mut set: Vec<String> = walk.stack.drain(at..).map(str::to_owned).collect();
            if set.len() > 1 {
                set.sort();
                walk.sets.push(set);
            }
        }
    }
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in graph.arrows.keys() {
        next.entry(from.as_str()).or_default().push(to.as_str());
    }
    let mut walk = Walk { next, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), sets: Vec::new() };
    for module in &graph.modules {
        if !walk.index.contains_key(module.as_str()) {
            visit(&mut walk, module);
        }
    }
    walk.sets.sort();
    walk.sets
}
