//! A gateway session's guard: a panic in its handlers closes it cleanly.

use actix::prelude::*;

use super::GatewaySession;
use crate::guard::{catch, Panicked};
use crate::protocol::{error_codes, ErrorObject, RequestId};
use crate::server::outbox::{Frame, Outbox};

impl GatewaySession {
    /// Runs a handler step through the guard. A panic closes the session
    /// cleanly (as [`Closed`] does), after answering `answer_to`'s request
    /// with an internal error naming the panic; the pool hears
    /// [`super::Event::ActorPanicked`]. The session's state (open requests,
    /// what `initialize` agreed) is not trusted after a panic, and its
    /// client can start a new session.
    pub(super) fn guarded<R>(
        &mut self,
        during: &str,
        answer_to: Option<(RequestId, Outbox)>,
        ctx: &mut Context<Self>,
        body: impl FnOnce(&mut Self, &mut Context<Self>) -> R,
    ) -> Result<R, Panicked> {
        let panic = match catch("gateway session", during, || body(self, ctx)) {
            Ok(answer) => return Ok(answer),
            Err(panic) => panic,
        };
        self.pool.handle.hub().do_send(crate::Event::panicked(&panic));
        if let Some((id, stream)) = answer_to {
            let message = format!("{panic}; this session was closed: start a new one");
            let error = ErrorObject { code: error_codes::INTERNAL_ERROR, message, data: None };
            // Offered, not awaited: the session stops now.
            stream.offer(Frame::response::<()>(&id, Err(error)));
        }
        self.close(ctx);
        Err(panic)
    }

    /// Cancels every open request and stops the session.
    pub(super) fn close(&mut self, ctx: &mut Context<Self>) {
        for (_, open) in self.open.drain() {
            ctx.cancel_future(open.work);
        }
        self.pool.subscriptions.end_all();
        self.asked.clear();
        ctx.stop();
    }

    /// The `fault-injection` hook ([`crate::guard::PANIC_METHOD`]):
    /// `{"actor": "session"}` panics here; `"hub"` and `"registry"` arm
    /// theirs for the message named by `"during"`.
    #[cfg(feature = "fault-injection")]
    pub(super) fn inject_panic(&mut self, params: &serde_json::Value) {
        let during = params.get("during").and_then(serde_json::Value::as_str).unwrap_or("*").to_string();
        let hub = self.pool.handle.hub().clone();
        match params.get("actor").and_then(serde_json::Value::as_str) {
            Some("hub") => hub.do_send(crate::guard::PanicNext(during)),
            Some("registry") => {
                actix::spawn(async move {
                    if let Ok(registry) = hub.send(crate::hub::GetRegistry).await {
                        registry.do_send(crate::guard::PanicNext(during));
                    }
                });
            }
            _ => panic!("injected fault"),
        }
    }
}
