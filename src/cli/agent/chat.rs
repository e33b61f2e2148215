//! `mcpvisor agent` without `-p`: a chat on the terminal.
//!
//! Answers stream as they come; each tool call is shown with its arguments
//! and its outcome (sanitised, folded to a few lines); confirmations are
//! asked on stderr. Ctrl-C cancels the running turn (the model stream is
//! closed, the servers get `notifications/cancelled`); a second Ctrl-C, or
//! Ctrl-C at an empty prompt twice, or Ctrl-D, ends the chat and stops
//! every server. Commands: see [`HELP`].

use std::io::Write;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc::UnboundedReceiver;

use super::asking::{self, Ask, Lines};
use super::history::{self, Opened};
use super::oneshot::folded;
use super::Setup;
use crate::actors::agent::{AgentEvent, AgentStop};
use crate::actors::outlet::Outlet;
use crate::cli::output::{terminal_safe, Failure, Layout};
use crate::cli::session::{describe, Session};
use crate::config::{ConfirmMode, Keyword};
use crate::llm::{ChatMessage, Part};
use crate::AgentHandle;

pub const HELP: &str = "\
/tools [words]     the tools offered (the best matches for the words)
/servers           each server's state
/reconnect [name]  restart a server (all that are not connected, without a name)
/model NAME        talk to another model of the same provider
/confirm MODE      always | never | ask: when to ask before a tool call
/history           the conversation so far
/clear             start a new conversation
/help              this list
Ctrl-C cancels the running answer; Ctrl-C twice or Ctrl-D ends the chat.";

struct Chat<'a> {
    session: &'a Session,
    setup: Setup,
    lines: Lines,
    agent: AgentHandle,
    events: UnboundedReceiver<AgentEvent>,
    /// Confirmations the agent waits for.
    asks: UnboundedReceiver<Ask>,
    /// Text was printed without a newline yet.
    mid_line: bool,
}

pub async fn run(session: &Session, setup: Setup, opened: Opened) -> Result<u8, Failure> {
    let lines = Lines::stdin();
    let resumed = opened.messages.len();
    let (agent, events, asks) = start_agent(session, &setup, opened).await?;
    let mut chat = Chat { session, setup, lines, agent, events, asks, mid_line: false };
    let tools = session.handle.list_tools().await.len();
    println!("mcpvisor agent: {} with {tools} tools. /help lists the commands; Ctrl-D ends the chat.", chat.setup.model.label());
    if resumed > 0 {
        println!("(going on with a conversation of {resumed} messages; /history shows them)");
    }
    let mut interrupts = signal(SignalKind::interrupt()).map_err(|e| Failure::usage(format!("cannot watch Ctrl-C: {e}")))?;
    let mut armed = false;
    loop {
        print!("> ");
        let _ = std::io::stdout().flush();
        let line = tokio::select! {
            line = chat.lines.next() => line,
            _ = interrupts.recv() => {
                if armed { println!(); break; }
                armed = true;
                println!("\n(Ctrl-C again to end the chat)");
                continue;
            }
        };
        armed = false;
        let Some(line) = line else {
            println!();
            break;
        };
        let line = line.trim();
        let keep_going = match line.strip_prefix('/') {
            Some(command) => chat.command(command).await?,
            None if line.is_empty() => true,
            None => chat.turn(line, &mut interrupts).await,
        };
        if !keep_going {
            break;
        }
    }
    Ok(0)
}

/// An agent for the `opened` conversation; its id is shown when it is saved.
async fn start_agent(
    session: &Session,
    setup: &Setup,
    opened: Opened,
) -> Result<(AgentHandle, UnboundedReceiver<AgentEvent>, UnboundedReceiver<Ask>), Failure> {
    if let Some(id) = opened.id() {
        println!("(conversation {id}; go on with it later with `mcpvisor agent --resume {id}`)");
    }
    let (outlet, events) = Outlet::channel();
    let mut config = setup.config(opened);
    config.events = Some(outlet);
    let (asker, asks) = asking::relayed();
    config.asker = Some(asker);
    let agent =
        session.handle.start_agent(config).await.ok_or_else(|| Failure::connection("the runtime stopped before the agent started"))?;
    Ok((agent, events, asks))
}

