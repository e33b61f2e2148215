//! Callers' requests: admission (in flight, queued or refused), time-outs
//! pushed out by progress, cancellation, and tool calls checked against
//! their schemas.

use super::*;
use crate::protocol::schema::check_output;

impl Connection {
    /// Admits a caller's request (see the module invariants): written now
    /// when a slot is free, else queued, else refused with `Overloaded`.
    fn admit<P: Serialize>(
        &mut self,
        label: &str,
        method: &str,
        params: &P,
        progress: Option<ProgressSink>,
        trace: Option<opentelemetry::Context>,
        ctx: &mut Context<Self>,
    ) -> Result<Admitted, CallError> {
        // The names are copied only into a refusal.
        let names = || (self.config.name.clone(), label.to_string());
        match &self.state {
            _ if self.phase == Phase::Stopping => {
                let (server, tool) = names();
                return Err(CallError::Stopped { server, tool });
            }
            _ if !self.enabled => {
                let (server, tool) = names();
                return Err(CallError::Disabled { server, tool });
            }
            ServerState::Failed { error, cause, .. } => {
                let (server, tool) = names();
                return Err(CallError::Failed { server, tool, error: error.clone(), cause: cause.clone() });
            }
            ServerState::NeedsAuth => {
                let (server, tool) = names();
                return Err(CallError::NeedsAuth { server, tool });
            }
            _ => {}
        }
        let tool = (method == crate::protocol::methods::TOOLS_CALL).then(|| label.to_string());
        if let Some(withheld) = tool.as_deref().and_then(|tool| self.withheld(tool)) {
            return Err(withheld.refusal(&self.config.name));
        }
        let send_now = !self.calls.has_queued() && self.can_send_call();
        if !send_now && self.calls.queued() >= self.config.limits.max_queued {
            let (server, tool) = names();
            return Err(CallError::Overloaded { server, tool, in_flight: self.calls.in_flight(), queued: self.calls.queued() });
        }
        let id = self.next_request_id();
        let progress = progress.map(|sink| ProgressRoute { sink, clock: ProgressClock::new() });
        let frame = self.session.request_frame(&id, method, params, progress.is_some());
        let clock = progress.as_ref().map(|route| route.clock.clone());
        let (reply, answer) = oneshot::channel();
        if send_now {
            if let Some(trace) = &trace {
                crate::telemetry::otel::queued_for(trace, Duration::ZERO);
            }
            self.put_on_wire(id.clone(), frame, Pending::new(reply, true, progress), ctx);
        } else {
            let trace = trace.map(|trace| (std::time::Instant::now(), trace));
            self.calls.enqueue(Queued { id: id.clone(), frame, reply, progress, trace, tool });
        }
        Ok(Admitted { id, answer, clock })
    }

    fn forget(&mut self, id: &RequestId, reason: &str, ctx: &mut Context<Self>) -> Whereabouts {
        if self.calls.unqueue(id) {
            return match self.run.as_ref().is_some_and(|run| run.ready) {
                true => Whereabouts::Queued,
                false => Whereabouts::WaitingForServer(self.state.clone()),
            };
        }
        let Some(pending) = self.calls.take(id) else { return Whereabouts::Gone };
        let unusable = self.calls.unusable_during(&pending);
        if let Some(run) = self.run.as_mut() {
            let before = run.outbox.len();
            run.outbox.retain(|o| o.request.as_ref() != Some(id));
            if run.outbox.len() == before {
                let params = serde_json::json!({ "requestId": id, "reason": reason });
                self.notify(methods::CANCELLED, &params, ctx);
            }
        }
        self.pump(ctx);
        Whereabouts::OnTheWire { unusable }
    }

