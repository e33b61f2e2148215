//! The one dispatcher of the server side: a request, parsed once
//! ([`super::request::ClientRequest`]) and its era resolved, goes to
//! [`dispatch`], which answers the lifecycle (`initialize`,
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

use rmcp::model::{CompleteRequestParams, GetPromptRequestParams, ReadResourceRequestParams};
use serde_json::{json, Value};

use super::era::{Eras, Served};
use super::lifecycle::{self, DiscoverCache, ServerInfo};
use super::paging::Pager;
use super::request::{CallToolParams, ClientRequest, Initialize, Level, List};
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

/// One request, parsed ([`ClientRequest::parse`]), its era resolved.
pub struct Request<'a, E> {
    pub id: &'a Value,
    pub call: ClientRequest,
    pub era: E,
}

/// What [`dispatch`] made of a request.
#[derive(Debug)]
pub enum Dispatched<W> {
    /// Answer now.
    Answer(Result<Value, ErrorObject>),
    /// The handler's own work (a call to run, a stream kept open, an
    /// answer that waits on something): the serving loop answers when it
    /// ends, if ever.
    Work(W),
}

impl<W> Dispatched<W> {
    /// Refuses `method` as not offered, with `why` (may be empty).
    pub fn not_found(method: &str, why: &str) -> Dispatched<W> {
        Dispatched::Answer(Err(ErrorObject::method_not_found(method, why)))
    }
}

/// What a handler has of one list.
#[derive(Debug)]
pub enum Listed<W> {
    /// The whole list, now: the dispatcher pages it.
    Items(Vec<Value>),
    /// Work that gathers the list and answers the [`Pager`]'s page of it.
    Later(W),
    NotOffered,
}

/// A server behind [`dispatch`]. Every method has a default that refuses
/// (-32601), so a handler implements what it offers. Each takes its
/// request's typed params and era; a request of no method of its own
/// (subscriptions, tasks, listen streams, extensions) goes to
/// [`ServerHandler::other`] whole.
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

    /// Whether `method` is offered in this era, past the lifecycle: one
    /// that is not is -32601 whatever its params ([`parse`]). The default
    /// offers every method, and each refuses by its default below.
    fn offers(&self, _method: &str, _era: &Self::Era) -> bool {
        true
    }

    fn initialize(&self, params: &Initialize) -> Value {
        lifecycle::initialize(&self.info(), params.protocol_version.as_deref(), self.capabilities(true))
    }

    fn discover(&self) -> Value {
        lifecycle::discover(&self.info(), self.eras().supported_versions(), self.capabilities(false), self.discover_cache())
    }

    /// Legacy `logging/setLevel` (the modern era sets a level per request).
    fn set_level(&self, _level: Level, _era: &Self::Era) -> Dispatched<Self::Work> {
        Dispatched::not_found(methods::SET_LOG_LEVEL, self.not_offered())
    }

    /// One of the lists; `pager` is the page asked for, its cursor checked.
    fn list(&self, _list: List, _pager: Pager, _era: &Self::Era) -> Listed<Self::Work> {
        Listed::NotOffered
    }

    fn call_tool(&self, _call: CallToolParams, _era: &Self::Era) -> Dispatched<Self::Work> {
        Dispatched::not_found(methods::TOOLS_CALL, self.not_offered())
    }

    fn read_resource(&self, _params: ReadResourceRequestParams, _era: &Self::Era) -> Dispatched<Self::Work> {
        Dispatched::not_found(methods::RESOURCES_READ, self.not_offered())
    }

    fn get_prompt(&self, _params: GetPromptRequestParams, _era: &Self::Era) -> Dispatched<Self::Work> {
        Dispatched::not_found(methods::PROMPTS_GET, self.not_offered())
    }

    fn complete(&self, _params: CompleteRequestParams, _era: &Self::Era) -> Dispatched<Self::Work> {
        Dispatched::not_found(methods::COMPLETE, self.not_offered())
    }

    /// Any other request (subscriptions, tasks, listen streams, skills,
    /// extensions, and a method served in another era only).
    fn other(&self, request: Request<'_, Self::Era>) -> Dispatched<Self::Work> {
        Dispatched::not_found(request.call.method(), self.not_offered())
    }
}

