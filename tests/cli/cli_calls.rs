//! Commands that start servers, against the bundled demo server: `call`
//! with typed `--arg`s and its exit codes, `status --json`, `test`, the
//! lists, and a broken server next to working ones.

use crate::cli_support::{demo_table, stderr, stdout, Sandbox};
use serde_json::json;

/// A sandbox whose user file has the demo server as `demo` plus `extra`.
fn with_servers(extra: &str) -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&format!("{}\n{extra}", demo_table("demo", &[])));
    sandbox
}

#[test]
fn call_types_args_by_the_input_schema_and_prints_the_whole_result() {
    let sandbox = Sandbox::new();
    let (result, code) = sandbox.json(["call", "demo", "add", "--arg", "a=2", "--arg", "b=40.5", "--json"]);
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["structuredContent"], json!({"sum": 42.5}), "numbers were sent as numbers: {result}");
    assert_eq!(result["content"][0]["type"], "text");

    // A string property keeps digits as text; the JSON object and --arg combine.
    sandbox.cmd(["call", "demo", "echo", "--arg", "text=42"]).assert().success().stdout("42\n");
    sandbox.cmd(["call", "demo", "add", r#"{"a": 1, "b": 1}"#, "--arg", "b=2"]).assert().success().stdout("3\n");
}

#[test]
fn exit_codes_tell_tool_errors_usage_errors_and_connection_errors_apart() {
    let sandbox = Sandbox::new();
    let (result, code) = sandbox.json(["call", "demo", "fail", "--json"]);
    assert_eq!((code, result["isError"].as_bool()), (1, Some(true)), "isError → 1 with the whole result: {result}");
    let output = sandbox.cmd(["call", "demo", "fail"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).starts_with("error: `fail` of server `demo` answered with an error"), "{}", stderr(&output));

    for (args, expected) in [
        (vec!["call", "demo", "add", "--arg", "a=two", "--arg", "b=1"], "takes `a` as number"),
        (vec!["call", "demo", "echo", "--arg", "text"], "is not KEY=VALUE"),
        (vec!["call", "demo", "nope"], "server `demo` has no tool `nope`; its tools are: add"),
        (vec!["call", "nobody", "echo"], "no server named `nobody`"),
        (vec!["call", "demo", "echo", "[1]"], "must be a JSON object"),
    ] {
        let output = sandbox.cmd(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(expected), "{args:?}: {}", stderr(&output));
    }

    // The server dies during the call: a connection error.
    let output = sandbox.cmd(["call", "demo", "crash", "--arg", "code=7"]).output().unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(stderr(&output).contains("server `demo` exited (exit code 7) while `crash` was in flight"), "{}", stderr(&output));
    // And so is a time-out.
    let output = sandbox.cmd(["call", "demo", "sleep", "--arg", "ms=5000", "--timeout", "0.3"]).output().unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert!(stderr(&output).contains("did not answer within"), "{}", stderr(&output));
}

#[test]
fn status_json_reports_every_server() {
    let sandbox =
        with_servers("[servers.off]\ncommand = \"whatever\"\nenabled = false\n\n[servers.web]\nurl = \"http://127.0.0.1:1/mcp\"\n");
    let (status, code) = sandbox.json(["status", "--json"]);
    assert_eq!(code, 0);
    let all = status.as_array().unwrap();
    assert_eq!(all.iter().map(|s| s["name"].as_str().unwrap()).collect::<Vec<_>>(), ["demo", "off", "web"]);
    let demo = &all[0];
    assert_eq!(
        (demo["state"].as_str(), demo["tools"].as_u64(), demo["resources"].as_u64(), demo["prompts"].as_u64()),
        (Some("connected"), Some(27), Some(5), Some(2))
    );
    assert!(
        demo["pid"].as_u64().is_some() && demo["era"].is_string() && demo["protocol_version"].is_string() && demo["uptime_ms"].is_u64(),
        "{demo}"
    );
    assert_eq!(
        (demo["restarts"].as_u64(), demo["transport"].as_str(), demo["origin"].as_str()),
        (Some(0), Some("stdio"), Some("mcpvisor"))
    );
    assert_eq!(demo["source"], sandbox.user_file.display().to_string());
    assert_eq!(all[1]["state"], "disabled");
    assert_ne!(all[2]["state"], "connected", "{}", all[2]);
    let error = all[2]["last_error"].as_str().or(all[2]["error"].as_str()).unwrap_or_default();
    assert!(error.contains("server `web`: POST http://127.0.0.1:1/mcp failed") && error.contains("refused"), "{}", all[2]);
}

#[test]
fn a_broken_server_does_not_stop_the_others() {
    let sandbox = with_servers(&format!(
        "{}\n[servers.missing]\ncommand = \"/nonexistent/mcp-server\"\n",
        demo_table("broken", &["--exit-immediately", "4"])
    ));
    let output = sandbox.cmd(["tools", "--search", "echo"]).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("demo    echo"), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("warning: server `broken` is") && stderr(&output).contains("warning: server `missing` is failed"),
        "{}",
        stderr(&output)
    );

    sandbox.cmd(["call", "demo", "echo", "--arg", "text=still here"]).assert().success().stdout("still here\n");
    let output = sandbox.cmd(["call", "broken", "echo", "--arg", "text=x"]).output().unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert!(stderr(&output).contains("mcpvisor test broken"), "points to the explanation: {}", stderr(&output));

    let (status, _) = sandbox.json(["status", "--json"]);
    let state = |name: &str| status.as_array().unwrap().iter().find(|s| s["name"] == name).unwrap()["state"].as_str().unwrap().to_string();
    assert_eq!(state("demo"), "connected");
    assert_ne!(state("broken"), "connected");
    assert_eq!(state("missing"), "failed");
}

