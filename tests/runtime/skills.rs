//! The skills extension (SEP-2640) against the demo server (`--skills`) in
//! both eras: listing reads no file, loading and reading verify what was
//! read, and the agent loads a skill when the model asks for it.

use std::sync::Arc;

use crate::common::*;
use crate::model_server::{openai_stream, ModelServer, Reply};
use mcpvisor::actors::agent::{AgentConfig, AgentEvent, ConfirmPolicy, SKILL_TOOL};
use mcpvisor::actors::outlet::Outlet;
use mcpvisor::config::{AgentSettings, ConfirmMode, Era, ServerConfig};
use mcpvisor::llm::{self, Provider};
use mcpvisor::skills::Mismatch;
use mcpvisor::{CallError, SkillError, SkillFiles};
use serde_json::{json, Value};

/// A demo server serving skills in `era`, logging the methods it receives to `log`.
fn skills_server(name: &str, era: Era, log: &std::path::Path) -> ServerConfig {
    let mut config = demo(name, &["--skills", "--request-log", log.to_str().unwrap()]);
    config.era = era;
    config
}

/// How many `resources/read` requests the server logged.
fn reads(log: &std::path::Path) -> usize {
    std::fs::read_to_string(log).unwrap_or_default().lines().filter(|line| line.starts_with("resources/read")).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_are_listed_without_reads_and_loaded_verified_in_both_eras() {
    let dir = tempfile::tempdir().unwrap();
    let (legacy_log, modern_log) = (dir.path().join("legacy.log"), dir.path().join("modern.log"));
    let handle = start(vec![skills_server("old", Era::Legacy, &legacy_log), skills_server("new", Era::Modern, &modern_log)]).await;
    for (server, log) in [("old", &legacy_log), ("new", &modern_log)] {
        let skills = handle.list_skills(server).await.unwrap();
        let names: Vec<&str> = skills.iter().map(|skill| skill.name()).collect();
        assert_eq!(names, ["release-notes", "stale-notes"], "{server}");
        assert_eq!(reads(log), 0, "{server}: listing read no file");
        let notes = &skills[0];
        assert_eq!(notes.frontmatter["license"], "MIT");
        assert!(matches!(&notes.resources, SkillFiles::Listed(files) if files.len() == 2));
        assert_eq!(&handle.get_skill(server, &notes.uri).await.unwrap(), notes);

        let loaded = handle.load_skill(server, notes).await.unwrap();
        assert!(loaded.body().starts_with("\n# Release notes"), "{server}: {}", loaded.body());
        assert_eq!(reads(log), 1, "{server}: loading read SKILL.md only");
        let template = handle.read_skill_file(&loaded, "references/TEMPLATE.md").await.unwrap();
        assert!(String::from_utf8(template).unwrap().starts_with("## VERSION"));
        assert_eq!(reads(log), 2);
    }
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_content_and_unlisted_files_are_refused_with_the_server_and_skill_named() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let handle = start(vec![skills_server("docs", Era::Auto, &log), demo("plain", &[])]).await;
    let skills = handle.list_skills("docs").await.unwrap();
    let stale = skills.iter().find(|skill| skill.name() == "stale-notes").unwrap();
    let refused = handle.load_skill("docs", stale).await.unwrap_err();
    assert!(
        matches!(&refused, SkillError::Unverified { server, skill, mismatch: Mismatch::Size { .. }, .. }
            if server == "docs" && skill == "skill://stale-notes/SKILL.md"),
        "{refused:?}"
    );
    assert!(refused.to_string().contains("list the server's skills again"), "{refused}");

    let loaded = handle.load_skill("docs", &skills[0]).await.unwrap();
    let before = reads(&log);
    let unlisted = handle.read_skill_file(&loaded, "references/SECRET.md").await.unwrap_err();
    assert!(matches!(unlisted, SkillError::Unverified { mismatch: Mismatch::Unlisted, .. }), "{unlisted:?}");
    let elsewhere = handle.read_skill_file(&loaded, "demo://counter").await.unwrap_err();
    assert!(matches!(elsewhere, SkillError::Unverified { mismatch: Mismatch::Unlisted, .. }), "{elsewhere:?}");
    assert_eq!(reads(&log), before, "an unlisted file is refused without being read");

    // A server that does not announce the extension is not asked.
    let unsupported = handle.list_skills("plain").await.unwrap_err();
    assert!(matches!(&unsupported, CallError::Unsupported { server, .. } if server == "plain"), "{unsupported:?}");
    assert!(unsupported.to_string().contains("io.modelcontextprotocol/skills"), "{unsupported}");
    handle.shutdown().await;
}

/// A streamed Chat Completions answer calling `load_skill` with `arguments`.
fn load(id: &str, arguments: Value) -> Reply {
    let delta = json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
        "function": {"name": SKILL_TOOL, "arguments": arguments.to_string()}}]});
    openai_stream(vec![delta], "tool_calls")
}

