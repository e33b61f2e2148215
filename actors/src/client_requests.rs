//! Requests a server sends to its client: `roots/list`,
//! `sampling/createMessage` and `elicitation/create`.
//!
//! An embedder answers them through [`ClientHandlers`], one [`Answering`]
//! per kind, each request naming the server: an async function
//! ([`ClientHandlers::sampling_fn`] and its siblings, for any tokio program)
//! or, inside actix, an actor ([`answered_by`] turns its `Recipient` into an
//! [`Answering`]; the tokio-side types name no actix type). Without one:
//! - roots: the server's configured `roots`, else none (an empty list:
//!   a server keeps the directories it was started with; nobody invents
//!   roots from a working directory);
//! - sampling: refused with a JSON-RPC error that says how to enable it
//!   (and sampling is then not announced among the client's capabilities);
//! - elicitation: declined (a valid answer: the user said no).
//!
//! The same answers serve both eras: legacy servers send these as JSON-RPC
//! requests; modern servers ask for them inside `input_required` results.

use std::fmt;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use actix::prelude::*;
use futures::future::{BoxFuture, FutureExt};
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, JsonObject};
use serde::Serialize;
use serde_json::{json, Value};

use crate::protocol::{error_codes, methods, ErrorObject};

/// One root offered to a server.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Root {
    pub uri: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Why the client did not do what a server asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub code: i64,
    pub message: String,
}

impl Refusal {
    pub fn new(message: impl Into<String>) -> Refusal {
        Refusal { code: error_codes::INVALID_REQUEST, message: message.into() }
    }
}

/// A server asks for the client's roots.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Vec<Root>, Refusal>")]
pub struct RootsRequest {
    pub server: String,
    /// The caller whose own connection asks (`Identity::caller_key`), for a
    /// server run per caller; `None` for a connection all callers share.
    pub caller: Option<String>,
    /// The server's configured `roots` (empty when none are): what it
    /// gets by default, and from [`ClientHandlers::offered_roots_fn`].
    pub configured: Vec<Root>,
}

/// A server asks the client's model for a completion; `params` are the
/// request's `CreateMessageRequest` params, the answer a `CreateMessageResult`.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<JsonObject, Refusal>")]
pub struct SamplingRequest {
    pub server: String,
    /// The caller whose own connection asks (`Identity::caller_key`), for a
    /// server run per caller; `None` for a connection all callers share.
    pub caller: Option<String>,
    pub params: JsonObject,
}

/// A server asks the user for input (form mode) or to visit a URL (URL mode).
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<ElicitResult, Refusal>")]
pub struct ElicitationRequest {
    pub server: String,
    /// The caller whose own connection asks (`Identity::caller_key`), for a
    /// server run per caller; `None` for a connection all callers share.
    pub caller: Option<String>,
    pub request: ElicitRequestParams,
    /// Form mode: the schema's `default` of each field (SEP-1034), ready to
    /// be shown pre-filled or accepted as they are.
    pub prefilled: JsonObject,
}

/// Who answers one kind of server request: an async function
/// ([`Answering::function`]), or an actor ([`answered_by`], the actix side).
pub struct Answering<M>
where
    M: Message + Send,
    M::Result: Send,
{
    /// The answer, or `None` when whoever answers is gone (an actor whose
    /// mailbox closed answers "gone").
    answer: Arc<dyn Fn(M) -> BoxFuture<'static, Option<M::Result>> + Send + Sync>,
}

impl<M> Answering<M>
where
    M: Message + Send + 'static,
    M::Result: Send,
{
    /// Answers with `function`: `|request| async move { ... }`, run on the
    /// runtime's thread.
    pub fn function<F, Fut>(function: F) -> Self
    where
        F: Fn(M) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = M::Result> + Send + 'static,
    {
        let function = Arc::new(function);
        Answering {
            answer: Arc::new(move |request| {
                let answered = function(request);
                Box::pin(async move { Some(answered.await) })
            }),
        }
    }

    /// The answer, or `None` when the answering actor is gone.
    pub(crate) async fn ask(&self, request: M) -> Option<M::Result> {
        (self.answer)(request).await
    }
}

