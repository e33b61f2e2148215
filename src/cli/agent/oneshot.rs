//! `mcpvisor agent -p PROMPT`: one turn, then exit.
//!
//! Human output: the text of the model's last answer on stdout (earlier
//! answers of the turn, written before tool calls, go to stderr with the
//! tool activity: each call with its arguments, denials, outcomes folded
//! to a few lines). `--json`: every event as one JSON line on stdout,
//! starting with `{"event":"session","session_id":...}` and ending with
//! one `{"event":"result",...}` that carries the whole answer, however the
//! turn ended (the fields of each event: docs/agent.md, "`--json` events").

use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;

use serde::Serialize;
use serde_json::json;

use super::asking::{self, Ask, Lines};
use super::history::Opened;
use super::{exit_code, Setup};
use crate::actors::agent::{AgentError, AgentEvent, TurnEnded};
use crate::actors::outlet::Outlet;
use crate::cli::output::{print_json_line, print_line, report_text, terminal_safe, warn, Failure, Layout};
use crate::cli::session::Session;
use crate::cli::{interrupted, stopped_by, Cli, EXIT_INTERRUPTED};
use crate::llm::Usage;
use crate::AgentHandle;

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
    let (outcome, signal) = run_turn(&agent, prompt).await?;
    drop(agent);
    let tally = printer.await.unwrap_or_default();
    if cli.json {
        print_json_line(&TurnResult::new(id.as_deref(), &outcome, &tally));
    }
    match &outcome {
        Err(error) => eprintln!("error: {}", report_text(&error.to_string(), Layout::Block)),
        Ok(ended) if exit_code(&outcome) != 0 => eprintln!("note: the turn ended with {}", ended.stop_reason.as_str()),
        Ok(_) => {}
    }
    if let (Some(id), false) = (id, cli.json) {
        eprintln!("(saved as conversation {id}; go on with `mcpvisor agent --resume {id}`)");
    }
    Ok(if signal.is_some() { EXIT_INTERRUPTED } else { exit_code(&outcome) })
}

/// How long a cancelled turn may take to end before the command stops without it.
const CANCEL_GRACE: Duration = Duration::from_secs(10);

/// Runs the prompt. A first Ctrl-C or SIGTERM cancels the turn, which ends
/// as a cancelled one (with its `result`); the signal is returned beside
/// the outcome. A second one, or a turn still running [`CANCEL_GRACE`]
/// later, stops the command at once.
async fn run_turn(agent: &AgentHandle, prompt: &str) -> Result<(Result<TurnEnded, AgentError>, Option<&'static str>), Failure> {
    let mut turn = Box::pin(agent.prompt(prompt));
    let mut signal = None;
    let answered = tokio::select! {
        answered = &mut turn => answered,
        caught = interrupted() => {
            signal = Some(caught);
            agent.cancel();
            tokio::select! {
                answered = &mut turn => answered,
                caught = interrupted() => return Err(stopped_by(caught)),
                () = tokio::time::sleep(CANCEL_GRACE) => return Err(stopped_by(caught)),
            }
        }
    };
    Ok((answered, signal))
}

/// What the `result` line sums up, gathered from a turn's events.
#[derive(Debug, Default)]
struct Tally {
    /// The text of the model's last answer: what it wrote after the turn's last tool call.
    answer: String,
    /// Tool calls the model asked for (denied and failed ones included).
    tool_calls: usize,
    /// The tokens of the turn's model requests, as the turn's last event tells them.
    usage: Usage,
}

impl Tally {
    fn see(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::Text { text } => self.answer.push_str(text),
            // What the model wrote before asking for tools is not the answer.
            AgentEvent::ToolCallRequested { .. } => {
                self.answer.clear();
                self.tool_calls += 1;
            }
            AgentEvent::TurnEnded { usage, .. } | AgentEvent::TurnFailed { usage, .. } => self.usage = *usage,
            _ => {}
        }
    }
}

/// The last `--json` line of a turn: its whole answer and how it ended.
#[derive(Debug, Serialize)]
struct TurnResult<'a> {
    event: &'static str,
    session_id: Option<&'a str>,
    /// The agent's stop reason, or `error`.
    stop_reason: &'static str,
    text: &'a str,
    usage: Usage,
    tool_calls: usize,
    /// What went wrong, when `stop_reason` is `error`.
    error: Option<String>,
}

impl<'a> TurnResult<'a> {
    fn new(session_id: Option<&'a str>, outcome: &Result<TurnEnded, AgentError>, tally: &'a Tally) -> TurnResult<'a> {
        let (stop_reason, error) = match outcome {
            Ok(ended) => (ended.stop_reason.as_str(), None),
            Err(error) => ("error", Some(error.to_string())),
        };
        TurnResult {
            event: "result",
            session_id,
            stop_reason,
            text: &tally.answer,
            usage: tally.usage,
            tool_calls: tally.tool_calls,
            error,
        }
    }
}

/// Prints the events until the agent is gone; `asks`, when there is a
/// terminal, are the confirmations to ask on it, each after the events
/// that came before it. Returns what the turn's `result` sums up.
async fn print_events(mut events: UnboundedReceiver<AgentEvent>, mut asks: Option<(UnboundedReceiver<Ask>, Lines)>, json: bool) -> Tally {
    let asked = asks.is_some();
    let mut tally = Tally::default();
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
        } else {
            show(&event, &tally.answer, asked);
        }
        tally.see(&event);
    }
    tally
}

/// One event for a person; `answer`: the text of the model's answer so far.
fn show(event: &AgentEvent, answer: &str, asked: bool) {
    match event {
        AgentEvent::ToolCallRequested { tool, arguments, .. } => {
            // What the model wrote before asking for tools goes with the tool activity.
            if !answer.trim().is_empty() {
                eprintln!("{}", terminal_safe(answer.trim(), Layout::Block));
            }
            eprintln!("→ {}", terminal_safe(&format!("{tool} {}", super::shown_arguments(arguments)), Layout::OneLine));
        }
        AgentEvent::ToolCallDenied { why, .. } => {
            eprintln!("  denied: {}", terminal_safe(why, Layout::OneLine));
            if !asked {
                eprintln!("  (without a terminal nobody can confirm; allow calls with --confirm never, or trust a server with `trust = true` under [agent.servers.NAME])");
            }
        }
        AgentEvent::ToolCallFinished { tool, is_error, output, .. } => {
            let mark = if *is_error { "✗" } else { "✓" };
            eprintln!("{mark} {}", terminal_safe(tool, Layout::OneLine));
            for line in folded(output) {
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
        }
        _ => {}
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
