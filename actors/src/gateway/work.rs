//! What a [`super::GatewaySession`] does for each request the one
//! dispatcher hands its handler ([`super::serving`]): the methods, with
//! their typed params, filtered by policy and routed to the pool by
//! [`super::names`].
//!
//! Every method here runs as one future per request, beside the session's
//! mailbox; dropping it (cancellation, the client gone) drops the upstream
//! request with it, which cancels it upstream.

use std::sync::{Arc, OnceLock};

use futures::future::join_all;
use rmcp::model::{CallToolResult, CompleteRequestParams, GetPromptRequestParams, JsonObject, Reference};
use serde::{Serialize, Serializer};
use serde_json::{json, Value};

use super::ServeOptions;
use crate::gateway::names::{serves, unknown_tool, withheld_owner, Owner, Routes, RoutesCache};
use crate::handle::Handle;
use crate::identity::Identity;
use crate::operation::{Complete, GetPrompt, LogLevel, ReadResource};
use crate::policy::Kind;
use crate::protocol::{error_codes, methods, ErrorObject, RequestId};
use crate::server::era::Served;
use crate::server::errors::{rpc_error, tool_failure};
use crate::server::outbox::{Frame, Outbox};
use crate::server::paging::Pager;
use crate::server::request::{CallToolParams, Level, List};
use crate::server::subscriptions::Subscriptions;
use crate::server::{tasks, SERVER_NAME, STATUS_URI};
use crate::telemetry::audit::Refusal;
use crate::{CallTool, KeptTool, ProgressSink};

use super::logs::{self, RequestLogs, SessionLevel};

/// Items in one page of a list; `nextCursor` leads to the next.
pub const PAGE_SIZE: usize = 100;

type Answer = Result<Value, ErrorObject>;

/// A request's result before its era finishes it ([`Answered::finish`]).
/// Invariant: a tool call's result stays as the upstream connection gave
/// it until it is serialised, once, into the response frame (building it
/// into a `Value` first cost a tree of allocations per call); every other
/// result is JSON.
#[derive(Debug)]
pub enum Answered {
    Json(Value),
    Call(CallToolResult),
}

impl Answered {
    /// The result as JSON (what a parked call or a task keeps).
    pub fn into_value(self) -> Value {
        match self {
            Answered::Json(value) => value,
            Answered::Call(result) => json!(result),
        }
    }

    /// Whether the tool reported an error (`isError`).
    pub fn is_tool_error(&self) -> bool {
        match self {
            Answered::Json(value) => value.get("isError") == Some(&Value::Bool(true)),
            Answered::Call(result) => result.is_error == Some(true),
        }
    }

    /// The result `served`'s era sends for `method` ([`Served::finish`]). A
    /// call result has no field of the modern era, so a legacy one goes out
    /// as it came.
    pub fn finish(self, served: &Served, method: &str) -> Answered {
        match (self, served) {
            (Answered::Call(result), Served::Legacy) => Answered::Call(result),
            (answered, served) => Answered::Json(served.finish(method, answered.into_value())),
        }
    }
}

impl Serialize for Answered {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Answered::Json(value) => value.serialize(serializer),
            Answered::Call(result) => result.serialize(serializer),
        }
    }
}

/// A tool as the gateway lists it: under its served name, with the
/// gateway's task support; its schemas are written from their text.
struct ServedTool<'a> {
    name: &'a str,
    tool: &'a KeptTool,
}

impl Serialize for ServedTool<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut fields = self.tool.fields();
        fields.set("name", self.name.into());
        fields.set("execution", tasks::execution());
        fields.serialize(serializer)
    }
}

/// The server the gateway's own status resource belongs to, for policies.
pub const GATEWAY_SERVER: &str = crate::server::SERVER_NAME;

/// What a request's work needs of its session; cheap to clone.
#[derive(Clone)]
pub struct Pool {
    pub handle: Handle,
    pub options: Arc<ServeOptions>,
    pub routes: RoutesCache,
    /// The resource URIs this session subscribed to, and its listen streams.
    pub subscriptions: Arc<Subscriptions<RequestId, Outbox>>,
    /// The session's own outbox, for what belongs to no request.
    pub notices: Outbox,
    /// The label of the session's tool calls (the audit log's `caller`).
    pub caller: Arc<str>,
    /// The handshake-era session's log level ([`logs`]).
    pub log_level: SessionLevel,
    /// Who the session serves, when the front checked credentials.
    pub identity: Option<Arc<Identity>>,
}

