//! The one typed inbound request of the server side: a request's method and
//! params are parsed once, here, into a [`ClientRequest`] that
//! [`super::dispatch`] routes and every handler reads (the gateway's
//! sessions, the demo server, in-process servers).
//!
//! rmcp's model types carry the methods whose params they describe in both
//! eras (`resources/read`, `resources/(un)subscribe`, `prompts/get`,
//! `completion/complete`, the `*/list` cursor, the level of
//! `logging/setLevel`); the crate's own types carry the rest: `initialize`
//! (read as leniently as ever: a version that is no string is no version),
//! `tools/call` (its 2025-11-25 `task` and an `arguments` that each server
//! checks itself, which rmcp's type has no room for), `tasks/*`,
//! `skills/get`, `subscriptions/listen`. A method no variant names stays
//! [`ClientRequest::Other`] with its params, so extensions still reach the
//! handlers.
//!
//! Invariant: bad params of a method named here are one -32602 naming the
//! method and the field, before any handler runs. The fields rmcp's types
//! would refuse but the servers never read (an MRTR `requestState` that is
//! no string on a `resources/read`, say) are not read here either, so no
//! request is refused that was served before.

#[allow(deprecated)]
use rmcp::model::LoggingLevel;
use rmcp::model::{
    ArgumentInfo, CompleteRequestParams, CompletionContext, GetPromptRequestParams, JsonObject, PaginatedRequestParams,
    ReadResourceRequestParams, Reference, SubscribeRequestParams, UnsubscribeRequestParams,
};
use serde_json::Value;

use super::listen::Filter;
use crate::protocol::{json_kind, methods, ErrorObject};

/// One request a client sent, its params parsed.
#[derive(Debug)]
pub enum ClientRequest {
    Initialize(Initialize),
    Discover,
    Ping,
    /// Legacy `logging/setLevel` (the dispatcher serves it in that era only).
    SetLevel(Level),
    /// One of the `*/list` methods a server side pages.
    List(List, PaginatedRequestParams),
    CallTool(CallToolParams),
    ReadResource(ReadResourceRequestParams),
    Subscribe(SubscribeRequestParams),
    Unsubscribe(UnsubscribeRequestParams),
    GetPrompt(GetPromptRequestParams),
    Complete(CompleteRequestParams),
    /// 2026-07-28 `subscriptions/listen`.
    Listen(Filter),
    /// `tasks/get`, `tasks/result`, `tasks/cancel` (2025-11-25).
    Task(TaskRequest),
    /// `skills/get` (the skills extension): the URI of a skill's `SKILL.md`.
    SkillsGet {
        uri: String,
    },
    /// A method not named above, for the handler to offer or refuse.
    Other {
        method: String,
        /// What an extension's handler reads (of the crate's own, only the `fault-injection` hook does).
        params: Value,
    },
}

/// `initialize`, read as every server side always read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Initialize {
    /// The client's version, when it sent one as a string.
    pub protocol_version: Option<String>,
    /// The client's capabilities (`{}` when it sent none).
    pub capabilities: Value,
}

/// The lists the dispatcher pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    Tools,
    Resources,
    ResourceTemplates,
    Prompts,
    /// `tasks/list` (2025-11-25).
    Tasks,
    /// `skills/list` (the skills extension).
    Skills,
}

impl List {
    pub fn method(self) -> &'static str {
        match self {
            List::Tools => methods::TOOLS_LIST,
            List::Resources => methods::RESOURCES_LIST,
            List::ResourceTemplates => methods::RESOURCE_TEMPLATES_LIST,
            List::Prompts => methods::PROMPTS_LIST,
            List::Tasks => methods::TASKS_LIST,
            List::Skills => methods::SKILLS_LIST,
        }
    }

    /// The key of the list's items in its result.
    pub fn key(self) -> &'static str {
        match self {
            List::Tools => "tools",
            List::Resources => "resources",
            List::ResourceTemplates => "resourceTemplates",
            List::Prompts => "prompts",
            List::Tasks => "tasks",
            List::Skills => "skills",
        }
    }
}

/// `tools/call`. rmcp's `CallToolRequestParams` has no 2025-11-25 `task`
/// and refuses an `arguments` that is no object before the server can say
/// so in its own words: hence this type.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallToolParams {
    pub name: String,
    /// A task-augmented call's `task` (absent or `null`: a plain call).
    pub task: Option<Value>,
    /// The params as sent: `arguments` (each server checks them), `_meta`
    /// (progress token, trace context, log level) and the 2026-07-28
    /// retry's `inputResponses` and `requestState`.
    pub params: Value,
}

impl CallToolParams {
    /// The `arguments` as sent (`Null` when absent).
    pub fn arguments(&self) -> &Value {
        self.params.get("arguments").unwrap_or(&Value::Null)
    }
}

