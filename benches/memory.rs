//! Memory that grows with what is kept, not with how it is parsed (issue 22,
//! goal 6): three measures, each against what it reads, with its aim.
//!
//! - `catalog`: a server listing N tools in one `tools/list` answer
//!   (`tests/fixtures/misbehaving_server.py many-tools N [distinct]`); the
//!   heap this process holds once the runtime is ready (a counting global
//!   allocator), and its peak while the listing is taken in and while
//!   `list_tools` (parsed), then `list_kept_tools` (kept) hand the catalog
//!   out, each divided by the answer's size.
//!   Aim: the kept catalog ≤ 5× the answer. Floor: the answer's text, 1×.
//! - `gateway session`: the heap one gateway session (`mcpvisor serve`'s,
//!   over in-memory pipes) adds to the ready runtime's at its peak while it
//!   builds its name tables and answers `tools/list` page by page, N tools
//!   with distinct schemas, divided by the answer's size. Aim ≤ 5×.
//! - `tools`: peak RSS of `mcpvisor tools` with one server of N tools with
//!   distinct schemas minus its peak with a one-tool server, divided by the
//!   answer's size (the runtime's catalog included). Aim ≤ 5×.
//! - `idle connection`: the heap held by K idle stdio connections to
//!   one-tool servers minus that of one, per connection. Aim ≤ 64 KiB.
//! - `list`: peak RSS of `mcpvisor list` on a generated Claude Code
//!   `.mcp.json` of M servers minus its peak on a one-server file (the
//!   floor: the binary, its runtime and libraries), divided by the file's
//!   size. Aim ≤ 5×. Beside it, counted: the heap `config::load_all`
//!   keeps of that file, and its peak while loading.
//!
//! Memory is counted, not timed, so the numbers hardly move between runs
//! or builds: `cargo bench --bench memory` (release) or, quicker,
//! `cargo test --bench memory` (debug build; the heap counts are the same).
//! Arguments `N K M` change the sizes (defaults 20000 20 20000).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use mcpvisor::actors::gateway::ClientBridge;
use mcpvisor::config::{RuntimeConfig, ServerConfig};
use mcpvisor::Runtime;

const BIN: &str = env!("CARGO_BIN_EXE_mcpvisor");
const READY: Duration = Duration::from_secs(120);

#[path = "support/counting_alloc.rs"]
mod counting_alloc;
#[path = "support/editor_file.rs"]
mod editor_file;
#[path = "support/many_tools.rs"]
mod many_tools;

use counting_alloc::{live, peak, reset_peak};
use many_tools::{answer_size, list_through_gateway, many_tools};

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let size = |i: usize, default: usize| args.get(i).copied().unwrap_or(default);
    let (tools, connections, servers) = (size(0, 20_000), size(1, 20), size(2, 20_000));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a tokio runtime");
    println!("| measure | input | kept | peak | kept / input | peak / input | aim |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    // First: a child's peak RSS counts this process's at the spawn.
    list(servers);
    tools_command(tools);
    loaded(servers);
    for distinct in [false, true] {
        runtime.block_on(catalog(tools, distinct));
    }
    runtime.block_on(gateway_session(tools));
    runtime.block_on(idle_connections(connections));
}

fn kib(bytes: usize) -> String {
    format!("{:.0} KiB", bytes as f64 / 1024.0)
}

async fn catalog(tools: usize, distinct: bool) {
    let args = many_tools(tools, distinct);
    let answer = answer_size(&args);
    let before = reset_peak();
    let handle = Runtime::start(RuntimeConfig::new([ServerConfig::stdio("many", "python3", args)])).expect("the runtime starts");
    assert!(handle.wait_ready(READY).await, "the server did not settle");
    // Let the connection finish its work after the listing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (kept, taken_in) = (live().saturating_sub(before), peak().saturating_sub(before));
    let listed = handle.list_tools().await;
    assert_eq!(listed.len(), tools, "every tool is listed");
    let handed_out = peak().saturating_sub(before);
    drop(listed);
    reset_peak();
    let kept_listed = handle.list_kept_tools().await;
    assert_eq!(kept_listed.len(), tools, "every tool is listed");
    let kept_out = peak().saturating_sub(before);
    drop(kept_listed);
    handle.shutdown().await;
    let name = format!("catalog, {tools} tools{}", if distinct { ", distinct schemas" } else { "" });
    let ratio = |bytes: usize| bytes as f64 / answer as f64;
    println!(
        "| {name} | {} | {} | {} (list_tools: {}; kept: {}) | {:.1}× | {:.1}× ({:.1}×; {:.1}×) | ≤ 5× kept |",
        kib(answer),
        kib(kept),
        kib(taken_in),
        kib(handed_out),
        kib(kept_out),
        ratio(kept),
        ratio(taken_in),
        ratio(handed_out),
        ratio(kept_out)
    );
}

