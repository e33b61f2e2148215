//! Servers' own requests (sampling, elicitation, roots) sent on to the
//! gateway's client.
//!
//! A [`ClientBridge`] gives the runtime [`ClientHandlers`] that put each
//! request to the one session whose call caused it ([`AskClient`]): the
//! session with a tool call open to the asking server (the request then
//! goes out on that call's stream: over HTTP, the POST's SSE stream, which
//! ends with the call's answer). A 2026-07-28 call whose request declared
//! the capability takes it on an `input_required` answer instead
//! (`crate::server::input`).
//!
//! Invariant: a server's request never reaches a session other than the
//! one whose call caused it. A per-caller connection (a server that acts
//! as each caller) says whose it is, and only that caller's sessions are
//! candidates. The runtime does not say which call a server's request
//! belongs to (stdio has no such field), so among the candidates:
//! - one session with a call open to the server: it is asked, and only it;
//!   when its client did not declare the capability (or is gone), the
//!   server gets the answer a client without handlers gets;
//! - two or more sessions with calls open to that server: the cause is
//!   ambiguous, and the server gets that same answer (never a guess);
//! - none: the request belongs to no caller's call, and gets that answer
//!   too, except under [`ClientBridge::new`] (one client, over stdio),
//!   where the one client is asked on its own stream.
//!
//! The answer a client without handlers gets: sampling refused (saying
//! why), elicitation declined. Roots follow [`ClientRoots`]: a server's
//! configured roots, else the client's when they pass through, else none.

use std::sync::{Arc, Mutex};

use actix::WeakAddr;
use rmcp::model::{ElicitResult, JsonObject};
use serde_json::{json, Value};

use super::roots::ClientRoots;
use crate::client_requests::{ClientHandlers, Refusal, Root};
use crate::gateway::{AskClient, CallingServer, GatewaySession};
use crate::protocol::{methods, ErrorObject};

/// The sessions that may answer servers' requests; clones share them.
/// `Default`: one client whose roots pass through (stdio).
#[derive(Clone)]
pub struct ClientBridge {
    sessions: Arc<Mutex<Attached>>,
    roots: ClientRoots,
    /// Many clients (HTTP): a request that no session's call caused is
    /// put to nobody.
    shared: bool,
}

/// The sessions attached, stopped ones among them until the next sweep.
#[derive(Default)]
struct Attached {
    sessions: Vec<WeakAddr<GatewaySession>>,
    /// How many were running at the last sweep.
    live: usize,
}

/// The fewest sessions attached before stopped ones are swept out.
const MIN_SWEEP: usize = 16;

impl Default for ClientBridge {
    fn default() -> Self {
        ClientBridge::new(ClientRoots::default())
    }
}

impl ClientBridge {
    /// A bridge for one client (stdio) whose servers' roots follow `roots`;
    /// the sessions must be served with the same record
    /// ([`crate::gateway::ServeOptions::client_roots`]).
    pub fn new(roots: ClientRoots) -> ClientBridge {
        ClientBridge { sessions: Arc::default(), roots, shared: false }
    }

    /// A bridge for a front that serves many clients, each perhaps another
    /// identity (HTTP): see the module's invariant.
    pub fn shared(roots: ClientRoots) -> ClientBridge {
        ClientBridge { shared: true, ..ClientBridge::new(roots) }
    }

    /// The record of the roots' rule, for [`crate::gateway::ServeOptions::client_roots`].
    pub fn client_roots(&self) -> ClientRoots {
        self.roots.clone()
    }

    /// Lets `session`'s client answer servers' requests (from now until it stops).
    pub fn attach(&self, session: WeakAddr<GatewaySession>) {
        let mut attached = self.lock();
        // Stopped sessions are swept out once the list has doubled since the
        // last sweep, not on every attach: a 2026-07-28 request attaches a
        // session of its own, and a scan of every session per request cost
        // 1.5–2 % of the HTTP gateway's CPU at 32 requests in flight.
        if attached.sessions.len() >= 2 * attached.live.max(MIN_SWEEP) {
            attached.sessions.retain(|session| session.upgrade().is_some());
            attached.live = attached.sessions.len();
        }
        attached.sessions.push(session);
    }

