//! Panic isolation of a connection, on the shared guard
//! ([`crate::guard`]): a panic that escaped would end the actor and
//! leave its address dead. Invariant: every handler body, every
//! timer and every continuation of an awaited answer or write enters the
//! connection's code through [`Connection::guarded`] (directly, or through
//! [`Connection::later`] and [`Connection::after`]). A caught panic fails the
//! calls in flight with an error naming it, publishes
//! [`Event::ActorPanicked`], kills the process group and lets the restart
//! policy run.

use std::future::Future;

use super::*;
use crate::guard::{catch_named, Panicked};

/// With the `fault-injection` feature, a stderr line containing this makes
/// the connection panic while handling it (proving the guard on a path
/// other than the handlers').
#[cfg(feature = "fault-injection")]
pub const PANIC_ON_STDERR_LINE: &str = "mcpvisor-inject-panic";

impl Connection {
    /// Turns a caught panic into error replies, an event and a restart;
    /// returns the explanation given to the callers.
    fn on_panic(&mut self, panic: Panicked) -> String {
        let text = format!("{panic}; the connection is being restarted");
        self.events.do_send(Event::panicked(&panic));
        let cause = Cause::new(panic.clone());
        self.calls.fail_all(|| Failure::Internal(text.clone(), Some(cause.clone())));
        let error = ConnectError::Protocol { server: self.config.name.clone(), method: panic.during, message: text.clone() };
        self.abort_run(error, Ending::Failure);
        text
    }

    /// Runs a handler body through the one guard ([`crate::guard`]),
    /// turning a panic into a restart (see [`Connection::on_panic`]).
    pub(super) fn guarded<R>(
        &mut self,
        during: &str,
        ctx: &mut Context<Self>,
        body: impl FnOnce(&mut Self, &mut Context<Self>) -> R,
    ) -> Result<R, String> {
        let body = self.panic_next.tripping(during, body);
        let name = |act: &Self| format!("connection to server `{}`", act.config.name);
        catch_named(self, during, |act| body(act, ctx), name).map_err(|panic| self.on_panic(panic))
    }

    /// A handler body answering a caller, guarded: a panic answers
    /// `label`'s caller with an error naming it.
    pub(super) fn guarded_reply<T: 'static>(
        &mut self,
        label: &str,
        ctx: &mut Context<Self>,
        body: impl FnOnce(&mut Self, &mut Context<Self>) -> Reply<Result<T, CallError>>,
    ) -> Reply<Result<T, CallError>> {
        match self.guarded(label, ctx, body) {
            Ok(reply) => reply,
            Err(panic) => Reply::Ready(Err(Failure::internal(panic).into_call_error(&self.config.name, label))),
        }
    }

    /// `ctx.run_later`, guarded.
    pub(super) fn later(
        &mut self,
        after: Duration,
        during: &'static str,
        ctx: &mut Context<Self>,
        then: impl FnOnce(&mut Self, &mut Context<Self>) + 'static,
    ) -> SpawnHandle {
        ctx.run_later(after, move |act, ctx| {
            let _ = act.guarded(during, ctx, then);
        })
    }

    /// Awaits `future` off the actor's state, then runs `then` with its
    /// output on the actor, guarded.
    pub(super) fn after<T: 'static>(
        &mut self,
        future: impl Future<Output = T> + 'static,
        during: &'static str,
        ctx: &mut Context<Self>,
        then: impl FnOnce(&mut Self, T, &mut Context<Self>) + 'static,
    ) -> SpawnHandle {
        ctx.spawn(future.into_actor(self).map(move |output, act, ctx| {
            let _ = act.guarded(during, ctx, move |act, ctx| then(act, output, ctx));
        }))
    }

    /// Runs `then` with the answer to an internal request of run
    /// `generation`, if that run is still the current one; guarded.
    pub(super) fn when_answered(
        &mut self,
        generation: u64,
        answer: oneshot::Receiver<Outcome>,
        during: &'static str,
        ctx: &mut Context<Self>,
        then: impl FnOnce(&mut Self, Outcome, &mut Context<Self>) + 'static,
    ) -> SpawnHandle {
        self.after(answer, during, ctx, move |act, outcome, ctx| {
            if act.current_run(generation).is_some() {
                then(act, flatten(outcome), ctx);
            }
        })
    }
}