    /// Admits a caller's request and returns its eventual raw answer; the
    /// future enforces the time-out (pushed out by progress) and cancels
    /// the request when it times out or is dropped.
    pub(super) fn caller_request<P: Serialize>(
        &mut self,
        label: String,
        method: &str,
        params: &P,
        options: RequestOptions,
        ctx: &mut Context<Self>,
    ) -> Answer {
        let RequestOptions { timeout, progress, trace } = options;
        let server = self.config.name.clone();
        let admitted = self.guarded(method, ctx, |act, ctx| act.admit(&label, method, params, progress, trace, ctx));
        let Admitted { id, answer, clock } = match admitted {
            Ok(Ok(admitted)) => admitted,
            Ok(Err(error)) => return Box::pin(std::future::ready(Err(error))),
            Err(panic) => return Box::pin(std::future::ready(Err(Failure::internal(panic).into_call_error(&server, &label)))),
        };
        let timeout = timeout.unwrap_or(self.config.timeouts.call);
        let max = self.config.timeouts.max_call;
        let mut guard = ForgetOnDrop { connection: Some(self.me(ctx)), id };
        Box::pin(async move {
            tokio::pin!(answer);
            let started = tokio::time::Instant::now();
            let outcome = loop {
                let deadline = clock.as_ref().map_or(started + timeout, |clock| clock.deadline(timeout, max));
                match tokio::time::timeout_at(deadline, &mut answer).await {
                    Ok(outcome) => {
                        guard.disarm();
                        break flatten(outcome);
                    }
                    // Progress arrived since the deadline was set: wait on.
                    Err(_) if clock.as_ref().is_some_and(|clock| clock.deadline(timeout, max) > deadline) => continue,
                    Err(_) => {
                        // The limit the caller set: the silence that ended the call.
                        let after = timeout;
                        let (server, tool) = (server, label);
                        return Err(match guard.forget("timed out").await {
                            Whereabouts::WaitingForServer(ServerState::Restarting { attempt, .. }) => {
                                CallError::Restarting { server, tool, attempt, after }
                            }
                            Whereabouts::OnTheWire { unusable } if !unusable.is_empty() => {
                                CallError::NoUsableAnswer { server, tool, after, unusable }
                            }
                            _ => CallError::Timeout { server, tool, after },
                        });
                    }
                }
            };
            outcome.map_err(|failure| failure.into_call_error(&server, &label))
        })
    }

    /// Every tool call to this connection comes through here (from the
    /// Registry's routing or sent directly): the one place where rate limits
    /// apply and where each call is counted, timed and audited
    /// ([`crate::telemetry`]), whatever its outcome (`cancelled` when its
    /// caller goes away first).
    /// Here too the secrets in its arguments and its result are screened
    /// ([`crate::integrity::secrets`]), whatever front the call came from.
    fn guarded_call(&mut self, mut call: CallTool, ctx: &mut Context<Self>) -> Reply<Result<CallToolResult, CallError>> {
        let mut watch = self.watch(&call);
        if let Some(span) = watch.span() {
            call.trace = Some(span.clone());
        }
        if let Err(refused) = self.screen.arguments(&mut call.arguments, &mut watch) {
            let refused = Err(refused);
            watch.finish(&refused);
            return Reply::Ready(refused);
        }
        let screen = self.screen.clone();
        match self.limited_call(call, ctx) {
            Reply::Ready(result) => {
                let result = screen.result(result, &mut watch);
                watch.finish(&result);
                Reply::Ready(result)
            }
            Reply::Later(answer) => Reply::later(async move {
                let result = screen.result(answer.await, &mut watch);
                watch.finish(&result);
                result
            }),
        }
    }

    /// Starts counting (and auditing) a call.
    fn watch(&mut self, call: &CallTool) -> CallWatch {
        let server = &self.config.name;
        let stats = match self.tool_stats.get(&call.name) {
            Some(stats) => stats.clone(),
            None => {
                let stats = self.telemetry.metrics().tool(server, &call.name);
                self.tool_stats.insert(call.name.clone(), stats.clone());
                stats
            }
        };
        self.telemetry.watch(CallStart {
            server,
            tool: &call.name,
            caller: call.caller.as_deref(),
            identity: call.identity.as_deref(),
            upstream: call.upstream.as_deref(),
            arguments: call.arguments.as_ref(),
            redactor: &self.redactor,
            stats,
            era: self.session.era().as_str(),
            parent: call.trace.as_ref(),
        })
    }

    /// A call whose tool or server has rate limits waits for its permit
    /// off the actor, then comes back as [`Permitted`] with the rest of its
    /// time-out; the permit is held until the answer is in.
    fn limited_call(&mut self, call: CallTool, ctx: &mut Context<Self>) -> Reply<Result<CallToolResult, CallError>> {
        if !self.limiter.limits(&call.name) {
            return self.admitted_call(call, ctx);
        }
        let timeout = call.timeout.unwrap_or(self.config.timeouts.call);
        let admit = self.limiter.admit(&call.name, timeout);
        let connection = self.me(ctx);
        let (server, tool) = (self.config.name.clone(), call.name.clone());
        Reply::later(async move {
            let started = tokio::time::Instant::now();
            let permit = admit.await.map_err(|refusal| CallError::RateLimited {
                server: server.clone(),
                tool: tool.clone(),
                limit: refusal.limit,
                retry_after: refusal.retry_after,
            })?;
            if let Some(trace) = &call.trace {
                crate::telemetry::otel::rate_limited_for(trace, started.elapsed());
            }
            let left = timeout.saturating_sub(started.elapsed()).max(Duration::from_millis(1));
            let call = CallTool { timeout: Some(left), ..call };
            let Some(connection) = connection.upgrade() else { return Err(CallError::Stopped { server, tool }) };
            let result = connection.send(Permitted(call)).await.unwrap_or(Err(CallError::Stopped { server, tool }));
            drop(permit);
            result
        })
    }

