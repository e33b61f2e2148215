//! The server: shared state, routing of every request, running requests that
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
use super::rpc::{classify, response_frame, text_result, ErrorObject, Message, Out, METHOD_NOT_FOUND};
use super::state::{InFlight, State};
use super::subscriptions::Subscriptions;
use super::{completion, lifecycle, lock, log, prompts, resources, skills, tools, DemoServerOptions};
use crate::server::paging::page;
use crate::task_store::{self as tasks, requested_ttl, Outcome, TaskStore};

/// What to do with one request.
enum Action {
    Reply(Result<Value, ErrorObject>),
    /// Run in its own task, cancellable, and answer when it ends.
    Spawn(Job),
    /// A listen stream is open: no answer until it ends.
    Open,
}

enum Job {
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
        match self.route(era, &id, &method, &params) {
            Action::Reply(result) => self.state.send(response_frame(&id, result.map(|r| era.finish(&method, r)))),
            Action::Spawn(job) => self.spawn(id, era, method, params, job),
            Action::Open => {}
        }
    }

    fn route(&self, era: RequestEra, id: &Value, method: &str, params: &Value) -> Action {
        let state = &self.state;
        let (options, legacy) = (&state.options, era.is_legacy());
        let list = |key: &str, items: Vec<Value>| Action::Reply(page(method, key, items, params, options.page_size));
        match method {
            "initialize" => {
                lock(&state.received).initialize_requests += 1;
                Action::Reply(Ok(skills::announce(lifecycle::initialize(params), options.skills)))
            }
            "server/discover" if options.era != Era::Legacy => {
                Action::Reply(Ok(skills::announce(lifecycle::discover(options.era), options.skills)))
            }
            "ping" => Action::Reply(Ok(json!({}))),
            "logging/setLevel" if legacy => Action::Reply(self.set_level(params)),
            "tools/list" => list("tools", state.tools(era)),
            "tools/call" => self.tool_call(era, params),
            "prompts/list" => list("prompts", prompts::list(&lock(&state.added).prompts)),
            "prompts/get" => Action::Reply(prompts::get(params, &lock(&state.added).prompts)),
            "resources/list" => list("resources", resources::list(&lock(&state.added).resources)),
            "resources/templates/list" if !options.no_templates => list("resourceTemplates", resources::templates()),
            "resources/read" => {
                if let Some(read) = skills::read(params).filter(|_| options.skills) {
                    return Action::Reply(Ok(read));
                }
                let counter = state.counter.load(Ordering::Relaxed);
                Action::Reply(resources::read(params, counter, &lock(&state.added).resources, era))
            }
            "resources/subscribe" | "resources/unsubscribe" if legacy => Action::Reply(state.subscriptions.legacy(method, params)),
            "completion/complete" => Action::Reply(completion::complete(params)),
            "skills/list" if options.skills => list("skills", skills::entries()),
            "skills/get" if options.skills => Action::Reply(skills::get(params)),
            "subscriptions/listen" if !legacy => match state.subscriptions.listen(id, params) {
                Ok(acknowledgement) => {
                    state.send(acknowledgement);
                    Action::Open
                }
                Err(e) => Action::Reply(Err(e)),
            },
            "tasks/get" | "tasks/cancel" if legacy => Action::Reply(state.tasks.get_or_cancel(method, params, None)),
            "tasks/list" if legacy => list("tasks", state.tasks.list(None)),
            "tasks/result" if legacy => match state.tasks.watch(params, None) {
                Ok((task, outcome)) => Action::Spawn(Job::TaskResult(task, outcome)),
                Err(e) => Action::Reply(Err(e)),
            },
            _ => Action::Reply(Err(ErrorObject::method_not_found(method, ""))),
        }
    }

    fn set_level(&self, params: &Value) -> Result<Value, ErrorObject> {
        let level = params.get("level").and_then(Level::parse);
        let level = level.ok_or_else(|| ErrorObject::invalid_params(format!("logging/setLevel: `level` must be {}", Level::expected())))?;
        *lock(&self.state.log_level) = level;
        Ok(json!({}))
    }

    /// `tools/call`: checks the call and its task augmentation (2025-11-25, legacy only).
    fn tool_call(&self, era: RequestEra, params: &Value) -> Action {
        let call = match parse_call(params, &lock(&self.state.added).tools) {
            Ok(call) => call,
            Err(e) => return Action::Reply(Err(e)),
        };
        let refuse = |message: String| Action::Reply(Err(ErrorObject::new(METHOD_NOT_FOUND, message)));
        let task = params.get("task").filter(|t| !t.is_null());
        match (&call, task, era.is_legacy()) {
            (ToolCall::SlowTask(_), Some(task), true) => Action::Reply(self.start_task(call.clone(), task)),
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
                Action::Reply(Ok(text_result(format!("reading no input for {ms} ms"))))
            }
            _ => Action::Spawn(Job::Tool(call)),
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

/// Appends `method` (and a call's tool name) to the `--request-log` file.
fn log_request(path: &std::path::Path, method: &str, params: &Value) {
    let tool = params.get("name").and_then(Value::as_str).filter(|_| method == "tools/call");
    let line = match tool {
        Some(tool) => format!("{method} {tool}\n"),
        None => format!("{method}\n"),
    };
    let appended = std::fs::OpenOptions::new().create(true).append(true).open(path).and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = appended {
        log(format_args!("cannot append to the request log {}: {e}", path.display()));
    }
}
