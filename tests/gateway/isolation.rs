//! Isolation of the command line (issue 30): a cloned repository's project
//! files start nothing, through any command, until `mcpvisor trust`; a file
//! that changes or appears afterwards is untrusted again; `serve`'s SIGHUP
//! reload follows the same rule; and mcpvisor's own `/proc/PID/environ`
//! shows none of the secrets it was started with.

use crate::gateway_http_support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::cli_support::{demo_table, stderr, stdout, Sandbox, BIN};
use serde_json::{json, Value};

/// A bound against hangs, not a timing check.
const PATIENCE: Duration = Duration::from_secs(60);

/// A project file whose server `evil` notes each start in `marker`, then
/// runs the demo server (so that, once trusted, it works).
fn hostile_mcp_json(marker: &Path) -> String {
    let script = format!("echo started >> '{}'; exec '{BIN}' demo-server", marker.display());
    json!({"mcpServers": {"evil": {"command": "sh", "args": ["-c", script]}}}).to_string()
}

/// Runs `command` to its end, killing it past [`PATIENCE`].
fn run_bounded(mut command: Command) -> Output {
    let child = command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("mcpvisor runs");
    let pid = child.id();
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match finished.recv_timeout(PATIENCE) {
        Ok(output) => output.expect("waited"),
        Err(_) => {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("mcpvisor did not finish within {PATIENCE:?}");
        }
    }
}

fn started(marker: &Path) -> usize {
    std::fs::read_to_string(marker).map(|text| text.lines().count()).unwrap_or(0)
}

