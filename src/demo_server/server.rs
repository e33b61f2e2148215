//! The server: shared state, its methods behind [`crate::server::dispatch`], running requests that
//! take time in their own tasks, cancellation and what was received.

use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
use crate::server::dispatch::{dispatch, string_param, Dispatched, Request, ServerHandler};
use crate::server::lifecycle::{DiscoverCache, ServerInfo};
use crate::server::listen::Filter;
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
    Tool(ToolCall),
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
        match dispatch(self, &Request { id: &id, method: &method, params: &params, era }) {
            Dispatched::Answer(result) => self.state.send(response_frame(&id, result.map(|r| era.finish(&method, r)))),
            Dispatched::Work(Work::Spawn(job)) => self.spawn(id, era, method, params, job),
            Dispatched::Work(Work::Open) => {}
        }
    }

    fn set_level_to(&self, params: &Value) -> Result<Value, ErrorObject> {
        let level = params.get("level").and_then(Level::parse);
        let level = level.ok_or_else(|| ErrorObject::invalid_params(format!("logging/setLevel: `level` must be {}", Level::expected())))?;
        *lock(&self.state.log_level) = level;
        Ok(json!({}))
    }

    /// `tools/call`: checks the call and its task augmentation (2025-11-25, legacy only).
    fn tool_call(&self, era: RequestEra, params: &Value) -> Dispatched<Work> {
        let call = match parse_call(params, &lock(&self.state.added).tools) {
            Ok(call) => call,
            Err(e) => return Dispatched::Answer(Err(e)),
        };
        let refuse = |message: String| Dispatched::Answer(Err(ErrorObject::new(METHOD_NOT_FOUND, message)));
        let task = params.get("task").filter(|t| !t.is_null());
        match (&call, task, era.is_legacy()) {
            (ToolCall::SlowTask(_), Some(task), true) => Dispatched::Answer(self.start_task(call.clone(), task)),
            (ToolCall::SlowTask(_), None, true) => {
                refuse("tool `slow_task` must be invoked as a task: `params.task` is required (execution.taskSupport \"required\")".into())
            }
            (ToolCall::SlowTask(_), _, false) => refuse("tool `slow_task` needs 2025-11-25 tasks, which only legacy sessions have".into()),
            (_, Some(_), true) => {
                let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
                refuse(format!("tool `{name}` cannot be invoked as a task (execution.taskSupport \"forbidden\")"))
            }
            (ToolCall::PauseReading(ms), None, _) => {
                *lock(&self.state.pause_reading) = Some(Duration::from_millis(*ms));
                Dispatched::Answer(Ok(text_result(format!("reading no input for {ms} ms"))))
            }
            _ => Dispatched::Work(Work::Spawn(Job::Tool(call))),
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

    fn spawn(&self, id: Value, era: RequestEra, method: String, params: Value, job: Job) {
        let key = id.to_string();
        let seq = self.state.next_seq.fetch_add(1, Ordering::Relaxed);
        let field = |name| if method == "tools/call" { params.get(name).cloned().unwrap_or(Value::Null) } else { Value::Null };
        let (tool, arguments) = (field("name"), field("arguments"));
        let state = Arc::clone(&self.state);
        // Registered under the lock before the task can finish and look for its entry.
        let mut in_flight = lock(&self.state.in_flight);
        let task_key = key.clone();
        let task = tokio::spawn(async move {
            let result = match job {
                Job::Tool(call) => tools::execute(call, &state, era, &params).await,
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

    fn set_level(&self, request: &Request<'_, RequestEra>) -> Result<Value, ErrorObject> {
        self.set_level_to(request.params)
    }

    fn list_tools(&self, era: &RequestEra) -> Option<Vec<Value>> {
        Some(self.state.tools(*era))
    }

    fn call_tool(&self, request: &Request<'_, RequestEra>) -> Dispatched<Work> {
        self.tool_call(request.era, request.params)
    }

    fn list_resources(&self, _era: &RequestEra) -> Option<Vec<Value>> {
        Some(resources::list(&lock(&self.state.added).resources))
    }

    fn list_resource_templates(&self, _era: &RequestEra) -> Option<Vec<Value>> {
        (!self.state.options.no_templates).then(resources::templates)
    }

    fn read_resource(&self, request: &Request<'_, RequestEra>) -> Dispatched<Work> {
        let state = &self.state;
        if let Some(read) = skills::read(request.params).filter(|_| state.options.skills) {
            return Dispatched::Answer(Ok(read));
        }
        let counter = state.counter.load(Ordering::Relaxed);
        Dispatched::Answer(resources::read(request.params, counter, &lock(&state.added).resources, request.era))
    }

    fn list_prompts(&self, _era: &RequestEra) -> Option<Vec<Value>> {
        Some(prompts::list(&lock(&self.state.added).prompts))
    }

    fn get_prompt(&self, request: &Request<'_, RequestEra>) -> Dispatched<Work> {
        Dispatched::Answer(prompts::get(request.params, &lock(&self.state.added).prompts))
    }

    fn complete(&self, request: &Request<'_, RequestEra>) -> Dispatched<Work> {
        Dispatched::Answer(completion::complete(request.params))
    }

    fn other_list(&self, request: &Request<'_, RequestEra>) -> Option<(&'static str, Vec<Value>)> {
        match request.method {
            methods::SKILLS_LIST if self.state.options.skills => Some(("skills", skills::entries())),
            methods::TASKS_LIST if request.era.is_legacy() => Some(("tasks", self.state.tasks.list(None))),
            _ => None,
        }
    }

    fn other(&self, request: &Request<'_, RequestEra>) -> Dispatched<Work> {
        let (state, method, params, legacy) = (&self.state, request.method, request.params, request.era.is_legacy());
        match method {
            methods::RESOURCES_SUBSCRIBE | methods::RESOURCES_UNSUBSCRIBE if legacy => {
                Dispatched::Answer(string_param(params, "uri", method).map(|uri| {
                    state.subscriptions.record(method, uri);
                    json!({})
                }))
            }
            methods::SKILLS_GET if state.options.skills => Dispatched::Answer(skills::get(params)),
            methods::SUBSCRIPTIONS_LISTEN if !legacy => match Filter::parse(params) {
                Ok(filter) => {
                    let acknowledgement = state.subscriptions.open(request.id.clone(), filter, ());
                    state.send(notification_frame(methods::SUBSCRIPTIONS_ACKNOWLEDGED, acknowledgement));
                    Dispatched::Work(Work::Open)
                }
                Err(e) => Dispatched::Answer(Err(e)),
            },
            methods::TASKS_GET | methods::TASKS_CANCEL if legacy => Dispatched::Answer(state.tasks.get_or_cancel(method, params, None)),
            methods::TASKS_RESULT if legacy => match state.tasks.watch(params, None) {
                Ok((task, outcome)) => Dispatched::Work(Work::Spawn(Job::TaskResult(task, outcome))),
                Err(e) => Dispatched::Answer(Err(e)),
            },
            _ => Dispatched::not_found(method, ""),
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
