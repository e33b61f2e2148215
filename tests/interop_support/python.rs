//! The checks of our own server on the Python SDK 2.x
//! (tests/interop/modern_server.py), the same over stdio and stateless
//! Streamable HTTP (docs/interop.md).

use std::time::Duration;

use super::{call, drain, era_of, next_event, object, resource_text, start, user};
use crate::common::{status_of, text};
use mcpvisor::actors::operation::LogLevel;
use mcpvisor::actors::{Event, ProgressSink};
use mcpvisor::config::ServerConfig;
use mcpvisor::{CallError, CallTool, Events, Handle};
use rmcp::model::{ArgumentInfo, Reference};
use serde_json::json;

/// The checks of tests/interop/modern_server.py against `config` (a server
/// named `py`, over stdio or stateless HTTP), which must settle in the
/// `expected` era (`legacy` or `modern`).
pub async fn py(config: ServerConfig, expected: &str) {
    let (handlers, asked) = user(&["/tmp/interop-py-root"]);
    let era = (config.transport, config.era);
    let handle = start(config, Some(handlers)).await;
    let modern = expected == "modern";
    let version = if modern { "2026-07-28" } else { "2025-11-25" };
    assert_eq!(era_of(&handle, "py").await, (expected.into(), version.into()), "{era:?}");
    let status = status_of(&handle, "py").await;
    assert_eq!((status.tools, status.resources, status.prompts), (6, 1, 1), "{status:?}");

    adds(&handle, "py").await;

    // Logging: modern, the level rides on each request; legacy, this SDK
    // does not announce `logging` (and logs regardless).
    let mut events = handle.subscribe();
    match handle.set_log_level("py", LogLevel::Info).await {
        Ok(()) => assert!(modern, "legacy py does not announce logging"),
        Err(CallError::Unsupported { capability, .. }) => {
            assert!(!modern, "modern takes a level per request");
            assert_eq!(capability, "logging");
        }
        Err(other) => panic!("set_log_level: {other}"),
    }
    counts_with_progress_and_logs(&handle, "py", &mut events).await;

    // Elicitation, sampling and roots: input_required rounds (modern) or
    // server-to-client requests (legacy), answered by the same handlers.
    assert_eq!(text(&call(&handle, "py", "ask_name", json!({})).await), "accept:Ada", "the schema's default is kept");
    let summary = text(&call(&handle, "py", "summarize", json!({"text": "actors and supervisors"})).await);
    assert_eq!(summary, "summary by interop-model: model says: Summarize: actors and supervisors");
    assert_eq!(text(&call(&handle, "py", "list_roots", json!({})).await), "file:///tmp/interop-py-root");
    {
        let asked = asked.lock().unwrap();
        assert_eq!(asked.elicited, ["What is your name?"]);
        assert_eq!(asked.sampled.len(), 1);
        assert_eq!(asked.sampled[0]["systemPrompt"], "You summarize in one line.");
    }

    // Resources, template, prompt, completion.
    let note = handle.read_resource("py", "note://hello").await.unwrap();
    assert_eq!(resource_text(&note.contents), "hello from python");
    let templates = handle.list_resource_templates("py").await.unwrap();
    assert_eq!(templates.iter().map(|t| t.uri_template.as_str()).collect::<Vec<_>>(), ["note://echo/{word}"]);
    let echoed = handle.read_resource("py", "note://echo/actix").await.unwrap();
    assert_eq!(resource_text(&echoed.contents), "echo: actix");
    let review = handle.get_prompt("py", "review", object(json!({"code": "fn main() {}"}))).await.unwrap();
    assert_eq!(serde_json::to_value(&review.messages).unwrap()[0]["content"]["text"], "Please review this code:\nfn main() {}");
    let code = ArgumentInfo::new("code", "r");
    assert_eq!(handle.complete("py", Reference::for_prompt("review"), code).await.unwrap().values, ["rust", "ruby"]);

    // Subscriptions: modern, through `subscriptions/listen`; legacy py has no `resources/subscribe`.
    match handle.subscribe_resource("py", "note://hello").await {
        Ok(()) => {
            assert!(modern, "legacy py does not announce resources.subscribe");
            assert_eq!(text(&call(&handle, "py", "touch", json!({"uri": "note://hello"})).await), "touched note://hello");
            let updated = next_event(&mut events, Duration::from_secs(10), "resources/updated", |e| match e {
                Event::ResourceUpdated { server, uri } if server == "py" => Some(uri),
                _ => None,
            });
            assert_eq!(updated.await, "note://hello");
        }
        Err(CallError::Unsupported { capability, .. }) => {
            assert!(!modern, "modern py serves subscriptions/listen");
            assert_eq!(capability, "resource subscriptions");
        }
        Err(other) => panic!("subscribe_resource: {other}"),
    }
    handle.shutdown().await;
}

/// `add(2, 40)` of `server` (one of our Python servers): 42, also as structured output.
pub async fn adds(handle: &Handle, server: &str) {
    let added = call(handle, server, "add", json!({"a": 2, "b": 40})).await;
    assert_eq!(text(&added), "42", "{server}");
    assert_eq!(added.structured_content, Some(json!({"result": 42})), "{server}");
}

/// `count(3)` of `server` (one of our Python servers): progress 1/3..3/3
/// with messages `step i`, and the `info` logs `counted i` on `events`.
pub async fn counts_with_progress_and_logs(handle: &Handle, server: &str, events: &mut Events) {
    let (sink, mut updates) = ProgressSink::channel();
    let counted = handle.call_on(server, CallTool::new("count", json!({"n": 3})).with_progress(sink)).await.unwrap();
    assert_eq!(text(&counted), "counted to 3", "{server}");
    let progress: Vec<(f64, Option<f64>, Option<String>)> =
        drain(&mut updates).into_iter().map(|p| (p.progress, p.total, p.message)).collect();
    let expected: Vec<(f64, Option<f64>, Option<String>)> = (1..=3).map(|i| (i as f64, Some(3.0), Some(format!("step {i}")))).collect();
    assert_eq!(progress, expected, "{server}");
    for i in 1..=3 {
        let message = format!("counted {i}");
        let level = next_event(events, Duration::from_secs(10), &message, |e| match e {
            Event::Log { server: from, level, data, .. } if from == server && data == json!(message) => Some(level),
            _ => None,
        });
        assert_eq!(level.await, "info", "{server}");
    }
}