impl Pool {
    /// One page of a list the pool serves (tools, prompts, resources and
    /// their templates), of what the caller may see.
    pub async fn list(&self, list: List, pager: Pager) -> Answer {
        let routes = self.routes().await;
        let (policy, identity) = (self.policy(), self.identity.as_deref());
        match list {
            List::Tools => {
                let visible = |owner: &Owner| Pool::may_list(&policy, identity, &owner.server, Kind::Tool, &owner.name);
                let listed = routes.tools.iter().filter(|(_, (owner, _))| visible(owner));
                pager.page(listed.map(|(name, (_, tool))| ServedTool { name, tool }).collect())
            }
            List::Prompts => {
                let visible = |owner: &Owner| Pool::may_list(&policy, identity, &owner.server, Kind::Prompt, &owner.name);
                let listed = routes.prompts.values().filter(|(owner, _)| visible(owner)).map(|(_, prompt)| json!(prompt));
                pager.page(listed.collect())
            }
            List::Resources => {
                let status = json!({"uri": STATUS_URI, "name": "status", "title": "mcpvisor: every server's status",
                    "mimeType": "application/json"});
                let status = self.may_read_status(&policy).then_some(status);
                let resources = routes
                    .resources
                    .iter()
                    .filter(|(uri, (server, _))| Pool::may_list(&policy, identity, server, Kind::Resource, uri))
                    .map(|(_, (_, resource))| json!(resource));
                pager.page(status.into_iter().chain(resources).collect())
            }
            List::ResourceTemplates => {
                let listed = routes
                    .templates
                    .iter()
                    .filter(|(server, template)| Pool::may_list(&policy, identity, server, Kind::Resource, &template.uri_template))
                    .map(|(_, template)| json!(template));
                pager.page(listed.collect())
            }
            List::Tasks | List::Skills => Err(ErrorObject::method_not_found(list.method(), "")),
        }
    }

    /// The current tables; newly built ones' warnings (name collisions,
    /// URI clashes) are told to the client as log messages.
    async fn routes(&self) -> Arc<Routes> {
        let fetched = self.routes.fetch(&self.handle, &self.options).await;
        if fetched.fresh {
            for warning in &fetched.routes.warnings {
                let params = json!({"level": "warning", "logger": SERVER_NAME, "data": warning});
                self.notices.offer(Frame::notification(methods::LOG_MESSAGE, &params));
            }
        }
        fetched.routes
    }

    /// Runs a task-augmented call as a task of this session ([`tasks`]).
    pub fn call_as_task(&self, mut call: CallToolParams) -> Answer {
        let task = call.task.take().unwrap_or(Value::Null);
        let pool = self.clone();
        let work = async move {
            // Its request is answered already: progress and server requests have no stream of their own.
            let (nowhere, _) = Outbox::with_capacity(1);
            pool.call(call, &nowhere, &OnceLock::new()).await.map(Answered::into_value)
        };
        // The task outlives its request, but its upstream call stays the request span's child.
        let work = crate::telemetry::otel::within(self.handle.telemetry().otel().map(|_| opentelemetry::Context::current()), work);
        tasks::start(&self.options.tasks, &self.caller, &task, work)
    }

