use serde_json::json;

use super::*;
use crate::protocol::error_codes;

fn parsed(method: &str, params: Value) -> ClientRequest {
    ClientRequest::parse(method, params).unwrap_or_else(|e| panic!("{method}: {}", e.message))
}

fn refused(method: &str, params: Value) -> String {
    let error = ClientRequest::parse(method, params).unwrap_err();
    assert_eq!(error.code, error_codes::INVALID_PARAMS, "{method}");
    error.message
}

#[test]
fn each_method_parses_into_its_typed_params() {
    let initialize = parsed("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {"roots": {}}}));
    let expected = Initialize { protocol_version: Some("2025-06-18".into()), capabilities: json!({"roots": {}}) };
    assert!(matches!(initialize, ClientRequest::Initialize(ref params) if *params == expected));
    assert!(matches!(parsed("server/discover", Value::Null), ClientRequest::Discover));
    assert!(matches!(parsed("ping", Value::Null), ClientRequest::Ping));
    assert!(matches!(parsed("logging/setLevel", json!({"level": "warning"})), ClientRequest::SetLevel(level) if level.name() == "warning"));
    let call = parsed("tools/call", json!({"name": "t", "arguments": {"a": 1}, "task": {"ttl": 5}, "_meta": {"progressToken": 1}}));
    let ClientRequest::CallTool(call) = call else { panic!("not a call") };
    assert_eq!((call.name.as_str(), &call.task, call.arguments()), ("t", &Some(json!({"ttl": 5})), &json!({"a": 1})));
    assert_eq!(call.params["_meta"]["progressToken"], 1);
    let ClientRequest::GetPrompt(prompt) = parsed("prompts/get", json!({"name": "p", "arguments": {"x": "y"}})) else { panic!() };
    assert_eq!((prompt.name.as_str(), prompt.arguments.unwrap()["x"].as_str()), ("p", Some("y")));
    assert!(matches!(parsed("resources/read", json!({"uri": "a://b"})), ClientRequest::ReadResource(read) if read.uri == "a://b"));
    assert!(matches!(parsed("resources/subscribe", json!({"uri": "a://b"})), ClientRequest::Subscribe(s) if s.uri == "a://b"));
    assert!(matches!(parsed("resources/unsubscribe", json!({"uri": "a://b"})), ClientRequest::Unsubscribe(s) if s.uri == "a://b"));
    let task = parsed("tasks/cancel", json!({"taskId": "t1"}));
    assert!(matches!(task, ClientRequest::Task(TaskRequest { kind: TaskMethod::Cancel, ref task_id }) if task_id == "t1"));
    assert!(matches!(parsed("skills/get", json!({"uri": "skill://a"})), ClientRequest::SkillsGet { uri } if uri == "skill://a"));
    assert!(matches!(parsed("subscriptions/listen", json!({"notifications": {"tools": true}})), ClientRequest::Listen(_)));
}

#[test]
fn lists_carry_their_cursor_and_name_their_key() {
    for (method, list) in [
        ("tools/list", List::Tools),
        ("resources/list", List::Resources),
        ("resources/templates/list", List::ResourceTemplates),
        ("prompts/list", List::Prompts),
        ("tasks/list", List::Tasks),
        ("skills/list", List::Skills),
    ] {
        let ClientRequest::List(parsed_list, paged) = parsed(method, json!({"cursor": "page:2"})) else { panic!("{method}") };
        assert_eq!((parsed_list, paged.cursor.as_deref(), parsed_list.method()), (list, Some("page:2"), method));
        let ClientRequest::List(_, first) = parsed(method, Value::Null) else { panic!("{method}") };
        assert_eq!(first.cursor, None);
    }
    assert_eq!(List::ResourceTemplates.key(), "resourceTemplates");
    assert_eq!(refused("prompts/list", json!({"cursor": 7})), "prompts/list: unknown cursor 7 (pass back a `nextCursor` this server gave)");
}

#[test]
fn completion_reads_its_reference_argument_and_string_context() {
    let params = json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "style", "value": "p"},
        "context": {"arguments": {"name": "Ada", "n": 1}}});
    let ClientRequest::Complete(complete) = parsed("completion/complete", params) else { panic!("not a completion") };
    assert_eq!(complete.r#ref, Reference::for_prompt("greet"));
    assert_eq!((complete.argument.name.as_str(), complete.argument.value.as_str()), ("style", "p"));
    let context = complete.context.and_then(|context| context.arguments).unwrap();
    assert_eq!((context.get("name").map(String::as_str), context.len()), (Some("Ada"), 1));
    let resource = json!({"ref": {"type": "ref/resource", "uri": "x://{id}"}, "argument": {"name": "id", "value": ""}});
    let ClientRequest::Complete(complete) = parsed("completion/complete", resource) else { panic!("not a completion") };
    assert_eq!(complete.r#ref, Reference::for_resource("x://{id}"));
}

#[test]
fn bad_params_are_one_invalid_params_naming_method_and_field() {
    assert_eq!(refused("tools/call", json!({})), "tools/call: `name` must be a string, and is missing");
    assert_eq!(refused("tools/call", Value::Null), "tools/call: `name` must be a string, and is missing");
    assert_eq!(refused("tools/call", json!({"name": 5})), "tools/call: `name` must be a string, not a number");
    assert_eq!(refused("resources/read", json!({"uri": []})), "resources/read: `uri` must be a string, not an array");
    assert_eq!(refused("resources/subscribe", json!({})), "resources/subscribe: `uri` must be a string, and is missing");
    assert_eq!(refused("prompts/get", json!({"name": "p", "arguments": "x"})), "prompts/get: `arguments` must be an object, not a string");
    assert_eq!(refused("tasks/get", json!({})), "tasks/get: `taskId` must be a string");
    assert_eq!(refused("skills/get", json!({"uri": null})), "skills/get: `uri` must be a string, not null");
    assert!(refused("logging/setLevel", json!({"level": "loud"})).starts_with("logging/setLevel: `level` must be one of debug, info"));
    assert!(refused("completion/complete", json!({"ref": {"type": "ref/tool"}})).starts_with("completion/complete: `ref` must be"));
    let argument = json!({"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "x"}});
    assert!(refused("completion/complete", argument).starts_with("completion/complete: `argument` must be {name, value}"));
    assert!(refused("subscriptions/listen", json!({})).starts_with("subscriptions/listen: `notifications` must be an object"));
}

#[test]
fn initialize_is_read_leniently_and_unknown_methods_keep_their_params() {
    let initialize = parsed("initialize", json!({"protocolVersion": 2025}));
    assert!(
        matches!(initialize, ClientRequest::Initialize(Initialize { protocol_version: None, ref capabilities }) if *capabilities == json!({}))
    );
    let other = parsed("x/echo", json!({"a": 1}));
    assert_eq!(other.method(), "x/echo");
    assert!(matches!(other, ClientRequest::Other { params, .. } if params == json!({"a": 1})));
    // A modern retry's fields rmcp would type are not read: a `requestState` that is no string is not refused.
    assert!(matches!(parsed("resources/read", json!({"uri": "a", "requestState": 5})), ClientRequest::ReadResource(_)));
    assert_eq!(parsed("tools/call", json!({"name": "t", "task": null})).target(), Some("t"));
}
