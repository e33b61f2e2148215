//! The server: shared state, its methods behind [`crate::server::dispatch`], running requests that
//! take time in their own tasks, cancellation and what was received.

use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CompleteRequestParams, GetPromptRequestParams, ReadResourceRequestParams};
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::catalog::{parse_call, ToolCall};
use super::era::{Era, RequestEra};
use super::interaction::{Outgoing, RequestStates};
use super::logging::Level;
use super::rpc::{classify, notification_frame, response_frame, text_result, ErrorObject, Message, Out, METHOD_NOT_FOUND};
use super::state::{InFlight, State};
use super::{completion, lifecycle, lock, log, prompts, resources, skills, tools, DemoServerOptions};
use crate::protocol::methods;
use crate::server::dispatch::{dispatch, parse, Dispatched, Listed, Request, ServerHandler};
use crate::server::lifecycle::{DiscoverCache, ServerInfo};
use crate::server::paging::Pager;
use crate::server::request::{CallToolParams, ClientRequest, Level as RequestLevel, List, TaskMethod};
use crate::server::subscriptions::Subscriptions;
use crate::task_store::{self as tasks, requested_ttl, Outcome, TaskStore};

/// What the demo runs past the dispatcher.
pub enum Work {
    /// Run in its own task, cancellable, and answer when it ends.
    Spawn(Job),
    /// A listen stream is open: no answer until it ends.
    Open,
}

pub enum Job {
    /// A checked call, with the params it came with (`_meta`, MRTR retries).
    Tool(ToolCall, Value),
    TaskResult(String, watch::Receiver<Outcome>),
}

pub struct Server {
    pub(super) state: Arc<State>,
}

impl Server {
    pub fn new(options: DemoServerOptions, out: Out) -> Self {
        let state = State {
            options,
            out,
            in_flight: Mutex::default(),
            next_seq: AtomicU64::new(0),
            received: Mutex::default(),
            pause_reading: Mutex::default(),
            added: Mutex::default(),
            counter: AtomicU64::new(0),
            log_level: Mutex::new(Level::DEBUG),
            subscriptions: Subscriptions::default(),
            outgoing: Outgoing::default(),
            request_states: RequestStates::default(),
            tasks: TaskStore::default(),
        };
        Server { state: Arc::new(state) }
    }

    pub fn handle_line(&self, line: &[u8]) {
        if line.trim_ascii().is_empty() {
            return;
        }
        let message = match serde_json::from_slice::<Value>(line) {
            Ok(message) => message,
            Err(e) => {
                let preview: String = String::from_utf8_lossy(line).chars().take(120).collect();
                return log(format_args!("ignoring a line that is not JSON ({e}): {}", preview.trim_end()));
            }
        };
        match classify(message) {
            Message::Request { id, method, params } => self.handle_request(id, method, params),
            Message::Notification { method, params } => {
                *lock(&self.state.received).notifications.entry(method.clone()).or_default() += 1;
                if method == "notifications/cancelled" {
                    self.cancel(&params);
                }
            }
            Message::Response { id, outcome } => {
                if !self.state.outgoing.deliver(&id, outcome) {
                    log(format_args!("ignoring a response to no pending request (id {id})"));
                }
            }
            Message::Invalid(why) => log(format_args!("ignoring a message: {why}")),
        }
    }

    /// How long to stop reading input, if `pause_reading` asked for it.
    pub fn take_pause(&self) -> Option<Duration> {
        lock(&self.state.pause_reading).take()
    }

    fn handle_request(&self, id: Value, method: String, params: Value) {
        let options = &self.state.options;
        if let Some(path) = &options.request_log {
            log_request(path, &method, &params);
        }
        if options.no_initialize && (method == "initialize" || (method == "server/discover" && options.era != Era::Legacy)) {
            return log(format_args!("not answering `{method}` (--no-initialize)"));
        }
        let era = match super::era::of_request(options.era, &method, &params) {
            Ok(era) => era,
            Err(e) => return self.state.send(response_frame(&id, Err(e))),
        };
        if method == methods::INITIALIZE {
            lock(&self.state.received).initialize_requests += 1;
        }
        let call = match parse(self, &method, params, &era) {
            Ok(call) => call,
            Err(e) => return self.state.send(response_frame(&id, Err(e))),
        };
        match dispatch(self, Request { id: &id, call, era }) {
            Dispatched::Answer(result) => self.state.send(response_frame(&id, result.map(|r| era.finish(&method, r)))),
            Dispatched::Work(Work::Spawn(job)) => self.spawn(id, era, method, job),
            Dispatched::Work(Work::Open) => {}
        }
    }

