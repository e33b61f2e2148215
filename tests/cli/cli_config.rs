//! Configuration as the command line uses it: `${VAR}` expansion when a
//! server starts (and its errors), and secrets kept out of every listing,
//! status, error and log line.

use crate::cli_support::{demo_table, reports_on, stderr, stdout, Sandbox, BIN};

#[test]
fn variables_are_expanded_when_a_server_starts() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file("[servers.demo]\ncommand = \"${MCPVISOR_TEST_BIN}\"\nargs = [\"${MODE:-demo-server}\"]\n");
    sandbox.cmd(["call", "demo", "echo", "--arg", "text=expanded"]).env("MCPVISOR_TEST_BIN", BIN).assert().success().stdout("expanded\n");
    // The file keeps the references: listings show them, not the values.
    let (list, _) = sandbox.json(["list", "--json"]);
    assert_eq!((list[0]["command"].as_str(), list[0]["args"][0].as_str()), (Some("${MCPVISOR_TEST_BIN}"), Some("${MODE:-demo-server}")));
}

#[test]
fn an_unset_variable_is_a_configuration_error_naming_server_and_field() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&format!(
        "{}\n[servers.needs]\ncommand = \"x\"\nenv = {{ API_KEY = \"${{MCPVISOR_UNSET_VAR}}\" }}\n",
        demo_table("demo", &[])
    ));
    for args in [vec!["status"], vec!["call", "needs", "anything"]] {
        let output = sandbox.cmd(&args).env_remove("MCPVISOR_UNSET_VAR").output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let error = stderr(&output);
        assert!(
            error.starts_with("error: server \"needs\": env.API_KEY uses ${MCPVISOR_UNSET_VAR}, which is not set; set it or write"),
            "{error}"
        );
    }
    // A command that starts only other servers is not held up by it.
    sandbox.cmd(["call", "demo", "echo", "--arg", "text=ok"]).env_remove("MCPVISOR_UNSET_VAR").assert().success();
    // `info` shows the problem without starting anything.
    let output = sandbox.cmd(["info", "needs"]).output().unwrap();
    assert!(output.status.success());
    assert!(stdout(&output).contains("cannot start: server \"needs\": env.API_KEY uses ${MCPVISOR_UNSET_VAR}"), "{}", stdout(&output));
}

#[test]
fn a_malformed_reference_or_file_is_an_error_with_the_fix() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file("[servers.bad]\ncommand = \"${oops\"\n");
    let output = sandbox.cmd(["call", "bad", "x"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("is not a variable reference; write ${NAME}"), "{}", stderr(&output));

    sandbox.write_user_file("[servers.typo]\ncomand = \"x\"\n");
    let output = sandbox.cmd(["list"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("unknown key `comand`"), "{}", stderr(&output));
}

/// A server that prints its secret env value on stderr and exits, so the
/// secret reaches the status' stderr tail, the error and the logs.
fn leaky_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&format!(
        "{}\n[servers.leaky]\ncommand = \"sh\"\nargs = [\"-c\", \"echo token is $SERVICE_TOKEN >&2; exit 3\"]\nenv = {{ SERVICE_TOKEN = \"${{LEAKY_SECRET}}\", LEVEL = \"debug\" }}\nrestart = \"never\"\n",
        demo_table("demo", &[])
    ));
    sandbox
}

const SECRET: &str = "s3cr3t-value-123";

#[test]
fn secrets_are_redacted_in_listings_status_errors_and_logs() {
    let sandbox = leaky_sandbox();
    for args in reports_on("leaky") {
        let output = sandbox.cmd(&args).env("LEAKY_SECRET", SECRET).output().unwrap();
        let shown = stdout(&output) + &stderr(&output);
        assert!(!shown.contains(SECRET), "{args:?} shows the secret:\n{shown}");
        assert!(shown.contains("token is ***"), "{args:?} shows the line, masked:\n{shown}");
    }
    let output = sandbox.cmd(["status", "--json"]).env("LEAKY_SECRET", SECRET).output().unwrap();
    let status: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let leaky = status.as_array().unwrap().iter().find(|s| s["name"] == "leaky").unwrap();
    assert_eq!(leaky["state"], "failed");

    // Listings show the reference, never a value.
    sandbox.write_user_file("[servers.inline]\ncommand = \"x\"\nenv = { SERVICE_TOKEN = \"s3cr3t-value-123\", LEVEL = \"debug\" }\n");
    for args in [vec!["list", "--json"], vec!["info", "inline"], vec!["info", "inline", "--json"]] {
        let output = sandbox.cmd(&args).output().unwrap();
        let shown = stdout(&output);
        assert!(!shown.contains(SECRET) && shown.contains("***") && shown.contains("debug"), "{args:?}:\n{shown}");
    }
}