/// Every command that starts servers, as a user would run it in the clone.
const COMMANDS: &[&[&str]] = &[
    &["status"],
    &["status", "--json"],
    &["tools"],
    &["tools", "--json"],
    &["call", "evil", "echo", r#"{"text": "hi"}"#],
    &["resources"],
    &["read", "evil", "demo://readme"],
    &["prompts"],
    &["prompt", "evil", "greeting"],
    &["test", "evil"],
    &["agent", "-p", "use echo to say hi"],
    &["acp"],
    &["serve"],
    &["top", "--once"],
    &["top", "--once", "--json"],
    &["auth", "evil"],
];

#[test]
fn a_cloned_repositorys_mcp_json_starts_nothing_through_any_command_until_trusted() {
    let sandbox = Sandbox::new();
    let marker = sandbox.home.join("marker");
    sandbox.write(".mcp.json", &hostile_mcp_json(&marker));
    for args in COMMANDS {
        let mut command = sandbox.std_cmd(*args);
        command.env_remove("MCPVISOR_GATEWAY_DEPTH");
        for var in ["MCPVISOR_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"] {
            command.env_remove(var);
        }
        let output = run_bounded(command);
        assert_eq!(started(&marker), 0, "`mcpvisor {}` started the untrusted server", args.join(" "));
        let said = stderr(&output);
        let notice = said.lines().find(|line| line.contains(".mcp.json")).unwrap_or_else(|| panic!("{args:?}: no notice in {said}"));
        assert!(notice.contains("not trusted") && notice.contains("mcpvisor trust"), "{args:?}: {notice}");
        if args.contains(&"--json") {
            let line: Value = serde_json::from_str(notice).unwrap_or_else(|e| panic!("{args:?}: the notice is not JSON ({e}): {notice}"));
            assert_eq!(line["untrusted"][0]["reason"], "folder", "{line}");
            assert_eq!(line["untrusted"][0]["servers"], json!(["evil"]), "{line}");
            let _: Value = serde_json::from_str(&stdout(&output)).unwrap_or_else(|e| panic!("{args:?}: stdout is not JSON ({e})"));
        }
    }
    // `serve --http` runs until stopped: its notice comes before it listens.
    let mut http = sandbox.std_cmd(["serve", "--http", "127.0.0.1:0"]);
    http.env_remove("MCPVISOR_GATEWAY_DEPTH").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = http.spawn().expect("serve --http starts");
    let lines: Vec<String> = BufReader::new(child.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .take_while(|line| !line.contains("serving MCP at"))
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    assert!(lines.iter().any(|line| line.contains(".mcp.json") && line.contains("not trusted")), "{lines:#?}");
    assert_eq!(started(&marker), 0, "`mcpvisor serve --http` started the untrusted server");

    // A call by name says where the server is and what to do.
    let output = run_bounded(sandbox.std_cmd(["call", "evil", "echo", r#"{"text": "hi"}"#]));
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("not trusted") && stderr(&output).contains(".mcp.json"), "{}", stderr(&output));

    sandbox.trust();
    let output = run_bounded(sandbox.std_cmd(["call", "evil", "echo", r#"{"text": "hi"}"#]));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output).trim(), "hi");
    assert_eq!(started(&marker), 1, "trusted, it runs");
    assert!(!stderr(&output).contains("not trusted"), "{}", stderr(&output));
}

#[test]
fn list_shows_untrusted_servers_and_the_command_to_run() {
    let sandbox = Sandbox::new();
    let marker = sandbox.home.join("marker");
    sandbox.write(".mcp.json", &hostile_mcp_json(&marker));
    sandbox.write_user_file(&demo_table("mine", &[]));
    let output = run_bounded(sandbox.std_cmd(["list"]));
    let text = stdout(&output);
    let row = text.lines().find(|line| line.starts_with("evil")).unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("not trusted") && row.contains("sh -c"), "{row}");
    assert!(text.lines().any(|line| line.starts_with("mine") && line.contains("enabled")), "{text}");
    let project = sandbox.project.canonicalize().unwrap();
    assert!(text.contains(&format!("mcpvisor trust {}", project.display())), "{text}");

    let (listed, code) = sandbox.json(["list", "--json"]);
    assert_eq!(code, 0);
    let evil = listed.as_array().unwrap().iter().find(|server| server["name"] == "evil").unwrap();
    assert_eq!(evil["state"], "not_trusted");
    assert_eq!(evil["reason"], "folder");
    assert!(evil["runs"].as_str().unwrap().starts_with("sh -c"), "{evil}");
    assert_eq!(started(&marker), 0);
}

#[test]
fn a_changed_or_a_new_project_file_is_untrusted_again_and_says_which() {
    let sandbox = Sandbox::new();
    sandbox.write(".mcpvisor.toml", &demo_table("demo", &[]));
    sandbox.trust();
    let states = |sandbox: &Sandbox| -> Vec<(String, String, String)> {
        let (statuses, _) = sandbox.json(["status", "--json"]);
        statuses
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["name"].as_str().unwrap().into(), s["state"].as_str().unwrap().into(), s["warning"].as_str().unwrap_or("").into()))
            .collect()
    };
    assert_eq!(states(&sandbox), [("demo".into(), "connected".into(), String::new())]);

    // A server appends itself to the trusted file: changed.
    let marker = sandbox.home.join("marker");
    let text = std::fs::read_to_string(sandbox.project.join(".mcpvisor.toml")).unwrap();
    let script = format!("echo started >> '{}'", marker.display());
    sandbox.write(".mcpvisor.toml", &format!("{text}\n[servers.added]\ncommand = \"sh\"\nargs = [\"-c\", {script:?}]\n"));
    // And writes a Cursor file beside it: new.
    sandbox.write(".cursor/mcp.json", &hostile_mcp_json(&marker));
    let found = states(&sandbox);
    assert!(found.contains(&("added".into(), "not_trusted".into(), "changed since the folder was trusted".into())), "{found:?}");
    assert!(found.contains(&("demo".into(), "not_trusted".into(), "changed since the folder was trusted".into())), "{found:?}");
    assert!(found.contains(&("evil".into(), "not_trusted".into(), "new since the folder was trusted".into())), "{found:?}");
    assert_eq!(started(&marker), 0);

    let (record, _) = sandbox.json(["trust", "--list", "--json"]);
    let files: Vec<(String, String)> = record[0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["file"].as_str().unwrap().into(), f["state"].as_str().unwrap().into()))
        .collect();
    assert_eq!(files, [(".cursor/mcp.json".into(), "new".into()), (".mcpvisor.toml".into(), "changed".into())]);
}

#[test]
fn trust_records_privately_lists_and_revokes() {
    let sandbox = Sandbox::new();
    sandbox.write(".mcp.json", &json!({"mcpServers": {"demo": {"command": BIN, "args": ["demo-server"]}}}).to_string());
    let output = run_bounded(sandbox.std_cmd(["trust"]));
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains(".mcp.json") && text.contains(&format!("demo: {BIN} demo-server")), "what it trusts is shown: {text}");
    let record: PathBuf = sandbox.home.join(".local/state/mcpvisor/trusted-folders.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&record).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(record.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);

    let (listed, _) = sandbox.json(["trust", "--list", "--json"]);
    assert_eq!(listed[0]["folder"], json!(sandbox.project.canonicalize().unwrap()));
    assert_eq!(listed[0]["files"], json!([{"file": ".mcp.json", "state": "trusted"}]));

    let output = run_bounded(sandbox.std_cmd(["trust", "--revoke", "."]));
    assert!(output.status.success(), "{}", stderr(&output));
    let (statuses, _) = sandbox.json(["status", "--json"]);
    assert_eq!(statuses[0]["state"], "not_trusted", "{statuses}");
    let output = run_bounded(sandbox.std_cmd(["trust", "--revoke", "."]));
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("is not a trusted folder"), "{}", stderr(&output));
}

#[test]
fn a_file_named_with_config_is_trusted_for_that_run() {
    let sandbox = Sandbox::new();
    let marker = sandbox.home.join("marker");
    let file = sandbox.write(".mcp.json", &hostile_mcp_json(&marker));
    let args = ["--config".as_ref(), file.as_os_str(), "call".as_ref(), "evil".as_ref(), "echo".as_ref(), r#"{"text": "hi"}"#.as_ref()];
    let output = run_bounded(sandbox.std_cmd(args));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(started(&marker), 1);
}

#[test]
fn servers_added_to_a_trusted_project_file_by_mcpvisor_stay_trusted() {
    let sandbox = Sandbox::new();
    // A new project file written at the user's command is trusted as written.
    let output = run_bounded(sandbox.std_cmd(["add", "--scope", "project", "one", "--", BIN, "demo-server"]));
    assert!(output.status.success(), "{}", stderr(&output));
    let output = run_bounded(sandbox.std_cmd(["add", "--scope", "project", "two", "--", BIN, "demo-server"]));
    assert!(output.status.success(), "{}", stderr(&output));
    let (listed, _) = sandbox.json(["list", "--json"]);
    let states: Vec<(&str, &str)> =
        listed.as_array().unwrap().iter().map(|s| (s["name"].as_str().unwrap(), s["state"].as_str().unwrap_or("enabled"))).collect();
    assert_eq!(states, [("one", "enabled"), ("two", "enabled")], "{listed}");

    // An untrusted file stays untrusted when a server is added to it.
    let other = Sandbox::new();
    other.write(".mcpvisor.toml", &demo_table("theirs", &[]));
    let output = run_bounded(other.std_cmd(["add", "--scope", "project", "mine", "--", BIN, "demo-server"]));
    assert!(stderr(&output).contains("not trusted"), "{}", stderr(&output));
    let (listed, _) = other.json(["list", "--json"]);
    assert!(listed.as_array().unwrap().iter().all(|s| s["state"] == "not_trusted"), "{listed}");
}

#[test]
fn serve_reload_on_sighup_leaves_out_a_project_file_written_after_trust() {
    let sandbox = Sandbox::new();
    sandbox.write(".mcpvisor.toml", &demo_table("demo", &[]));
    sandbox.trust();
    let mut child = sandbox
        .std_cmd(["-v", "serve"])
        .env_remove("MCPVISOR_GATEWAY_DEPTH")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("serve starts");
    let (lines, heard) = mpsc::channel();
    let reader = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in reader.lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let wait_for = |what: &str| -> Vec<String> {
        let deadline = Instant::now() + PATIENCE;
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match heard.recv_timeout(left) {
                Ok(line) if line.contains(what) => return seen,
                Ok(line) => seen.push(line),
                Err(_) => break,
            }
        }
        panic!("no line with {what:?} within {PATIENCE:?}: {seen:#?}");
    };
    // Once serve answers, its SIGHUP handler is in place.
    let mut stdin = child.stdin.take().unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    writeln!(stdin, "{initialize}").unwrap();
    let (answers, answered) = mpsc::channel();
    let reader = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in reader.lines().map_while(Result::ok) {
            let _ = answers.send(line);
        }
    });
    let answer = answered.recv_timeout(PATIENCE).expect("serve answers initialize");
    assert!(answer.contains("\"result\""), "{answer}");
    // What a sandboxed server with a writable working directory could do.
    let marker = sandbox.home.join("marker");
    sandbox.write(".mcp.json", &hostile_mcp_json(&marker));
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    let before = wait_for("configuration applied");
    assert!(before.iter().any(|line| line.contains(".mcp.json") && line.contains("not trusted")), "{before:#?}");
    assert_eq!(started(&marker), 0, "the reload started the untrusted server");
    drop(stdin);
    let _ = child.wait();
}