    /// Runs a plain call upstream. Progress goes to `stream`; the server it
    /// goes to is put in `server` before it is sent.
    pub async fn call(&self, call: CallToolParams, stream: &Outbox, server: &OnceLock<String>) -> Result<Answered, ErrorObject> {
        let CallToolParams { name, mut params, .. } = call;
        let mut routes = self.routes().await;
        if !routes.tools.contains_key(&name) {
            // A server may have listed new tools since the tables were built.
            self.routes.invalidate();
            routes = self.routes().await;
        }
        let Some(owner) = routes.tools.get(&name).map(|(owner, _)| owner.clone()).or_else(|| self.routes.known_tool(&name)) else {
            let statuses = self.handle.status().await;
            if let Some(owner) = withheld_owner(&name, &statuses, &self.options) {
                if let Err(denied) = self.check_use(&owner.server, Kind::Tool, &owner.name, &name, params.get("arguments")).await {
                    return Err(self.denied_call(&owner, &params, denied));
                }
                // The connection refuses it, saying what changed (and the call is counted and audited there).
                let refused = self.handle.call_on(&owner.server, CallTool::new(owner.name.clone(), Value::Null)).await;
                return refused.map(Answered::Call).or_else(|error| self.failure(error).map(Answered::Json));
            }
            self.audit_refused(None, &name, &params, Refusal::UnknownTool, None);
            return Err(ErrorObject::invalid_params(unknown_tool(&name, &statuses, &self.options)));
        };
        if let Err(denied) = self.check_use(&owner.server, Kind::Tool, &owner.name, &name, params.get("arguments")).await {
            return Err(self.denied_call(&owner, &params, denied));
        }
        // Held until the call is answered (the caller's concurrency share).
        let _share = match self.caller_share(&owner).await {
            Ok(share) => share,
            Err(refused) => {
                self.audit_refused(Some(&owner.server), &owner.name, &params, Refusal::RateLimited, None);
                return self.failure(refused).map(Answered::Json);
            }
        };
        // Before the call: the server's requests during it go to this request's stream.
        let _ = server.set(owner.server.clone());
        // The request's span (OpenTelemetry on) is current here: the call becomes its child.
        let trace = self.handle.telemetry().otel().map(|_| opentelemetry::Context::current());
        let mut call = CallTool::new(owner.name.clone(), params.get_mut("arguments").map(Value::take).unwrap_or(Value::Null))
            .with_caller(&*self.caller)
            .with_identity(self.identity.clone())
            .with_trace(trace);
        // Not `Value::pointer`, which allocates each step of the path.
        let token = params.get("_meta").and_then(|meta| meta.get("progressToken")).cloned();
        let mut logs = RequestLogs::of(&params, &self.handle);
        // The level goes upstream in the call's own `_meta` (a 2026-07-28 server logs only for requests that ask).
        match &logs {
            Some(logs) => call = call.with_log_level(logs.level),
            None if !logs::is_modern(&params) => call = call.with_log_level(self.log_level.get()),
            None => {}
        }
        if token.is_none() && logs.is_none() {
            return self
                .handle
                .call_on(&owner.server, call)
                .await
                .map(Answered::Call)
                .or_else(|error| self.failure(error).map(Answered::Json));
        }
        let (sink, mut progress) = ProgressSink::channel();
        if token.is_some() {
            call = call.with_progress(sink);
        }
        let running = self.handle.call_on(&owner.server, call);
        tokio::pin!(running);
        let forward = |step: crate::Progress| {
            let mut params = json!({"progressToken": token, "progress": step.progress});
            if let Some(total) = step.total {
                params["total"] = json!(total);
            }
            if let Some(message) = step.message {
                params["message"] = json!(message);
            }
            // Progress is lossy: a client that does not read it loses some.
            stream.offer(Frame::notification(methods::PROGRESS, &params));
        };
        let outcome = loop {
            tokio::select! {
                biased;
                Some(step) = progress.recv() => forward(step),
                Some(event) = RequestLogs::next(&mut logs) => {
                    if let Some(message) = logs.as_ref().and_then(|logs| logs.message(&owner.server, event)) {
                        stream.offer(message);
                    }
                }
                outcome = &mut running => break outcome,
            }
        };
        // Progress and logs sent just before the answer are already here: they go out before the response.
        while let Ok(step) = progress.try_recv() {
            forward(step);
        }
        if let Some(logs) = &mut logs {
            for message in logs.drain(&owner.server) {
                stream.offer(message);
            }
        }
        outcome.map(Answered::Call).or_else(|error| self.failure(error).map(Answered::Json))
    }

    /// A failed call's answer, the servers' secrets masked (its message may quote their stderr).
    /// The caller's permit under `[serve.caller_limits]` (`None`: no such
    /// limits, or no identity), or the refusal naming the caller's limit.
    async fn caller_share(&self, owner: &Owner) -> Result<Option<crate::rate_limit::Permit>, crate::error::CallError> {
        let (Some(limits), Some(identity)) = (&self.options.caller_limits, &self.identity) else { return Ok(None) };
        match limits.admit(&identity.caller_key()).await {
            Ok(permit) => Ok(Some(permit)),
            Err(refusal) => Err(crate::error::CallError::RateLimited {
                server: owner.server.clone(),
                tool: owner.name.clone(),
                limit: refusal.limit,
                retry_after: refusal.retry_after,
            }),
        }
    }

