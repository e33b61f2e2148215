//! `tools --search` answers from the on-disk tool cache: a server listed
//! recently under the same configuration is not started again; `--refresh`
//! and an edited configuration start it. The demo server's `--request-log`
//! shows every handshake it answered, so "not started" is observed, not
//! inferred.

use std::path::{Path, PathBuf};

use crate::cli_support::{demo_table, stderr, stdout, Sandbox};

/// The handshakes (`initialize` or the modern `server/discover`) in a request log.
fn handshakes(log: &Path) -> usize {
    std::fs::read_to_string(log).unwrap_or_default().lines().filter(|line| matches!(*line, "initialize" | "server/discover")).count()
}

/// A sandbox with demo servers `names`, each logging its requests to `NAME.log`; returns the logs.
fn logged_servers(names: &[&str]) -> (Sandbox, Vec<PathBuf>) {
    let sandbox = Sandbox::new();
    let logs: Vec<PathBuf> = names.iter().map(|name| sandbox.project.join(format!("{name}.log"))).collect();
    let tables: Vec<String> =
        names.iter().zip(&logs).map(|(name, log)| demo_table(name, &["--request-log", log.to_str().unwrap()])).collect();
    sandbox.write_user_file(&tables.join("\n"));
    (sandbox, logs)
}

/// `(server, tool)` of each tool of a `--json` listing, in order.
fn found(sandbox: &Sandbox, args: &[&str]) -> Vec<(String, String)> {
    let (listing, code) = sandbox.json(args);
    assert_eq!(code, 0, "{listing}");
    listing.as_array().unwrap().iter().map(|t| (t["server"].as_str().unwrap().into(), t["name"].as_str().unwrap().into())).collect()
}

#[test]
fn a_second_search_answers_from_the_cache_without_starting_the_server() {
    let (sandbox, logs) = logged_servers(&["demo"]);
    let first = found(&sandbox, &["tools", "--search", "echo", "--json"]);
    assert_eq!(first.first(), Some(&("demo".to_string(), "echo".to_string())), "the exact name first: {first:?}");
    assert_eq!(handshakes(&logs[0]), 1);

    let output = sandbox.cmd(["tools", "--search", "echo"]).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("demo    echo"), "{}", stdout(&output));
    assert!(stderr(&output).contains("note: the tools of 1 server come from the tool cache"), "{}", stderr(&output));
    assert_eq!(found(&sandbox, &["tools", "--search", "echo", "--json"]), first, "the same answer");
    assert_eq!(handshakes(&logs[0]), 1, "the server was not started again");

    sandbox.cmd(["tools", "--search", "echo", "--refresh"]).assert().success();
    assert_eq!(handshakes(&logs[0]), 2, "--refresh starts it");
}

#[test]
fn a_plain_listing_fills_the_cache() {
    let (sandbox, logs) = logged_servers(&["demo"]);
    sandbox.cmd(["tools"]).assert().success();
    assert_eq!(handshakes(&logs[0]), 1);
    assert!(!found(&sandbox, &["tools", "--search", "sleep milliseconds", "--json"]).is_empty());
    assert_eq!(handshakes(&logs[0]), 1);
    sandbox.cmd(["tools"]).assert().success();
    assert_eq!(handshakes(&logs[0]), 2, "a listing without --search is always live");
}

#[test]
fn an_edited_configuration_invalidates_its_entry_only() {
    let (sandbox, logs) = logged_servers(&["first", "second"]);
    sandbox.cmd(["tools", "--search", "echo"]).assert().success();
    assert_eq!((handshakes(&logs[0]), handshakes(&logs[1])), (1, 1));

    let text = sandbox.user_file_text().replacen("[servers.second]\n", "[servers.second]\ntimeout = 45\n", 1);
    sandbox.write_user_file(&text);
    let hits = found(&sandbox, &["tools", "--search", "echo", "--json"]);
    assert_eq!((handshakes(&logs[0]), handshakes(&logs[1])), (1, 2), "only the edited server was started");
    assert!(hits.contains(&("first".into(), "echo".into())) && hits.contains(&("second".into(), "echo".into())), "{hits:?}");
}

#[test]
fn only_servers_without_a_usable_entry_are_started() {
    let (sandbox, logs) = logged_servers(&["cached", "new"]);
    sandbox.cmd(["tools", "--search", "echo", "--server", "cached"]).assert().success();
    assert_eq!((handshakes(&logs[0]), handshakes(&logs[1])), (1, 0));

    let hits = found(&sandbox, &["tools", "--search", "echo", "--json"]);
    assert_eq!((handshakes(&logs[0]), handshakes(&logs[1])), (1, 1));
    assert!(hits.contains(&("cached".into(), "echo".into())) && hits.contains(&("new".into(), "echo".into())), "{hits:?}");
}

#[test]
fn a_corrupt_entry_is_a_warning_and_the_server_is_listed_live_and_cached_again() {
    let (sandbox, logs) = logged_servers(&["demo"]);
    sandbox.cmd(["tools"]).assert().success();
    let dir = sandbox.cache_home().join("mcpvisor/tools");
    let entries: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|entry| entry.unwrap().path()).collect();
    assert_eq!(entries.len(), 1, "one file per server: {entries:?}");
    std::fs::write(&entries[0], "{\"format\": 1, \"tools\": [").unwrap();

    let output = sandbox.cmd(["tools", "--search", "echo"]).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("warning: the tool cache") && stderr(&output).contains("not a tool cache entry"),
        "{}",
        stderr(&output)
    );
    assert!(stdout(&output).contains("demo    echo"), "{}", stdout(&output));
    assert_eq!(handshakes(&logs[0]), 2);
    sandbox.cmd(["tools", "--search", "echo"]).assert().success();
    assert_eq!(handshakes(&logs[0]), 2, "the entry was written again");
}

#[test]
fn a_server_that_fails_to_start_is_not_cached() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&demo_table("broken", &["--exit-immediately", "4"]));
    for _ in 0..2 {
        let output = sandbox.cmd(["tools", "--search", "echo"]).output().unwrap();
        assert!(stderr(&output).contains("warning: server `broken` is"), "started and reported each time: {}", stderr(&output));
    }
    assert!(
        !sandbox.cache_home().join("mcpvisor/tools").exists()
            || std::fs::read_dir(sandbox.cache_home().join("mcpvisor/tools")).unwrap().count() == 0
    );
}
