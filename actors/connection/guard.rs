//! Panic isolation: the one guarded entry point.
//!
//! Every actor runs on the runtime's one thread, so a panic that escaped a
//! handler would stop every connection. Invariant: every handler body, every
//! timer and every continuation of an awaited answer or write enters the
//! connection's code through [`Connection::guarded`] (directly, or through
//! [`Connection::later`] and [`Connection::after`]). A caught panic fails the
//! calls in flight with an error naming it, kills the process group and lets
//! the restart policy run.

use std::future::Future;

use super::*;

/// With the `fault-injection` feature, a stderr line containing this makes
/// the connection panic while handling it (proving the guard on a path
/// other than the handlers').
#[cfg(feature = "fault-injection")]
pub const PANIC_ON_STDERR_LINE: &str = "mcpvisor-inject-panic";

impl Connection {
    /// Turns a caught panic into error replies and a restart; returns the
    /// explanation given to the callers.
    fn on_panic(&mut self, during: &str, payload: Box<dyn Any + Send>) -> String {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let text = format!("internal error in mcpvisor while handling {during} (panic: {message}); the connection is being restarted");
        tracing::error!(server = %self.config.name, "{text}");
        self.calls.fail_all(|| Failure::Internal(text.clone()));
        let error = ConnectError::Protocol { server: self.config.name.clone(), method: during.into(), message: text.clone() };
        self.abort_run(error, Ending::Failure);
        text
    }

    /// Runs a handler body, catching a panic (see [`Connection::on_panic`]).
    pub(super) fn guarded<R>(
        &mut self,
        during: &str,
        ctx: &mut Context<Self>,
        body: impl FnOnce(&mut Self, &mut Context<Self>) -> R,
    ) -> Result<R, String> {
        #[cfg(feature = "fault-injection")]
        let body = {
            let panic_now = std::mem::take(&mut self.panic_next);
            move |act: &mut Self, ctx: &mut Context<Self>| {
                assert!(!panic_now, "injected fault");
                body(act, ctx)
            }
        };
        std::panic::catch_unwind(AssertUnwindSafe(|| body(self, ctx))).map_err(|payload| self.on_panic(during, payload))
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
            Err(panic) => Reply::Ready(Err(Failure::Internal(panic).into_call_error(&self.config.name, label))),
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
