//! The wire: writing frames through the bounded outbox, and reading what
//! the server sends (answers, its own requests, notifications, stderr).

use super::*;

impl Connection {
    /// Sends an internal request (not counted against `max_in_flight`).
    pub(super) fn request<P: Serialize>(&mut self, method: &str, params: &P, ctx: &mut Context<Self>) -> oneshot::Receiver<Outcome> {
        self.request_with_id(method, params, ctx).1
    }

    /// An internal request, framed for the agreed era; returns its id too.
    pub(super) fn request_with_id<P: Serialize>(
        &mut self,
        method: &str,
        params: &P,
        ctx: &mut Context<Self>,
    ) -> (RequestId, oneshot::Receiver<Outcome>) {
        let id = self.next_request_id();
        let (reply, answer) = oneshot::channel();
        let frame = self.session.request_frame(&id, method, params, false);
        self.put_on_wire(id.clone(), frame, Pending::new(reply, false, None), ctx);
        (id, answer)
    }

    pub(super) fn notify<P: Serialize>(&mut self, method: &str, params: &P, ctx: &mut Context<Self>) {
        self.push_control(protocol::notification_frame(method, params), ctx);
    }

    pub(super) fn put_on_wire(&mut self, id: RequestId, frame: Vec<u8>, pending: Pending, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_mut() else {
            let _ = pending.reply.send(Err(Failure::Stopped));
            return;
        };
        run.outbox.push_back(Outbound { request: Some(id.clone()), bytes: frame });
        self.calls.insert(id, pending);
        self.flush(ctx);
    }

    fn push_control(&mut self, bytes: Vec<u8>, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_mut() else { return };
        if run.control_frames >= MAX_CONTROL_FRAMES {
            tracing::warn!(server = %self.config.name, "the server is not reading its input; a control message was dropped");
            return;
        }
        run.control_frames += 1;
        run.outbox.push_back(Outbound { request: None, bytes });
        self.flush(ctx);
    }

    /// Starts writing the outbox unless a write is already under way.
    fn flush(&mut self, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_mut() else { return };
        if run.outbox.is_empty() || !run.process.can_write() {
            return;
        }
        let Some(mut stdin) = run.process.take_input() else { return };
        let batch = if run.outbox.len() == 1 {
            run.outbox.pop_front().map(|o| o.bytes).unwrap_or_default()
        } else {
            let mut batch = Vec::with_capacity(run.outbox.iter().map(|o| o.bytes.len()).sum());
            run.outbox.drain(..).for_each(|o| batch.extend_from_slice(&o.bytes));
            batch
        };
        run.control_frames = 0;
        let generation = run.generation;
        let write = async move {
            let result = stdin.write_all(&batch).await;
            (stdin, result)
        };
        self.after(write, "a finished write", ctx, move |act, (stdin, result), ctx| {
            let name = act.config.name.clone();
            let Some(run) = act.current_run(generation) else { return };
            match result {
                Ok(()) => {
                    if run.process.return_input(stdin) {
                        act.flush(ctx);
                    }
                }
                // The exit path reports what happened to the process.
                Err(e) => tracing::debug!(server = %name, "writing to the server failed: {e}"),
            }
        });
    }

    /// Moves waiting calls onto the wire while there are free slots.
    pub(super) fn pump(&mut self, ctx: &mut Context<Self>) {
        while self.can_send_call() {
            let Some(call) = self.calls.next_queued() else { break };
            if let Some(withheld) = call.tool.as_deref().and_then(|tool| self.withheld(tool)) {
                let _ = call.reply.send(Err(Failure::Withheld(Box::new(withheld.refusal(&self.config.name)))));
                continue;
            }
            if let Some((queued_at, trace)) = &call.trace {
                crate::telemetry::otel::queued_for(trace, queued_at.elapsed());
            }
            self.put_on_wire(call.id, call.frame, Pending::new(call.reply, true, call.progress), ctx);
        }
    }

    pub(super) fn can_send_call(&self) -> bool {
        self.run.as_ref().is_some_and(|run| run.ready) && self.calls.in_flight() < self.config.limits.max_in_flight
    }

    fn on_frame(&mut self, frame: Frame, ctx: &mut Context<Self>) {
        match frame {
            Ok(RpcMessage::Response { id: Some(id), outcome }) => self.on_response(id, outcome.map_err(Failure::Rpc), ctx),
            Ok(RpcMessage::Response { id: None, outcome }) => self.on_unreadable_report(outcome, ctx),
            Ok(RpcMessage::Request { id, method, params }) => self.on_server_request(id, method, params, ctx),
            Ok(RpcMessage::Notification { method, params }) => self.on_notification(&method, params, ctx),
            Err(noise) if noise.is_noise() => tracing::trace!(server = %self.name(), "{noise}"),
            Err(bad) => self.on_bad_line(bad, ctx),
        }
    }

    pub(super) fn on_response(&mut self, id: RequestId, outcome: Outcome, ctx: &mut Context<Self>) {
        let Some(pending) = self.calls.take(&id) else {
            return self.on_unknown_id(id, outcome, ctx);
        };
        let _ = pending.reply.send(outcome);
        if pending.counted {
            self.pump(ctx);
        }
    }

