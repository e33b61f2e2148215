//! An embedding program's agent: a Hub with the bundled demo server, an
//! Agent with a confirmation policy of its own, one Prompt, its events.
//!
//! Run: `cargo run --example agent -- "add 2 and 3"`. With no model named
//! (`MCPVISOR_MODEL`, plus `OPENAI_BASE_URL`/`OPENAI_API_KEY` or
//! `ANTHROPIC_API_KEY` with `MCPVISOR_PROVIDER=anthropic`) the built-in
//! scripted model answers: it calls the tool the prompt names.

use std::sync::Arc;
use std::time::Duration;

use mcpvisor::actors::agent::{Agent, AgentConfig, AgentEvent, ConfirmRequest, Decision, Prompt};
use mcpvisor::actors::client_requests::Answering;
use mcpvisor::actors::hub::{GetRegistry, Hub, Shutdown, WaitReady};
use mcpvisor::actors::outlet::Outlet;
use mcpvisor::config::{RuntimeConfig, ServerConfig};
use mcpvisor::llm::{self, scripted::Scripted, settings::Choices, ChatModel, ModelSettings, Provider};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("demo-server") {
        std::process::exit(mcpvisor::demo_server::run(Default::default()));
    }
    let prompt = std::env::args().nth(1).unwrap_or_else(|| "add 2 and 3".into());
    actix::System::new().block_on(run(prompt))
}

async fn run(prompt: String) -> Result<(), Box<dyn std::error::Error>> {
    // The supervision tree: a Hub with one server, and the registry of its tools.
    let this_exe = std::env::current_exe()?.to_string_lossy().into_owned();
    let hub = Hub::start(RuntimeConfig::new([ServerConfig::stdio("demo", this_exe, ["demo-server"])]));
    tokio::time::timeout(Duration::from_secs(20), hub.send(WaitReady)).await??;
    let registry = hub.send(GetRegistry).await?;

    // The program's own policy: read-only tools run, anything destructive is refused, the rest allowed once.
    let policy = Answering::function(|request: ConfirmRequest| async move {
        match request.destructive {
            true => Decision::RejectOnce,
            false => Decision::AllowOnce,
        }
    });
    let (events, mut received) = Outlet::channel();
    let mut config = AgentConfig::new(model()?);
    config.conversation.system = Some("Use the tools to answer.".into());
    config.asker = Some(policy);
    config.events = Some(events);
    let agent = Agent::start(registry, config);

    // The events print as they come; the turn's end is the Prompt's answer.
    let printer = actix::spawn(async move {
        while let Some(event) = received.recv().await {
            match event {
                AgentEvent::Text { text } => print!("{text}"),
                AgentEvent::ToolCallRequested { tool, arguments, .. } => println!("\n[call {tool} {arguments}]"),
                AgentEvent::ToolCallDenied { why, .. } => println!("[denied: {why}]"),
                AgentEvent::ToolCallFinished { output, is_error, .. } => {
                    println!("[{}: {output}]", if is_error { "failed" } else { "result" })
                }
                AgentEvent::TurnEnded { stop_reason, usage } => {
                    println!("\n[turn ended: {}, {} tokens in, {} out]", stop_reason.as_str(), usage.input_tokens, usage.output_tokens)
                }
                _ => {}
            }
        }
    });
    let ended = agent.send(Prompt::text(prompt)).await?;
    drop(agent);
    printer.await?;
    hub.send(Shutdown).await?;
    ended?;
    Ok(())
}

/// The model the environment names, else the scripted one.
fn model() -> Result<Arc<dyn ChatModel>, Box<dyn std::error::Error>> {
    if std::env::var("MCPVISOR_MODEL").is_err() {
        return Ok(Arc::new(Scripted));
    }
    let provider = match std::env::var("MCPVISOR_PROVIDER").as_deref() {
        Ok("anthropic") => Provider::Anthropic,
        _ => Provider::OpenAi,
    };
    let settings = ModelSettings::resolve(Choices { provider: Some(provider), ..Choices::default() }, |name| std::env::var(name).ok())?;
    Ok(llm::connect(&settings)?)
}