/// Parses `method` with its `params` ([`ClientRequest::parse`]) for
/// `handler`: bad params of a method it offers are -32602, of one it does
/// not offer in this era ([`ServerHandler::offers`]) -32601, as whatever
/// else it does not offer.
pub fn parse<H: ServerHandler + ?Sized>(handler: &H, method: &str, params: Value, era: &H::Era) -> Result<ClientRequest, ErrorObject> {
    ClientRequest::parse(method, params).map_err(|invalid| match handler.offers(method, era) {
        true => invalid,
        false => ErrorObject::method_not_found(method, handler.not_offered()),
    })
}

/// Serves `request` with `handler`: the lifecycle, what is not offered and
/// paging here, the rest by the handler.
pub fn dispatch<H: ServerHandler + ?Sized>(handler: &H, request: Request<'_, H::Era>) -> Dispatched<H::Work> {
    let Request { id, call, era } = request;
    match &call {
        ClientRequest::Initialize(params) => return Dispatched::Answer(Ok(handler.initialize(params))),
        ClientRequest::Discover if handler.eras() != Eras::Legacy => return Dispatched::Answer(Ok(handler.discover())),
        ClientRequest::Ping => return Dispatched::Answer(Ok(json!({}))),
        _ => {}
    }
    if !handler.offers(call.method(), &era) {
        return Dispatched::not_found(call.method(), handler.not_offered());
    }
    match call {
        ClientRequest::SetLevel(level) if era.is_legacy() => handler.set_level(level, &era),
        ClientRequest::List(list, params) => {
            let pager = match Pager::new(list.method(), list.key(), params.cursor.as_deref(), handler.page_size()) {
                Ok(pager) => pager,
                Err(refusal) => return Dispatched::Answer(Err(refusal)),
            };
            match handler.list(list, pager, &era) {
                Listed::Items(items) => Dispatched::Answer(pager.page(items)),
                Listed::Later(work) => Dispatched::Work(work),
                Listed::NotOffered => Dispatched::not_found(list.method(), handler.not_offered()),
            }
        }
        ClientRequest::CallTool(call) => handler.call_tool(call, &era),
        ClientRequest::ReadResource(params) => handler.read_resource(params, &era),
        ClientRequest::GetPrompt(params) => handler.get_prompt(params, &era),
        ClientRequest::Complete(params) => handler.complete(params, &era),
        call => handler.other(Request { id, call, era }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::error_codes;
    use crate::protocol::session::META_PROTOCOL_VERSION;

    /// Offers three tools, pages of two, both eras; `skills/list` besides.
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
        fn offers(&self, method: &str, _era: &Served) -> bool {
            !method.starts_with("resources/")
        }
        fn list(&self, list: List, pager: Pager, _era: &Served) -> Listed<String> {
            match list {
                List::Tools => Listed::Items(vec![json!("a"), json!("b"), json!("c")]),
                List::Skills => Listed::Later(format!("{pager:?}")),
                _ => Listed::NotOffered,
            }
        }
        fn call_tool(&self, call: CallToolParams, _era: &Served) -> Dispatched<String> {
            Dispatched::Work(call.name)
        }
    }

    fn run<H: ServerHandler<Era = Served>>(handler: &H, method: &str, params: Value) -> Dispatched<H::Work> {
        let era = Served::of(method, &params).unwrap();
        match parse(handler, method, params, &era) {
            Ok(call) => dispatch(handler, Request { id: &json!(1), call, era }),
            Err(refusal) => Dispatched::Answer(Err(refusal)),
        }
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
        assert!(matches!(run(&Tools, "tools/call", json!({"name": "a"})), Dispatched::Work(name) if name == "a"));
    }

    #[test]
    fn a_list_gathered_later_gets_its_checked_page_and_a_bad_cursor_is_refused_first() {
        let later = run(&Tools, "skills/list", json!({"cursor": "page:4"}));
        let expected = format!("{:?}", Pager::new("skills/list", "skills", Some("page:4"), 2).unwrap());
        assert!(matches!(later, Dispatched::Work(pager) if pager == expected));
        let refused = answer(run(&Tools, "skills/list", json!({"cursor": "page:3"}))).unwrap_err();
        assert_eq!((refused.code, refused.message.starts_with("skills/list: unknown cursor")), (error_codes::INVALID_PARAMS, true));
    }

    #[test]
    fn what_the_handler_does_not_offer_is_method_not_found_with_its_hint() {
        let modern = json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28"}, "level": "info"});
        for (method, params) in [
            ("prompts/list", Value::Null),
            ("resources/read", json!({"uri": "x"})),
            ("resources/read", json!({"uri": 5})),
            ("logging/setLevel", modern),
            ("logging/setLevel", json!({"level": "info"})),
            ("x/y", Value::Null),
            ("echo/list", Value::Null),
        ] {
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
