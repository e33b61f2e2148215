//! Servers' own requests (sampling, elicitation, roots) sent on to the
//! gateway's client.
//!
//! A [`ClientBridge`] gives the runtime [`ClientHandlers`] that put each
//! request to an attached session whose client declared the capability
//! ([`AskClient`]): first to one with a tool call open to the asking server
//! (the request then goes out on that call's stream: over HTTP, the POST's
//! SSE stream, which ends with the call's answer), else to the first one
//! (on its own stream: stdout, or the HTTP session's GET stream). A
//! 2026-07-28 call whose request declared the capability takes it on an
//! `input_required` answer instead (`crate::server::input`). The
//! runtime does not say which call a server's request belongs to, so with
//! two sessions calling the same server at once the first of them is
//! asked. When no session offers the capability, the request gets the answer a
//! client without handlers gets: sampling refused (saying why), elicitation
//! declined. Roots follow [`ClientRoots`]: a server's configured roots,
//! else the client's when they pass through, else none.

use std::sync::{Arc, Mutex};

use actix::WeakAddr;
use rmcp::model::{ElicitResult, JsonObject};
use serde_json::{json, Value};

use super::roots::ClientRoots;
use crate::actors::client_requests::{ClientHandlers, Refusal, Root};
use crate::actors::gateway::{AskClient, GatewaySession};
use crate::protocol::{methods, ErrorObject};

/// The sessions that may answer servers' requests; clones share them.
/// `Default`: the client's roots pass through (one client, over stdio).
#[derive(Clone, Default)]
pub struct ClientBridge {
    sessions: Arc<Mutex<Vec<WeakAddr<GatewaySession>>>>,
    roots: ClientRoots,
}

impl ClientBridge {
    /// A bridge whose servers' roots follow `roots`; the sessions must be
    /// served with the same record ([`crate::actors::gateway::ServeOptions::client_roots`]).
    pub fn new(roots: ClientRoots) -> ClientBridge {
        ClientBridge { sessions: Arc::default(), roots }
    }

    /// The record of the roots' rule, for [`crate::actors::gateway::ServeOptions::client_roots`].
    pub fn client_roots(&self) -> ClientRoots {
        self.roots.clone()
    }

    /// Lets `session`'s client answer servers' requests (from now until it stops).
    pub fn attach(&self, session: WeakAddr<GatewaySession>) {
        let mut sessions = self.lock();
        sessions.retain(|session| session.upgrade().is_some());
        sessions.push(session);
    }

    /// Handlers for the runtime serving the pool.
    pub fn handlers(&self) -> ClientHandlers {
        let (sampling, elicitation, roots) = (self.clone(), self.clone(), self.clone());
        ClientHandlers::default()
            .sampling_fn(move |request| {
                let bridge = sampling.clone();
                async move {
                    match bridge.ask(request.server, methods::SAMPLING_CREATE_MESSAGE, Value::Object(request.params)).await {
                        Some(answer) => answer.and_then(|value| object(value, "sampling")),
                        None => Err(Refusal::new("the gateway's client does not offer sampling (it did not declare the capability)")),
                    }
                }
            })
            .elicitation_fn(move |request| {
                let bridge = elicitation.clone();
                async move {
                    let params = serde_json::to_value(&request.request).unwrap_or(Value::Null);
                    match bridge.ask(request.server, methods::ELICITATION_CREATE, params).await {
                        Some(answer) => answer.and_then(|value| {
                            serde_json::from_value::<ElicitResult>(value)
                                .map_err(|e| Refusal::new(format!("the gateway's client answered elicitation with no valid result: {e}")))
                        }),
                        None => Ok(crate::actors::client_requests::declined()),
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
                    match bridge.ask(request.server, methods::ROOTS_LIST, json!({})).await {
                        Some(answer) => answer.map(|value| {
                            let listed = value.get("roots").and_then(Value::as_array).cloned().unwrap_or_default();
                            listed.iter().filter_map(root).collect()
                        }),
                        None => Ok(Vec::new()),
                    }
                }
            })
    }

    /// The answer of the first session whose client declared the
    /// capability, sessions with a call open to `server` (those whose call
    /// may have caused the request) asked first.
    async fn ask(&self, server: String, method: &'static str, params: Value) -> Option<Result<Value, Refusal>> {
        let sessions: Vec<_> = self.lock().iter().filter_map(WeakAddr::upgrade).collect();
        for calling in [true, false] {
            for session in &sessions {
                let ask = AskClient { server: server.clone(), method, params: params.clone(), calling };
                if let Ok(Some(answer)) = session.send(ask).await {
                    return Some(answer.map_err(|ErrorObject { code, message, .. }| Refusal { code, message }));
                }
            }
        }
        None
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<WeakAddr<GatewaySession>>> {
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
