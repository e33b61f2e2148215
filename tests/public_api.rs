//! The public API, committed as `public-api.txt` and compared here, so that
//! every change to it shows in review. The surface is read from rustdoc's
//! JSON output (`-Z unstable-options --output-format json`, allowed on the
//! stable toolchain by `RUSTC_BOOTSTRAP=1`) by `public_api/render.rs`;
//! docs/decisions.md says why this and not `cargo public-api`.
//!
//! After an intended change, update the file with
//! `MCPVISOR_BLESS_PUBLIC_API=1 cargo test --test public_api`.

#[path = "public_api/render.rs"]
mod render;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const SURFACE_FILE: &str = "public-api.txt";
const BLESS: &str = "MCPVISOR_BLESS_PUBLIC_API";

/// The workspace's libraries, the facade first: it re-exports the others.
const CRATES: &[&str] = &["mcpvisor", "mcpvisor_wire", "mcpvisor_services", "mcpvisor_actors"];

/// Builds the workspace libraries' rustdoc JSON (default features, as a
/// dependent sees them) into a directory of its own, so that this test
/// never waits for the lock of the target directory `cargo test` is using.
fn rustdoc_json() -> Vec<serde_json::Value> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| manifest.join("target"));
    let doc_target = target.join("public-api");
    let mut cargo = Command::new(env!("CARGO"));
    // The variables cargo sets for a test would make the nested build see a
    // changed environment each time and check dependencies again.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        let set_for_tests =
            ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_CRATE_", "CARGO_BIN_", "CARGO_PRIMARY_PACKAGE", "CARGO_TARGET_", "CARGO_RUSTC_"]
                .iter()
                .any(|prefix| name.starts_with(prefix));
        if set_for_tests || name == "OUT_DIR" || name == "RUSTDOCFLAGS" {
            cargo.env_remove(name);
        }
    }
    let output = cargo
        .args(["doc", "--workspace", "--lib", "--no-deps", "--quiet", "--manifest-path"])
        .arg(manifest.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&doc_target)
        .env("RUSTDOCFLAGS", "-Z unstable-options --output-format json")
        .env("RUSTC_BOOTSTRAP", "1")
        .output()
        .expect("cargo runs");
    assert!(output.status.success(), "cargo rustdoc (JSON) failed:\n{}", String::from_utf8_lossy(&output.stderr));
    let read = |name: &str| {
        let json = doc_target.join("doc").join(format!("{name}.json"));
        let text = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("reading {}: {e}", json.display()));
        serde_json::from_str(&text).expect("rustdoc wrote JSON")
    };
    CRATES.iter().map(|name| read(name)).collect()
}

#[test]
fn the_public_api_is_the_committed_one() {
    let mut docs = rustdoc_json();
    let doc = docs.remove(0);
    let format = doc["format_version"].as_u64().unwrap_or(0);
    assert!(
        render::KNOWN_FORMATS.contains(&format),
        "rustdoc JSON format {format} is not one tests/public_api/render.rs was checked against ({:?}); \
         check its output, widen KNOWN_FORMATS, then update {SURFACE_FILE} with `{BLESS}=1 cargo test --test public_api`",
        render::KNOWN_FORMATS
    );
    let surface = render::surface(&doc, &docs);
    let rendered = surface.iter().map(|line| format!("{line}\n")).collect::<String>();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(SURFACE_FILE);
    if std::env::var_os(BLESS).is_some() {
        std::fs::write(&file, &rendered).expect("writing the surface file");
        return;
    }
    let committed = std::fs::read_to_string(&file).unwrap_or_default();
    if committed == rendered {
        return;
    }
    let (old, new): (HashSet<&str>, HashSet<&str>) = (committed.lines().collect(), rendered.lines().collect());
    let removed: Vec<&str> = committed.lines().filter(|line| !new.contains(line)).collect();
    let added: Vec<&str> = rendered.lines().filter(|line| !old.contains(line)).collect();
    let diff: String = removed.iter().map(|l| format!("- {l}\n")).chain(added.iter().map(|l| format!("+ {l}\n"))).collect();
    panic!(
        "the public API changed ({} lines removed, {} added):\n{diff}\nIf the change is intended, update {SURFACE_FILE} with\n    {BLESS}=1 cargo test --test public_api\nand commit it; see README.md, \"Stability\".",
        removed.len(),
        added.len()
    );
}
