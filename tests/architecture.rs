//! The layers of docs/architecture.md's module table ("Layers") hold: the
//! crate graph is the table (each crate depends only on the crates of the
//! layers below it, so the compiler refuses an import that points up), every
//! module lives in its layer's crate, and no modules form a loop.

mod architecture_support;

use std::collections::BTreeSet;
use std::path::Path;

use architecture_support::{check, graph, layer_table, read_tree, references, Findings, Graph, Source, CRATES};

/// Arrows allowed to point up a layer, each `"from -> to"`: none since issue
/// 21 (config as data, one server side, `Handle` beside the actors). The
/// list can only shrink: the test fails when an arrow appears that is not
/// here, and when one listed here is gone.
const KNOWN_UPWARD: &[&str] = &[];

/// Loops between modules today, each its modules sorted and joined by
/// `" <-> "` (issue 21). Like [`KNOWN_UPWARD`], exact both ways.
const KNOWN_LOOPS: &[&str] = &[];

#[test]
fn every_import_points_down_and_no_modules_form_a_loop() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources = read_tree(root);
    let architecture = std::fs::read_to_string(root.join("docs/architecture.md")).expect("docs/architecture.md is read");
    // The module table only: other tables of the file have rows of their own.
    let rows = architecture.lines().skip_while(|line| !line.starts_with("| module | layer |")).take_while(|line| line.starts_with('|'));
    let table = layer_table(&rows.collect::<Vec<_>>().join("\n"));
    assert!(
        table.len() >= 20,
        "the module table of docs/architecture.md was not found (rows `| [`module`] | N name | ... |`); read: {table:?}"
    );
    let graph = graph(&sources);
    assert!(graph.modules.contains("actors::hub"), "the actors were not read from actors/: {:?}", graph.modules);
    let findings = check(&graph, &table);
    let problems = problems(&graph, &findings, KNOWN_UPWARD, KNOWN_LOOPS);
    assert!(problems.is_empty(), "the layers of docs/architecture.md do not hold:\n{}", problems.join("\n"));
}

/// Every finding not allowed by the lists, and every listed arrow or loop that no longer exists.
fn problems(graph: &Graph, findings: &Findings, known_upward: &[&str], known_loops: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    for module in &findings.unplaced {
        problems.push(format!("module `{module}` has no row in the module table of docs/architecture.md: place it in a layer"));
    }
    for (module, layer, home) in &findings.misplaced {
        let (dir, _, _) = CRATES.iter().find(|(_, _, l)| l == layer).expect("every layer has a crate");
        problems.push(format!("module `{module}` is placed in layer {layer} but lives in the crate of layer {home}: move it under {dir}/"));
    }
    for row in &findings.unknown_rows {
        problems.push(format!("the module table of docs/architecture.md names `{row}`, which is no module: remove the row"));
    }
    let upward: BTreeSet<String> = findings.upward.iter().map(|(from, to, _)| format!("{from} -> {to}")).collect();
    for (from, to, file) in &findings.upward {
        if !known_upward.contains(&format!("{from} -> {to}").as_str()) {
            problems.push(format!("{from} -> {to} points up a layer (e.g. {file})"));
        }
    }
    for known in known_upward {
        if !upward.contains(*known) {
            problems.push(format!("KNOWN_UPWARD lists `{known}`, which no longer points up: remove it from tests/architecture.rs"));
        }
    }
    let loops: BTreeSet<String> = findings.loops.iter().map(|set| set.join(" <-> ")).collect();
    for set in &findings.loops {
        let name = set.join(" <-> ");
        if !known_loops.contains(&name.as_str()) {
            let inside = graph.arrows.iter().filter(|((from, to), _)| set.contains(from) && set.contains(to));
            let arrows: Vec<String> = inside.map(|((from, to), file)| format!("    {from} -> {to}   ({file})")).collect();
            problems.push(format!("loop: {name}\n{}", arrows.join("\n")));
        }
    }
    for known in known_loops {
        if !loops.contains(*known) {
            problems
                .push(format!("KNOWN_LOOPS lists `{known}`, which is no longer a loop: remove it (or put the smaller loop in its place)"));
        }
    }
    problems
}

// The checker checked: small made-up trees, so that it cannot pass by finding nothing.

const LIB_RS: &str = "//! | module | layer | what |
//! | --- | --- | --- |
//! | [`protocol`] | 1 data | |
//! | [`config`] | 1 data | |
//! | `transport` | 2 services | |
//! | [`actors`] | 3 actors | |
//! | [`handle`] | 4 fronts | |
pub mod protocol;
pub use handle::{Handle, Runtime};
pub use actors::hub::Hub;
";