    /// A call the policy refused, audited with its rule.
    fn denied_call(&self, owner: &Owner, params: &Value, denied: ErrorObject) -> ErrorObject {
        let rule = denied.data.as_ref().and_then(|data| data.get("policyRule")).and_then(Value::as_str);
        self.audit_refused(Some(&owner.server), &owner.name, params, Refusal::Denied, rule);
        denied
    }

    fn failure(&self, error: crate::error::CallError) -> Answer {
        match tool_failure(error) {
            Ok(mut result) => {
                self.options.redactor.json(&mut result);
                Ok(result)
            }
            Err(mut refusal) => {
                refusal.message = self.options.redactor.text(&refusal.message).into_owned();
                Err(refusal)
            }
        }
    }

    pub async fn prompt(&self, params: GetPromptRequestParams) -> Answer {
        let (name, arguments) = (params.name, params.arguments);
        let routes = self.routes().await;
        let Some((owner, _)) = routes.prompts.get(&name) else {
            return Err(ErrorObject::invalid_params(format!(
                "Unknown prompt: `{name}` is not served here; list the prompts for the names served"
            )));
        };
        let given = arguments.clone().map(Value::Object);
        self.check_use(&owner.server, Kind::Prompt, &owner.name, &name, given.as_ref()).await?;
        let get = GetPrompt { name: owner.name.clone(), arguments };
        let prompt = self.handle.as_caller(&owner.server, self.identity.as_ref(), &owner.name, get).await;
        prompt.map(|result| json!(result)).map_err(rpc_error)
    }

    pub async fn read(&self, uri: String) -> Answer {
        let uri = normal_uri(&uri, methods::RESOURCES_READ)?;
        if uri == STATUS_URI {
            self.check_use(GATEWAY_SERVER, Kind::Resource, STATUS_URI, STATUS_URI, None).await?;
            let statuses: Vec<_> = self.handle.status().await.into_iter().filter(|status| serves(&self.options, &status.name)).collect();
            // Only the servers the caller may use something of: a state and a stderr tail are that server's news.
            let names = statuses.iter().map(|status| status.name.clone()).collect();
            let heard = super::heard_by(&self.handle, &self.options, self.identity.as_deref(), names).await;
            let statuses: Vec<_> = statuses.into_iter().filter(|status| heard.contains(&status.name)).collect();
            let mut statuses = serde_json::to_value(&statuses).unwrap_or_default();
            self.options.redactor.json(&mut statuses);
            let text = serde_json::to_string_pretty(&statuses).unwrap_or_default();
            return Ok(json!({"contents": [{"uri": STATUS_URI, "mimeType": "application/json", "text": text}]}));
        }
        let server = self.resource_server(&uri).await?;
        self.check_use(&server, Kind::Resource, &uri, &uri, None).await?;
        let read = ReadResource { uri: uri.clone() };
        self.handle.as_caller(&server, self.identity.as_ref(), &uri, read).await.map(|result| json!(result)).map_err(rpc_error)
    }

    /// `resources/subscribe` (`subscribe`) or `resources/unsubscribe` of `uri`.
    pub async fn subscription(&self, subscribe: bool, uri: String) -> Answer {
        let method = if subscribe { methods::RESOURCES_SUBSCRIBE } else { methods::RESOURCES_UNSUBSCRIBE };
        let uri = normal_uri(&uri, method)?;
        if uri == STATUS_URI {
            self.check_use(GATEWAY_SERVER, Kind::Resource, STATUS_URI, STATUS_URI, None).await?;
        } else {
            let server = self.resource_server(&uri).await?;
            self.check_use(&server, Kind::Resource, &uri, &uri, None).await?;
            let outcome = match subscribe {
                true => self.handle.subscribe_resource(&server, &uri).await,
                false => self.handle.unsubscribe_resource(&server, &uri).await,
            };
            outcome.map_err(rpc_error)?;
        }
        self.subscriptions.record(method, &uri);
        Ok(json!({}))
    }

