//! The one dispatcher of the server side: a request, its era already
//! resolved, goes to [`dispatch`], which answers the lifecycle (`initialize`,
//! `ping`, `server/discover`, legacy `logging/setLevel`), pages every
//! `*/list` with [`super::paging`], and hands the rest to a
//! [`ServerHandler`] (in the manner of rmcp's `ServerHandler`): tools,
//! resources, prompts, completion, and whatever else the handler offers.
//!
//! Invariants: a method the handler does not offer is -32601 naming it (with
//! the handler's [`ServerHandler::not_offered`] hint); `server/discover` is
//! answered only by a server of the modern era; every list answer is one
//! page of one cursor format. What the dispatcher returns is not yet
//! finished for its era: the caller adds the modern era's fields
//! ([`super::era::Served::finish`]) when it sends the answer.
//! Notifications (`notifications/initialized`, cancellations) stay with the
//! serving loop: they are about its connection, not about a method.

use serde_json::{json, Value};

use super::era::{Eras, Served};
use super::lifecycle::{self, DiscoverCache, ServerInfo};
use super::paging;
use crate::protocol::{methods, ErrorObject};

/// How one request is served, as a handler reads it (the demo's
/// `RequestEra` keeps the request's log level besides).
pub trait ServedEra {
    fn is_legacy(&self) -> bool;
}

impl ServedEra for Served {
    fn is_legacy(&self) -> bool {
        !self.is_modern()
    }
}

/// One request, its era resolved.
pub struct Request<'a, E> {
    pub id: &'a Value,
    pub method: &'a str,
    /// `Value::Null` when the request had none.
    pub params: &'a Value,
    pub era: E,
}

/// The string `params[key]` of a `method` request, or the -32602 that
/// names the method, the key and what was there instead.
pub fn string_param<'a>(params: &'a Value, key: &str, method: &str) -> Result<&'a str, ErrorObject> {
    match params.get(key) {
        Some(Value::String(value)) => Ok(value),
        Some(other) => {
            Err(ErrorObject::invalid_params(format!("{method}: `{key}` must be a string, not {}", crate::protocol::json_kind(other))))
        }
        None => Err(ErrorObject::invalid_params(format!("{method}: `{key}` must be a string, and is missing"))),
    }
}

/// What [`dispatch`] made of a request.
#[derive(Debug)]
pub enum Dispatched<W> {
    /// Answer now.
    Answer(Result<Value, ErrorObject>),
    /// The handler's own work (a call to run, a stream kept open): the
    /// serving loop answers when it ends, if ever.
    Work(W),
}

impl<W> Dispatched<W> {
    /// Refuses `method` as not offered, with `why` (may be empty).
    pub fn not_found(method: &str, why: &str) -> Dispatched<W> {
        Dispatched::Answer(Err(ErrorObject::method_not_found(method, why)))
    }
}

/// A server behind [`dispatch`]. Every method has a default that refuses
/// (-32601), so a handler implements what it offers. A list method answers
/// the whole list (`None`: not offered); the dispatcher pages it.
pub trait ServerHandler {
    /// How one request is served, as this handler reads it.
    type Era: ServedEra;
    /// What the handler runs past the dispatcher (see [`Dispatched::Work`]).
    type Work;

    /// Who the server says it is.
    fn info(&self) -> ServerInfo;

    /// What the server offers, in `initialize` (`legacy`) or
    /// `server/discover`.
    fn capabilities(&self, legacy: bool) -> Value;

    /// The eras served: `server/discover` needs the modern one.
    fn eras(&self) -> Eras {
        Eras::Legacy
    }

    /// How long clients may keep the `server/discover` answer.
    fn discover_cache(&self) -> DiscoverCache {
        DiscoverCache::Private
    }

    /// Items per `*/list` page (unbounded: one page).
    fn page_size(&self) -> usize {
        usize::MAX
    }