fn findings_of(files: &[(&str, &str)]) -> (Graph, Findings) {
    let mut sources: Vec<Source> = files.iter().map(|(path, text)| Source { path: path.to_string(), text: text.to_string() }).collect();
    sources.push(Source { path: "src/lib.rs".into(), text: LIB_RS.into() });
    let graph = graph(&sources);
    let findings = check(&graph, &layer_table(LIB_RS));
    (graph, findings)
}

const CLEAN: &[(&str, &str)] = &[
    ("crates/wire/src/protocol/mod.rs", "pub mod era;\n"),
    ("crates/wire/src/protocol/era.rs", "pub struct Era;\n"),
    ("crates/wire/src/config/mod.rs", "use crate::protocol::era::Era;\n"),
    ("crates/services/src/transport/mod.rs", "use crate::{config, protocol::{era::Era}};\n"),
    ("src/handle.rs", "use crate::actors::hub::Hub;\n"),
    ("actors/src/lib.rs", "pub mod hub;\npub mod registry;\npub use crate::config::Config;\n"),
    ("actors/src/hub.rs", "use super::registry::Registry;\nuse crate::transport::Pipe;\n"),
    ("actors/src/registry.rs", "pub struct Registry;\n"),
];

#[test]
fn a_clean_tree_passes() {
    let (graph, findings) = findings_of(CLEAN);
    assert_eq!(findings, Findings::default(), "arrows read: {:?}", graph.arrows.keys().collect::<Vec<_>>());
    // It passes because the arrows are down, not because none were read.
    let read: Vec<String> = graph.arrows.keys().map(|(from, to)| format!("{from} -> {to}")).collect();
    let expected = ["actors -> config", "actors::hub -> actors::registry", "actors::hub -> transport", "config -> protocol"];
    for arrow in expected.iter().chain(&["handle -> actors::hub", "transport -> config", "transport -> protocol"]) {
        assert!(read.contains(&arrow.to_string()), "{arrow} was not read; read: {read:?}");
    }
}

#[test]
fn an_upward_import_is_found_in_code_in_a_group_and_in_a_doc_link() {
    for (text, to) in [
        ("fn f() { crate::actors::hub::Hub::stop(); }", "actors::hub"),
        ("use crate::{protocol::era::Era, actors::{hub::{self, Hub}}};", "actors::hub"),
        ("//! Operations in [`crate::actors::hub`] (`crate::handle::Handle` is prose, not a link).", "actors::hub"),
        ("/// Opened by [`crate::Handle::open`], a name the crate root re-exports.\npub struct Config;", "handle"),
        ("/// Opened by [the door](crate::Runtime).\npub struct Config;", "handle"),
    ] {
        let mut files = CLEAN.to_vec();
        files.push(("crates/wire/src/config/paths.rs", text));
        let (_, findings) = findings_of(&files);
        let arrows: Vec<(&str, &str)> = findings.upward.iter().map(|(from, to, _)| (from.as_str(), to.as_str())).collect();
        assert_eq!(arrows, [("config", to)], "in {text:?}");
        assert_eq!(findings.upward[0].2, "crates/wire/src/config/paths.rs", "the example names the file");
    }
}

#[test]
fn a_loop_is_found_with_its_modules_and_shown_with_its_arrows() {
    let registry_uses_hub =
        |&(path, text): &(&'static str, &'static str)| (path, if path == "actors/src/registry.rs" { "use super::hub::Hub;" } else { text });
    let files: Vec<_> = CLEAN.iter().map(registry_uses_hub).collect();
    let (graph, findings) = findings_of(&files);
    assert_eq!(findings.loops, [vec!["actors::hub".to_string(), "actors::registry".to_string()]]);
    let found = problems(&graph, &findings, &[], &[]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("actors::registry -> actors::hub   (actors/src/registry.rs)"), "{}", found[0]);
    assert!(problems(&graph, &findings, &[], &["actors::hub <-> actors::registry"]).is_empty());
}

#[test]
fn strings_comments_and_test_code_are_not_imports() {
    let text = r####"
        const A: &str = "crate::actors::hub";
        const B: &str = r#"crate::actors::hub "# ;
        const C: char = '"'; const D: char = '\''; fn e<'a>(_: &'a str) {}
        // crate::actors::hub
        /* crate::actors::hub /* nested */ crate::actors::hub */
        #[cfg(test)]
        mod tests { use crate::actors::hub::Hub; fn f() { let _ = "}"; } }
        #[cfg(test)]
        #[path = "paths_tests.rs"]
        mod paths_tests;
        #[cfg(test)]
        mod fixtures;
        #[cfg(test)]
        fn helper() { crate::actors::hub::Hub::stop(); }
        use crate::protocol::era::Era;
    "####;
    let mut files = CLEAN.to_vec();
    files.push(("crates/wire/src/config/paths.rs", text));
    files.push(("crates/wire/src/config/paths_tests.rs", "use crate::actors::hub::Hub;"));
    files.push(("crates/wire/src/config/paths/fixtures.rs", "use crate::actors::hub::Hub;"));
    files.push(("crates/wire/src/config/tests.rs", "use crate::handle::Handle;"));
    let (_, findings) = findings_of(&files);
    assert_eq!(findings, Findings::default());
    // The code after all of it is still read.
    assert!(references(text).contains(&vec!["crate".to_string(), "protocol".into(), "era".into(), "Era".into()]));
}