impl Chat<'_> {
    /// Runs one prompt; false when the user asked to end the chat meanwhile.
    async fn turn(&mut self, prompt: &str, interrupts: &mut tokio::signal::unix::Signal) -> bool {
        let mut turn = Box::pin(self.agent.prompt(prompt));
        let mut cancelled = false;
        let outcome = loop {
            tokio::select! {
                biased;
                Some(event) = self.events.recv() => self.show(event),
                Some((request, reply)) = self.asks.recv() => {
                    self.end_line();
                    tokio::select! {
                        decision = asking::answer(&self.lines, &request) => { let _ = reply.send(decision); }
                        // The question is withdrawn with the turn; the next Ctrl-C ends the chat.
                        _ = interrupts.recv() => {
                            cancelled = true;
                            self.agent.cancel();
                            println!("\n(cancelling; Ctrl-C again to end the chat)");
                        }
                    }
                }
                outcome = &mut turn => break outcome,
                _ = interrupts.recv() => {
                    if cancelled {
                        self.end_line();
                        return false;
                    }
                    cancelled = true;
                    self.agent.cancel();
                    self.end_line();
                    println!("(cancelling; Ctrl-C again to end the chat)");
                }
            }
        };
        while let Ok(event) = self.events.try_recv() {
            self.show(event);
        }
        self.end_line();
        match outcome {
            Ok(ended) if ended.stop_reason != AgentStop::EndTurn => println!("(the turn ended: {})", ended.stop_reason.as_str()),
            Ok(_) => {}
            Err(error) => println!("error: {}", terminal_safe(&error.to_string(), Layout::Block)),
        }
        true
    }

    fn show(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::Text { text } => {
                print!("{}", terminal_safe(&text, Layout::Block));
                let _ = std::io::stdout().flush();
                self.mid_line = !text.ends_with('\n');
            }
            AgentEvent::ToolCallRequested { tool, arguments, .. } => {
                self.end_line();
                println!("→ {}", terminal_safe(&format!("{tool} {}", super::shown_arguments(&arguments)), Layout::OneLine));
            }
            AgentEvent::ToolCallDenied { why, .. } => println!("  denied: {}", terminal_safe(&why, Layout::OneLine)),
            AgentEvent::ToolCallProgress { progress, total, message, .. } => {
                let of = total.map(|t| format!(" of {t}")).unwrap_or_default();
                println!("  … {progress}{of} {}", terminal_safe(message.as_deref().unwrap_or(""), Layout::OneLine));
            }
            AgentEvent::ToolCallFinished { tool, is_error, output, .. } => {
                println!("{} {}", if is_error { "✗" } else { "✓" }, terminal_safe(&tool, Layout::OneLine));
                for line in folded(&output) {
                    println!("  {line}");
                }
            }
            AgentEvent::Compacted { summarised, kept } => {
                self.end_line();
                println!("(summarised {summarised} earlier messages to save context; kept {kept})");
            }
            AgentEvent::HistoryFailed { error } => {
                self.end_line();
                println!("warning: the conversation is no longer saved: {}", terminal_safe(&error, Layout::OneLine));
            }
            _ => {}
        }
    }

    fn end_line(&mut self) {
        if self.mid_line {
            println!();
            self.mid_line = false;
        }
    }

    /// Runs a `/command`; false for none (the chat ends only by Ctrl-C or Ctrl-D).
    async fn command(&mut self, command: &str) -> Result<bool, Failure> {
        let (name, rest) = command.split_once(char::is_whitespace).map_or((command, ""), |(n, r)| (n, r.trim()));
        match name {
            "help" => println!("{HELP}"),
            "tools" => self.tools(rest).await,
            "servers" => {
                for status in self.session.handle.status().await {
                    println!("{:<20} {}", terminal_safe(&status.name, Layout::OneLine), terminal_safe(&describe(&status), Layout::OneLine));
                }
            }
            "reconnect" => self.reconnect(rest).await,
            "model" if rest.is_empty() => println!("the model is {}; /model NAME changes it", self.setup.model.label()),
            "model" => match self.setup.with_model(rest) {
                Ok(()) => {
                    self.agent.set_model(self.setup.model.clone());
                    println!("the model is now {}", self.setup.model.label());
                }
                Err(failure) => println!("error: {}", failure.message),
            },
            "confirm" => match ConfirmMode::parse(rest) {
                Some(mode) => {
                    self.setup.mode = mode;
                    self.agent.set_confirm(mode);
                    println!("confirmation: {rest}");
                }
                None => println!("/confirm takes one of {}", ConfirmMode::choices()),
            },
            "history" => match self.agent.history().await {
                Ok(conversation) => conversation.messages.iter().for_each(|message| println!("{}", summary_line(message))),
                Err(error) => println!("error: {error}"),
            },
            "clear" => {
                let (agent, events, asks) = start_agent(self.session, &self.setup, history::start(&self.setup)).await?;
                (self.agent, self.events, self.asks) = (agent, events, asks);
                println!("(a new conversation)");
            }
            other => println!("unknown command /{}; /help lists them", terminal_safe(other, Layout::OneLine)),
        }
        Ok(true)
    }

    async fn tools(&self, words: &str) {
        let catalog = self.session.handle.list_tools().await;
        let shown: Vec<&crate::ToolEntry> =
            if words.is_empty() { catalog.iter().collect() } else { crate::tool_search::search(words, &catalog, 20) };
        for entry in &shown {
            let description = entry.tool.description.as_deref().and_then(|d| d.lines().next()).unwrap_or("");
            println!("{}  {}", terminal_safe(&entry.name, Layout::OneLine), terminal_safe(description, Layout::OneLine));
        }
        if shown.is_empty() {
            println!("(no tools)");
        }
    }

    async fn reconnect(&self, name: &str) {
        let names: Vec<String> = match name {
            "" => self
                .session
                .handle
                .status()
                .await
                .into_iter()
                .filter(|s| s.state != crate::ServerState::Connected)
                .map(|s| s.name)
                .collect(),
            name => vec![name.to_string()],
        };
        if names.is_empty() {
            println!("every server is connected");
        }
        for name in names {
            match self.session.handle.reconnect(&name).await {
                Ok(()) => println!("reconnecting {}", terminal_safe(&name, Layout::OneLine)),
                Err(error) => println!("error: {}", terminal_safe(&error.to_string(), Layout::OneLine)),
            }
        }
    }
}

/// One line per message of `/history`.
fn summary_line(message: &ChatMessage) -> String {
    let first = |text: &str| terminal_safe(text.lines().next().unwrap_or(""), Layout::OneLine).into_owned();
    match message {
        ChatMessage::User { content } => format!("you: {}", first(&content.iter().filter_map(Part::text).collect::<Vec<_>>().join(" "))),
        ChatMessage::Assistant { text, tool_calls } => {
            let calls: Vec<&str> = tool_calls.iter().map(|call| call.name.as_str()).collect();
            let calls = if calls.is_empty() { String::new() } else { format!(" [calls {}]", calls.join(", ")) };
            format!("assistant: {}{calls}", first(text))
        }
        ChatMessage::Tool { name, content, is_error, .. } => {
            let text = content.iter().filter_map(Part::text).collect::<Vec<_>>().join(" ");
            format!("{} {name}: {}", if *is_error { "✗" } else { "✓" }, first(&text))
        }
    }
}