    /// The hint of every -32601 (may be empty).
    fn not_offered(&self) -> &'static str {
        ""
    }

    fn initialize(&self, params: &Value) -> Value {
        lifecycle::initialize(&self.info(), params, self.capabilities(true))
    }

    fn discover(&self) -> Value {
        lifecycle::discover(&self.info(), self.eras().supported_versions(), self.capabilities(false), self.discover_cache())
    }

    /// Legacy `logging/setLevel` (the modern era sets a level per request).
    fn set_level(&self, request: &Request<'_, Self::Era>) -> Result<Value, ErrorObject> {
        Err(ErrorObject::method_not_found(request.method, self.not_offered()))
    }

    fn list_tools(&self, _era: &Self::Era) -> Option<Vec<Value>> {
        None
    }

    fn call_tool(&self, request: &Request<'_, Self::Era>) -> Dispatched<Self::Work> {
        Dispatched::not_found(request.method, self.not_offered())
    }

    fn list_resources(&self, _era: &Self::Era) -> Option<Vec<Value>> {
        None
    }

    fn list_resource_templates(&self, _era: &Self::Era) -> Option<Vec<Value>> {
        None
    }

    fn read_resource(&self, request: &Request<'_, Self::Era>) -> Dispatched<Self::Work> {
        Dispatched::not_found(request.method, self.not_offered())
    }

    fn list_prompts(&self, _era: &Self::Era) -> Option<Vec<Value>> {
        None
    }

    fn get_prompt(&self, request: &Request<'_, Self::Era>) -> Dispatched<Self::Work> {
        Dispatched::not_found(request.method, self.not_offered())
    }

    fn complete(&self, request: &Request<'_, Self::Era>) -> Dispatched<Self::Work> {
        Dispatched::not_found(request.method, self.not_offered())
    }

    /// Any other `*/list` the handler offers (`tasks/list`, `skills/list`):
    /// the key of its items and the items.
    fn other_list(&self, _request: &Request<'_, Self::Era>) -> Option<(&'static str, Vec<Value>)> {
        None
    }

    /// Any other request (subscriptions, tasks, extensions).
    fn other(&self, request: &Request<'_, Self::Era>) -> Dispatched<Self::Work> {
        Dispatched::not_found(request.method, self.not_offered())
    }
}

