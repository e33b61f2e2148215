//! Release builds link the binaries with their functions in the order the
//! gateway's and the client's calls touch them (`benches/symbol-order.txt`,
//! made by `benches/symbol-order.sh`), so that the code a call runs sits in
//! a few pages instead of being spread over the whole text: the kernel maps
//! code 64 KB around each page fault, so scattered code costs resident memory
//! (docs/benchmarks.md, "Code pages in the order calls touch them").
//!
//! Invariant: the order is only handed to a linker that has shown it takes
//! it. A one-line program is linked with the same flags first; a linker
//! without `--symbol-ordering-file` (GNU ld, which Rust before 1.90 uses)
//! leaves the build as it was. `MCPVISOR_SYMBOL_ORDER=0` turns it off.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const ORDER: &str = "benches/symbol-order.txt";

fn main() {
    println!("cargo:rerun-if-changed={ORDER}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MCPVISOR_SYMBOL_ORDER");
    if !wanted() {
        return;
    }
    let order = Path::new(&env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default()).join(ORDER);
    if !order.is_file() {
        return;
    }
    let args = [
        format!("-Wl,--symbol-ordering-file={}", order.display()),
        // The order names functions of several binaries and of past builds.
        "-Wl,--no-warn-symbol-ordering".to_string(),
    ];
    if !linker_takes(&args) {
        println!(
            "cargo:warning=the linker does not take --symbol-ordering-file: \
             the binary is linked without benches/symbol-order.txt"
        );
        return;
    }
    for arg in &args {
        println!("cargo:rustc-link-arg-bins={arg}");
        println!("cargo:rustc-link-arg-examples={arg}");
    }
}

/// Optimised builds for Linux on x86-64 with GNU libc, unless turned off.
fn wanted() -> bool {
    let var = |name: &str| env::var(name).unwrap_or_default();
    var("PROFILE") == "release"
        && var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && var("CARGO_CFG_TARGET_ENV") == "gnu"
        && var("MCPVISOR_SYMBOL_ORDER") != "0"
}

/// Links `fn main() {}` with `args` and the build's own rustc flags and target.
fn linker_takes(args: &[String]) -> bool {
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap_or_default());
    let source = out.join("probe.rs");
    if std::fs::write(&source, "fn main() {}\n").is_err() {
        return false;
    }
    let mut rustc = Command::new(env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()));
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    rustc.args(flags.split('\x1f').filter(|f| !f.is_empty()));
    if let Ok(target) = env::var("TARGET") {
        rustc.args(["--target", &target]);
    }
    rustc.arg(&source).arg("-o").arg(out.join("probe")).args(args.iter().flat_map(|a| ["-C".to_string(), format!("link-arg={a}")]));
    rustc.output().is_ok_and(|o| o.status.success())
}
