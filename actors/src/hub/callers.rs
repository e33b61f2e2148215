//! The Hub's side of servers that act as each caller ([`crate::callers`]):
//! it makes their exchanger and gives their own (catalog) connection the
//! gateway's credentials, or that connection's process an environment
//! with every `${caller.…}` empty; it starts a connection per caller on
//! first use (bounded), ends the idle ones, and ends one caller's when its
//! login is made or revoked ([`EndCaller`]).

use std::collections::HashMap;
use std::sync::Arc;

use actix::prelude::*;

use super::{Hub, Slot};
use crate::callers::{Acting, CallerStart, Callers, EndCaller, StartCaller};
use crate::config::per_caller::render_env;
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
    /// or a refusal saying why the exchanger cannot be made), or `config`
    /// the environment of its own process. `None` for other servers.
    pub(super) fn callers_of(&mut self, config: &mut ServerConfig, parts: &mut ServerParts, ctx: &mut Context<Self>) -> Option<CallerSlot> {
        let (acting, max, idle) = match (&config.auth, &config.per_caller) {
            (Some(Auth::TokenExchange(settings)), _) => {
                let exchanger = match Exchanger::new(config, self.parts.caller_tokens.clone()) {
                    Ok(exchanger) => exchanger,
                    Err(error) => {
                        tracing::error!(server = %config.name, "{error}");
                        parts.credentials = Some(crate::oauth::refusing(error.message));
                        return None;
                    }
                };
                parts.credentials = Some(exchanger.gateway_credentials());
                (Acting::Exchange(exchanger), settings.max_callers, settings.caller_idle)
            }
            (Some(Auth::OAuth(oauth)), _) if oauth.per_caller.is_some() => {
                let settings = oauth.per_caller.unwrap_or_default();
                let logins = match &self.parts.caller_logins {
                    Some(desk) => desk.server(config),
                    None => Err(crate::oauth::OAuthError::new(format!(
                        "server `{}` has each caller log in itself (auth.per_caller), which only `mcpvisor serve --http` with \
                         [serve] public_url and login_key does",
                        config.name
                    ))),
                };
                match logins {
                    // Its own connection lists the catalog with the gateway's own login (`auth.grant`).
                    Ok(logins) => (Acting::Login(logins), settings.max_callers, settings.caller_idle),
                    Err(error) => {
                        tracing::error!(server = %config.name, "{error}");
                        parts.credentials = Some(crate::oauth::refusing(error.message));
                        return None;
                    }
                }
            }
            (_, Some(per_caller)) => {
                let template = std::mem::take(&mut config.env);
                // Every `${caller.…}` empty or its default: never an error.
                config.env = render_env(&template, None).unwrap_or_default();
                (Acting::Process { env: template, secrets: per_caller.secrets.clone() }, per_caller.max_callers, per_caller.caller_idle)
            }
            _ => return None,
        };
        let callers = Callers::new(&config.name, acting, max, idle, ctx.address().recipient());
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
            let idle = callers.shared.take_idle();
            callers.end(&slot.config.name, idle, "idle");
        }
    }

    /// Ends every caller's connection of `server` (restarted by an admin):
    /// each caller's next call starts a new one.
    pub(super) fn end_callers(&mut self, server: &str) {
        let Some(Slot { callers: Some(callers), config, .. }) = self.servers.get_mut(server) else { return };
        let all = callers.shared.take_all();
        callers.end(&config.name, all, "restarted");
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
        parts.caller = Some(msg.who);
        let mut config = slot.config.clone();
        match (msg.start, callers.shared.exchanger()) {
            (CallerStart::Exchange { subject }, Some(exchanger)) => {
                parts.credentials = Some(exchanger.caller_credentials(&msg.caller, &subject))
            }
            (CallerStart::Process { env }, None) => config.env = env,
            (CallerStart::Login, None) => match callers.shared.logins().map(|logins| logins.credentials(&msg.caller)) {
                Some(Ok(credentials)) => parts.credentials = Some(credentials),
                Some(Err(error)) => return Err(CallError::AsCaller { server: msg.server, tool, message: error.message }),
                None => return Err(CallError::Stopped { server: msg.server, tool }),
            },
            _ => return Err(CallError::Stopped { server: msg.server, tool }),
        }
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

impl CallerSlot {
    /// Shuts down the connections of `taken` (already out of the shared table).
    fn end(&mut self, server: &str, taken: Vec<String>, why: &str) {
        for caller in taken {
            if let Some(connection) = self.connections.remove(&caller) {
                tracing::debug!(server, caller, "ended a per-caller connection ({why})");
                // Dropping the strong address after the shutdown ends the actor.
                actix_rt::spawn(async move {
                    let _ = connection.send(connection::Shutdown).await;
                });
            }
        }
    }
}

impl Handler<EndCaller> for Hub {
    type Result = ();

    fn handle(&mut self, msg: EndCaller, _: &mut Context<Self>) {
        let Some(Slot { callers: Some(callers), config, .. }) = self.servers.get_mut(&msg.server) else { return };
        let taken = callers.shared.take_caller(&msg.caller);
        callers.end(&config.name, taken, "its login changed");
    }
}

impl Handler<StartCaller> for Hub {
    type Result = Result<Addr<Connection>, CallError>;

    fn handle(&mut self, msg: StartCaller, ctx: &mut Context<Self>) -> Self::Result {
        let tool = String::new();
        self.guarded("StartCaller", ctx, |hub, ctx| hub.start_caller(msg, ctx), |panic| Err(CallError::Internal { tool, panic }))
    }
}
