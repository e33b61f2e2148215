//! The built-in tools server against real files in a temporary directory
//! and real processes, through `Handle::call_tool`.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::*;
use mcpvisor::builtin_tools::{self, BuiltinSettings};
use mcpvisor::{CallTool, CallToolResult, Handle, ServerState};
use serde_json::{json, Value};

async fn builtin(settings: BuiltinSettings) -> Handle {
    start_in_process(vec![builtin_tools::server(settings)], vec![]).await
}

async fn call(handle: &Handle, tool: &str, arguments: Value) -> CallToolResult {
    let name = format!("mcp__builtin__{tool}");
    handle.call_tool(&name, arguments).await.unwrap_or_else(|e| panic!("{name} failed: {e}"))
}

/// The text of a result that must be a success.
async fn ok(handle: &Handle, tool: &str, arguments: Value) -> String {
    let result = call(handle, tool, arguments).await;
    assert_eq!(result.is_error, Some(false), "{tool} failed: {}", text(&result));
    text(&result)
}

/// The text of a result that must be a tool error.
async fn refused(handle: &Handle, tool: &str, arguments: Value) -> String {
    let result = call(handle, tool, arguments).await;
    assert_eq!(result.is_error, Some(true), "{tool} should have failed: {}", text(&result));
    text(&result)
}

