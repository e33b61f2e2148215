//! The session history on disk: what a conversation's file holds, that it
//! never holds a configured secret, and where it is kept.

use std::os::unix::fs::PermissionsExt;

use mcpvisor::config::{Redactor, ServerConfig};
use mcpvisor::llm::chat::{ChatMessage, Part, StopReason, ToolCall, Usage};
use mcpvisor::sessions::{NewSession, Record, SessionError, SessionId, SessionStore};

/// A secret with no recognisable shape: only the configuration says it is
/// one. Its quote and backslash differ in JSON, where the file has them
/// escaped; in a tool call's arguments (JSON in a string) the shape rule of
/// `"password": "..."` used to end the value at the escaped quote and leave
/// the rest of the secret in the file.
const SECRET: &str = "plain-looking-s3cret\"with\\quotes";

fn redactor() -> Redactor {
    let config = ServerConfig::stdio("db", "db-server", ["--verbose"]).with_env("DB_PASSWORD", SECRET);
    Redactor::from_configs([&config])
}

#[test]
fn a_configured_secret_never_reaches_the_file_wherever_it_appears() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::new(dir.path());
    let new = NewSession { model: "m".into(), cwd: None, system: Some(format!("The password is {SECRET}.")) };
    let writer = store.create(new, redactor()).unwrap();
    let arguments = serde_json::json!({"query": "select 1", "password": SECRET}).to_string();
    let records = [
        Record::Message { message: ChatMessage::user(format!("connect with {SECRET}")) },
        Record::Message {
            message: ChatMessage::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall { id: "c1".into(), name: "mcp__db__query".into(), arguments }],
            },
        },
        Record::Message {
            message: ChatMessage::Tool {
                call_id: "c1".into(),
                name: "mcp__db__query".into(),
                content: vec![Part::Text { text: format!("connected as admin:{SECRET}; token ghp_abcdefghijklmnopqrstuvwxyz0123") }],
                is_error: false,
            },
        },
        Record::Summary { summary: format!("The user's password is {SECRET}."), replaced: 1 },
        Record::TurnEnded { stop_reason: StopReason::EndTurn, usage: Usage::default() },
    ];
    for record in &records {
        writer.append(record).unwrap();
    }

    let bytes = std::fs::read(writer.path()).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let escaped = serde_json::to_string(SECRET).unwrap();
    for form in [SECRET, &escaped[1..escaped.len() - 1], "plain-looking-s3cret", "quotes", "ghp_abcdefghijklmnopqrstuvwxyz0123"] {
        assert!(!text.contains(form), "{form:?} was written:\n{text}");
    }
    assert_eq!(text.lines().count(), 1 + records.len(), "one line per record:\n{text}");

    let saved = store.load(writer.id()).unwrap();
    assert!(saved.warnings.is_empty(), "every line still parses: {:?}", saved.warnings);
    assert_eq!(saved.started.system.as_deref(), Some("The password is ***."));
    let ChatMessage::Assistant { tool_calls, .. } = &saved.messages[1] else { panic!("{:?}", saved.messages) };
    assert_eq!(tool_calls[0].parsed_arguments().unwrap()["password"], "***", "the arguments stay JSON");
}

#[test]
fn a_resumed_conversation_goes_on_in_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::new(dir.path());
    let writer = store.create(NewSession { model: "m".into(), ..NewSession::default() }, Redactor::default()).unwrap();
    writer.append(&Record::Message { message: ChatMessage::user("first") }).unwrap();
    let id = writer.id().clone();
    drop(writer);

    let latest = store.latest().unwrap().expect("a conversation");
    assert_eq!(latest, id);
    let (saved, writer) = store.resume(&SessionId::parse(latest.as_str()).unwrap(), Redactor::default()).unwrap();
    assert_eq!(saved.messages, vec![ChatMessage::user("first")]);
    writer.append(&Record::Message { message: ChatMessage::user("second") }).unwrap();
    assert_eq!(store.load(&id).unwrap().messages, vec![ChatMessage::user("first"), ChatMessage::user("second")]);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no second file");
}

#[test]
fn an_id_from_a_user_never_reaches_outside_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("secret.jsonl"), "{}").unwrap();
    for text in ["../secret", "/etc/passwd", "secret", "20261123-142501-042-7f3a9c/../../secret"] {
        let error = SessionId::parse(text).unwrap_err();
        assert!(matches!(error, SessionError::BadId { .. }), "{text}");
        assert!(error.to_string().contains("is not a conversation id"), "{error}");
    }
}

/// Set in the copy of this test binary that [`in_its_own_process`] starts.
const CHILD: &str = "MCPVISOR_TEST_OWN_PROCESS";

/// Runs the test `name` (module path and all) alone in a new process of
/// this test binary with `env` set, since setting a variable in this process
/// would race with every other test of the binary reading the environment;
/// false when this is that process, where the test then runs.
fn in_its_own_process(name: &str, env: &[(&str, &std::path::Path)]) -> bool {
    if std::env::var_os(CHILD).is_some() {
        return false;
    }
    let binary = std::env::current_exe().expect("the test binary's path");
    let mut command = std::process::Command::new(binary);
    command.args(["--exact", name, "--test-threads", "1", "--nocapture"]).env(CHILD, "1");
    command.envs(env.iter().map(|(key, value)| (key, value)));
    let output = command.output().expect("the test binary starts again");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{name} failed in its own process:\n{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "{name} did not run in its own process:\n{stdout}");
    true
}

#[test]
fn the_default_location_follows_xdg_data_home_and_files_are_private() {
    // It reads XDG_DATA_HOME, set for a process of its own.
    let name = "sessions::the_default_location_follows_xdg_data_home_and_files_are_private";
    let dir = tempfile::tempdir().unwrap();
    if in_its_own_process(name, &[("XDG_DATA_HOME", dir.path())]) {
        return;
    }
    let data_home = std::path::PathBuf::from(std::env::var_os("XDG_DATA_HOME").expect("XDG_DATA_HOME is set for this process"));
    let store = SessionStore::default_location().unwrap();
    assert_eq!(store.dir(), data_home.join("mcpvisor/sessions"));
    let writer = store.create(NewSession::default(), Redactor::default()).unwrap();
    assert_eq!(writer.path().parent(), Some(store.dir()));
    assert_eq!(std::fs::metadata(store.dir()).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(std::fs::metadata(writer.path()).unwrap().permissions().mode() & 0o777, 0o600);
}