    fn admitted_call(&mut self, call: CallTool, ctx: &mut Context<Self>) -> Reply<Result<CallToolResult, CallError>> {
        let label = call.name.clone();
        self.guarded_reply(&label, ctx, |act, ctx| act.call(call, ctx))
    }

    /// A tool call: checked against the tool's filter and `inputSchema`,
    /// sent (as a task when the tool requires it), finished when the answer
    /// needs more rounds, and its `structuredContent` checked against the
    /// tool's `outputSchema`.
    pub(super) fn call(&mut self, mut call: CallTool, ctx: &mut Context<Self>) -> Reply<Result<CallToolResult, CallError>> {
        let (server, tool) = (self.config.name.clone(), call.name.clone());
        if !self.config.tools.permits(&call.name) {
            return Reply::Ready(Err(CallError::NotPermitted { server, tool }));
        }
        if let Some(message) = call.arguments_error.take() {
            return Reply::Ready(Err(CallError::InvalidArguments { server, tool, message }));
        }
        let contract = self.contracts.get(&call.name).cloned();
        let output_schema = contract.as_ref().and_then(|contract| contract.output_schema(&mut self.schemas));
        if let Some(contract) = &contract {
            let arguments = serde_json::Value::Object(call.arguments.take().unwrap_or_default());
            if let Err(message) = contract.check_arguments_cached(&arguments, &mut self.schemas) {
                return Reply::Ready(Err(CallError::InvalidArguments { server, tool, message }));
            }
            if let serde_json::Value::Object(arguments) = arguments {
                call.arguments = Some(arguments);
            }
        }
        let timeout = call.timeout.unwrap_or(self.config.timeouts.call);
        let as_task = contract
            .as_ref()
            .is_some_and(|c| c.task_required)
            .then(|| TaskParams { ttl: self.config.timeouts.max_call.as_millis() as u64 });
        // A handshake-era server takes its level from `logging/setLevel` only.
        let level = call.log_level.filter(|_| self.session.era() == Era::Modern);
        let mut meta = level.map(|level| serde_json::json!({ crate::protocol::session::META_LOG_LEVEL: level.as_str() }));
        if let Some(trace) = call.trace.as_ref().filter(|trace| crate::telemetry::otel::has_span(trace)) {
            let meta = meta.get_or_insert_with(|| serde_json::json!({}));
            if let Some(meta) = meta.as_object_mut() {
                crate::telemetry::otel::inject_into_meta(trace, meta);
            }
        }
        let params = CallParams { name: &call.name, arguments: &call.arguments, task: as_task, meta: meta.clone() };
        let options = RequestOptions { timeout: call.timeout, progress: call.progress, trace: call.trace };
        let answer = self.caller_request(call.name.clone(), methods::TOOLS_CALL, &params, options, ctx);
        let (requester, max) = (self.requester_parts(ctx), self.config.timeouts.max_call);
        // Only a modern server may ask for input and get the request again;
        // elsewhere the arguments are not kept (a queued call holds its frame only).
        let arguments = (self.session.era() == Era::Modern).then_some(call.arguments);
        Reply::later(async move {
            let mut raw = answer.await?;
            if rounds::may_need_rounds(&raw) {
                let params = match &arguments {
                    Some(arguments) => serde_json::to_value(CallParams { name: &tool, arguments, task: as_task, meta }).unwrap_or_default(),
                    None => serde_json::Value::Null,
                };
                // Boxed: the rare multi-round path must not grow every call's future.
                let requester = requester.requester();
                let more = Box::pin(rounds::finish(&requester, methods::TOOLS_CALL, params, &tool, raw));
                raw = match tokio::time::timeout(max.max(timeout), more).await {
                    Ok(finished) => finished?,
                    Err(_) => return Err(CallError::Timeout { server, tool, after: max.max(timeout) }),
                };
            }
            let result = parse::<CallToolResult>(&raw).map_err(|message| CallError::Protocol {
                server: server.clone(),
                tool: tool.clone(),
                message,
            })?;
            if output_schema.is_some() {
                let structured = result.structured_content.as_ref();
                if let Err(problem) = check_output(output_schema.as_deref(), structured, result.is_error.unwrap_or(false)) {
                    let message = format!("its structuredContent does not match the tool's outputSchema: {problem}");
                    return Err(CallError::Protocol { server, tool, message });
                }
            }
            Ok(result)
        })
    }
}