/// Waits (bounded) until no process has id `pid`: `kill(pid, 0)` fails.
async fn wait_gone(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    // SAFETY: signal 0 only checks that the process exists.
    while unsafe { libc::kill(pid as i32, 0) } == 0 {
        assert!(Instant::now() < deadline, "process {pid} of the command's group is still alive: {:?}", alive(pid));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits (bounded) for the pid the command wrote to `file`.
async fn pid_in(file: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(pid) = std::fs::read_to_string(file).ok().and_then(|text| text.trim().parse().ok()) {
            return pid;
        }
        assert!(Instant::now() < deadline, "the command never wrote its pid to {}", file.display());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_lists_four_annotated_tools_and_has_no_pid() {
    let dir = tempfile::tempdir().unwrap();
    let handle = builtin(BuiltinSettings::new(dir.path())).await;
    let tools = handle.list_tools().await;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["mcp__builtin__list_directory", "mcp__builtin__read_file", "mcp__builtin__run_command", "mcp__builtin__write_file"]);
    let hints = |name: &str| {
        let tool = &tools.iter().find(|t| t.tool.name == name).unwrap().tool;
        assert_eq!(tool.input_schema["type"], "object", "{name}");
        assert!(tool.input_schema["required"].as_array().is_some_and(|r| !r.is_empty()), "{name}");
        let a = tool.annotations.clone().unwrap();
        (a.read_only_hint, a.destructive_hint, a.open_world_hint)
    };
    assert_eq!(hints("read_file"), (Some(true), None, Some(false)));
    assert_eq!(hints("list_directory"), (Some(true), None, Some(false)));
    assert_eq!(hints("write_file"), (Some(false), Some(true), Some(false)));
    assert_eq!(hints("run_command"), (Some(false), Some(true), Some(true)));
    let status = status_of(&handle, "builtin").await;
    assert_eq!((status.state, status.pid), (ServerState::Connected, None));
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_file_numbers_lines_from_an_offset_and_says_where_to_read_on() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("five.txt"), "one\ntwo\nthree\nfour\nfive\n").unwrap();
    std::fs::write(dir.path().join("empty.txt"), "").unwrap();
    std::fs::write(dir.path().join("crlf.txt"), "a\r\nb\r\n").unwrap();
    std::fs::write(dir.path().join("long.txt"), format!("{}é\nshort\n", "x".repeat(9))).unwrap();
    let settings = BuiltinSettings { max_line_bytes: 10, ..BuiltinSettings::new(dir.path()) };
    let handle = builtin(settings).await;

    let whole = ok(&handle, "read_file", json!({"path": "five.txt"})).await;
    assert_eq!(whole, "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour\n     5\tfive\n");
    let window = ok(&handle, "read_file", json!({"path": dir.path().join("five.txt"), "offset": 2, "limit": 2})).await;
    assert_eq!(window, "     2\ttwo\n     3\tthree\n[the file goes on after line 3; call read_file with offset 4 to read on]\n");
    assert!(ok(&handle, "read_file", json!({"path": "empty.txt"})).await.ends_with("empty.txt is empty."));
    assert_eq!(ok(&handle, "read_file", json!({"path": "crlf.txt"})).await, "     1\ta\n     2\tb\n");
    let cut = ok(&handle, "read_file", json!({"path": "long.txt"})).await;
    assert_eq!(cut, "     1\txxxxxxxxx [… line cut: 2 more bytes]\n     2\tshort\n", "cut inside `é`, which is dropped whole");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_file_caps_its_lines_and_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let lines: String = (1..=50).map(|n| format!("line {n:02}\n")).collect();
    std::fs::write(dir.path().join("many.txt"), lines).unwrap();
    let settings = BuiltinSettings { read_lines: 10, max_read_bytes: 60, ..BuiltinSettings::new(dir.path()) };
    let handle = builtin(settings).await;
    let capped = ok(&handle, "read_file", json!({"path": "many.txt", "limit": 1000})).await;
    assert!(capped.starts_with("     1\tline 01\n"), "{capped}");
    assert!(capped.ends_with("[stopped before line 5 to stay within 60 bytes; call read_file with offset 5 to read on]\n"), "{capped}");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_file_errors_name_the_path_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("five.txt"), "1\n2\n3\n4\n5\n").unwrap();
    std::fs::write(dir.path().join("image.bin"), b"\x89PNG\x00\x00\x01").unwrap();
    std::fs::write(dir.path().join("latin1.txt"), b"ok\ncaf\xe9\n").unwrap();
    let handle = builtin(BuiltinSettings::new(dir.path())).await;
    let missing = refused(&handle, "read_file", json!({"path": "nope.txt"})).await;
    assert!(missing.contains("nope.txt: it does not exist") && missing.contains("relative paths start at"), "{missing}");
    let directory = refused(&handle, "read_file", json!({"path": "."})).await;
    assert!(directory.contains("it is a directory; use list_directory"), "{directory}");
    let binary = refused(&handle, "read_file", json!({"path": "image.bin"})).await;
    assert!(binary.contains("image.bin: it holds NUL bytes"), "{binary}");
    let latin1 = refused(&handle, "read_file", json!({"path": "latin1.txt"})).await;
    assert!(latin1.contains("latin1.txt: line 2 is not valid UTF-8"), "{latin1}");
    let past_end = refused(&handle, "read_file", json!({"path": "five.txt", "offset": 9})).await;
    assert!(past_end.contains("five.txt has 5 lines, so there is no line 9"), "{past_end}");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_file_creates_directories_replaces_atomically_and_says_what_it_did() {
    let dir = tempfile::tempdir().unwrap();
    let handle = builtin(BuiltinSettings::new(dir.path())).await;
    let created = ok(&handle, "write_file", json!({"path": "a/b/new.txt", "content": "hello\nworld\n"})).await;
    assert!(created.starts_with("Created ") && created.ends_with("a/b/new.txt (12 bytes, 2 lines)."), "{created}");
    let file = dir.path().join("a/b/new.txt");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello\nworld\n");
    let replaced = ok(&handle, "write_file", json!({"path": file, "content": "bye"})).await;
    assert!(replaced.ends_with("new.txt (it had 12 bytes): now 3 bytes, 1 lines."), "{replaced}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "bye");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("a/b")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers, ["new.txt"], "no temporary file is left behind");

    let on_directory = refused(&handle, "write_file", json!({"path": "a", "content": "x"})).await;
    assert!(on_directory.contains("cannot write") && on_directory.contains("it is a directory"), "{on_directory}");
    let under_file = refused(&handle, "write_file", json!({"path": "a/b/new.txt/inner.txt", "content": "x"})).await;
    assert!(under_file.contains("new.txt/inner.txt: a part of the path is a file"), "{under_file}");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_directory_sorts_marks_directories_and_caps_the_count() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["b.txt", "a.txt", "d.txt"] {
        std::fs::write(dir.path().join(name), "").unwrap();
    }
    std::fs::create_dir(dir.path().join("c")).unwrap();
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    let handle = builtin(BuiltinSettings { max_entries: 3, ..BuiltinSettings::new(dir.path()) }).await;
    let listed = ok(&handle, "list_directory", json!({"path": "."})).await;
    let lines: Vec<&str> = listed.lines().skip(1).collect();
    assert_eq!(lines[..3], ["a.txt", "b.txt", "c/"]);
    assert!(listed.lines().next().unwrap().ends_with("(5 entries):"), "{listed}");
    assert!(lines[3].starts_with("[… 2 more entries not shown"), "{listed}");
    assert!(ok(&handle, "list_directory", json!({"path": "empty"})).await.ends_with("empty is empty."));
    let file = refused(&handle, "list_directory", json!({"path": "a.txt"})).await;
    assert!(file.contains("a.txt: it is a file, not a directory; use read_file"), "{file}");
    let missing = refused(&handle, "list_directory", json!({"path": "nowhere"})).await;
    assert!(missing.contains("nowhere: it does not exist"), "{missing}");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_command_reports_output_together_and_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let handle = builtin(BuiltinSettings::new(dir.path())).await;
    let both = ok(&handle, "run_command", json!({"command": "echo out; echo err >&2; pwd"})).await;
    let here = dir.path().canonicalize().unwrap();
    assert_eq!(both, format!("out\nerr\n{}\n[exit code 0]", here.display()));
    let sub = ok(&handle, "run_command", json!({"command": "pwd", "cwd": "sub"})).await;
    assert_eq!(sub, format!("{}\n[exit code 0]", here.join("sub").display()));
    let no_stdin = ok(&handle, "run_command", json!({"command": "cat; echo done"})).await;
    assert_eq!(no_stdin, "done\n[exit code 0]", "stdin is empty, so `cat` ends at once");
    let failed = refused(&handle, "run_command", json!({"command": "echo broken; exit 3"})).await;
    assert_eq!(failed, "broken\n[exit code 3]");
    let unknown = refused(&handle, "run_command", json!({"command": "no-such-command-here"})).await;
    assert!(
        unknown.contains("no-such-command-here") && unknown.ends_with("\n[exit code 127]"),
        "the shell's own errors are captured: {unknown}"
    );
    let syntax = refused(&handle, "run_command", json!({"command": "if then"})).await;
    assert!(
        syntax.to_lowercase().contains("syntax error") && syntax.ends_with("[exit code 2]"),
        "even a script that does not parse: {syntax}"
    );
    let nowhere = refused(&handle, "run_command", json!({"command": "true", "cwd": "missing"})).await;
    assert!(nowhere.contains("could not start the command in") && nowhere.contains("missing"), "{nowhere}");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_command_output_keeps_its_head_and_tail() {
    let dir = tempfile::tempdir().unwrap();
    let handle = builtin(BuiltinSettings { max_output_bytes: 100, ..BuiltinSettings::new(dir.path()) }).await;
    let output = ok(&handle, "run_command", json!({"command": "seq 1 10000"})).await;
    assert!(output.starts_with("1\n2\n3\n"), "{output}");
    assert!(output.contains("9999\n10000\n"), "{output}");
    let cut = 48_894 - 100; // `seq 1 10000` writes 48,894 bytes
    assert!(output.contains(&format!("[... {cut} bytes of output cut here ...]")), "{output}");
    assert!(
        output.ends_with(&format!("[{cut} bytes of output were cut from the middle to stay within 100 bytes]\n[exit code 0]")),
        "{output}"
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_times_out_is_ended_with_its_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let handle = builtin(BuiltinSettings::new(dir.path())).await;
    let command = "sleep 1000 & echo $! > pid; echo started; wait";
    let timed_out = refused(&handle, "run_command", json!({"command": command, "timeout_secs": 1})).await;
    assert!(timed_out.starts_with("started\n[timed out after 1 s: the command and every process it started were ended"), "{timed_out}");
    wait_gone(pid_in(&dir.path().join("pid")).await).await;
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_processes_end_with_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let handle = builtin(BuiltinSettings::new(dir.path())).await;
    let result = ok(&handle, "run_command", json!({"command": "sleep 1000 > /dev/null 2>&1 & echo $! > pid"})).await;
    assert_eq!(result, "[exit code 0]");
    wait_gone(pid_in(&dir.path().join("pid")).await).await;
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_command_is_ended_with_its_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let handle = builtin(BuiltinSettings::new(dir.path())).await;
    let caller = handle.clone();
    let call = CallTool::new("mcp__builtin__run_command", json!({"command": "sleep 1000 & echo $! > pid; wait"}));
    let running = tokio::spawn(async move { caller.call(call).await });
    let pid = pid_in(&dir.path().join("pid")).await;
    assert!(alive(pid).is_some());
    running.abort();
    wait_gone(pid).await;
    let after = ok(&handle, "run_command", json!({"command": "echo still serving"})).await;
    assert_eq!(after, "still serving\n[exit code 0]");
    assert_eq!(status_of(&handle, "builtin").await.restarts, 0, "a cancelled call does not restart the server");
    handle.shutdown().await;
}