/// A `tasks/*` request about one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRequest {
    pub kind: TaskMethod,
    pub task_id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskMethod {
    Get,
    Result,
    Cancel,
}

impl TaskMethod {
    pub fn method(self) -> &'static str {
        match self {
            TaskMethod::Get => methods::TASKS_GET,
            TaskMethod::Result => methods::TASKS_RESULT,
            TaskMethod::Cancel => methods::TASKS_CANCEL,
        }
    }
}

impl ClientRequest {
    /// Parses `method` with its `params` (`Value::Null` for none), or the
    /// -32602 naming the method and the field.
    pub fn parse(method: &str, params: Value) -> Result<ClientRequest, ErrorObject> {
        let list = |list: List| Ok(ClientRequest::List(list, paginated(list.method(), &params)?));
        let task = |kind: TaskMethod| Ok(ClientRequest::Task(TaskRequest { kind, task_id: task_id(kind.method(), &params)? }));
        match method {
            methods::INITIALIZE => Ok(ClientRequest::Initialize(Initialize {
                protocol_version: params.get("protocolVersion").and_then(Value::as_str).map(str::to_owned),
                capabilities: params.get("capabilities").cloned().unwrap_or_else(|| serde_json::json!({})),
            })),
            methods::DISCOVER => Ok(ClientRequest::Discover),
            methods::PING => Ok(ClientRequest::Ping),
            methods::SET_LOG_LEVEL => {
                let level = params.get("level").cloned().and_then(|level| serde_json::from_value(level).ok()).map(Level);
                level.map(ClientRequest::SetLevel).ok_or_else(|| {
                    ErrorObject::invalid_params(
                        "logging/setLevel: `level` must be one of debug, info, notice, warning, error, critical, alert, emergency",
                    )
                })
            }
            methods::TOOLS_LIST => list(List::Tools),
            methods::RESOURCES_LIST => list(List::Resources),
            methods::RESOURCE_TEMPLATES_LIST => list(List::ResourceTemplates),
            methods::PROMPTS_LIST => list(List::Prompts),
            methods::TASKS_LIST => list(List::Tasks),
            methods::SKILLS_LIST => list(List::Skills),
            methods::TOOLS_CALL => {
                let name = string_param(&params, "name", method)?.to_owned();
                let task = params.get("task").filter(|task| !task.is_null()).cloned();
                Ok(ClientRequest::CallTool(CallToolParams { name, task, params }))
            }
            methods::RESOURCES_READ => {
                Ok(ClientRequest::ReadResource(ReadResourceRequestParams::new(string_param(&params, "uri", method)?)))
            }
            methods::RESOURCES_SUBSCRIBE => {
                Ok(ClientRequest::Subscribe(SubscribeRequestParams::new(string_param(&params, "uri", method)?)))
            }
            methods::RESOURCES_UNSUBSCRIBE => {
                Ok(ClientRequest::Unsubscribe(UnsubscribeRequestParams::new(string_param(&params, "uri", method)?)))
            }
            methods::PROMPTS_GET => {
                let prompt = GetPromptRequestParams::new(string_param(&params, "name", method)?);
                Ok(ClientRequest::GetPrompt(match optional_object(&params, "arguments", method)? {
                    Some(arguments) => prompt.with_arguments(arguments),
                    None => prompt,
                }))
            }
            methods::COMPLETE => complete(&params).map(ClientRequest::Complete),
            methods::SUBSCRIPTIONS_LISTEN => Filter::parse(&params).map(ClientRequest::Listen),
            methods::TASKS_GET => task(TaskMethod::Get),
            methods::TASKS_RESULT => task(TaskMethod::Result),
            methods::TASKS_CANCEL => task(TaskMethod::Cancel),
            methods::SKILLS_GET => Ok(ClientRequest::SkillsGet { uri: string_param(&params, "uri", method)?.to_owned() }),
            _ => Ok(ClientRequest::Other { method: method.to_owned(), params }),
        }
    }

    /// The method's name.
    pub fn method(&self) -> &str {
        match self {
            ClientRequest::Initialize(_) => methods::INITIALIZE,
            ClientRequest::Discover => methods::DISCOVER,
            ClientRequest::Ping => methods::PING,
            ClientRequest::SetLevel(_) => methods::SET_LOG_LEVEL,
            ClientRequest::List(list, _) => list.method(),
            ClientRequest::CallTool(_) => methods::TOOLS_CALL,
            ClientRequest::ReadResource(_) => methods::RESOURCES_READ,
            ClientRequest::Subscribe(_) => methods::RESOURCES_SUBSCRIBE,
            ClientRequest::Unsubscribe(_) => methods::RESOURCES_UNSUBSCRIBE,
            ClientRequest::GetPrompt(_) => methods::PROMPTS_GET,
            ClientRequest::Complete(_) => methods::COMPLETE,
            ClientRequest::Listen(_) => methods::SUBSCRIPTIONS_LISTEN,
            ClientRequest::Task(task) => task.kind.method(),
            ClientRequest::SkillsGet { .. } => methods::SKILLS_GET,
            ClientRequest::Other { method, .. } => method,
        }
    }

