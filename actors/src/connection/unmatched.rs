//! Lines from the server that cannot be used as they are: an answer that
//! is not valid UTF-8 or not valid JSON-RPC, an oversized one, one whose id
//! has the wrong type, an `id: null` error report.
//!
//! When such a line can be tied to a request (its id can be read, or it is
//! an answer and exactly one request awaits one), that request fails at
//! once with a protocol error saying what was wrong. Otherwise the line is
//! noted, and a call that then times out says which such lines came
//! meanwhile. Invalid UTF-8 is never repaired: JSON text must be UTF-8, and
//! guessing would hand callers altered data (see docs/decisions.md).

use crate::codec::{names_a_method, peek_tail_id, Salvage};

use super::*;

impl Connection {
    /// A line that is not a usable message.
    pub(super) fn on_bad_line(&mut self, bad: FrameError, ctx: &mut Context<Self>) {
        let (salvage, problem) = match bad {
            FrameError::TooLarge { size, max, head, tail } => {
                let id = peek_id(&head).or_else(|| peek_tail_id(&tail));
                let is_answer = id.is_some() || (head.trim_ascii_start().starts_with(b"{") && !names_a_method(&head, &tail));
                (Salvage { is_answer, id }, too_large(size, max))
            }
            FrameError::InvalidUtf8 { preview, salvage } => {
                let problem = format!(
                    "the answer is not valid UTF-8 (JSON text must be UTF-8, and mcpvisor does not guess what was meant): {preview}"
                );
                (salvage, problem)
            }
            FrameError::NotJsonRpc { reason, preview, salvage } => {
                (salvage, format!("the answer is not valid JSON-RPC ({reason}): {preview}"))
            }
            FrameError::Blank => return,
        };
        if !salvage.is_answer {
            tracing::warn!(server = %self.name(), "skipped a line on stdout: {problem}");
            return;
        }
        let request = match salvage.id {
            Some(id) if self.calls.get(&id).is_some() => Some(id),
            Some(id) => self.calls.same_id_other_type(&id),
            None => self.calls.only_request(self.listen_request()),
        };
        self.fail_or_note(request, problem, ctx);
    }

    /// An answer whose id matches no request: one written with the other
    /// type of id ("4" for 4) is tied to its request; anything else is a
    /// late answer to a request given up on, and is dropped.
    pub(super) fn on_unknown_id(&mut self, id: RequestId, outcome: Outcome, ctx: &mut Context<Self>) {
        let Some(request) = self.calls.same_id_other_type(&id) else {
            tracing::debug!(server = %self.name(), %id, "ignored an answer to an unknown or abandoned request");
            return drop(outcome);
        };
        let problem = format!(
            "the answer carried the id {} ({}) for the request with id {} ({}); JSON-RPC requires the id to come back unchanged",
            id,
            id_type(&id),
            request,
            id_type(&request)
        );
        self.fail_or_note(Some(request), problem, ctx);
    }

    /// An error report with `id: null`: the server could not read a
    /// request. With exactly one request awaiting an answer, it is that one.
    pub(super) fn on_unreadable_report(&mut self, outcome: Result<Box<RawValue>, ErrorObject>, ctx: &mut Context<Self>) {
        let what = match outcome {
            Err(error) => format!("error {}: {}", error.code, error.message),
            Ok(_) => "a result with a null id".to_string(),
        };
        let problem = format!("the server reported that it could not read a request ({what})");
        let request = self.calls.only_request(self.listen_request());
        self.fail_or_note(request, problem, ctx);
    }

    /// The open `subscriptions/listen` request, whose answer is not awaited soon.
    fn listen_request(&self) -> Option<&RequestId> {
        self.run.as_ref().and_then(|run| run.listen.as_ref())
    }

    fn fail_or_note(&mut self, request: Option<RequestId>, problem: String, ctx: &mut Context<Self>) {
        match request {
            Some(id) => {
                tracing::warn!(server = %self.name(), %id, "{problem}");
                self.on_response(id, Err(Failure::Malformed(problem)), ctx);
            }
            None => {
                tracing::warn!(server = %self.name(), "a line matching no request was skipped: {problem}");
                self.calls.note_unusable(problem);
            }
        }
    }
}

fn id_type(id: &RequestId) -> &'static str {
    match id {
        RequestId::Number(_) => "a number",
        RequestId::String(_) => "a string",
    }
}
