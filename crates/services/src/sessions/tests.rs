use super::*;
use crate::llm::chat::{Part, StopReason, ToolCall, Usage};
use std::os::unix::fs::PermissionsExt;

fn store() -> (tempfile::TempDir, SessionStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::new(dir.path().join("sessions"));
    (dir, store)
}

fn new_session() -> NewSession {
    NewSession { model: "gpt-test".into(), cwd: Some("/work".into()), system: Some("You help.".into()) }
}

fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::user("add 2 and 3"),
        ChatMessage::Assistant {
            text: "Let me add.".into(),
            tool_calls: vec![ToolCall { id: "call_1".into(), name: "mcp__demo__add".into(), arguments: r#"{"a":2,"b":3}"#.into() }],
        },
        ChatMessage::Tool {
            call_id: "call_1".into(),
            name: "mcp__demo__add".into(),
            content: vec![Part::Text { text: "5".into() }],
            is_error: false,
        },
        ChatMessage::Assistant { text: "5".into(), tool_calls: vec![] },
    ]
}

fn write_all(writer: &SessionWriter, messages: &[ChatMessage]) {
    for message in messages {
        writer.append(&Record::Message { message: message.clone() }).unwrap();
    }
}

#[test]
fn a_conversation_round_trips_with_its_tool_calls() {
    let (_dir, store) = store();
    let writer = store.create(new_session(), Redactor::default()).unwrap();
    write_all(&writer, &conversation());
    writer.append(&Record::TurnEnded { stop_reason: StopReason::EndTurn, usage: Usage { input_tokens: 10, output_tokens: 2 } }).unwrap();

    let saved = store.load(writer.id()).unwrap();
    assert_eq!(saved.messages, conversation());
    assert_eq!((saved.started.model.as_str(), saved.started.cwd.as_deref()), ("gpt-test", Some("/work")));
    assert_eq!(saved.started.system.as_deref(), Some("You help."));
    assert!(saved.warnings.is_empty(), "{:?}", saved.warnings);
    assert_eq!(writer.path(), store.path_of(writer.id()));
}

#[test]
fn a_summary_is_replayed_in_place_of_the_messages_it_replaced() {
    let (_dir, store) = store();
    let writer = store.create(new_session(), Redactor::default()).unwrap();
    write_all(&writer, &conversation());
    writer.append(&Record::Summary { summary: "The user added 2 and 3; it made 5.".into(), replaced: 3 }).unwrap();
    write_all(&writer, &[ChatMessage::user("and 4?")]);
    // A second summary counts the replayed conversation, the first summary included.
    writer.append(&Record::Summary { summary: "Sums so far: 5.".into(), replaced: 2 }).unwrap();

    let saved = store.load(writer.id()).unwrap();
    assert_eq!(saved.messages, vec![summary_message("Sums so far: 5."), ChatMessage::user("and 4?")]);
    let ChatMessage::User { content } = &saved.messages[0] else { panic!("a user message") };
    assert!(content[0].text().unwrap().starts_with(SUMMARY_HEADING));
}

#[test]
fn an_incomplete_last_line_is_skipped_with_a_warning_and_resuming_starts_a_new_line() {
    let (_dir, store) = store();
    let writer = store.create(new_session(), Redactor::default()).unwrap();
    write_all(&writer, &conversation()[..1]);
    writer.write_raw(br#"{"type":"message","message":{"role":"assis"#).unwrap();

    let saved = store.load(writer.id()).unwrap();
    assert_eq!(saved.messages, conversation()[..1]);
    assert_eq!(saved.warnings, ["line 3 is incomplete (the program writing it stopped); it was skipped"]);

    let (_, writer) = store.resume(writer.id(), Redactor::default()).unwrap();
    write_all(&writer, &[ChatMessage::user("again")]);
    let saved = store.load(writer.id()).unwrap();
    assert_eq!(saved.messages, vec![ChatMessage::user("add 2 and 3"), ChatMessage::user("again")]);
    assert_eq!(saved.warnings.len(), 1, "{:?}", saved.warnings);
    assert!(saved.warnings[0].starts_with("line 3 is not JSON"), "the torn line is no longer the last: {:?}", saved.warnings);
}

#[test]
fn unknown_record_types_and_invalid_lines_are_skipped_with_warnings() {
    let (_dir, store) = store();
    let writer = store.create(new_session(), Redactor::default()).unwrap();
    writer.write_raw(b"{\"type\":\"checkpoint\",\"files\":[\"a.rs\"]}\n\n").unwrap();
    writer.write_raw(b"{\"type\":\"message\",\"message\":{\"role\":\"robot\"}}\nnot json\n").unwrap();
    write_all(&writer, &[ChatMessage::user("still read")]);

    let saved = store.load(writer.id()).unwrap();
    assert_eq!(saved.messages, vec![ChatMessage::user("still read")]);
    assert_eq!(saved.warnings.len(), 3, "{:?}", saved.warnings);
    assert!(saved.warnings[0].contains("line 2: record type \"checkpoint\" is unknown"), "{:?}", saved.warnings);
    assert!(saved.warnings[1].starts_with("line 4: not a valid `message` record"), "{:?}", saved.warnings);
    assert!(saved.warnings[2].starts_with("line 5 is not JSON"), "{:?}", saved.warnings);
}

#[test]
fn a_file_without_a_started_record_or_with_another_id_is_not_a_session() {
    let (_dir, store) = store();
    let writer = store.create(new_session(), Redactor::default()).unwrap();
    let other = SessionId::at(0, 7);
    fs::copy(writer.path(), store.path_of(&other)).unwrap();
    let error = store.load(&other).unwrap_err();
    assert!(error.to_string().contains(&format!("its `started` record names conversation {}", writer.id())), "{error}");

    fs::write(store.path_of(&other), "{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":[]}}\n").unwrap();
    assert!(matches!(store.load(&other), Err(SessionError::NotASession { .. })));
    assert_eq!(store.load(&SessionId::at(1, 1)), Err(SessionError::NotFound { id: SessionId::at(1, 1), dir: store.dir().into() }));
}

