//! `mcpvisor agent -p PROMPT`: one turn, then exit.
//!
//! Human output: the text of the model's last answer on stdout (earlier
//! answers of the turn, written before tool calls, go to stderr with the
//! tool activity: each call with its arguments, denials, outcomes folded
//! to a few lines). `--json`: every event as one JSON line on stdout,
//! starting with `{"event":"session","session_id":...}`; the answer is in
//! the `text` events.

use tokio::sync::mpsc::UnboundedReceiver;

use serde_json::json;

use super::asking::{self, Ask, Lines};
use super::history::Opened;
use super::{exit_code, Setup};
use crate::actors::agent::{AgentEvent, Prompt};
use crate::actors::outlet::Outlet;
use crate::cli::output::{print_json_line, print_line, report_text, terminal_safe, warn, Failure, Layout};
use crate::cli::session::Session;
use crate::cli::Cli;

/// Lines of a tool's output shown on stderr.
const SHOWN_LINES: usize = 6;

pub async fn run(cli: &Cli, session: &Session, setup: &Setup, opened: Opened, prompt: &str) -> Result<u8, Failure> {
    let id = opened.id();
    if cli.json {
        print_json_line(&json!({"event": "session", "session_id": id}));
    }
    let mut config = setup.config(opened);
    let (outlet, events) = Outlet::channel();
    config.events = Some(outlet);
    let asks = match asking::interactive() {
        true => {
            let (asker, asks) = asking::relayed();
            config.asker = Some(asker);
            Some((asks, asking::Lines::stdin()))
        }
        false => None,
    };
    let agent =
        session.handle.start_agent(config).await.ok_or_else(|| Failure::connection("the runtime stopped before the agent started"))?;
    let printer = tokio::spawn(print_events(events, asks, cli.json));
    let outcome = agent.send(Prompt::text(prompt)).await.map_err(|_| Failure::connection("the agent stopped during the turn"))?;
    drop(agent);
    let _ = printer.await;
    match &outcome {
        Err(error) => eprintln!("error: {}", report_text(&error.to_string(), Layout::Block)),
        Ok(ended) if exit_code(&outcome) != 0 => eprintln!("note: the turn ended with {}", ended.stop_reason.as_str()),
        Ok(_) => {}
    }
    if let (Some(id), false) = (id, cli.json) {
        eprintln!("(saved as conversation {id}; go on with `mcpvisor agent --resume {id}`)");
    }
    Ok(exit_code(&outcome))
}

/// Prints the events until the agent is gone; `asks`, when there is a
/// terminal, are the confirmations to ask on it, each after the events
/// that came before it.
async fn print_events(mut events: UnboundedReceiver<AgentEvent>, mut asks: Option<(UnboundedReceiver<Ask>, Lines)>, json: bool) {
    let asked = asks.is_some();
    let mut answer = String::new();
    loop {
        let event = match &mut asks {
            Some((pending, lines)) => tokio::select! {
                biased;
                event = events.recv() => event,
                Some((request, reply)) = pending.recv() => {
                    let _ = reply.send(asking::answer(lines, &request).await);
                    continue;
                }
            },
            None => events.recv().await,
        };
        let Some(event) = event else { break };
        if json {
            print_json_line(&event);
            continue;
        }
        match event {
            AgentEvent::Text { text } => answer.push_str(&text),
            AgentEvent::ToolCallRequested { tool, arguments, .. } => {
                // What the model wrote before asking for tools is not the answer.
                if !answer.trim().is_empty() {
                    eprintln!("{}", terminal_safe(answer.trim(), Layout::Block));
                }
                answer.clear();
                eprintln!("→ {}", terminal_safe(&format!("{tool} {arguments}"), Layout::OneLine));
            }
            AgentEvent::ToolCallDenied { why, .. } => {
                eprintln!("  denied: {}", terminal_safe(&why, Layout::OneLine));
                if !asked {
                    eprintln!("  (without a terminal nobody can confirm; allow calls with --confirm never, or trust a server with `trust = true` under [agent.servers.NAME])");
                }
            }
            AgentEvent::ToolCallFinished { tool, is_error, output, .. } => {
                let mark = if is_error { "✗" } else { "✓" };
                eprintln!("{mark} {}", terminal_safe(&tool, Layout::OneLine));
                for line in folded(&output) {
                    eprintln!("  {line}");
                }
            }
            AgentEvent::Compacted { summarised, kept } => eprintln!("(summarised {summarised} earlier messages, kept {kept})"),
            AgentEvent::HistoryFailed { error } => warn(format_args!("the conversation is no longer saved: {error}")),
            AgentEvent::TurnEnded { .. } => {
                let text = answer.trim();
                if !text.is_empty() {
                    print_line(terminal_safe(text, Layout::Block));
                }
                answer.clear();
            }
            _ => {}
        }
    }
}

/// The first lines of a tool's output, made safe, with a count of the rest.
pub fn folded(output: &str) -> Vec<String> {
    let lines: Vec<&str> = output.lines().collect();
    let mut shown: Vec<String> = lines.iter().take(SHOWN_LINES).map(|line| terminal_safe(line, Layout::OneLine).into_owned()).collect();
    if lines.len() > SHOWN_LINES {
        shown.push(format!("… {} more lines", lines.len() - SHOWN_LINES));
    }
    shown
}