/// The heap one gateway session adds to the ready runtime's at its peak
/// while it builds its name tables and answers every page of `tools/list`.
async fn gateway_session(tools: usize) {
    let args = many_tools(tools, true);
    let answer = answer_size(&args);
    let bridge = ClientBridge::default();
    let config = RuntimeConfig::new([ServerConfig::stdio("many", "python3", args)]);
    let handle = Runtime::builder(config).client_handlers(bridge.handlers()).start().expect("the runtime starts");
    assert!(handle.wait_ready(READY).await, "the server did not settle");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = reset_peak();
    let mut listed = 0;
    list_through_gateway(&handle, &bridge, |_| listed += 1).await;
    let session = peak().saturating_sub(before);
    assert_eq!(listed, tools, "every tool is listed");
    handle.shutdown().await;
    println!(
        "| gateway session names / tools/list answer, {tools} tools, distinct schemas | {} | | {} | | {:.1}× | ≤ 5× peak |",
        kib(answer),
        kib(session),
        session as f64 / answer as f64
    );
}

/// The heap held by `count` idle connections once they are ready.
async fn held_by(count: usize) -> usize {
    let before = live();
    let servers = (0..count).map(|i| ServerConfig::stdio(format!("s{i}"), "python3", many_tools(1, false)));
    let handle = Runtime::start(RuntimeConfig::new(servers)).expect("the runtime starts");
    assert!(handle.wait_ready(READY).await, "the servers did not settle");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = live().saturating_sub(before);
    handle.shutdown().await;
    held
}

async fn idle_connections(count: usize) {
    let one = held_by(1).await;
    let many = held_by(count).await;
    let per = many.saturating_sub(one) / count.saturating_sub(1).max(1);
    println!("| idle stdio connection ({count} vs 1) | | {} each | | | | ≤ 64 KiB |", kib(per));
}

/// Peak RSS in KiB of `mcpvisor COMMAND` run in `dir` (its project and
/// home; its configuration file `dir/servers.toml`, if any).
#[allow(clippy::zombie_processes, reason = "the child is reaped by wait4, which also reports its peak memory")]
fn peak_kib(dir: &Path, command: &str) -> i64 {
    let child = Command::new(BIN)
        .arg(command)
        .current_dir(dir)
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join("xdg"))
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("MCPVISOR_CONFIG", dir.join("servers.toml"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("mcpvisor runs");
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for our own child, once; status and usage are valid for writes.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4: {}", std::io::Error::last_os_error());
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "mcpvisor {command} failed: {status}");
    usage.ru_maxrss
}

fn list(servers: usize) {
    let dir = std::env::temp_dir().join(format!("mcpvisor-memory-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    // Each file is trusted before it is listed (`mcpvisor trust`), as a user would.
    editor_file::write_claude_code_file(&dir, 1);
    peak_kib(&dir, "trust");
    let floor = peak_kib(&dir, "list");
    let size = editor_file::write_claude_code_file(&dir, servers);
    peak_kib(&dir, "trust");
    let peak = peak_kib(&dir, "list");
    let _ = std::fs::remove_dir_all(&dir);
    let grown = (peak - floor).max(0) as usize * 1024;
    println!(
        "| `list`, {servers} servers (floor: one server, {floor} KiB RSS) | {} | | {} | | {:.1}× | ≤ 5× peak |",
        kib(size),
        kib(grown),
        grown as f64 / size as f64
    );
}

/// Peak RSS of `mcpvisor tools` with one server of `tools` tools with
/// distinct schemas, minus its peak with a one-tool server (the floor).
fn tools_command(tools: usize) {
    let dir = std::env::temp_dir().join(format!("mcpvisor-memory-bench-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let run = |count: usize| {
        let args: Vec<String> = many_tools(count, true).iter().map(|arg| format!("{arg:?}")).collect();
        let table = format!("[servers.many]\ncommand = \"python3\"\nargs = [{}]\n", args.join(", "));
        std::fs::write(dir.join("servers.toml"), table).expect("the configuration is written");
        peak_kib(&dir, "tools")
    };
    let floor = run(1);
    let grown = (run(tools) - floor).max(0) as usize * 1024;
    let _ = std::fs::remove_dir_all(&dir);
    let answer = answer_size(&many_tools(tools, true));
    println!(
        "| `tools`, {tools} tools, distinct schemas (floor: one tool, {floor} KiB RSS) | {} | | {} | | {:.1}× | ≤ 5× peak |",
        kib(answer),
        kib(grown),
        grown as f64 / answer as f64
    );
}

/// The heap `config::load_all` keeps of a `.mcp.json` of `servers`
/// servers (the part of `list` that grows with the file), and its peak.
fn loaded(servers: usize) {
    let dir = std::env::temp_dir().join(format!("mcpvisor-memory-bench-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let size = editor_file::write_claude_code_file(&dir, servers);
    let no_user_file = dir.join("none.toml").to_string_lossy().into_owned();
    let before = reset_peak();
    let env = |name: &str| (name == "MCPVISOR_CONFIG").then(|| no_user_file.clone());
    // Trusted: this measures loading, not the trust check.
    let locations = mcpvisor::config::Locations {
        trust: mcpvisor::config::ProjectTrust::Everything,
        ..mcpvisor::config::Locations::new(Some(&dir), env)
    };
    let config = locations.load();
    let (kept, peak) = (live().saturating_sub(before), peak().saturating_sub(before));
    assert_eq!(config.expect("the file loads").servers.len(), servers, "every server is loaded");
    let _ = std::fs::remove_dir_all(&dir);
    let ratio = |bytes: usize| bytes as f64 / size as f64;
    println!(
        "| `load_all`, {servers} servers | {} | {} | {} | {:.1}× | {:.1}× | |",
        kib(size),
        kib(kept),
        kib(peak),
        ratio(kept),
        ratio(peak)
    );
}
