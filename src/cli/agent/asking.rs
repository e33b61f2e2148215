//! The terminal's input, and confirmation asked on it: the question on
//! stderr, the answer read from stdin (`y` yes, `n` no, `a` always for this
//! tool, `d` deny always).
//!
//! One thread reads stdin line by line into [`Lines`], which the chat and
//! the asker share: a question withdrawn (the turn was cancelled) consumes
//! no line, and questions are asked one at a time (parallel calls wait
//! their turn), so answers cannot cross.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use tokio::sync::{mpsc, Mutex};

use crate::actors::agent::{ConfirmRequest, Decision};
use crate::actors::client_requests::Answering;
use crate::cli::output::{terminal_safe, Layout};

/// The lines typed on stdin; `None` once it is closed.
#[derive(Clone)]
pub struct Lines(Arc<Mutex<mpsc::UnboundedReceiver<String>>>);

impl Lines {
    /// Starts the thread that reads stdin (it ends with stdin or the process).
    pub fn stdin() -> Lines {
        let (tx, rx) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines(Arc::new(Mutex::new(rx)))
    }

    pub async fn next(&self) -> Option<String> {
        self.0.lock().await.recv().await
    }
}

/// Whether there is someone at the terminal to ask.
pub fn interactive() -> bool {
    std::io::stdin().is_terminal()
}

/// An asker that asks on the terminal and reads the answer from `lines`.
pub fn terminal(lines: &Lines) -> Answering<ConfirmRequest> {
    let lines = lines.clone();
    Answering::function(move |request: ConfirmRequest| {
        let lines = lines.clone();
        async move { ask(&lines, &question(&request)).await }
    })
}

/// The question shown for a request: the tool, what it may do, its arguments.
pub fn question(request: &ConfirmRequest) -> String {
    let nature = match (request.read_only, request.destructive) {
        (true, _) => "read-only",
        (false, true) => "may change or delete things",
        (false, false) => "may change things",
    };
    let mut arguments = serde_json::to_string(&request.arguments).unwrap_or_default();
    if arguments.chars().count() > 400 {
        arguments = arguments.chars().take(400).collect::<String>() + "…";
    }
    let text = format!("Allow `{}` ({nature}) with {arguments}?", request.tool);
    terminal_safe(&text, Layout::OneLine).into_owned()
}

/// Asks on stderr until the answer is one of the choices; end of input denies.
/// Holding the lines for the whole question keeps parallel questions apart.
async fn ask(lines: &Lines, question: &str) -> Decision {
    let mut input = lines.0.lock().await;
    loop {
        eprint!("{question} [y]es / [n]o / [a]lways allow / [d]eny always: ");
        let _ = std::io::stderr().flush();
        let Some(line) = input.recv().await else { return Decision::RejectOnce };
        if let Some(decision) = parse_answer(&line) {
            return decision;
        }
    }
}

pub fn parse_answer(line: &str) -> Option<Decision> {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(Decision::AllowOnce),
        "n" | "no" => Some(Decision::RejectOnce),
        "a" | "always" => Some(Decision::AllowAlways),
        "d" | "deny" | "never" => Some(Decision::RejectAlways),
        _ => None,
    }
}