/// What a caller's request brings besides its method and params.
#[derive(Default)]
pub(super) struct RequestOptions {
    /// Overrides the server's call time-out.
    pub(super) timeout: Option<Duration>,
    pub(super) progress: Option<ProgressSink>,
    /// The span of the call (OpenTelemetry on), told how long it was queued.
    pub(super) trace: Option<opentelemetry::Context>,
}

/// The params of `tools/call`.
#[derive(Serialize)]
struct CallParams<'a> {
    pub(super) name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) arguments: &'a Option<rmcp::model::JsonObject>,
    /// Asks for a task (2025-11-25) instead of waiting on the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) task: Option<TaskParams>,
    /// The call's own `_meta` (its log level); the session adds the era's.
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub(super) meta: Option<serde_json::Value>,
}

#[derive(Serialize, Clone, Copy)]
struct TaskParams {
    /// How long the server keeps the task, in milliseconds.
    pub(super) ttl: u64,
}

/// A caller's request, admitted: its id, its answer to come, and the
/// clock its progress notifications touch.
struct Admitted {
    pub(super) id: RequestId,
    pub(super) answer: oneshot::Receiver<Outcome>,
    pub(super) clock: Option<Arc<ProgressClock>>,
}

/// The raw answer to a caller's request, still to come.
type Answer = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Box<RawValue>, CallError>>>>;

impl Handler<Request> for Connection {
    type Result = Reply<Result<Box<RawValue>, CallError>>;

    fn handle(&mut self, request: Request, ctx: &mut Context<Self>) -> Self::Result {
        let none = serde_json::Value::Object(Default::default());
        let params = match &request.params {
            serde_json::Value::Null => &none,
            params => params,
        };
        let options = RequestOptions { timeout: request.timeout, progress: request.progress, trace: None };
        Reply::Later(self.caller_request(request.label, &request.method, params, options, ctx))
    }
}

impl Handler<CallTool> for Connection {
    type Result = Reply<Result<CallToolResult, CallError>>;

    fn handle(&mut self, call: CallTool, ctx: &mut Context<Self>) -> Self::Result {
        self.guarded_call(call, ctx)
    }
}

/// A tool call that has its rate-limit permit (held by its sender).
#[derive(Message)]
#[rtype(result = "Result<CallToolResult, CallError>")]
struct Permitted(CallTool);

impl Handler<Permitted> for Connection {
    type Result = Reply<Result<CallToolResult, CallError>>;

    fn handle(&mut self, permitted: Permitted, ctx: &mut Context<Self>) -> Self::Result {
        self.admitted_call(permitted.0, ctx)
    }
}

impl Handler<Routed> for Connection {
    type Result = ();

    fn handle(&mut self, routed: Routed, ctx: &mut Context<Self>) {
        let reply = self.guarded_call(routed.call, ctx);
        <Reply<_> as MessageResponse<Self, CallTool>>::handle(reply, ctx, routed.reply);
    }
}

/// Tells the connection to forget a call when its caller's future is
/// dropped before the answer came (the caller went away). It holds the
/// connection weakly, so a waiting call never keeps a removed server alive.
struct ForgetOnDrop {
    pub(super) connection: Option<WeakAddr<Connection>>,
    pub(super) id: RequestId,
}

impl ForgetOnDrop {
    fn disarm(&mut self) {
        self.connection = None;
    }

    async fn forget(&mut self, reason: &'static str) -> Whereabouts {
        match self.connection.take().and_then(|connection| connection.upgrade()) {
            Some(connection) => connection.send(Forget { id: self.id.clone(), reason }).await.unwrap_or(Whereabouts::Gone),
            None => Whereabouts::Gone,
        }
    }
}

impl Drop for ForgetOnDrop {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.take().and_then(|connection| connection.upgrade()) {
            connection.do_send(Forget { id: self.id.clone(), reason: "the caller went away" });
        }
    }
}

impl Handler<Forget> for Connection {
    type Result = MessageResult<Forget>;

    fn handle(&mut self, msg: Forget, ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.guarded("a cancellation", ctx, |act, ctx| act.forget(&msg.id, msg.reason, ctx)).unwrap_or(Whereabouts::Gone))
    }
}