    /// `tools/call`: checks the call and its task augmentation (2025-11-25, legacy only).
    fn tool_call(&self, era: RequestEra, request: CallToolParams) -> Dispatched<Work> {
        let call = match parse_call(&request.name, request.arguments(), &lock(&self.state.added).tools) {
            Ok(call) => call,
            Err(e) => return Dispatched::Answer(Err(e)),
        };
        let refuse = |message: String| Dispatched::Answer(Err(ErrorObject::new(METHOD_NOT_FOUND, message)));
        match (&call, &request.task, era.is_legacy()) {
            (ToolCall::SlowTask(_), Some(task), true) => Dispatched::Answer(self.start_task(call.clone(), task)),
            (ToolCall::SlowTask(_), None, true) => {
                refuse("tool `slow_task` must be invoked as a task: `params.task` is required (execution.taskSupport \"required\")".into())
            }
            (ToolCall::SlowTask(_), _, false) => refuse("tool `slow_task` needs 2025-11-25 tasks, which only legacy sessions have".into()),
            (_, Some(_), true) => {
                refuse(format!("tool `{}` cannot be invoked as a task (execution.taskSupport \"forbidden\")", request.name))
            }
            (ToolCall::PauseReading(ms), None, _) => {
                *lock(&self.state.pause_reading) = Some(Duration::from_millis(*ms));
                Dispatched::Answer(Ok(text_result(format!("reading no input for {ms} ms"))))
            }
            _ => Dispatched::Work(Work::Spawn(Job::Tool(call, request.params))),
        }
    }

    /// Creates a task running `call`; answers the `CreateTaskResult` at once.
    fn start_task(&self, call: ToolCall, task: &Value) -> Result<Value, ErrorObject> {
        let (id, created) = self.state.tasks.create(requested_ttl(task)?, None)?;
        let (state, task_id) = (Arc::clone(&self.state), id.clone());
        let work = tokio::spawn(async move {
            let result = tools::execute(call, &state, RequestEra::Legacy, &Value::Null).await;
            state.tasks.end(&task_id, Ok(result.unwrap_or_else(|e| text_result(e.message))));
        });
        self.state.tasks.set_abort(&id, work.abort_handle());
        Ok(created)
    }

    fn spawn(&self, id: Value, era: RequestEra, method: String, job: Job) {
        let key = id.to_string();
        let seq = self.state.next_seq.fetch_add(1, Ordering::Relaxed);
        let field = |name| match &job {
            Job::Tool(_, params) => params.get(name).cloned().unwrap_or(Value::Null),
            Job::TaskResult(..) => Value::Null,
        };
        let (tool, arguments) = (field("name"), field("arguments"));
        let state = Arc::clone(&self.state);
        // Registered under the lock before the task can finish and look for its entry.
        let mut in_flight = lock(&self.state.in_flight);
        let task_key = key.clone();
        let task = tokio::spawn(async move {
            let result = match job {
                Job::Tool(call, params) => tools::execute(call, &state, era, &params).await,
                Job::TaskResult(task, outcome) => tasks::result(task, outcome).await,
            };
            let mut in_flight = lock(&state.in_flight);
            if in_flight.get(&task_key).is_some_and(|entry| entry.seq == seq) {
                in_flight.remove(&task_key);
                state.send(response_frame(&id, result.map(|r| era.finish(&method, r))));
            }
        });
        in_flight.insert(key, InFlight { seq, tool, arguments, abort: task.abort_handle() });
    }

    /// Records a cancellation and stops the request (or listen stream) if still open;
    /// it then never answers.
    fn cancel(&self, params: &Value) {
        let Some(request_id) = params.get("requestId") else {
            return log("ignoring notifications/cancelled without `requestId`");
        };
        let entry = lock(&self.state.in_flight).remove(&request_id.to_string());
        match &entry {
            Some(entry) => entry.abort.abort(),
            None => {
                self.state.subscriptions.end(request_id);
            }
        }
        let (tool, arguments) = entry.map_or((Value::Null, Value::Null), |e| (e.tool, e.arguments));
        let record = json!({
            "requestId": request_id,
            "reason": params.get("reason").cloned().unwrap_or(Value::Null),
            "tool": tool,
            "arguments": arguments,
        });
        lock(&self.state.received).cancellations.push(record);
    }

    /// Drops the running requests and lets the writer flush what is already answered (boundedly).
    pub async fn shutdown(self, writer: JoinHandle<()>) {
        for (_, request) in lock(&self.state.in_flight).drain() {
            request.abort.abort();
        }
        self.state.tasks.abort_all();
        drop(self);
        let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    }
}

/// The demo's methods behind the dispatcher; a legacy-only method in the
/// modern era (and the reverse) is not offered.
impl ServerHandler for Server {
    type Era = RequestEra;
    type Work = Work;

    fn info(&self) -> ServerInfo {
        lifecycle::server_info()
    }

    fn capabilities(&self, legacy: bool) -> Value {
        lifecycle::capabilities(legacy, self.state.options.skills)
    }

    fn eras(&self) -> Era {
        self.state.options.era
    }

    fn discover_cache(&self) -> DiscoverCache {
        lifecycle::DISCOVER_CACHE
    }

    fn page_size(&self) -> usize {
        self.state.options.page_size
    }