    /// Answers a request of the server: `ping` at once, the others through
    /// the embedder's handlers or their defaults (see [`Answerer`]).
    fn on_server_request(&mut self, id: RequestId, method: String, params: Option<Box<RawValue>>, ctx: &mut Context<Self>) {
        if method == methods::PING {
            return self.push_control(protocol::response_frame(&id, Ok(&serde_json::json!({}))), ctx);
        }
        let answerer = self.answerer.clone();
        let params = params.and_then(|raw| serde_json::from_str(raw.get()).ok());
        let generation = self.generation;
        let answer = async move { answerer.answer(&method, params).await };
        self.after(answer, "the answer to a server's request", ctx, move |act, outcome, ctx| {
            if act.current_run(generation).is_none() {
                return;
            }
            let frame = match &outcome {
                Ok(result) => protocol::response_frame(&id, Ok(result)),
                Err(error) => protocol::response_frame::<()>(&id, Err(error)),
            };
            act.push_control(frame, ctx);
        });
    }

    fn on_notification(&mut self, method: &str, params: Option<Box<RawValue>>, ctx: &mut Context<Self>) {
        let params: serde_json::Value = params.and_then(|raw| serde_json::from_str(raw.get()).ok()).unwrap_or_default();
        let server = self.config.name.clone();
        match method {
            methods::PROGRESS => self.on_progress(&params),
            methods::TOOLS_LIST_CHANGED => {
                if self.run.as_ref().is_some_and(|run| run.ready) {
                    // Before anything the server sends after it (a call's answer) reaches its caller.
                    self.registry.do_send_stale(server);
                    self.list(Listing::Tools, ctx);
                }
            }
            methods::RESOURCES_LIST_CHANGED | methods::PROMPTS_LIST_CHANGED => {
                let what = if method == methods::RESOURCES_LIST_CHANGED { Listing::Resources } else { Listing::Prompts };
                if self.run.as_ref().is_some_and(|run| run.ready) {
                    self.list(what, ctx);
                }
                self.events.do_send(Event::ListChanged { server, list: what.capability().into() });
            }
            methods::RESOURCE_UPDATED => {
                let uri = params.get("uri").and_then(|u| u.as_str()).unwrap_or_default().to_string();
                self.events.do_send(Event::ResourceUpdated { server, uri });
            }
            methods::LOG_MESSAGE => {
                let level = params.get("level").and_then(|l| l.as_str()).unwrap_or("info").to_string();
                let logger = params.get("logger").and_then(|l| l.as_str()).map(str::to_string);
                let data = params.get("data").cloned().unwrap_or_default();
                log_server_message(&server, &level, logger.as_deref(), &data);
                self.events.do_send(Event::Log { server, level, logger, data });
            }
            methods::CANCELLED => tracing::debug!(server = %server, "the server cancelled one of its requests: {params}"),
            _ => tracing::debug!(server = %server, method, "notification ignored"),
        }
    }

    /// Routes a progress notification to its request's sink (token = request id).
    fn on_progress(&mut self, params: &serde_json::Value) {
        let token = params.get("progressToken").cloned().and_then(|t| serde_json::from_value::<RequestId>(t).ok());
        let Some(route) = token.and_then(|id| self.calls.get(&id)).and_then(|p| p.progress.as_ref()) else {
            tracing::debug!(server = %self.config.name, "progress for no running request: {params}");
            return;
        };
        route.clock.touch();
        route.sink.send(Progress {
            server: self.config.name.clone(),
            progress: params.get("progress").and_then(|p| p.as_f64()).unwrap_or_default(),
            total: params.get("total").and_then(|t| t.as_f64()),
            message: params.get("message").and_then(|m| m.as_str()).map(str::to_string),
        });
    }

    fn on_stderr_line(&mut self, line: String) {
        #[cfg(feature = "fault-injection")]
        assert!(!line.contains(super::guard::PANIC_ON_STDERR_LINE), "injected fault in a stderr line");
        let line = self.redactor.text(&line).into_owned();
        tracing::info!(target: "mcpvisor::server", server = %self.config.name, "{line}");
        if self.stderr_tail.len() == STDERR_TAIL_LINES {
            self.stderr_tail.pop_front();
        }
        self.stderr_tail.push_back(line);
    }
}

/// Logs a server's `notifications/message` at the matching `tracing` level.
fn log_server_message(server: &str, level: &str, logger: Option<&str>, data: &serde_json::Value) {
    let logger = logger.unwrap_or("-");
    match level {
        "debug" => tracing::debug!(target: "mcpvisor::server", server, logger, "{data}"),
        "info" | "notice" => tracing::info!(target: "mcpvisor::server", server, logger, "{data}"),
        "warning" => tracing::warn!(target: "mcpvisor::server", server, logger, "{data}"),
        _ => tracing::error!(target: "mcpvisor::server", server, logger, level, "{data}"),
    }
}

impl StreamHandler<Result<Frame, std::io::Error>> for Connection {
    fn handle(&mut self, item: Result<Frame, std::io::Error>, ctx: &mut Context<Self>) {
        match item {
            Ok(frame) => {
                let _ = self.guarded("a message from the server", ctx, |act, ctx| act.on_frame(frame, ctx));
            }
            Err(e) => tracing::warn!(server = %self.config.name, "reading stdout failed: {e}"),
        }
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        let _ = self.guarded("the end of stdout", ctx, |act, ctx| act.on_stdout_closed(ctx));
    }
}

impl StreamHandler<Result<String, std::io::Error>> for Connection {
    fn handle(&mut self, item: Result<String, std::io::Error>, ctx: &mut Context<Self>) {
        if let Ok(line) = item {
            let _ = self.guarded("a stderr line", ctx, |act, _| act.on_stderr_line(line));
        }
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        let _ = self.guarded("the end of stderr", ctx, |act, ctx| {
            let Some(run) = act.run.as_mut() else { return };
            run.stderr_open = false;
            let generation = run.generation;
            act.finish_run_if_drained(generation, ctx);
        });
    }
}
