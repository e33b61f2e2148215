//! The terminal's input, and confirmation asked on it: the question on
//! stderr, the answer read from stdin (`y` yes, `n` no, `a` always for this
//! tool, `d` deny always).
//!
//! One thread reads stdin line by line into [`Lines`], which the chat and
//! the questions share: a question withdrawn (the turn was cancelled)
//! consumes no line, and questions are asked one at a time by the code that
//! prints the turn's events ([`relayed`]), so answers cannot cross and a
//! question never lands in the middle of other output.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Mutex};

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

/// A question waiting to be shown, with where its answer goes.
pub type Ask = (ConfirmRequest, oneshot::Sender<Decision>);

/// An asker that hands each question to whoever prints the turn's events
/// (the receiver), so a question is shown after the tool call it is about,
/// never in the middle of other output. A question dropped unanswered is
/// [`Decision::Cancelled`].
pub fn relayed() -> (Answering<ConfirmRequest>, mpsc::UnboundedReceiver<Ask>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let asker = Answering::function(move |request: ConfirmRequest| {
        let (reply, answer) = oneshot::channel();
        let sent = tx.send((request, reply));
        async move {
            match sent {
                Ok(()) => answer.await.unwrap_or(Decision::Cancelled),
                Err(_) => Decision::Cancelled,
            }
        }
    });
    (asker, rx)
}

/// Shows `request` on the terminal and reads the answer from `lines`.
pub async fn answer(lines: &Lines, request: &ConfirmRequest) -> Decision {
    ask(lines, &question(request)).await
}

/// The question shown for a request: the tool, what it may do, its arguments.
pub fn question(request: &ConfirmRequest) -> String {
    let nature = match (request.read_only, request.destructive) {
        (true, _) => "read-only",
        (false, true) => "may change or delete things",
        (false, false) => "may change things",
    };
    let arguments = super::shown_arguments(&request.arguments);
    let text = format!("Allow `{}` ({nature}) with {arguments}? (\"always\" allows {})", request.tool, request.always_allows);
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
