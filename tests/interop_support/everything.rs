//! The checks of the reference server `everything` (npm
//! `@modelcontextprotocol/server-everything`), the same over stdio,
//! Streamable HTTP and HTTP+SSE (docs/interop.md has the survey).

use std::time::Duration;

use super::{call, drain, era_of, next_event, object, resource_text, start, texts, user};
use crate::common::text;
use mcpvisor::actors::operation::LogLevel;
use mcpvisor::actors::{Event, ProgressSink};
use mcpvisor::config::ServerConfig;
use mcpvisor::CallTool;
use rmcp::model::{ArgumentInfo, Reference};
use serde_json::json;

/// The whole survey of `everything` against `config` (a server named
/// `everything`, over any transport): it must settle in the legacy era.
pub async fn everything(config: ServerConfig) {
    let (handlers, asked) = user(&["/tmp/interop-everything-root"]);
    let how = format!("{:?} {:?}", config.transport, config.era);
    let handle = start(config, Some(handlers)).await;
    assert_eq!(era_of(&handle, "everything").await, ("legacy".into(), "2025-11-25".into()), "{how}: a legacy-only server");

    // Tools, including the four registered after `initialized` by client capability.
    let mut events = handle.subscribe();
    let tools: Vec<String> = handle.list_tools().await.into_iter().map(|t| t.tool.name.to_string()).collect();
    for tool in ["echo", "get-sum", "get-tiny-image", "trigger-long-running-operation", "toggle-simulated-logging"] {
        assert!(tools.contains(&tool.to_string()), "{tool} in {tools:?}");
    }
    assert_eq!(text(&call(&handle, "everything", "echo", json!({"message": "hi"})).await), "Echo: hi");
    assert_eq!(text(&call(&handle, "everything", "get-sum", json!({"a": 2, "b": 3})).await), "The sum of 2 and 3 is 5.");
    let weather = call(&handle, "everything", "get-structured-content", json!({"location": "Chicago"})).await;
    assert_eq!(weather.structured_content, Some(json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82})));
    let image = serde_json::to_value(&call(&handle, "everything", "get-tiny-image", json!({})).await.content).unwrap();
    let image = image.as_array().unwrap().iter().find(|b| b["type"] == "image").cloned().expect("an image block");
    assert_eq!(image["mimeType"], "image/png");
    assert!(image["data"].as_str().is_some_and(|d| d.starts_with("iVBOR")), "base64 PNG: {image}");
    let annotated = call(&handle, "everything", "get-annotated-message", json!({"messageType": "error"})).await;
    let annotated = serde_json::to_value(&annotated.content).unwrap();
    assert_eq!(annotated[0]["text"], "Error: Operation failed");
    assert_eq!(annotated[0]["annotations"]["priority"], 1.0);

    // Resources, templates, prompts, completion.
    let resources = handle.list_resources("everything").await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris.len(), 7, "{uris:?}");
    assert!(uris.contains(&"demo://resource/static/document/architecture.md"), "{uris:?}");
    let templates = handle.list_resource_templates("everything").await.unwrap();
    let templates: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert_eq!(templates, ["demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/blob/{resourceId}"]);
    let dynamic = handle.read_resource("everything", "demo://resource/dynamic/text/1").await.unwrap();
    let dynamic = resource_text(&dynamic.contents);
    assert!(dynamic.starts_with("Resource 1: This is a plaintext resource created at"), "{dynamic}");
    let prompts: Vec<String> = handle.list_prompts("everything").await.unwrap().into_iter().map(|p| p.name.to_string()).collect();
    assert_eq!(prompts, ["simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"]);
    let paris = handle.get_prompt("everything", "args-prompt", object(json!({"city": "Paris"}))).await.unwrap();
    assert_eq!(serde_json::to_value(&paris.messages).unwrap()[0]["content"]["text"], "What's weather in Paris?");
    let department = ArgumentInfo::new("department", "E");
    let completed = handle.complete("everything", Reference::for_prompt("completable-prompt"), department).await.unwrap();
    assert_eq!(completed.values, ["Engineering"]);

    // Progress: one notification per step, in order, with the total.
    let (sink, mut updates) = ProgressSink::channel();
    let long = CallTool::new("trigger-long-running-operation", json!({"duration": 1, "steps": 3})).with_progress(sink);
    let done = handle.call_on("everything", long).await.unwrap();
    assert_eq!(text(&done), "Long running operation completed. Duration: 1 seconds, Steps: 3.");
    let steps: Vec<(f64, Option<f64>)> = drain(&mut updates).into_iter().map(|p| (p.progress, p.total)).collect();
    assert_eq!(steps, [(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))]);

    // Sampling, elicitation and roots reach the embedder's handlers.
    let sampled = texts(&call(&handle, "everything", "trigger-sampling-request", json!({"prompt": "hello"})).await);
    assert!(sampled.starts_with("LLM sampling result:"), "{sampled}");
    assert!(sampled.contains("model says: Resource trigger-sampling-request context: hello"), "{sampled}");
    assert_eq!(asked.lock().unwrap().sampled[0]["maxTokens"], 100);
    let elicited = texts(&call(&handle, "everything", "trigger-elicitation-request", json!({})).await);
    assert!(elicited.contains("User provided the requested information!"), "{elicited}");
    assert!(elicited.contains("- Name: Ada Lovelace") && elicited.contains("- Favorite Integer: 42"), "{elicited}");
    assert_eq!(asked.lock().unwrap().elicited, ["Please provide inputs for the following fields:"]);
    let roots = texts(&call(&handle, "everything", "get-roots-list", json!({})).await);
    assert!(roots.contains("Current MCP Roots (1 total)") && roots.contains("file:///tmp/interop-everything-root"), "{roots}");

    // The server logged the roots it got right after `initialized`.
    let logged = next_event(&mut events, Duration::from_secs(10), "the roots log", |e| match e {
        Event::Log { server, data, logger, .. } if server == "everything" && data.to_string().contains("Roots updated") => Some(logger),
        _ => None,
    });
    assert_eq!(logged.await.as_deref(), Some("everything-server"));

    // A task-required tool: the call is augmented and its result awaited.
    let research = texts(&call(&handle, "everything", "simulate-research-query", json!({"topic": "actors"})).await);
    assert!(research.to_lowercase().contains("actors"), "{research}");

    // Logging with a level, then resource subscriptions.
    handle.set_log_level("everything", LogLevel::Debug).await.unwrap();
    let started = texts(&call(&handle, "everything", "toggle-simulated-logging", json!({})).await);
    assert!(started.starts_with("Started simulated, random-leveled logging"), "{started}");
    let level = next_event(&mut events, Duration::from_secs(15), "a simulated log", |e| match e {
        Event::Log { server, level, data, .. } if server == "everything" && data.to_string().contains("-level message") => Some(level),
        Event::Log { server, level, data, .. } if server == "everything" && data.to_string().contains("level-message") => Some(level),
        _ => None,
    });
    assert!(["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"].contains(&level.await.as_str()));
    let uri = "demo://resource/static/document/architecture.md";
    handle.subscribe_resource("everything", uri).await.unwrap();
    call(&handle, "everything", "toggle-subscriber-updates", json!({})).await;
    let updated = next_event(&mut events, Duration::from_secs(15), "resources/updated", |e| match e {
        Event::ResourceUpdated { server, uri } if server == "everything" => Some(uri),
        _ => None,
    });
    assert_eq!(updated.await, uri);
    handle.unsubscribe_resource("everything", uri).await.unwrap();
    assert!(handle.ping("everything").await.unwrap() < Duration::from_secs(5));
    handle.shutdown().await;
}