/// The actix side of [`Answering`]: `recipient` answers each request (its
/// mailbox must stay open: a closed one answers "gone").
pub fn answered_by<M>(recipient: Recipient<M>) -> Answering<M>
where
    M: Message + Send + 'static,
    M::Result: Send,
{
    Answering { answer: Arc::new(move |request| Box::pin(recipient.send(request).map(Result::ok))) }
}

impl<M> Clone for Answering<M>
where
    M: Message + Send,
    M::Result: Send,
{
    fn clone(&self) -> Self {
        Answering { answer: self.answer.clone() }
    }
}

/// The embedder's answerers of server-to-client requests.
#[derive(Clone, Default)]
pub struct ClientHandlers {
    pub roots: Option<Answering<RootsRequest>>,
    pub sampling: Option<Answering<SamplingRequest>>,
    pub elicitation: Option<Answering<ElicitationRequest>>,
}

impl fmt::Debug for ClientHandlers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientHandlers")
            .field("roots", &self.roots.is_some())
            .field("sampling", &self.sampling.is_some())
            .field("elicitation", &self.elicitation.is_some())
            .finish()
    }
}

impl ClientHandlers {
    /// Answers `roots/list` with `function`, e.g. `|request| async move { Ok(vec![...]) }`.
    pub fn roots_fn<F, Fut>(mut self, function: F) -> Self
    where
        F: Fn(RootsRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<Root>, Refusal>> + Send + 'static,
    {
        self.roots = Some(Answering::function(function));
        self
    }

    /// Offers the roots `function` answers to the servers with no
    /// configured `roots`; a server with configured ones gets those (the
    /// rule of every mode of the command line: configured, else the client's).
    pub fn offered_roots_fn<F, Fut>(self, function: F) -> Self
    where
        F: Fn(RootsRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<Root>, Refusal>> + Send + 'static,
    {
        let function = Arc::new(function);
        self.roots_fn(move |request| {
            let function = function.clone();
            async move {
                match request.configured.is_empty() {
                    true => function(request).await,
                    false => Ok(request.configured),
                }
            }
        })
    }

    /// Answers `sampling/createMessage` with `function` (and announces sampling).
    pub fn sampling_fn<F, Fut>(mut self, function: F) -> Self
    where
        F: Fn(SamplingRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<JsonObject, Refusal>> + Send + 'static,
    {
        self.sampling = Some(Answering::function(function));
        self
    }

    /// Answers `elicitation/create` with `function`.
    pub fn elicitation_fn<F, Fut>(mut self, function: F) -> Self
    where
        F: Fn(ElicitationRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ElicitResult, Refusal>> + Send + 'static,
    {
        self.elicitation = Some(Answering::function(function));
        self
    }

    /// The capabilities the client announces: roots and elicitation always
    /// (they have defaults), sampling only when someone can answer it.
    pub fn capabilities(&self) -> Value {
        let mut capabilities = json!({
            "roots": { "listChanged": true },
            "elicitation": { "form": {}, "url": {} },
        });
        if self.sampling.is_some() {
            capabilities["sampling"] = json!({});
        }
        capabilities
    }
}

/// What a connection needs to answer its server's requests.
#[derive(Debug, Clone)]
pub struct Answerer {
    pub server: String,
    /// The caller of a per-caller connection (see [`SamplingRequest::caller`]).
    pub caller: Option<String>,
    pub handlers: ClientHandlers,
    /// The server's configured roots, the answer without a roots handler
    /// (empty when none are configured).
    pub roots: Vec<Root>,
}

impl Answerer {
    pub fn new(server: &str, handlers: ClientHandlers, configured_roots: &[String]) -> Answerer {
        let roots = configured_roots.iter().map(|root| Root::of(root)).collect();
        Answerer { server: server.to_string(), caller: None, handlers, roots }
    }

    /// The answerer of `caller`'s own connection.
    pub fn for_caller(self, caller: Option<String>) -> Answerer {
        Answerer { caller, ..self }
    }

    /// Answers one request of the server: the result, or the error to send back.
    pub async fn answer(&self, method: &str, params: Option<Value>) -> Result<Value, ErrorObject> {
        let refused = |refusal: Refusal| ErrorObject { code: refusal.code, message: refusal.message, data: None };
        let gone =
            |what: &str| ErrorObject { code: error_codes::INTERNAL_ERROR, message: format!("the {what} handler is gone"), data: None };
        match method {
            methods::PING => Ok(json!({})),
            methods::ROOTS_LIST => {
                let roots = match &self.handlers.roots {
                    Some(handler) => {
                        let request =
                            RootsRequest { server: self.server.clone(), caller: self.caller.clone(), configured: self.roots.clone() };
                        handler.ask(request).await.ok_or_else(|| gone("roots"))?
                    }
                    None => Ok(self.roots.clone()),
                };
                roots.map(|roots| json!({ "roots": roots })).map_err(refused)
            }
            methods::SAMPLING_CREATE_MESSAGE => {
                let Some(handler) = &self.handlers.sampling else {
                    return Err(refused(Refusal::new(
                        "mcpvisor has no model to sample from: the embedding program did not set a sampling handler (ClientHandlers::sampling)",
                    )));
                };
                let params = object(params).map_err(invalid)?;
                let answer = handler
                    .ask(SamplingRequest { server: self.server.clone(), caller: self.caller.clone(), params })
                    .await
                    .ok_or_else(|| gone("sampling"))?;
                answer.map(Value::Object).map_err(refused)
            }
            methods::ELICITATION_CREATE => {
                let value = params.unwrap_or(Value::Null);
                let request: ElicitRequestParams =
                    serde_json::from_value(value.clone()).map_err(|e| invalid(format!("elicitation/create params are not valid: {e}")))?;
                let Some(handler) = &self.handlers.elicitation else {
                    return Ok(json!({ "action": "decline" }));
                };
                let prefilled = schema_defaults(&value);
                let answer = handler
                    .ask(ElicitationRequest { server: self.server.clone(), caller: self.caller.clone(), request, prefilled })
                    .await
                    .ok_or_else(|| gone("elicitation"))?;
                answer.map(|result| serde_json::to_value(result).unwrap_or(Value::Null)).map_err(refused)
            }
            other => {
                Err(ErrorObject { code: error_codes::METHOD_NOT_FOUND, message: format!("mcpvisor does not handle {other}"), data: None })
            }
        }
    }
}

/// A declined elicitation, for handlers that want to say no to some.
pub fn declined() -> ElicitResult {
    ElicitResult::new(ElicitationAction::Decline)
}

fn invalid(message: impl Into<String>) -> ErrorObject {
    ErrorObject { code: error_codes::INVALID_PARAMS, message: message.into(), data: None }
}

fn object(params: Option<Value>) -> Result<JsonObject, String> {
    match params {
        Some(Value::Object(map)) => Ok(map),
        _ => Err("params must be an object".into()),
    }
}

/// The `default` of each property of a form elicitation's `requestedSchema`.
fn schema_defaults(params: &Value) -> JsonObject {
    let properties = params.pointer("/requestedSchema/properties").and_then(Value::as_object);
    properties.into_iter().flatten().filter_map(|(name, schema)| Some((name.clone(), schema.get("default")?.clone()))).collect()
}

impl Root {
    /// A configured root: a URI as it is, a path (made absolute) as a `file://` URI.
    pub fn of(root: &str) -> Root {
        let uri = if root.contains("://") { root.to_string() } else { format!("file://{}", absolute(root)) };
        let name = uri.rsplit('/').find(|part| !part.is_empty()).map(str::to_string);
        Root { uri, name }
    }
}

fn absolute(path: &str) -> String {
    let path = Path::new(path);
    if path.is_absolute() {
        return path.to_string_lossy().into_owned();
    }
    std::env::current_dir().map(|dir| dir.join(path).to_string_lossy().into_owned()).unwrap_or_else(|_| path.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(answer: Result<Value, ErrorObject>) -> Vec<String> {
        let answer = answer.unwrap();
        answer["roots"].as_array().unwrap().iter().map(|root| root["uri"].as_str().unwrap().to_string()).collect()
    }

    #[actix_rt::test]
    async fn roots_are_the_configured_ones_else_none_never_the_working_directory() {
        let configured = Answerer::new("s", ClientHandlers::default(), &["/data".into(), "https://x/y".into()]);
        assert_eq!(
            configured.roots,
            vec![
                Root { uri: "file:///data".into(), name: Some("data".into()) },
                Root { uri: "https://x/y".into(), name: Some("y".into()) },
            ]
        );
        let unconfigured = Answerer::new("s", ClientHandlers::default(), &[]);
        assert_eq!(listed(unconfigured.answer(methods::ROOTS_LIST, None).await), Vec::<String>::new());
    }

    #[actix_rt::test]
    async fn an_embedders_roots_win_and_offered_roots_yield_to_configured_ones() {
        let own = ClientHandlers::default().roots_fn(|request| async move {
            assert_eq!(request.configured, vec![Root::of("/data")], "the handler is told what is configured");
            Ok(vec![Root::of("/embedder")])
        });
        let answerer = Answerer::new("s", own, &["/data".into()]);
        assert_eq!(listed(answerer.answer(methods::ROOTS_LIST, None).await), ["file:///embedder"]);
        let offered = ClientHandlers::default().offered_roots_fn(|_| async { Ok(vec![Root::of("/workspace")]) });
        let configured = Answerer::new("s", offered.clone(), &["/data".into()]);
        assert_eq!(listed(configured.answer(methods::ROOTS_LIST, None).await), ["file:///data"]);
        let unconfigured = Answerer::new("s", offered, &[]);
        assert_eq!(listed(unconfigured.answer(methods::ROOTS_LIST, None).await), ["file:///workspace"]);
    }

    #[test]
    fn form_defaults_are_prefilled() {
        let params = json!({"mode": "form", "message": "m", "requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string", "default": "Ada"}, "age": {"type": "integer"}, "ok": {"type": "boolean", "default": true}}}});
        let defaults = schema_defaults(&params);
        assert_eq!(Value::Object(defaults), json!({"name": "Ada", "ok": true}));
    }

    #[actix_rt::test]
    async fn without_handlers_sampling_is_refused_and_elicitation_declined() {
        let answerer = Answerer::new("s", ClientHandlers::default(), &["/r".into()]);
        let refusal = answerer.answer(methods::SAMPLING_CREATE_MESSAGE, Some(json!({"messages": []}))).await.unwrap_err();
        assert!(refusal.message.contains("sampling handler"), "{refusal:?}");
        let form = json!({"mode": "form", "message": "Name?", "requestedSchema": {"type": "object", "properties": {}}});
        assert_eq!(answerer.answer(methods::ELICITATION_CREATE, Some(form)).await, Ok(json!({"action": "decline"})));
        let roots = answerer.answer(methods::ROOTS_LIST, None).await.unwrap();
        assert_eq!(roots, json!({"roots": [{"uri": "file:///r", "name": "r"}]}));
        assert_eq!(answerer.answer("x/y", None).await.unwrap_err().code, error_codes::METHOD_NOT_FOUND);
        assert!(!ClientHandlers::default().capabilities().as_object().unwrap().contains_key("sampling"));
    }
}