#[test]
fn a_module_without_a_row_and_a_row_without_a_module_are_named() {
    let mut files = CLEAN.to_vec();
    files.push(("src/newroom.rs", "pub struct Room;\n"));
    files.retain(|(path, _)| *path != "src/handle.rs");
    let (graph, findings) = findings_of(&files);
    assert_eq!(findings.unplaced, ["newroom"]);
    assert_eq!(findings.unknown_rows, ["handle"]);
    let found = problems(&graph, &findings, &[], &[]);
    assert!(found.iter().any(|p| p.contains("`newroom` has no row")), "{found:?}");
}

#[test]
fn the_allow_lists_can_only_shrink() {
    let mut files = CLEAN.to_vec();
    files.push(("crates/wire/src/config/paths.rs", "use crate::actors::registry::Registry;"));
    let (graph, findings) = findings_of(&files);
    assert!(problems(&graph, &findings, &["config -> actors::registry"], &[]).is_empty());
    let stale = problems(&graph, &findings, &["config -> actors::registry", "protocol -> handle"], &["config <-> transport"]);
    assert_eq!(stale.len(), 2, "{stale:?}");
    assert!(stale[0].contains("`protocol -> handle`, which no longer points up"), "{}", stale[0]);
    assert!(stale[1].contains("`config <-> transport`, which is no longer a loop"), "{}", stale[1]);
}

#[test]
fn a_module_in_the_crate_of_another_layer_is_named() {
    let mut files = CLEAN.to_vec();
    files.retain(|(path, _)| *path != "crates/services/src/transport/mod.rs");
    files.push(("crates/wire/src/transport/mod.rs", "use crate::config;\n"));
    let (graph, findings) = findings_of(&files);
    assert_eq!(findings.misplaced, [("transport".to_string(), 2, 1)]);
    let found = problems(&graph, &findings, &[], &[]);
    assert!(
        found
            .iter()
            .any(|p| p.contains("`transport` is placed in layer 2 but lives in the crate of layer 1: move it under crates/services/src/")),
        "{found:?}"
    );
}

/// The `mcpvisor-*` crates a manifest's `[dependencies]` name.
fn workspace_dependencies(manifest: &str) -> Vec<String> {
    let section = manifest.lines().skip_while(|line| line.trim() != "[dependencies]").skip(1).take_while(|line| !line.starts_with('['));
    section.filter_map(|line| line.split(['.', ' ', '=']).next()).filter(|name| name.starts_with("mcpvisor")).map(str::to_owned).collect()
}

#[test]
fn the_crate_graph_is_the_layer_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml is read");
    for (dir, name, layer) in CRATES {
        let folder = dir.strip_suffix("src").unwrap_or(dir).trim_end_matches('/');
        let manifest_path = root.join(folder).join("Cargo.toml");
        let manifest = std::fs::read_to_string(&manifest_path).unwrap_or_else(|e| panic!("{}: {e}", manifest_path.display()));
        let package = name.replace('_', "-");
        assert!(manifest.contains(&format!("name = \"{package}\"")), "{} is not the package {package}", manifest_path.display());
        if !folder.is_empty() {
            assert!(workspace.contains(&format!("\"{folder}\"")), "the workspace's members do not list {folder}");
        }
        let mut below: Vec<String> = CRATES.iter().filter(|(_, _, l)| l < layer).map(|(_, n, _)| n.replace('_', "-")).collect();
        let mut used = workspace_dependencies(&manifest);
        below.sort();
        used.sort();
        // Each crate may use every crate below it and nothing else of the workspace: an
        // import that points up does not compile.
        assert_eq!(used, below, "{package} (layer {layer}) must depend on exactly the crates of the layers below it");
    }
}

#[test]
fn a_manifests_workspace_dependencies_are_read() {
    let manifest = "[package]\nname = \"x\"\n\n[dependencies]\nmcpvisor-wire.workspace = true\nmcpvisor-services = { path = \"../services\" }\nserde = \"1\"\n\n[dev-dependencies]\nmcpvisor-actors.workspace = true\n";
    assert_eq!(workspace_dependencies(manifest), ["mcpvisor-wire", "mcpvisor-services"]);
}