/// Serves `request` with `handler`: the lifecycle and paging here, the rest
/// by the handler.
pub fn dispatch<H: ServerHandler + ?Sized>(handler: &H, request: &Request<'_, H::Era>) -> Dispatched<H::Work> {
    let (method, params, legacy) = (request.method, request.params, request.era.is_legacy());
    let list = |key: &str, items: Option<Vec<Value>>| match items {
        Some(items) => Dispatched::Answer(paging::page(method, key, items, params, handler.page_size())),
        None => Dispatched::not_found(method, handler.not_offered()),
    };
    match method {
        methods::INITIALIZE => Dispatched::Answer(Ok(handler.initialize(params))),
        methods::DISCOVER if handler.eras() != Eras::Legacy => Dispatched::Answer(Ok(handler.discover())),
        methods::PING => Dispatched::Answer(Ok(json!({}))),
        methods::SET_LOG_LEVEL if legacy => Dispatched::Answer(handler.set_level(request)),
        methods::TOOLS_LIST => list("tools", handler.list_tools(&request.era)),
        methods::TOOLS_CALL => handler.call_tool(request),
        methods::RESOURCES_LIST => list("resources", handler.list_resources(&request.era)),
        methods::RESOURCE_TEMPLATES_LIST => list("resourceTemplates", handler.list_resource_templates(&request.era)),
        methods::RESOURCES_READ => handler.read_resource(request),
        methods::PROMPTS_LIST => list("prompts", handler.list_prompts(&request.era)),
        methods::PROMPTS_GET => handler.get_prompt(request),
        methods::COMPLETE => handler.complete(request),
        _ if method.ends_with("/list") => match handler.other_list(request) {
            Some((key, items)) => list(key, Some(items)),
            None => handler.other(request),
        },
        _ => handler.other(request),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::error_codes;
    use crate::protocol::session::META_PROTOCOL_VERSION;

    /// Offers three tools, pages of two, both eras; `echo/list` besides.
    struct Tools;

    impl ServerHandler for Tools {
        type Era = Served;
        type Work = String;

        fn info(&self) -> ServerInfo {
            ServerInfo { name: "tools".into(), title: None, instructions: None }
        }
        fn capabilities(&self, legacy: bool) -> Value {
            json!({ "tools": {}, "legacy": legacy })
        }
        fn eras(&self) -> Eras {
            Eras::Dual
        }
        fn page_size(&self) -> usize {
            2
        }
        fn not_offered(&self) -> &'static str {
            "tools only"
        }
        fn list_tools(&self, _era: &Served) -> Option<Vec<Value>> {
            Some(vec![json!("a"), json!("b"), json!("c")])
        }
        fn call_tool(&self, request: &Request<'_, Served>) -> Dispatched<String> {
            Dispatched::Work(request.params["name"].to_string())
        }
        fn other_list(&self, _request: &Request<'_, Served>) -> Option<(&'static str, Vec<Value>)> {
            Some(("echoes", vec![json!(1)]))
        }
    }

    fn run<H: ServerHandler<Era = Served>>(handler: &H, method: &str, params: Value) -> Dispatched<H::Work> {
        let era = Served::of(method, &params).unwrap();
        dispatch(handler, &Request { id: &json!(1), method, params: &params, era })
    }

    fn answer(dispatched: Dispatched<String>) -> Result<Value, ErrorObject> {
        match dispatched {
            Dispatched::Answer(answer) => answer,
            Dispatched::Work(work) => panic!("work {work} where an answer was expected"),
        }
    }

    #[test]
    fn the_lifecycle_is_answered_from_the_handlers_info_and_capabilities() {
        let initialized = answer(run(&Tools, "initialize", json!({"protocolVersion": "2025-06-18"}))).unwrap();
        assert_eq!((initialized["protocolVersion"].as_str(), &initialized["capabilities"]["legacy"]), (Some("2025-06-18"), &json!(true)));
        let discovered = answer(run(&Tools, "server/discover", json!({}))).unwrap();
        assert_eq!((&discovered["serverInfo"]["name"], &discovered["capabilities"]["legacy"]), (&json!("tools"), &json!(false)));
        assert_eq!(answer(run(&Tools, "ping", Value::Null)).unwrap(), json!({}));
    }

    #[test]
    fn lists_are_paged_and_calls_go_to_the_handler() {
        let first = answer(run(&Tools, "tools/list", Value::Null)).unwrap();
        assert_eq!(first, json!({"tools": ["a", "b"], "nextCursor": "page:2"}));
        let last = answer(run(&Tools, "tools/list", json!({"cursor": "page:2"}))).unwrap();
        assert_eq!(last, json!({"tools": ["c"]}));
        assert_eq!(answer(run(&Tools, "echo/list", Value::Null)).unwrap(), json!({"echoes": [1]}));
        assert!(matches!(run(&Tools, "tools/call", json!({"name": "a"})), Dispatched::Work(name) if name == "\"a\""));
    }

    #[test]
    fn what_the_handler_does_not_offer_is_method_not_found_with_its_hint() {
        let modern = json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28"}});
        for (method, params) in
            [("prompts/list", Value::Null), ("resources/read", json!({"uri": "x"})), ("logging/setLevel", modern), ("x/y", Value::Null)]
        {
            let refused = answer(run(&Tools, method, params)).unwrap_err();
            assert_eq!(refused.code, error_codes::METHOD_NOT_FOUND, "{method}");
            assert_eq!(refused.message, format!("Method not found: {method} (tools only)"));
        }
    }

    #[test]
    fn a_legacy_only_server_does_not_answer_discover() {
        struct Legacy;
        impl ServerHandler for Legacy {
            type Era = Served;
            type Work = String;
            fn info(&self) -> ServerInfo {
                ServerInfo { name: "legacy".into(), title: None, instructions: None }
            }
            fn capabilities(&self, _legacy: bool) -> Value {
                json!({})
            }
        }
        let refused = answer(run(&Legacy, "server/discover", json!({}))).unwrap_err();
        assert_eq!(refused.code, error_codes::METHOD_NOT_FOUND);
        assert_eq!(answer(run(&Legacy, "tools/list", Value::Null)).unwrap_err().code, error_codes::METHOD_NOT_FOUND);
    }
}
