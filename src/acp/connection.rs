//! [`AcpConnection`]: the actor of one editor connection. It takes the
//! editor's requests and notifications ([`Incoming`]) one at a time,
//! answers the quick ones at once and runs the slow ones (opening a
//! session, a prompt) beside its mailbox, so `session/cancel` is handled
//! while a prompt runs.
//!
//! Robustness: a request before `initialize` is refused with
//! `-32600`, an unknown method with `-32601`, params that do not fit the
//! schema with `-32602` naming the field; a second prompt while one runs
//! is refused; [`Closed`] (the editor went away) cancels every turn and
//! removes every session's servers before it answers.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use actix::prelude::*;
use agent_client_protocol_schema::ProtocolVersion;
use agent_client_protocol_schema::{
    AgentCapabilities, AuthMethod, AuthMethodAgent, AvailableCommandsUpdate, CancelNotification, ContentBlock, CurrentModeUpdate,
    Implementation, InitializeRequest, InitializeResponse, LoadSessionRequest, LoadSessionResponse, McpCapabilities, NewSessionRequest,
    NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse, SessionUpdate, SetSessionModeRequest, SetSessionModeResponse,
    StopReason,
};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use super::host::EditorOffers;
use super::modes::{commands, Mode};
use super::peer::Peer;
use super::session::{invalid, Context as SessionContext, Opening, Session};
use super::{command, prompt, replay, AcpOptions, REMOTE_SERVERS};
use crate::actors::agent::{AgentError, AgentStop, Prompt};
use crate::actors::guard::catch;
use crate::llm::LlmError;
use crate::protocol::{error_codes, ErrorObject, RequestId};
use crate::sessions::SessionId as SavedId;
use crate::Handle;

/// A request or notification of the editor.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Incoming {
    /// `None` for a notification.
    pub id: Option<RequestId>,
    pub method: String,
    pub params: Option<Box<RawValue>>,
}

/// The editor closed the connection; answered once everything is cleaned up.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Closed;

pub struct AcpConnection {
    peer: Peer,
    handle: Handle,
    options: Arc<AcpOptions>,
    /// What the editor offers; `None` until `initialize`.
    offers: Option<EditorOffers>,
    sessions: HashMap<String, Session>,
    /// Sessions numbered so far (their servers' suffix).
    opened: usize,
    /// The configured servers, which every session shares.
    configured: Arc<HashSet<String>>,
}

impl AcpConnection {
    pub fn new(peer: Peer, handle: Handle, options: AcpOptions, configured: HashSet<String>) -> AcpConnection {
        AcpConnection {
            peer,
            handle,
            options: Arc::new(options),
            offers: None,
            sessions: HashMap::new(),
            opened: 0,
            configured: Arc::new(configured),
        }
    }

    fn dispatch(&mut self, id: RequestId, method: &str, params: Option<Box<RawValue>>, ctx: &mut Context<Self>) {
        #[cfg(feature = "fault-injection")]
        if method == crate::actors::guard::PANIC_METHOD {
            panic!("injected fault");
        }
        if method == "initialize" {
            let answer = parse::<InitializeRequest>(method, params).map(|request| self.initialize(request));
            return self.peer.respond(&id, answer);
        }
        let Some(offers) = self.offers else {
            let message = format!("{method} before initialize: send initialize first");
            return self.peer.respond::<()>(&id, Err(ErrorObject { code: error_codes::INVALID_REQUEST, message, data: None }));
        };
        let outcome = match method {
            "authenticate" => match self.options.missing_key {
                None => Ok(serde_json::json!({})),
                Some(var) => Err(auth_required(var)),
            },
            "session/new" => parse::<NewSessionRequest>(method, params).map(|request| {
                self.open(id.clone(), Opening { cwd: request.cwd, servers: request.mcp_servers, saved: None, number: 0 }, offers, ctx)
            }),
            "session/load" => parse::<LoadSessionRequest>(method, params).and_then(|request| self.load(id.clone(), request, offers, ctx)),
            "session/prompt" => parse::<PromptRequest>(method, params).and_then(|request| self.prompt(id.clone(), request, ctx)),
            "session/set_mode" => parse::<SetSessionModeRequest>(method, params).and_then(|request| self.set_mode(request)),
            _ => Err(ErrorObject {
                code: error_codes::METHOD_NOT_FOUND,
                message: format!("method {method} is not supported by this agent"),
                data: None,
            }),
        };
        match outcome {
            Ok(serde_json::Value::Null) => {} // answered later
            Ok(value) => self.peer.respond(&id, Ok(value)),
            Err(error) => self.peer.respond::<()>(&id, Err(error)),
        }
    }

