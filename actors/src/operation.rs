//! Typed operations on one server besides tool calls: resources, prompts,
//! completion, log level and ping.
//!
//! Each operation is a message to a [`Connection`] (or to the Hub wrapped
//! in [`ToServer`], which routes it by server name). It runs as
//! a short conversation of [`Request`]s with the connection, so it shares
//! the connection's back-pressure, time-outs and cancellation with tool
//! calls; list operations follow every `nextCursor` through the same
//! bounded [`crate::protocol::pagination::Paginator`] as the connection's own listings.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use actix::prelude::*;
use rmcp::model::{
    ArgumentInfo, CompletionInfo, GetPromptResult, JsonObject, Prompt, ReadResourceResult, Reference, Resource, ResourceTemplate,
};
use serde_json::{json, Value};

use super::connection::Connection;
pub use super::messages::{LogLevel, RootsChanged, SetLogLevel, SubscribeResource, UnsubscribeResource};
use super::reply::Reply;
pub use super::rounds::Requester;
use crate::error::CallError;
use crate::protocol::{error_codes, methods};

pub(crate) type Flow<T> = Pin<Box<dyn Future<Output = Result<T, CallError>>>>;

/// Sends `message` to the connection of `server`: a tool call by the
/// server's own tool name, or any operation of this module; the Hub and
/// the Registry route it (re-exported as `hub::ToServer`).
#[derive(Debug)]
pub struct ToServer<M> {
    pub server: String,
    pub message: M,
}

impl<M, T> Message for ToServer<M>
where
    M: Message<Result = Result<T, CallError>>,
    T: 'static,
{
    type Result = Result<T, CallError>;
}

/// An operation on one server, run as requests to its connection.
pub trait Operation: Message<Result = Result<Self::Output, CallError>> + Send + 'static {
    type Output: 'static;
    /// The server capability this operation needs (`"resources"`, ...);
    /// a connected server that did not announce it is not asked at all.
    const CAPABILITY: Option<&'static str> = None;
    /// The extension (`capabilities.extensions` key) this operation needs.
    const EXTENSION: Option<&'static str> = None;
    /// The method, for errors.
    const METHOD: &'static str;
    fn run(self, requester: Requester) -> Flow<Self::Output>;
}

impl<M: Operation> Handler<M> for Connection {
    type Result = Reply<Result<M::Output, CallError>>;

    fn handle(&mut self, operation: M, ctx: &mut Context<Self>) -> Self::Result {
        let refusal = M::CAPABILITY.and_then(|capability| self.unannounced(capability, M::METHOD));
        if let Some(refusal) = refusal.or_else(|| M::EXTENSION.and_then(|extension| self.unannounced_extension(extension, M::METHOD))) {
            return Reply::Ready(Err(refusal));
        }
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
    const CAPABILITY: Option<&'static str> = Some("resources");
    const METHOD: &'static str = methods::RESOURCES_LIST;
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
    const CAPABILITY: Option<&'static str> = Some("resources");
    const METHOD: &'static str = methods::RESOURCE_TEMPLATES_LIST;
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
    const CAPABILITY: Option<&'static str> = Some("resources");
    const METHOD: &'static str = methods::RESOURCES_READ;
    fn run(self, requester: Requester) -> Flow<ReadResourceResult> {
        let label = format!("{} {}", methods::RESOURCES_READ, self.uri);
        Box::pin(async move { requester.request(methods::RESOURCES_READ, json!({ "uri": self.uri }), label).await })
    }
}

/// Every prompt of the server.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Vec<Prompt>, CallError>")]
pub struct ListPrompts;

impl Operation for ListPrompts {
    type Output = Vec<Prompt>;
    const CAPABILITY: Option<&'static str> = Some("prompts");
    const METHOD: &'static str = methods::PROMPTS_LIST;
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
    const CAPABILITY: Option<&'static str> = Some("prompts");
    const METHOD: &'static str = methods::PROMPTS_GET;
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
    const METHOD: &'static str = methods::COMPLETE;
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

/// Pings the server; answers the round trip.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<Duration, CallError>")]
pub struct Ping;

impl Operation for Ping {
    type Output = Duration;
    const METHOD: &'static str = methods::PING;
    fn run(self, requester: Requester) -> Flow<Duration> {
        Box::pin(async move {
            let started = Instant::now();
            let _: Value = requester.request(methods::PING, json!({}), methods::PING.to_string()).await?;
            Ok(started.elapsed())
        })
    }
}
