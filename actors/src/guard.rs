//! Panic isolation: the one guarded entry for every actor.
//!
//! actix 0.13 does not restart an actor whose handler panicked: tokio
//! catches the panic at the actor's task and the address dies, so every
//! later message fails with a mailbox error. Invariant: every handler body
//! of the Hub, the Registry, a Connection, an Agent, a gateway session and
//! an ACP connection runs through [`catch`], and the futures they run
//! beside their mailbox through [`catch_future`]; what each actor does with
//! a caught [`Panicked`] is its own decision (see docs/decisions.md,
//! "Panics"), but it always answers the message that panicked with a typed
//! error and says so in an event.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;

pub use crate::error::Panicked;

/// Runs `body`, catching a panic; the panic is logged at `error`.
pub fn catch<R>(actor: &str, during: &str, body: impl FnOnce() -> R) -> Result<R, Panicked> {
    std::panic::catch_unwind(AssertUnwindSafe(body)).map_err(|payload| caught(actor, during, payload))
}

/// [`catch`] for an actor whose name must be formatted: `actor` names it
/// from `state` only when `body` (which borrowed `state`) panicked, so a
/// handler that does not panic allocates nothing for its name.
pub fn catch_named<S, R>(
    state: &mut S,
    during: &str,
    body: impl FnOnce(&mut S) -> R,
    actor: impl FnOnce(&S) -> String,
) -> Result<R, Panicked> {
    std::panic::catch_unwind(AssertUnwindSafe(|| body(&mut *state))).map_err(|payload| caught(&actor(state), during, payload))
}

/// Polls `future`, catching a panic in any poll (see [`catch`]).
pub fn catch_future<F: Future>(actor: String, during: String, future: F) -> impl Future<Output = Result<F::Output, Panicked>> {
    AssertUnwindSafe(future).catch_unwind().map(move |outcome| outcome.map_err(|payload| caught(&actor, &during, payload)))
}

fn caught(actor: &str, during: &str, payload: Box<dyn Any + Send>) -> Panicked {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    let panicked = Panicked { actor: actor.into(), during: during.into(), message };
    tracing::error!("{panicked}");
    panicked
}

/// With the `fault-injection` feature: makes the next handler of the
/// message named here (`"AddServer"`, `"CallTool"`, ...; `"*"`: of any
/// message) panic inside the guard. Each actor handles it by arming its
/// [`PanicSwitch`]. `"unguarded"` makes the handler of `PanicNext` itself
/// panic outside the guard: a panic the guard missed, which ends the actor.
#[cfg(feature = "fault-injection")]
#[derive(actix::Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct PanicNext(pub String);

/// Wire-driven actors (a gateway session, an ACP connection) panic in the
/// handler of a request with this method, with the `fault-injection` feature.
#[cfg(feature = "fault-injection")]
pub const PANIC_METHOD: &str = "mcpvisor/test/panic";

/// One actor's armed fault: empty (and free) without `fault-injection`.
#[derive(Debug, Default)]
pub struct PanicSwitch {
    #[cfg(feature = "fault-injection")]
    armed: Option<String>,
}

impl PanicSwitch {
    /// Arms the switch (see [`PanicNext`]); panics at once for `"unguarded"`.
    #[cfg(feature = "fault-injection")]
    pub fn arm(&mut self, during: impl Into<String>) {
        let during = during.into();
        assert!(during != "unguarded", "injected fault outside the guard");
        self.armed = Some(during);
    }

    /// Wraps `body` (the handler of `during`) so that it panics first when
    /// the switch was armed for it (once).
    pub fn tripping<A, C, R>(&mut self, during: &str, body: impl FnOnce(&mut A, &mut C) -> R) -> impl FnOnce(&mut A, &mut C) -> R {
        #[cfg(feature = "fault-injection")]
        let armed = self.armed.take_if(|armed| armed == "*" || armed == during).is_some();
        #[cfg(not(feature = "fault-injection"))]
        let _ = during;
        move |actor, ctx| {
            #[cfg(feature = "fault-injection")]
            assert!(!armed, "injected fault");
            body(actor, ctx)
        }
    }
}

/// An actor whose handlers keep its state through a panic (the Hub, the
/// Registry): the message that panicked is answered by `failed`, the
/// actor says so (`panicked`, which publishes the event) and serves on.
pub trait KeepsStateOnPanic: Sized {
    /// The actor's name in [`Panicked`].
    const NAME: &'static str;
    fn panic_switch(&mut self) -> &mut PanicSwitch;
    /// Tells the world (an [`crate::Event::ActorPanicked`]).
    fn panicked(&mut self, panic: &Panicked);

    /// Runs the handler of `during` through [`catch`].
    fn guarded<C, R>(
        &mut self,
        during: &str,
        ctx: &mut C,
        body: impl FnOnce(&mut Self, &mut C) -> R,
        failed: impl FnOnce(Panicked) -> R,
    ) -> R {
        let body = self.panic_switch().tripping(during, body);
        match catch(Self::NAME, during, || body(self, ctx)) {
            Ok(answer) => answer,
            Err(panic) => {
                self.panicked(&panic);
                failed(panic)
            }
        }
    }
}