#[test]
fn a_named_file_with_a_bad_entry_or_no_server_is_an_error_not_the_demo() {
    let sandbox = Sandbox::new();
    let cases = [
        (r#"{"mcpServers": {"x": {"command": 5}}}"#, "f.json: server \"x\": `command` must be a string"),
        (r#"{"mcpServers": {"x": {"command": "a", "args": [1]}}}"#, "f.json: server \"x\": `args[0]` must be a string"),
        (r#"{"mcpServers": {"x": {"command": "a", "args": "x"}}}"#, "f.json: server \"x\": `args` must be an array of strings"),
        (r#"{"mcpServers": {}}"#, "f.json defines no server"),
    ];
    for (text, expected) in cases {
        sandbox.write("f.json", text);
        for args in [vec!["--config", "f.json", "status"], vec!["--config", "f.json", "--json", "list"]] {
            let output = sandbox.cmd(&args).output().unwrap();
            assert_eq!(output.status.code(), Some(2), "{text} {args:?}");
            assert!(stderr(&output).contains(expected), "{text} {args:?}: {}", stderr(&output));
            assert!(!stdout(&output).contains("demo-server"), "the demo is not offered: {}", stdout(&output));
        }
    }
    // The user file named by MCPVISOR_CONFIG, empty.
    sandbox.write_user_file("# nothing yet\n");
    let output = sandbox.cmd(["list"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("servers.toml defines no server"), "{}", stderr(&output));
}

#[test]
fn the_demo_is_offered_only_when_nothing_is_configured_anywhere() {
    let sandbox = Sandbox::new();
    let (list, code) = sandbox.json(["--json", "list"]);
    assert_eq!((code, list[0]["origin"].as_str()), (0, Some("built-in")));
    // An editor's file in the project whose only server cannot be used: skipped, and no demo in its place.
    sandbox.write(".mcp.json", r#"{"mcpServers": {"x": {"command": 5}}}"#);
    sandbox.trust();
    let output = sandbox.cmd(["status"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    let error = stderr(&output);
    assert!(error.contains("warning: skipped: ") && error.contains("`command` must be a string"), "{error}");
    assert!(error.contains("no usable server"), "{error}");
}

#[test]
fn a_command_starts_at_most_max_servers_and_says_how_to_start_more() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&format!("{}\n{}\n{}", demo_table("a", &[]), demo_table("b", &[]), demo_table("c", &[])));
    let refused = [sandbox.cmd(["--max-servers", "2", "status"]).output().unwrap(), {
        let mut command = sandbox.cmd(["tools"]);
        command.env("MCPVISOR_MAX_SERVERS", "2");
        command.output().unwrap()
    }];
    for output in refused {
        assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
        let error = stderr(&output);
        assert!(error.contains("would start 3 servers, more than the limit of 2") && error.contains("--max-servers 3"), "{error}");
    }
    // Naming one server starts only that one; a higher limit starts them all.
    sandbox.cmd(["--max-servers", "2", "call", "a", "echo", "--arg", "text=one"]).assert().success().stdout("one\n");
    sandbox.cmd(["--max-servers", "2", "tools", "--server", "b"]).assert().success();
    sandbox.cmd(["--max-servers", "3", "status"]).assert().success();
}

/// Peak resident memory of `mcpvisor ARGS` in KiB, from the kernel's accounting of the child.
#[allow(clippy::zombie_processes, reason = "the child is reaped by wait4, which also reports its peak memory")]
fn peak_rss_kib(sandbox: &Sandbox, args: &[&str]) -> i64 {
    let child = sandbox.std_cmd(args).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for our own child, once; status and usage are valid for writes.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4: {}", std::io::Error::last_os_error());
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{args:?} failed: {status}");
    usage.ru_maxrss
}

#[test]
fn listing_a_huge_editor_file_costs_a_bounded_multiple_of_its_size() {
    let sandbox = Sandbox::new();
    let servers: Vec<String> = (0..20_000)
        .map(|i| format!(r#""s{i:06}": {{"command": "npx", "args": ["@scope/server-fs", "/tmp"], "env": {{"LEVEL": "info"}}}}"#))
        .collect();
    let text = format!(r#"{{"mcpServers": {{{}}}}}"#, servers.join(", "));
    sandbox.write(".mcp.json", &text);
    sandbox.trust();
    let input_kib = (text.len() / 1024) as i64;
    for args in [vec!["list"], vec!["--json", "list"]] {
        let peak = peak_rss_kib(&sandbox, &args);
        // Before: every entry's JSON was built even for the human listing (about 70 KiB per KiB of input).
        assert!(peak < 30 * input_kib + 20 * 1024, "{args:?}: peak {peak} KiB for {input_kib} KiB of input");
    }
}
