//! What reaches the user's terminal and stdout: server-supplied strings
//! cannot inject escape sequences or break tables (`--json` keeps them
//! exact), a server that announced only tools passes `test`, and output
//! lost on stdout is an error while a closed pipe ends quietly.

use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Stdio;

use crate::cli_support::{demo_table, python_fixture_table, stderr, stdout, Sandbox};

/// Characters that must never reach a terminal raw.
fn has_raw_control(text: &str) -> bool {
    text.chars().any(|c| (c.is_control() && c != '\n') || ('\u{202a}'..='\u{202e}').contains(&c))
}

fn hostile_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    let stderr_server = "[servers.noisy]\ncommand = \"sh\"\nargs = [\"-c\", \"printf '\\\\033[31mred\\\\033]0;title\\\\007 line\\\\n' >&2; exit 1\"]\nrestart = \"never\"\n";
    sandbox.write_user_file(&format!("{}\n{stderr_server}", python_fixture_table("hostile", "tools_only_server.py", &["--hostile"])));
    sandbox
}

#[test]
fn server_strings_cannot_inject_terminal_escapes_and_json_keeps_them_exact() {
    let sandbox = hostile_sandbox();
    let output = sandbox.cmd(["tools", "--server", "hostile"]).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let shown = stdout(&output);
    assert!(!has_raw_control(&shown), "raw control characters in:\n{shown:?}");
    assert_eq!(shown.lines().count(), 5, "a header and one line per tool:\n{shown}");
    assert!(shown.contains("red\\u{1b}[31malert") && shown.contains("two\\nlines"), "{shown}");

    let (tools, _) = sandbox.json(["--json", "tools", "--server", "hostile"]);
    let names: Vec<&str> = tools.as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"red\x1b[31malert") && names.contains(&"two\nlines"), "{names:?}");

    for args in [
        vec!["call", "hostile", "nosuch"],
        vec!["call", "hostile", "red\x1b[31malert"],
        vec!["status"],
        vec!["-v", "status"],
        vec!["test", "noisy"],
    ] {
        let output = sandbox.cmd(&args).output().unwrap();
        let shown = stdout(&output) + &stderr(&output);
        assert!(!has_raw_control(&shown), "{args:?}: raw control characters in:\n{shown:?}");
    }
    let output = sandbox.cmd(["status"]).output().unwrap();
    assert!(stdout(&output).contains("\\u{1b}[31mred"), "the stderr tail is shown escaped:\n{}", stdout(&output));
}

#[test]
fn test_passes_on_a_server_that_announced_only_tools() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&python_fixture_table("tonly", "tools_only_server.py", &[]));
    let output = sandbox.cmd(["test", "tonly"]).output().unwrap();
    let shown = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{shown}{}", stderr(&output));
    assert!(shown.contains("resources/list") && shown.matches("not offered").count() == 2, "{shown}");
    for command in ["resources", "prompts"] {
        sandbox.cmd([command]).assert().success();
    }
}

#[test]
fn output_lost_on_stdout_is_an_error() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&demo_table("demo", &[]));
    for args in [vec!["tools"], vec!["--json", "call", "demo", "echo", "--arg", "text=hi"], vec!["list"]] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
        let output = sandbox.std_cmd(&args).stdout(full).output().unwrap();
        assert_eq!(output.status.code(), Some(4), "{args:?}: {}", stderr(&output));
        assert!(stderr(&output).contains("could not be written to stdout"), "{args:?}: {}", stderr(&output));
    }
}

#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&demo_table("demo", &[]));
    let mut fds = [0; 2];
    // SAFETY: pipe writes two new descriptors into the array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors were just opened and are owned here alone.
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(reader); // closed before the command starts: its first write gets EPIPE
    let output = sandbox.std_cmd(["tools"]).stdout(Stdio::from(writer)).stderr(Stdio::piped()).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stderr(&output), "", "nothing to say about a reader that left");
}

#[test]
fn status_and_tools_say_which_tools_were_left_out_or_renamed() {
    let sandbox = Sandbox::new();
    let state = tempfile::tempdir().unwrap();
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/processes/stubborn_server.py");
    let table =
        format!("[servers.odd]\ncommand = \"python3\"\nargs = [{fixture:?}, {:?}, \"--odd-tools\"]\nera = \"legacy\"\n", state.path());
    sandbox.write_user_file(&table);
    for command in [["status"], ["tools"]] {
        let output = sandbox.cmd(command).output().unwrap();
        let said = stderr(&output);
        assert!(output.status.success(), "{said}");
        for warning in ["warning: server `odd`: tool `x_y` is listed more than once", "empty name", "`x.y` is exposed as `mcp__odd__x_y_"] {
            assert!(said.contains(warning), "`mcpvisor {}` does not say {warning:?}:\n{said}", command[0]);
        }
    }
}