#[tokio::test]
async fn the_gateways_proc_environ_shows_no_secret_yet_its_token_still_works() {
    let token = "0f3a9c2e7b1d4a6f8e0c2b4d6f8a0c1e";
    let model_key = "sk-ant-test-0123456789abcdef0123456789";
    let env = [("MCPVISOR_SERVE_TOKEN", token), ("ANTHROPIC_API_KEY", model_key)];
    let gateway = gateway_http_support::Gateway::start("127.0.0.1:0", &[], &env).expect("the gateway starts");
    let environ = std::fs::read(format!("/proc/{}/environ", gateway.child.id())).expect("our own child's environ is readable");
    let shown = String::from_utf8_lossy(&environ);
    assert!(!shown.contains(token) && !shown.contains(model_key), "secrets in /proc/PID/environ: {shown:?}");
    assert!(environ.iter().all(|byte| *byte == 0), "the whole block is emptied: {shown:?}");

    // The values were kept in the process: the token from the environment admits, and only it.
    let http = gateway_http_support::client();
    let initialize = gateway_http_support::initialize(gateway_http_support::LEGACY);
    let refused = gateway_http_support::post(&http, &gateway.mcp(), &initialize).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let admitted = gateway_http_support::post(&http, &gateway.mcp(), &initialize).bearer_auth(token).send().await.unwrap();
    assert_eq!(admitted.status(), 200);
}