    /// What the request is about, for a span's name: the tool or prompt
    /// called, the resource read or (un)subscribed.
    pub fn target(&self) -> Option<&str> {
        match self {
            ClientRequest::CallTool(call) => Some(&call.name),
            ClientRequest::GetPrompt(prompt) => Some(&prompt.name),
            ClientRequest::ReadResource(read) => Some(&read.uri),
            ClientRequest::Subscribe(subscribe) => Some(&subscribe.uri),
            ClientRequest::Unsubscribe(unsubscribe) => Some(&unsubscribe.uri),
            _ => None,
        }
    }
}

/// The level of `logging/setLevel`: rmcp's, which marks it deprecated
/// (SEP-2577) while the legacy era still has the method, so the one
/// `allow` is here.
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(deprecated)]
pub struct Level(LoggingLevel);

#[allow(deprecated)]
impl Level {
    /// The level as the wire spells it.
    pub fn name(self) -> &'static str {
        match self.0 {
            LoggingLevel::Debug => "debug",
            LoggingLevel::Info => "info",
            LoggingLevel::Notice => "notice",
            LoggingLevel::Warning => "warning",
            LoggingLevel::Error => "error",
            LoggingLevel::Critical => "critical",
            LoggingLevel::Alert => "alert",
            LoggingLevel::Emergency => "emergency",
        }
    }
}

/// The string `params[key]` of a `method` request, or the -32602 that
/// names the method, the key and what was there instead.
pub fn string_param<'a>(params: &'a Value, key: &str, method: &str) -> Result<&'a str, ErrorObject> {
    match params.get(key) {
        Some(Value::String(value)) => Ok(value),
        Some(other) => Err(ErrorObject::invalid_params(format!("{method}: `{key}` must be a string, not {}", json_kind(other)))),
        None => Err(ErrorObject::invalid_params(format!("{method}: `{key}` must be a string, and is missing"))),
    }
}

/// The object `params[key]`, if any (absent or `null`: none).
fn optional_object(params: &Value, key: &str, method: &str) -> Result<Option<JsonObject>, ErrorObject> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map.clone())),
        Some(other) => Err(ErrorObject::invalid_params(format!("{method}: `{key}` must be an object, not {}", json_kind(other)))),
    }
}

/// A list's `cursor` (absent or `null`: the first page). One that is no
/// string is refused as the pager refuses any cursor it never gave.
fn paginated(method: &str, params: &Value) -> Result<PaginatedRequestParams, ErrorObject> {
    let cursor = match params.get("cursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(cursor)) => Some(cursor.clone()),
        Some(other) => return Err(super::paging::unknown_cursor(method, other)),
    };
    Ok(PaginatedRequestParams::default().with_cursor(cursor))
}

fn task_id(method: &str, params: &Value) -> Result<String, ErrorObject> {
    let id = params.get("taskId").and_then(Value::as_str).map(str::to_owned);
    id.ok_or_else(|| ErrorObject::invalid_params(format!("{method}: `taskId` must be a string")))
}

/// `completion/complete`: a prompt or resource-template reference, the
/// argument being completed and the arguments resolved before it (a
/// context whose arguments are not all strings is no context).
fn complete(params: &Value) -> Result<CompleteRequestParams, ErrorObject> {
    let reference = params.get("ref").unwrap_or(&Value::Null);
    let wrong_ref =
        || ErrorObject::invalid_params("completion/complete: `ref` must be {type: ref/prompt, name} or {type: ref/resource, uri}");
    let reference = match reference.get("type").and_then(Value::as_str) {
        Some("ref/prompt") => Reference::for_prompt(string_param(reference, "name", "completion/complete ref")?),
        Some("ref/resource") => Reference::for_resource(string_param(reference, "uri", "completion/complete ref")?),
        _ => return Err(wrong_ref()),
    };
    let argument: ArgumentInfo = serde_json::from_value(params.get("argument").cloned().unwrap_or(Value::Null))
        .map_err(|e| ErrorObject::invalid_params(format!("completion/complete: `argument` must be {{name, value}}: {e}")))?;
    let context = params.pointer("/context/arguments").and_then(Value::as_object).map(|arguments| {
        let strings = arguments.iter().filter_map(|(name, value)| Some((name.clone(), value.as_str()?.to_owned())));
        CompletionContext::with_arguments(strings.collect())
    });
    let complete = CompleteRequestParams::new(reference, argument);
    Ok(match context {
        Some(context) => complete.with_context(context),
        None => complete,
    })
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