    fn offers(&self, method: &str, era: &RequestEra) -> bool {
        let (options, legacy) = (&self.state.options, era.is_legacy());
        match method {
            methods::SET_LOG_LEVEL | methods::RESOURCES_SUBSCRIBE | methods::RESOURCES_UNSUBSCRIBE => legacy,
            methods::TASKS_GET | methods::TASKS_RESULT | methods::TASKS_CANCEL | methods::TASKS_LIST => legacy,
            methods::SUBSCRIPTIONS_LISTEN => !legacy,
            methods::SKILLS_LIST | methods::SKILLS_GET => options.skills,
            methods::RESOURCE_TEMPLATES_LIST => !options.no_templates,
            _ => true,
        }
    }

    fn set_level(&self, level: RequestLevel, _era: &RequestEra) -> Dispatched<Work> {
        let level = Level::parse(&Value::from(level.name()));
        let level = level.ok_or_else(|| ErrorObject::invalid_params(format!("logging/setLevel: `level` must be {}", Level::expected())));
        Dispatched::Answer(level.map(|level| {
            *lock(&self.state.log_level) = level;
            json!({})
        }))
    }

    fn list(&self, list: List, _pager: Pager, era: &RequestEra) -> Listed<Work> {
        let state = &self.state;
        Listed::Items(match list {
            List::Tools => state.tools(*era),
            List::Resources => resources::list(&lock(&state.added).resources),
            List::ResourceTemplates => resources::templates(),
            List::Prompts => prompts::list(&lock(&state.added).prompts),
            List::Skills => skills::entries(),
            List::Tasks => state.tasks.list(None),
        })
    }

    fn call_tool(&self, call: CallToolParams, era: &RequestEra) -> Dispatched<Work> {
        self.tool_call(*era, call)
    }

    fn read_resource(&self, params: ReadResourceRequestParams, era: &RequestEra) -> Dispatched<Work> {
        let state = &self.state;
        if let Some(read) = skills::read(&params.uri).filter(|_| state.options.skills) {
            return Dispatched::Answer(Ok(read));
        }
        let counter = state.counter.load(Ordering::Relaxed);
        Dispatched::Answer(resources::read(&params.uri, counter, &lock(&state.added).resources, *era))
    }

    fn get_prompt(&self, params: GetPromptRequestParams, _era: &RequestEra) -> Dispatched<Work> {
        Dispatched::Answer(prompts::get(&params, &lock(&self.state.added).prompts))
    }

    fn complete(&self, params: CompleteRequestParams, _era: &RequestEra) -> Dispatched<Work> {
        Dispatched::Answer(completion::complete(&params))
    }

    /// Each offered in its era only ([`ServerHandler::offers`]).
    fn other(&self, request: Request<'_, RequestEra>) -> Dispatched<Work> {
        let state = &self.state;
        match request.call {
            ClientRequest::Subscribe(params) => {
                state.subscriptions.record(methods::RESOURCES_SUBSCRIBE, &params.uri);
                Dispatched::Answer(Ok(json!({})))
            }
            ClientRequest::Unsubscribe(params) => {
                state.subscriptions.record(methods::RESOURCES_UNSUBSCRIBE, &params.uri);
                Dispatched::Answer(Ok(json!({})))
            }
            ClientRequest::SkillsGet { uri } => Dispatched::Answer(skills::get(&uri)),
            ClientRequest::Listen(filter) => {
                let acknowledgement = state.subscriptions.open(request.id.clone(), filter, ());
                state.send(notification_frame(methods::SUBSCRIPTIONS_ACKNOWLEDGED, acknowledgement));
                Dispatched::Work(Work::Open)
            }
            ClientRequest::Task(task) => match task.kind {
                TaskMethod::Result => match state.tasks.watch(&task.task_id, None) {
                    Ok((task, outcome)) => Dispatched::Work(Work::Spawn(Job::TaskResult(task, outcome))),
                    Err(e) => Dispatched::Answer(Err(e)),
                },
                kind => Dispatched::Answer(state.tasks.get_or_cancel(kind.method(), &task.task_id, None)),
            },
            call => Dispatched::not_found(call.method(), ""),
        }
    }
}

/// Appends `method` (and a call's tool name, and the W3C trace context
/// its `_meta` carries) to the `--request-log` file.
fn log_request(path: &std::path::Path, method: &str, params: &Value) {
    let tool = params.get("name").and_then(Value::as_str).filter(|_| method == "tools/call");
    let mut line = match tool {
        Some(tool) => format!("{method} {tool}"),
        None => method.to_string(),
    };
    for key in ["traceparent", "tracestate"] {
        if let Some(value) = params.pointer(&format!("/_meta/{key}")).and_then(Value::as_str) {
            line.push_str(&format!(" {key}={value}"));
        }
    }
    line.push('\n');
    let appended = std::fs::OpenOptions::new().create(true).append(true).open(path).and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = appended {
        log(format_args!("cannot append to the request log {}: {e}", path.display()));
    }
}
