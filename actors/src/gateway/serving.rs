//! A gateway session as a handler of the one server side
//! ([`crate::server::dispatch`]): the dispatcher answers the lifecycle,
//! `ping`, the paging and what is not offered, as it does for every server
//! this crate serves; what the session offers runs as one future per
//! request ([`Work`]) over the pool ([`Pool`]), where its policy filters
//! and checks.
//!
//! What stays with the session, before the dispatcher (it needs the
//! session's own state): `initialize` records the client's capabilities, a
//! `subscriptions/listen` opens a stream, and a 2026-07-28 call that may ask
//! its client parks on `input_required` ([`crate::server::input`]).

use std::future::Future;
use std::sync::{Arc, OnceLock};

use futures::future::{FutureExt, LocalBoxFuture};
use rmcp::model::{CompleteRequestParams, GetPromptRequestParams, ReadResourceRequestParams};
use serde_json::Value;

use super::work::{Answered, Pool, PAGE_SIZE};
use crate::protocol::{methods, ErrorObject};
use crate::server::dispatch::{Dispatched, Listed, Request, ServerHandler};
use crate::server::era::{Eras, Served};
use crate::server::lifecycle::{self, ServerInfo};
use crate::server::outbox::Outbox;
use crate::server::paging::Pager;
use crate::server::request::{CallToolParams, ClientRequest, Level, List};
use crate::server::{tasks, SERVER_NAME};

/// One request's work past the dispatcher; dropping it (cancellation, the
/// client gone) drops its upstream request, which cancels it upstream.
pub(super) type Work = LocalBoxFuture<'static, Result<Answered, ErrorObject>>;

/// The session serving one request: its pool, the stream its progress
/// goes to, and where a tool call puts the server it goes to (before it is
/// sent: that server's requests during it go to this request's stream).
pub(super) struct Serving<'a> {
    pub pool: &'a Pool,
    pub stream: &'a Outbox,
    pub server: &'a Arc<OnceLock<String>>,
}

impl Serving<'_> {
    /// Work answering JSON, on its own clone of the pool.
    fn later<F: Future<Output = Result<Value, ErrorObject>> + 'static>(&self, work: impl FnOnce(Pool) -> F) -> Dispatched<Work> {
        Dispatched::Work(work(self.pool.clone()).map(|answer| answer.map(Answered::Json)).boxed_local())
    }
}

impl ServerHandler for Serving<'_> {
    type Era = Served;
    type Work = Work;

    fn info(&self) -> ServerInfo {
        server_info()
    }

    /// Declared whole, whatever the pool offers now: servers come and go while a session lasts (restarts,
    /// `SIGHUP`), and a session's capabilities cannot change after `initialize`. Tasks are a legacy-era feature.
    fn capabilities(&self, legacy: bool) -> Value {
        lifecycle::capabilities(legacy)
    }

    /// Both eras, per request; `server/discover` is not to be cached (the pool changes).
    fn eras(&self) -> Eras {
        Eras::Dual
    }

    fn page_size(&self) -> usize {
        PAGE_SIZE
    }

    /// Every method in either era (a lenient gateway), but the skills extension.
    fn offers(&self, method: &str, _era: &Served) -> bool {
        !matches!(method, methods::SKILLS_LIST | methods::SKILLS_GET)
    }

    fn set_level(&self, level: Level, _era: &Served) -> Dispatched<Work> {
        self.later(|pool| async move { pool.set_level(level).await })
    }

    fn list(&self, list: List, pager: Pager, _era: &Served) -> Listed<Work> {
        match list {
            List::Tasks => Listed::Items(self.pool.options.tasks.list(Some(&*self.pool.caller))),
            List::Skills => Listed::NotOffered, // not offered: see `offers`
            list => {
                let pool = self.pool.clone();
                Listed::Later(async move { pool.list(list, pager).await.map(Answered::Json) }.boxed_local())
            }
        }
    }

    /// A task-augmented call (legacy era; the modern one has no such tasks and answers when done) is answered
    /// with its task as soon as the task starts; any other runs upstream. Both start in the work, where the
    /// request's span is current (the upstream call, even a task's, is its child).
    fn call_tool(&self, call: CallToolParams, era: &Served) -> Dispatched<Work> {
        if call.task.is_some() && !era.is_modern() {
            return self.later(|pool| async move { pool.call_as_task(call) });
        }
        let (pool, stream, server) = (self.pool.clone(), self.stream.clone(), self.server.clone());
        Dispatched::Work(async move { pool.call(call, &stream, &server).await }.boxed_local())
    }

    fn read_resource(&self, params: ReadResourceRequestParams, _era: &Served) -> Dispatched<Work> {
        self.later(|pool| async move { pool.read(params.uri).await })
    }

    fn get_prompt(&self, params: GetPromptRequestParams, _era: &Served) -> Dispatched<Work> {
        self.later(|pool| async move { pool.prompt(params).await })
    }

    fn complete(&self, params: CompleteRequestParams, _era: &Served) -> Dispatched<Work> {
        self.later(|pool| async move { pool.complete(params).await })
    }

    /// Subscriptions and tasks in either era, and `logging/setLevel` in the modern one too (fanned out to
    /// every server, as in the legacy era).
    fn other(&self, request: Request<'_, Served>) -> Dispatched<Work> {
        match request.call {
            ClientRequest::Subscribe(params) => self.later(|pool| async move { pool.subscription(true, params.uri).await }),
            ClientRequest::Unsubscribe(params) => self.later(|pool| async move { pool.subscription(false, params.uri).await }),
            ClientRequest::Task(task) => self.later(|pool| async move { tasks::answer(&pool.options.tasks, &task, &pool.caller).await }),
            ClientRequest::SetLevel(level) => self.set_level(level, &request.era),
            call => Dispatched::not_found(call.method(), ""),
        }
    }
}

/// Who the gateway says it is.
pub(super) fn server_info() -> ServerInfo {
    ServerInfo { name: SERVER_NAME.into(), title: None, instructions: Some(INSTRUCTIONS) }
}

const INSTRUCTIONS: &str = "mcpvisor serves many MCP servers as one: tools and prompts are named {server}__{name}; \
     the resource mcpvisor://status shows every server's state.";