fn says(text: &str) -> Reply {
    openai_stream(vec![json!({"role": "assistant", "content": text})], "stop")
}

/// The text of the tool result answering `call_id` in a recorded request body.
fn tool_result(body: &Value, call_id: &str) -> String {
    let messages = body["messages"].as_array().unwrap();
    let result = messages.iter().find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id).expect("the call was answered");
    match &result["content"] {
        Value::String(text) => text.clone(),
        parts => parts.as_array().into_iter().flatten().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_loads_a_skill_when_the_model_asks_and_reads_its_files_verified() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let handle = start(vec![skills_server("docs", Era::Auto, &log)]).await;
    let model_server = ModelServer::start([
        load("c1", json!({"server": "docs", "skill": "release-notes"})),
        load("c2", json!({"server": "docs", "skill": "release-notes", "file": "references/TEMPLATE.md"})),
        load("c3", json!({"server": "docs", "skill": "stale-notes"})),
        says("Done."),
    ])
    .await;
    let model: Arc<dyn llm::ChatModel> = llm::connect(&model_server.settings(Provider::OpenAi, Some(true))).unwrap();
    let (outlet, mut events) = Outlet::channel();
    let mut config = AgentConfig::new(model);
    config.events = Some(outlet);
    config.policy = ConfirmPolicy::new(ConfirmMode::Always, AgentSettings::default());
    let agent = handle.start_agent(config).await.unwrap();
    agent.prompt("write the release notes for 1.2").await.unwrap();

    let requests = model_server.requests();
    let tools = requests[0].body["tools"].as_array().unwrap();
    let offered = tools.iter().find(|tool| tool["function"]["name"] == SKILL_TOOL).expect("load_skill is offered");
    let description = offered["function"]["description"].as_str().unwrap();
    assert!(description.contains("- docs, release-notes: Write release notes for a version from its changes"), "{description}");
    assert_eq!(reads(&log), 3, "SKILL.md twice and the template once: nothing before the model asked");

    let skill = tool_result(&requests[1].body, "c1");
    assert!(skill.contains("Skill `release-notes` from MCP server `docs`"), "{skill}");
    assert!(skill.contains("Its files (read with `file`): references/TEMPLATE.md."), "{skill}");
    assert!(skill.contains("Thanks to everyone who contributed."), "the instructions are in the context: {skill}");
    assert!(!skill.contains("license: MIT"), "the frontmatter is not repeated: {skill}");
    let template = tool_result(&requests[2].body, "c2");
    assert!(template.contains("skill://release-notes/references/TEMPLATE.md") && template.contains("### Fixed"), "{template}");
    let stale = tool_result(&requests[3].body, "c3");
    assert!(stale.contains("The skill was not loaded") && stale.contains("failed verification"), "{stale}");
    assert!(!stale.contains("The new body."), "unverified content never reaches the model: {stale}");

    let mut finished = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let AgentEvent::ToolCallFinished { call_id, is_error, .. } = event {
            finished.push((call_id, is_error));
        }
    }
    assert_eq!(finished, [("c1".to_string(), false), ("c2".to_string(), false), ("c3".to_string(), true)]);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_skills_the_agent_offers_no_skill_tool() {
    let handle = start(vec![demo("plain", &[])]).await;
    let model_server = ModelServer::start([says("Hello.")]).await;
    let model: Arc<dyn llm::ChatModel> = llm::connect(&model_server.settings(Provider::OpenAi, Some(true))).unwrap();
    let agent = handle.start_agent(AgentConfig::new(model)).await.unwrap();
    agent.prompt("hi").await.unwrap();
    let tools = model_server.requests()[0].body["tools"].as_array().cloned().unwrap_or_default();
    assert!(tools.iter().all(|tool| tool["function"]["name"] != SKILL_TOOL));
    handle.shutdown().await;
}