#[test]
fn test_times_each_step_of_a_working_server() {
    let sandbox = Sandbox::new();
    let (report, code) = sandbox.json(["test", "demo", "--json"]);
    assert_eq!(code, 0, "{report}");
    let steps: Vec<&str> = report["steps"].as_array().unwrap().iter().map(|s| s["step"].as_str().unwrap()).collect();
    assert_eq!(steps, ["start process", "handshake", "list", "ping", "resources/list", "prompts/list"]);
    assert!(report["steps"].as_array().unwrap().iter().all(|s| s["ok"] == true && s["ms"].is_f64()), "{report}");
    assert!(report["steps"][1]["detail"].as_str().unwrap().contains("server mcpvisor-demo"), "{report}");
    let output = sandbox.cmd(["test", "demo"]).output().unwrap();
    assert!(stdout(&output).contains("`demo` works."), "{}", stdout(&output));
}

#[test]
fn test_explains_why_a_server_does_not_start() {
    let sandbox = with_servers(&format!(
        "[servers.missing]\ncommand = \"no-such-mcp-server\"\n\n{}\n{}startup_timeout = 1.5\n",
        demo_table("exits", &["--exit-immediately", "5"]),
        demo_table("mute", &["--no-initialize"]),
    ));
    let output = sandbox.cmd(["test", "missing"]).env("PATH", "/usr/bin:/bin").output().unwrap();
    assert_eq!(output.status.code(), Some(3));
    let text = stdout(&output);
    assert!(
        text.contains("✗ start process") && text.contains("cannot start `no-such-mcp-server`") && text.contains("PATH=/usr/bin:/bin"),
        "{text}"
    );
    assert!(text.contains("hint: check the command's spelling"), "{text}");

    let output = sandbox.cmd(["test", "exits"]).output().unwrap();
    assert_eq!(output.status.code(), Some(3));
    let text = stdout(&output);
    assert!(text.contains("exit code 5"), "{text}");
    assert!(text.contains("last lines of the server's stderr") && text.contains("exiting at start-up with code 5"), "{text}");

    let (report, code) = sandbox.json(["test", "mute", "--json"]);
    assert_eq!(code, 3);
    let failed = report["steps"].as_array().unwrap().iter().find(|s| s["ok"] == false).unwrap();
    assert_eq!(failed["step"], "handshake", "{report}");
    assert!(failed["detail"].as_str().unwrap().contains("did not answer"), "{report}");
}

#[test]
fn resources_and_prompts_are_listed_read_and_got() {
    let sandbox = Sandbox::new();
    let (listed, code) = sandbox.json(["resources", "--json"]);
    assert_eq!(code, 0);
    let uris: Vec<&str> = listed["resources"].as_array().unwrap().iter().map(|r| r["uri"].as_str().unwrap()).collect();
    assert!(uris.contains(&"demo://counter") && listed["resources"][0]["server"] == "demo", "{listed}");
    assert_eq!(listed["templates"][0]["uriTemplate"], "demo://item/{id}");
    sandbox.cmd(["read", "demo", "demo://item/7"]).assert().success().stdout("item 7\n");
    let (read, _) = sandbox.json(["read", "demo", "demo://blob", "--json"]);
    assert!(read["contents"][0]["blob"].is_string(), "{read}");
    let output = sandbox.cmd(["read", "demo", "demo://nothing"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "an unknown URI is the caller's mistake: {}", stderr(&output));
    assert!(stderr(&output).contains("Resource not found: demo://nothing"), "{}", stderr(&output));

    let (prompts, _) = sandbox.json(["prompts", "--json"]);
    assert_eq!(prompts[0]["name"], "greet");
    assert_eq!(prompts[0]["arguments"][0]["name"], "name");
    let output = sandbox.cmd(["prompt", "demo", "greet", "--arg", "name=Ada", "--arg", "style=pirate"]).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("user: ") && stdout(&output).contains("Ada") && stdout(&output).contains("pirate"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn tools_search_matches_names_and_descriptions_across_servers() {
    let sandbox = with_servers(&demo_table("second", &[]));
    let (found, code) = sandbox.json(["tools", "--search", "ECHO", "--json"]);
    assert_eq!(code, 0);
    let hits: Vec<(&str, &str)> =
        found.as_array().unwrap().iter().map(|t| (t["server"].as_str().unwrap(), t["name"].as_str().unwrap())).collect();
    assert!(hits.contains(&("demo", "echo")) && hits.contains(&("second", "echo")), "{hits:?}");
    let echo = found.as_array().unwrap().iter().find(|t| t["server"] == "demo" && t["name"] == "echo").unwrap();
    assert_eq!(echo["exposedName"], "mcp__demo__echo");
    assert!(echo["inputSchema"]["properties"]["text"].is_object());

    let (found, _) = sandbox.json(["tools", "--search", "milliseconds", "--server", "second", "--json"]);
    let names: Vec<&str> = found.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["sleep"], "matched by its description only, on the one server asked for");
}
