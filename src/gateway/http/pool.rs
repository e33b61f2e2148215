//! The HTTP front's [`Gateway`] over the pool: each session is a
//! [`GatewaySession`] actor started on the pool's actix System, on the
//! thread of the request that opened it (`workers::Workers`).

use std::sync::Arc;

use actix::Addr;
use futures::future::BoxFuture;
use serde_json::Value;

use super::{Gateway, Port};
use crate::actors::gateway::bridge::ClientBridge;
use crate::actors::gateway::ServeOptions;
use crate::actors::gateway::{Closed, GatewaySession, Inbound};
use crate::actors::hub;
use crate::identity::Identity;
use crate::protocol::Message;
use crate::server::outbox::Outbox;
use crate::Handle;

/// Serves `handle`'s pool; `bridge` (the one the runtime was started with)
/// lets the sessions' clients answer the servers' requests.
pub struct PoolGateway {
    pub handle: Handle,
    pub options: ServeOptions,
    pub bridge: ClientBridge,
}

/// One started [`GatewaySession`].
struct SessionPort(Addr<GatewaySession>);

impl Port for SessionPort {
    fn deliver(&self, message: Message, params: Option<Value>, outbox: Outbox) -> BoxFuture<'static, bool> {
        let session = self.0.clone();
        Box::pin(async move { session.send(Inbound { frame: Ok(message), stream: outbox, params }).await.is_ok() })
    }

    fn close(&self) {
        self.0.do_send(Closed);
    }

    fn is_open(&self) -> bool {
        self.0.connected()
    }
}

impl PoolGateway {
    /// Starts `starting` on the arbiter this request is served on (a
    /// worker, or the runtime's own thread), so the session's messages
    /// from its connection cross no thread; off any arbiter (an embedder's
    /// runtime), on the hub's.
    fn start(&self, starting: GatewaySession) -> BoxFuture<'static, Option<Arc<dyn Port>>> {
        let (started, session) = tokio::sync::oneshot::channel();
        let bridge = self.bridge.clone();
        let start = move || {
            let session = actix::Actor::start(starting);
            bridge.attach(session.downgrade());
            let _ = started.send(session);
        };
        // `spawn_fn` runs `start` inside the arbiter's local task set, where
        // an actor can start even when this request runs on a plain tokio task.
        match actix_rt::Arbiter::try_current() {
            Some(here) => {
                here.spawn_fn(start);
            }
            None => self.handle.hub().do_send(hub::Spawn(Box::new(start))),
        }
        Box::pin(async move { session.await.ok().map(|addr| Arc::new(SessionPort(addr)) as Arc<dyn Port>) })
    }
}

impl Gateway for PoolGateway {
    fn open(&self, caller: &str, identity: Option<Arc<Identity>>, standalone: Outbox) -> BoxFuture<'static, Option<Arc<dyn Port>>> {
        self.start(GatewaySession::new(self.handle.clone(), self.options.clone(), standalone, caller).with_identity(identity))
    }

    fn stateless(&self, identity: Option<Arc<Identity>>) -> BoxFuture<'static, Option<Arc<dyn Port>>> {
        // The 2026-07-28 era has no stream outside requests: what would go
        // there (list changes) is dropped, never queued.
        let (outbox, frames) = Outbox::with_capacity(1);
        drop(frames);
        let session = GatewaySession::stateless(self.handle.clone(), self.options.clone(), outbox, crate::gateway::STATELESS_CALLER);
        self.start(session.with_identity(identity))
    }

    fn admin(&self) -> Option<Arc<dyn super::admin::Admin>> {
        Some(Arc::new(super::admin::PoolAdmin(self.handle.clone())))
    }

    fn servers(&self) -> BoxFuture<'static, Vec<String>> {
        let handle = self.handle.clone();
        Box::pin(async move { handle.status().await.into_iter().map(|status| status.name).collect() })
    }

    fn heard_by(&self, identity: Option<Arc<Identity>>, servers: Vec<String>) -> BoxFuture<'static, Vec<String>> {
        let (handle, options) = (self.handle.clone(), self.options.clone());
        Box::pin(async move { crate::actors::gateway::heard_by(&handle, &options, identity.as_deref(), servers).await })
    }

    fn core(&self) -> BoxFuture<'static, Result<(), String>> {
        let probe = self.handle.hub().send(hub::CoreHealth);
        Box::pin(async move { probe.await.unwrap_or_else(|_| Err("the hub stopped (a panic escaped its guard); restart mcpvisor".into())) })
    }
}