    fn initialize(&mut self, request: InitializeRequest) -> InitializeResponse {
        let caps = &request.client_capabilities;
        self.offers = Some(EditorOffers { read: caps.fs.read_text_file, write: caps.fs.write_text_file, terminal: caps.terminal });
        let version = request.protocol_version.min(ProtocolVersion::LATEST);
        let capabilities = AgentCapabilities::new()
            .load_session(self.options.store.is_some())
            .prompt_capabilities(PromptCapabilities::new().image(true).embedded_context(true))
            .mcp_capabilities(McpCapabilities::new().http(REMOTE_SERVERS).sse(REMOTE_SERVERS));
        InitializeResponse::new(version)
            .agent_capabilities(capabilities)
            .agent_info(Implementation::new("mcpvisor", env!("CARGO_PKG_VERSION")).title("mcpvisor".to_string()))
            .auth_methods(self.options.missing_key.map(auth_method).into_iter().collect())
    }

    /// Opens a session beside the mailbox; answers `id` when it is ready.
    /// `history`: the saved messages to replay first (`session/load`).
    fn open(&mut self, id: RequestId, mut opening: Opening, offers: EditorOffers, ctx: &mut Context<Self>) -> serde_json::Value {
        self.opened += 1;
        opening.number = self.opened;
        let replayed = opening.saved.as_ref().map(|(_, messages, ..)| replay::updates(messages));
        let cx = SessionContext {
            handle: self.handle.clone(),
            options: self.options.clone(),
            peer: self.peer.clone(),
            offers,
            configured: self.configured.clone(),
        };
        let opened = async move { Session::open(&cx, opening).await };
        ctx.spawn(opened.into_actor(self).map(move |opened, connection, _| {
            let session = match opened {
                Ok(session) => session,
                Err(error) => return connection.peer.respond::<()>(&id, Err(error)),
            };
            let modes = session.mode.state();
            let session_id = session.room.session_id.clone();
            match replayed {
                Some(updates) => {
                    updates.into_iter().for_each(|update| session.room.update(update));
                    connection.peer.respond(&id, Ok(LoadSessionResponse::new().modes(modes)));
                }
                None => connection.peer.respond(&id, Ok(NewSessionResponse::new(session_id.clone()).modes(modes))),
            }
            session.room.update(SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands())));
            for note in &session.notes {
                session
                    .room
                    .update(SessionUpdate::AgentMessageChunk(agent_client_protocol_schema::ContentChunk::new(format!("{note}\n").into())));
            }
            connection.sessions.insert(session_id.to_string(), session);
        }));
        serde_json::Value::Null
    }

    fn load(
        &mut self,
        id: RequestId,
        request: LoadSessionRequest,
        offers: EditorOffers,
        ctx: &mut Context<Self>,
    ) -> Result<serde_json::Value, ErrorObject> {
        if self.sessions.contains_key(&*request.session_id.0) {
            return Err(invalid(format!("session {} is already open in this connection", request.session_id)));
        }
        let Some(store) = &self.options.store else {
            return Err(invalid("saved sessions are not available: the session store could not be opened".into()));
        };
        let saved_id = SavedId::parse(&request.session_id.0).map_err(|e| invalid(e.to_string()))?;
        let (saved, journal) = store.resume(&saved_id, self.options.redactor.clone()).map_err(|e| invalid(e.to_string()))?;
        let saved = Some((saved_id, saved.messages, saved.started.system, journal));
        Ok(self.open(id, Opening { cwd: request.cwd, servers: request.mcp_servers, saved, number: 0 }, offers, ctx))
    }

    fn prompt(&mut self, id: RequestId, request: PromptRequest, ctx: &mut Context<Self>) -> Result<serde_json::Value, ErrorObject> {
        let key = request.session_id.to_string();
        let session = self.sessions.get_mut(&key).ok_or_else(|| unknown_session(&key))?;
        if session.prompting {
            return Err(invalid(format!("session {key} is already answering a prompt; wait for it or send session/cancel")));
        }
        session.prompting = true;
        let (agent, relay, room, scope, mode) =
            (session.agent.clone(), session.relay.clone(), session.room.clone(), session.scope.clone(), session.mode);
        let handle = self.handle.clone();
        let missing_key = self.options.missing_key;
        let switch_model = self.options.switch_model.clone();
        let slash = match request.prompt.first() {
            Some(ContentBlock::Text(text)) => text.text.strip_prefix('/').map(str::to_string),
            _ => None,
        };
        let run = async move {
            if let Some(line) = slash {
                let target = command::Target { handle: &handle, scope: &scope, mode, agent: &agent, switch_model: switch_model.as_ref() };
                if let Some(text) = command::run(target, &line).await {
                    room.update(SessionUpdate::AgentMessageChunk(agent_client_protocol_schema::ContentChunk::new(text.into())));
                    return relay.finish(id, Ok(PromptResponse::new(StopReason::EndTurn)));
                }
            }
            let outcome = match agent.prompt(Prompt { content: prompt::parts(request.prompt) }).await {
                Ok(ended) => Ok(PromptResponse::new(stop_reason(ended.stop_reason))),
                Err(error) => Err(turn_error(error, missing_key)),
            };
            relay.finish(id, outcome);
        };
        ctx.spawn(run.into_actor(self).map(move |(), connection, _| {
            if let Some(session) = connection.sessions.get_mut(&key) {
                session.prompting = false;
            }
        }));
        Ok(serde_json::Value::Null)
    }

    fn set_mode(&mut self, request: SetSessionModeRequest) -> Result<serde_json::Value, ErrorObject> {
        let key = request.session_id.to_string();
        let session = self.sessions.get_mut(&key).ok_or_else(|| unknown_session(&key))?;
        let mode = Mode::parse(&request.mode_id.0)
            .ok_or_else(|| invalid(format!("there is no mode `{}`; the modes are ask, auto and read-only", request.mode_id)))?;
        session.set_mode(mode, self.options.policy.mode);
        session.room.update(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode.id().to_string())));
        serde_json::to_value(SetSessionModeResponse::new()).map_err(|e| invalid(e.to_string()))
    }

    fn notified(&mut self, method: &str, params: Option<Box<RawValue>>) {
        if method == "session/cancel" {
            match parse::<CancelNotification>(method, params) {
                Ok(cancel) => {
                    if let Some(session) = self.sessions.get(&*cancel.session_id.0) {
                        session.agent.cancel();
                    }
                }
                Err(error) => tracing::warn!("{}", error.message),
            }
        }
    }
}

