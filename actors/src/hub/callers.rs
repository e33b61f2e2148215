//! The Hub's side of servers that act as each caller ([`crate::callers`]):
//! it makes their exchanger, gives their own (catalog) connection the
//! gateway's credentials, starts a connection per caller on first use
//! (bounded), and ends the idle ones.

use std::collections::HashMap;
use std::sync::Arc;

use actix::prelude::*;

use super::{Hub, Slot};
use crate::callers::{Callers, StartCaller};
use crate::config::{Auth, ServerConfig};
use crate::connection::{self, Connection};
use crate::error::CallError;
use crate::guard::KeepsStateOnPanic;
use crate::oauth::Exchanger;
use crate::parts::ServerParts;

/// A token-exchange server's callers, as the Hub holds them.
pub(super) struct CallerSlot {
    pub(super) shared: Arc<Callers>,
    /// The only strong address of each caller's connection, by caller key.
    pub(super) connections: HashMap<String, Addr<Connection>>,
}

impl Hub {
    /// For a server that acts as each caller: its callers, with `parts`
    /// given the credentials of its own connection (the gateway's token,
    /// or a refusal saying why the exchanger cannot be made). `None` for
    /// other servers.
    pub(super) fn callers_of(&mut self, config: &ServerConfig, parts: &mut ServerParts, ctx: &mut Context<Self>) -> Option<CallerSlot> {
        let Some(Auth::TokenExchange(settings)) = &config.auth else { return None };
        let exchanger = match Exchanger::new(config, self.parts.caller_tokens.clone()) {
            Ok(exchanger) => exchanger,
            Err(error) => {
                tracing::error!(server = %config.name, "{error}");
                parts.credentials = Some(crate::oauth::refusing(error.message));
                return None;
            }
        };
        parts.credentials = Some(exchanger.gateway_credentials());
        let callers = Callers::new(&config.name, exchanger, settings.max_callers, settings.caller_idle, ctx.address().recipient());
        let every = callers.reap_every();
        if self.reaping.is_none_or(|current| every < current) {
            self.reaping = Some(every);
            ctx.run_interval(every, |hub, ctx| hub.guarded("reap callers", ctx, |hub, _| hub.reap_callers(), drop));
        }
        Some(CallerSlot { shared: Arc::new(callers), connections: HashMap::new() })
    }

    /// Ends the connections of callers idle for their server's `caller_idle`.
    fn reap_callers(&mut self) {
        for slot in self.servers.values_mut() {
            let Some(callers) = &mut slot.callers else { continue };
            for caller in callers.shared.take_idle() {
                if let Some(connection) = callers.connections.remove(&caller) {
                    tracing::debug!(server = %slot.config.name, caller, "ended an idle per-caller connection");
                    // Dropping the strong address after the shutdown ends the actor.
                    actix_rt::spawn(async move {
                        let _ = connection.send(connection::Shutdown).await;
                    });
                }
            }
        }
    }

    fn start_caller(&mut self, msg: StartCaller, ctx: &mut Context<Self>) -> Result<Addr<Connection>, CallError> {
        let tool = String::new();
        let Some(slot) = self.servers.get(&msg.server) else { return Err(CallError::UnknownServer { server: msg.server }) };
        let Some(callers) = &slot.callers else { return Err(CallError::Stopped { server: msg.server, tool }) };
        if let Some(connection) = callers.connections.get(&msg.caller).filter(|connection| connection.connected()) {
            return Ok(connection.clone());
        }
        let open = callers.connections.values().filter(|connection| connection.connected()).count();
        if open >= callers.shared.max() {
            return Err(callers.shared.refusal(open));
        }
        let mut parts = self.parts.for_server(&msg.server);
        parts.credentials = Some(callers.shared.exchanger().caller_credentials(&msg.caller, &msg.subject));
        let config = slot.config.clone();
        let (connection, _) = self.start_connection(config, parts, ctx);
        let Some(Slot { callers: Some(callers), .. }) = self.servers.get_mut(&msg.server) else {
            return Err(CallError::Stopped { server: msg.server, tool });
        };
        callers.connections.retain(|_, connection| connection.connected());
        callers.shared.admit(&msg.caller, connection.downgrade());
        callers.connections.insert(msg.caller, connection.clone());
        // Not registered with the registry: its catalog is the server's own connection's.
        connection.do_send(connection::Registered);
        Ok(connection)
    }
}

impl Handler<StartCaller> for Hub {
    type Result = Result<Addr<Connection>, CallError>;

    fn handle(&mut self, msg: StartCaller, ctx: &mut Context<Self>) -> Self::Result {
        let tool = String::new();
        self.guarded("StartCaller", ctx, |hub, ctx| hub.start_caller(msg, ctx), |panic| Err(CallError::Internal { tool, panic }))
    }
}
