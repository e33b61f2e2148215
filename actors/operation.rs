//! Typed operations on one server besides tool calls: resources, prompts,
//! completion, log level and ping.
//!
//! Each operation is a message to a [`Connection`] (or to the Hub wrapped
//! in [`super::hub::ToServer`], which routes it by server name). It runs as
//! a short conversation of [`Request`]s with the connection, so it shares
//! the connection's back-pressure, time-outs and cancellation with tool
//! calls; list operations follow every `nextCursor` through the same
//! bounded [`Paginator`] as the connection's own listings.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix::WeakAddr;
use rmcp::model::{
    ArgumentInfo, CompletionInfo, GetPromptResult, JsonObject, Prompt, ReadResourceResult, Reference, Resource, ResourceTemplate,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::client_requests::Answerer;
use super::connection::{Connection, Request};
use super::reply::Reply;
use super::rounds;
use crate::error::CallError;
use crate::protocol::pagination::{ListBounds, Paginator};
use crate::protocol::{error_codes, methods};

/// Talks to one connection on a caller's behalf. It holds the connection
/// weakly (the Hub holds the only strong address): once the server is
/// removed, its requests fail with `Stopped`.
#[derive(Clone)]
pub struct Requester {
    connection: WeakAddr<Connection>,
    server: String,
    answerer: Arc<Answerer>,
    bounds: ListBounds,
}

impl Requester {
    pub(crate) fn new(
        connection: WeakAddr<Connection>,
        server: impl Into<String>,
        answerer: Arc<Answerer>,
        bounds: ListBounds,
    ) -> Requester {
        Requester { connection, server: server.into(), answerer, bounds }
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    pub(crate) fn answerer(&self) -> &Arc<Answerer> {
        &self.answerer
    }

    /// Sends one request, finishes it if the server needs more rounds
    /// (see `actors/rounds.rs`), and parses the result as `T`.
    pub async fn request<T: DeserializeOwned>(&self, method: &str, params: Value, label: String) -> Result<T, CallError> {
        let raw = self.finished(method, params, label.clone()).await?;
        self.parse(&raw, label)
    }

    /// Sends one request and parses its result as `T`, with no further rounds.
    pub async fn request_once<T: DeserializeOwned>(&self, method: &str, params: Value, label: String) -> Result<T, CallError> {
        let raw = self.raw(Request { method: method.into(), params, label: label.clone(), timeout: None, progress: None }).await?;
        self.parse(&raw, label)
    }

    /// Sends one request and finishes it if the server needs more rounds.
    async fn finished(&self, method: &str, params: Value, label: String) -> Result<Box<RawValue>, CallError> {
        let request = Request { method: method.into(), params: params.clone(), label: label.clone(), timeout: None, progress: None };
        let raw = self.raw(request).await?;
        match rounds::may_need_rounds(&raw) {
            true => Box::pin(rounds::finish(self, method, params, &label, raw)).await,
            false => Ok(raw),
        }
    }

    fn parse<T: DeserializeOwned>(&self, raw: &RawValue, label: String) -> Result<T, CallError> {
        serde_json::from_str(raw.get()).map_err(|e| CallError::Protocol {
            server: self.server.clone(),
            tool: label,
            message: e.to_string(),
        })
    }

    pub async fn raw(&self, request: Request) -> Result<Box<RawValue>, CallError> {
        let label = request.label.clone();
        let Some(connection) = self.connection.upgrade() else {
            return Err(CallError::Stopped { server: self.server.clone(), tool: label });
        };
        match connection.send(request).await {
            Ok(answer) => answer,
            Err(_) => Err(CallError::Stopped { server: self.server.clone(), tool: label }),
        }
    }

    /// Every item of a paginated list: the `field` array of each page,
    /// followed with the connection's one bounded [`Paginator`].
    pub async fn list_all<T: DeserializeOwned>(&self, method: &'static str, field: &'static str) -> Result<Vec<T>, CallError> {
        let mut pages = Paginator::new(method, field, self.bounds);
        let mut items = Vec::new();
        loop {
            let raw = self.finished(method, pages.params(), method.to_string()).await?;
            let (found, more) = pages.take::<T>(&raw).map_err(|message| CallError::Protocol {
                server: self.server.clone(),
                tool: method.to_string(),
                message,
            })?;
            items.extend(found);
            if !more {
                return Ok(items);
            }
        }
    }
}

type Flow<T> = Pin<Box<dyn Future<Output = Result<T, CallError>>>>;

/// An operation on one server, run as requests to its connection.
pub trait Operation: Message<Result = Result<Self::Output, CallError>> + Send + 'static {
    type Output: 'static;
    fn run(self, requester: Requester) -> Flow<Self::Output>;
}

impl<M: Operation> Handler<M> for Connection {
    type Result = Reply<Result<M::Output, CallError>>;

    fn handle(&mut self, operation: M, ctx: &mut Context<Self>) -> Self::Result {
        let requester = self.requester(ctx);
        Reply::Later(operation.run(requester))
    }
}

/// Every resource of the server.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Vec<Resource>, CallError>")]
pub struct ListResources;

impl Operation for ListResources {
    type Output = Vec<Resource>;
    fn run(self, requester: Requester) -> Flow<Vec<Resource>> {
        Box::pin(async move { requester.list_all(methods::RESOURCES_LIST, "resources").await })
    }
}

/// Every resource template of the server; a server without templates
/// (answering -32601) has none.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Vec<ResourceTemplate>, CallError>")]
pub struct ListResourceTemplates;

impl Operation for ListResourceTemplates {
    type Output = Vec<ResourceTemplate>;
    fn run(self, requester: Requester) -> Flow<Vec<ResourceTemplate>> {
        Box::pin(async move {
            match requester.list_all(methods::RESOURCE_TEMPLATES_LIST, "resourceTemplates").await {
                Err(CallError::Rpc { code, .. }) if code == error_codes::METHOD_NOT_FOUND => Ok(Vec::new()),
                other => other,
            }
        })
    }
}

/// Reads one resource (text or blob contents).
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<ReadResourceResult, CallError>")]
pub struct ReadResource {
    pub uri: String,
}

impl Operation for ReadResource {
    type Output = ReadResourceResult;
    fn run(self, requester: Requester) -> Flow<ReadResourceResult> {
        let label = format!("{} {}", methods::RESOURCES_READ, self.uri);
        Box::pin(async move { requester.request(methods::RESOURCES_READ, json!({ "uri": self.uri }), label).await })
    }
}

/// Asks for `notifications/resources/updated` of one resource (legacy:
/// `resources/subscribe`; modern: part of the connection's listen stream).
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<(), CallError>")]
pub struct SubscribeResource {
    pub uri: String,
}

/// Stops the updates of [`SubscribeResource`].
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<(), CallError>")]
pub struct UnsubscribeResource {
    pub uri: String,
}

/// Every prompt of the server.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Vec<Prompt>, CallError>")]
pub struct ListPrompts;

impl Operation for ListPrompts {
    type Output = Vec<Prompt>;
    fn run(self, requester: Requester) -> Flow<Vec<Prompt>> {
        Box::pin(async move { requester.list_all(methods::PROMPTS_LIST, "prompts").await })
    }
}

/// One prompt, filled in with its arguments.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<GetPromptResult, CallError>")]
pub struct GetPrompt {
    pub name: String,
    pub arguments: Option<JsonObject>,
}

impl Operation for GetPrompt {
    type Output = GetPromptResult;
    fn run(self, requester: Requester) -> Flow<GetPromptResult> {
        let label = format!("{} {}", methods::PROMPTS_GET, self.name);
        let mut params = json!({ "name": self.name });
        if let Some(arguments) = self.arguments {
            params["arguments"] = Value::Object(arguments);
        }
        Box::pin(async move { requester.request(methods::PROMPTS_GET, params, label).await })
    }
}

/// Completion of a prompt's or resource template's argument.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<CompletionInfo, CallError>")]
pub struct Complete {
    pub reference: Reference,
    pub argument: ArgumentInfo,
    /// Values of the other arguments already given (`context.arguments`).
    pub context: Option<JsonObject>,
}

impl Operation for Complete {
    type Output = CompletionInfo;
    fn run(self, requester: Requester) -> Flow<CompletionInfo> {
        let mut params = json!({ "ref": self.reference, "argument": self.argument });
        if let Some(arguments) = self.context {
            params["context"] = json!({ "arguments": arguments });
        }
        Box::pin(async move {
            #[derive(serde::Deserialize)]
            struct Answer {
                completion: CompletionInfo,
            }
            let answer: Answer = requester.request(methods::COMPLETE, params, methods::COMPLETE.to_string()).await?;
            Ok(answer.completion)
        })
    }
}

/// MCP log levels, least to most severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LogLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        }
    }
}

/// Sets the lowest level of `notifications/message` the server sends
/// (legacy: `logging/setLevel`; modern: rides on every later request).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<(), CallError>")]
pub struct SetLogLevel(pub LogLevel);

/// Tells the server its roots changed (`notifications/roots/list_changed`);
/// it will ask for them again. For embedders whose roots handler answers
/// differently over time.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<(), CallError>")]
pub struct RootsChanged;

/// Pings the server; answers the round trip.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<Duration, CallError>")]
pub struct Ping;

impl Operation for Ping {
    type Output = Duration;
    fn run(self, requester: Requester) -> Flow<Duration> {
        Box::pin(async move {
            let started = Instant::now();
            let _: Value = requester.request(methods::PING, json!({}), methods::PING.to_string()).await?;
            Ok(started.elapsed())
        })
    }
}