    /// Subscribes upstream to each of `uris` for a listen stream; a URI no
    /// server serves is skipped (its stream never hears of it). Subscriptions
    /// stay until the server restarts: updates nobody asked for are filtered out.
    pub async fn watch(&self, uris: Vec<String>) {
        // A URI with no one form is skipped, as one no server serves.
        let uris: Vec<String> =
            uris.iter().filter_map(|uri| crate::protocol::uri::normalize(uri).ok().map(|uri| uri.into_owned())).collect();
        for uri in uris.iter().filter(|uri| *uri != STATUS_URI) {
            if let Ok(server) = self.resource_server(uri).await {
                if self.check_use(&server, Kind::Resource, uri, uri, None).await.is_err() {
                    continue;
                }
                if let Err(error) = self.handle.subscribe_resource(&server, uri).await {
                    tracing::warn!(%server, %uri, "subscriptions/listen: {error}");
                }
            }
        }
    }

    async fn resource_server(&self, uri: &str) -> Result<String, ErrorObject> {
        let mut routes = self.routes().await;
        if routes.resource_server(uri).is_none() {
            self.routes.invalidate();
            routes = self.routes().await;
        }
        routes.resource_server(uri).map(str::to_string).ok_or_else(|| ErrorObject {
            code: error_codes::RESOURCE_NOT_FOUND,
            message: format!("Resource not found: no server lists `{uri}` or a template it fits"),
            data: Some(json!({ "uri": uri })),
        })
    }

    pub async fn complete(&self, params: CompleteRequestParams) -> Answer {
        let CompleteRequestParams { r#ref: reference, argument, context, .. } = params;
        // As the client sent them: the arguments already resolved, which are strings.
        let context = context
            .and_then(|context| context.arguments)
            .map(|arguments| arguments.into_iter().map(|(name, value)| (name, Value::String(value))).collect::<JsonObject>());
        let routes = self.routes().await;
        let (server, reference) = match reference {
            Reference::Prompt(prompt) => {
                let name = prompt.name;
                let (owner, _) = routes
                    .prompts
                    .get(&name)
                    .ok_or_else(|| ErrorObject::invalid_params(format!("completion/complete: unknown prompt `{name}`")))?;
                self.check_use(&owner.server, Kind::Prompt, &owner.name, &name, None).await?;
                (owner.server.clone(), Reference::for_prompt(owner.name.clone()))
            }
            Reference::Resource(resource) => {
                let uri = resource.uri;
                let server = routes.template_server(&uri).ok_or_else(|| {
                    ErrorObject::invalid_params(format!("completion/complete: no server has the resource template `{uri}`"))
                })?;
                self.check_use(server, Kind::Resource, &uri, &uri, None).await?;
                (server.to_string(), Reference::for_resource(uri))
            }
            _ => {
                return Err(ErrorObject::invalid_params(
                    "completion/complete: `ref` must be {type: ref/prompt, name} or {type: ref/resource, uri}",
                ))
            }
        };
        let message = Complete { reference, argument, context };
        let completion = self.handle.as_caller(&server, self.identity.as_ref(), methods::COMPLETE, message).await.map_err(rpc_error)?;
        Ok(json!({ "completion": completion }))
    }

    pub async fn set_level(&self, level: Level) -> Answer {
        let level: LogLevel = serde_json::from_value(Value::from(level.name())).map_err(|_| {
            ErrorObject::invalid_params(
                "logging/setLevel: `level` must be one of debug, info, notice, warning, error, critical, alert, emergency",
            )
        })?;
        self.log_level.set(level);
        let servers = self.served_servers().await;
        // Fanned out to every server (the handshake-era ones filter by it); one that does not log is not an error of the client's.
        join_all(servers.iter().map(|server| self.handle.set_log_level(server, level))).await;
        Ok(json!({}))
    }

    async fn served_servers(&self) -> Vec<String> {
        self.handle.status().await.into_iter().map(|status| status.name).filter(|name| serves(&self.options, name)).collect()
    }
}

/// A resource URI in its one form (`protocol::uri`), as the policy matches
/// it and the server receives it; one that has none is refused, naming why.
fn normal_uri(uri: &str, method: &str) -> Result<String, ErrorObject> {
    crate::protocol::uri::normalize(uri).map(|uri| uri.into_owned()).map_err(|why| {
        ErrorObject::invalid_params(format!("{method}: the uri `{uri}` cannot be read safely: {why}; send it in plain form"))
    })
}