impl Actor for AcpConnection {
    type Context = Context<Self>;
}

impl Handler<Incoming> for AcpConnection {
    type Result = ();

    /// Every message goes through the actors' one guard: a panic answers
    /// that request with an internal error naming it, an event says so, and
    /// the connection keeps its sessions and serves on (their agents are
    /// actors of their own, guarded themselves).
    fn handle(&mut self, incoming: Incoming, ctx: &mut Context<Self>) {
        let Incoming { id, method, params } = incoming;
        let answer_to = id.clone();
        let caught = catch("ACP connection", &method, || match id {
            Some(id) => self.dispatch(id, &method, params, ctx),
            None => self.notified(&method, params),
        });
        let Err(panic) = caught else { return };
        self.handle.hub().do_send(crate::actors::Event::panicked(&panic));
        if let Some(id) = answer_to {
            let message = format!("{panic}; the connection goes on: send the request again, or open a new session");
            self.peer.respond::<()>(&id, Err(ErrorObject { code: error_codes::INTERNAL_ERROR, message, data: None }));
        }
    }
}

impl Handler<Closed> for AcpConnection {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: Closed, _: &mut Context<Self>) -> Self::Result {
        self.peer.close();
        let sessions: Vec<Session> = self.sessions.drain().map(|(_, session)| session).collect();
        let handle = self.handle.clone();
        Box::pin(async move {
            for session in sessions {
                session.close(&handle).await;
            }
        })
    }
}

fn parse<T: DeserializeOwned>(method: &str, params: Option<Box<RawValue>>) -> Result<T, ErrorObject> {
    let raw = params.as_ref().map_or("{}", |raw| raw.get());
    serde_json::from_str(raw).map_err(|e| invalid(format!("the params of {method} do not fit the ACP schema: {e}")))
}

/// ACP's "authentication required" error code.
const AUTH_REQUIRED: i64 = -32000;

/// The one auth method offered when the key is missing: setting it.
fn auth_method(var: &'static str) -> AuthMethod {
    let about = format!(
        "Set {var} in the environment the editor starts `mcpvisor acp` with (Zed: `env` of the agent server), then restart the agent"
    );
    AuthMethod::Agent(AuthMethodAgent::new(var.to_string(), format!("Set {var}")).description(about))
}

/// A turn's failure: "authentication required" when the key is missing and the provider refused.
fn turn_error(error: AgentError, missing_key: Option<&str>) -> ErrorObject {
    match (&error, missing_key) {
        (AgentError::Model(LlmError::Auth { .. }), Some(var)) => auth_required(var),
        _ => ErrorObject { code: error_codes::INTERNAL_ERROR, message: error.to_string(), data: None },
    }
}

fn auth_required(var: &str) -> ErrorObject {
    let message = format!("the model needs an API key: set {var} in the environment of `mcpvisor acp` and restart the agent");
    ErrorObject { code: AUTH_REQUIRED, message, data: None }
}

fn unknown_session(id: &str) -> ErrorObject {
    invalid(format!("there is no session {id} in this connection; create one with session/new or load it with session/load"))
}

fn stop_reason(stop: AgentStop) -> StopReason {
    match stop {
        AgentStop::EndTurn => StopReason::EndTurn,
        AgentStop::MaxTokens => StopReason::MaxTokens,
        AgentStop::MaxTurnRequests => StopReason::MaxTurnRequests,
        AgentStop::Refusal => StopReason::Refusal,
        AgentStop::Cancelled => StopReason::Cancelled,
    }
}
