//! The session's side of servers' own requests (sampling, elicitation,
//! roots), which [`super::bridge`] puts to the one session whose call
//! caused them: whether a call to the server is open here, and the asking
//! itself (on that call's stream, or parked on a 2026-07-28 call's
//! `input_required`).

use actix::prelude::*;
use serde_json::Value;
use tokio::sync::oneshot;

use super::GatewaySession;
use crate::protocol::{error_codes, ErrorObject, RequestId};
use crate::server::input::{self, Asked};
use crate::server::outbox::Frame;

/// A server's own request (sampling, elicitation, roots) to put to the
/// gateway's client. `None`: the client did not declare the capability (or
/// is gone), or `calling` is set and none of the session's calls to
/// `server` is open; the server then gets the answer of a client without
/// the capability (see [`super::bridge`]: never another session's).
#[derive(Message, Debug)]
#[rtype(result = "Option<Result<Value, ErrorObject>>")]
pub struct AskClient {
    pub server: String,
    pub method: &'static str,
    pub params: Value,
    /// Only if a call of this session to `server` is open (then on its stream).
    pub calling: bool,
}

/// Whether a call of this session to the server is open (its client gone
/// or not): a request of that server may be this session's doing. With
/// `caller` (the request came from that caller's own connection), only if
/// this session is that caller's.
#[derive(Message, Debug)]
#[rtype(result = "bool")]
pub struct CallingServer {
    pub server: String,
    pub caller: Option<String>,
}

impl Handler<CallingServer> for GatewaySession {
    type Result = bool;

    fn handle(&mut self, CallingServer { server, caller }: CallingServer, _: &mut Context<Self>) -> bool {
        let theirs = match (&caller, &self.pool.identity) {
            (None, _) => true,
            (Some(caller), Some(identity)) => identity.caller_key() == *caller,
            (Some(_), None) => false,
        };
        theirs && self.open.values().any(|open| open.server.get() == Some(&server))
    }
}

impl Handler<AskClient> for GatewaySession {
    type Result = ResponseFuture<Option<Result<Value, ErrorObject>>>;

    fn handle(&mut self, ask: AskClient, _: &mut Context<Self>) -> Self::Result {
        let capability = input::capability(ask.method);
        // A 2026-07-28 call to that server whose request declared the capability parks on `input_required`.
        let asks = self.open.values().filter(|open| ask.calling && open.server.get() == Some(&ask.server)).find_map(|open| {
            open.asks.as_ref().filter(|(capabilities, _)| capabilities.get(capability).is_some()).map(|(_, asks)| asks.clone())
        });
        if let Some(asks) = asks {
            return Box::pin(async move {
                let (reply, answer) = oneshot::channel();
                asks.send(Asked { method: ask.method, params: ask.params, reply }).ok()?;
                // Unanswered (the client never retried): the default answer.
                answer.await.ok()
            });
        }
        let declared = self.client.as_ref().is_some_and(|client| client.capabilities.get(capability).is_some());
        if !declared {
            return Box::pin(async { None });
        }
        // Where it goes: the stream of an open call to that server, else the session's own outbox.
        let stream = match self.calling(&ask.server) {
            Some(stream) => stream,
            None if ask.calling => return Box::pin(async { None }),
            None => self.outbox.clone(),
        };
        self.asked.retain(|_, waiter| !waiter.is_closed());
        self.next_ask += 1;
        let id = RequestId::String(format!("mcpvisor-{}", self.next_ask));
        let (tx, rx) = oneshot::channel();
        self.asked.insert(id.clone(), tx);
        Box::pin(async move {
            if !stream.send(Frame::request(&id, ask.method, &ask.params)).await {
                return None;
            }
            let gone = ErrorObject { code: error_codes::INTERNAL_ERROR, message: "the gateway's client went away".into(), data: None };
            Some(rx.await.unwrap_or(Err(gone)))
        })
    }
}