#[test]
fn latest_and_list_go_by_id_newest_first_and_ignore_other_files() {
    let (_dir, store) = store();
    assert_eq!(store.latest().unwrap(), None, "no directory yet");
    let first = store.create(new_session(), Redactor::default()).unwrap();
    write_all(&first, &[ChatMessage::user("one two three four five six seven eight nine ten eleven twelve thirteen")]);
    let second = store.create(NewSession { model: "other".into(), ..new_session() }, Redactor::default()).unwrap();
    // Ids of the same millisecond differ by their random part: order them by name.
    let (older, newer) = if first.id() < second.id() { (&first, &second) } else { (&second, &first) };
    fs::write(store.dir().join("notes.txt"), "not a session").unwrap();
    fs::write(store.dir().join("20261123-142501-042-7f3a9c.jsonl.tmp"), "").unwrap();

    assert_eq!(store.latest().unwrap().as_ref(), Some(newer.id()));
    let listing = store.list().unwrap();
    let ids: Vec<&SessionId> = listing.sessions.iter().map(|info| &info.id).collect();
    assert_eq!(ids, [newer.id(), older.id()]);
    let info = listing.sessions.iter().find(|info| &info.id == first.id()).unwrap();
    assert_eq!(info.first_words, "one two three four five six seven eight nine ten eleven twelve …");
    assert_eq!(info.model, "gpt-test");
    assert_eq!(listing.sessions.iter().find(|info| &info.id == second.id()).unwrap().first_words, "");

    let broken = SessionId::at(4_000_000_000_000, 1);
    fs::write(store.path_of(&broken), "garbage\n").unwrap();
    let listing = store.list().unwrap();
    assert_eq!(listing.sessions.len(), 2);
    assert!(listing.warnings[0].contains("not a saved conversation"), "{:?}", listing.warnings);
}

#[test]
fn files_are_private_to_their_owner() {
    let (_dir, store) = store();
    fs::create_dir_all(store.dir()).unwrap();
    fs::set_permissions(store.dir(), fs::Permissions::from_mode(0o755)).unwrap();
    let writer = store.create(new_session(), Redactor::default()).unwrap();
    assert_eq!(fs::metadata(store.dir()).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(fs::metadata(writer.path()).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn an_unwritable_directory_is_a_typed_error_naming_it() {
    let (dir, _) = store();
    let blocker = dir.path().join("file");
    fs::write(&blocker, "").unwrap();
    let store = SessionStore::new(blocker.join("sessions"));
    let error = store.create(new_session(), Redactor::default()).unwrap_err();
    assert!(matches!(&error, SessionError::Io { action: "create it", path, .. } if path == store.dir()), "{error}");
}

#[test]
fn conversations_started_at_once_get_ids_of_their_own() {
    let (_dir, store) = store();
    let writers: Vec<SessionWriter> = (0..64).map(|_| store.create(new_session(), Redactor::default()).unwrap()).collect();
    let mut ids: Vec<&SessionId> = writers.iter().map(|writer| writer.id()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 64);
    assert_eq!(fs::read_dir(store.dir()).unwrap().count(), 64);
    for writer in &writers {
        assert_eq!(store.load(writer.id()).unwrap().started.session_id, *writer.id(), "each file holds its own conversation");
    }
}