    /// Handlers for the runtime serving the pool.
    pub fn handlers(&self) -> ClientHandlers {
        let (sampling, elicitation, roots) = (self.clone(), self.clone(), self.clone());
        ClientHandlers::default()
            .sampling_fn(move |request| {
                let bridge = sampling.clone();
                async move {
                    match bridge.ask(request.server, request.caller, methods::SAMPLING_CREATE_MESSAGE, Value::Object(request.params)).await
                    {
                        Some(answer) => answer.and_then(|value| object(value, "sampling")),
                        None => Err(Refusal::new("the gateway's client does not offer sampling (it did not declare the capability)")),
                    }
                }
            })
            .elicitation_fn(move |request| {
                let bridge = elicitation.clone();
                async move {
                    let params = serde_json::to_value(&request.request).unwrap_or(Value::Null);
                    match bridge.ask(request.server, request.caller, methods::ELICITATION_CREATE, params).await {
                        Some(answer) => answer.and_then(|value| {
                            serde_json::from_value::<ElicitResult>(value)
                                .map_err(|e| Refusal::new(format!("the gateway's client answered elicitation with no valid result: {e}")))
                        }),
                        None => Ok(crate::client_requests::declined()),
                    }
                }
            })
            .offered_roots_fn(move |request| {
                let bridge = roots.clone();
                async move {
                    if !bridge.roots.passes_through() {
                        return Ok(Vec::new());
                    }
                    // Recorded before asking: a client that declares roots later tells this server.
                    bridge.roots.asked(&request.server);
                    match bridge.ask(request.server, request.caller, methods::ROOTS_LIST, json!({})).await {
                        Some(answer) => answer.map(|value| {
                            let listed = value.get("roots").and_then(Value::as_array).cloned().unwrap_or_default();
                            listed.iter().filter_map(root).collect()
                        }),
                        None => Ok(Vec::new()),
                    }
                }
            })
    }

    /// The answer of the session whose call caused the request (see the
    /// module's invariant); `None`: the server gets the no-client answer.
    async fn ask(&self, server: String, caller: Option<String>, method: &'static str, params: Value) -> Option<Result<Value, Refusal>> {
        let sessions: Vec<_> = self.lock().sessions.iter().filter_map(WeakAddr::upgrade).collect();
        let mut calling = Vec::new();
        for session in &sessions {
            if let Ok(true) = session.send(CallingServer { server: server.clone(), caller: caller.clone() }).await {
                calling.push(session);
            }
        }
        let (session, calling) = match (calling.as_slice(), sessions.as_slice()) {
            ([session], _) => (*session, true),
            ([], [session]) if !self.shared && caller.is_none() => (session, false),
            ([], _) => return None,
            (_, _) => {
                tracing::info!(
                    %server,
                    method,
                    sessions = calling.len(),
                    "a server's request while sessions of several callers have calls open to it: \
                     which call caused it is unknown, so it gets the answer of a client without that capability"
                );
                return None;
            }
        };
        let ask = AskClient { server, method, params, calling };
        let answer = session.send(ask).await.ok()??;
        Some(answer.map_err(|ErrorObject { code, message, .. }| Refusal { code, message }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Attached> {
        self.sessions.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn object(value: Value, what: &str) -> Result<JsonObject, Refusal> {
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(Refusal::new(format!("the gateway's client answered {what} with something that is not an object"))),
    }
}

fn root(value: &Value) -> Option<Root> {
    Some(Root { uri: value.get("uri")?.as_str()?.to_string(), name: value.get("name").and_then(Value::as_str).map(str::to_string) })
}
