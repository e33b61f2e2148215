//! One run of the server process, from spawn to the end: the start-up
//! time-out, the exit and the draining of its output, and what comes next
//! (a restart through the Supervisor, or giving up).

use super::*;

pub(super) struct Outbound {
    /// The request this frame carries, `None` for control frames.
    pub(super) request: Option<RequestId>,
    pub(super) bytes: Vec<u8>,
}

/// One run of the server process.
pub(super) struct Run {
    pub(super) generation: u64,
    pub(super) process: Process,
    /// The open `subscriptions/listen` request of a modern server.
    pub(super) listen: Option<RequestId>,
    pub(super) outbox: VecDeque<Outbound>,
    pub(super) control_frames: usize,
    pub(super) started_at: Instant,
    pub(super) ready: bool,
    /// The start-up time-out, cancelled once ready: actix polls every
    /// future of a context on each wake-up, so none may linger.
    pub(super) startup_timer: Option<SpawnHandle>,
    pub(super) stdout_open: bool,
    pub(super) stderr_open: bool,
    pub(super) exit: Option<ExitInfo>,
    /// The state of each kind of listing, by [`Listing`].
    pub(super) listings: [ListingState; 3],
    /// The id of the `server/discover` request while the era is being found.
    pub(super) probing: Option<RequestId>,
    /// The era is agreed (`initialize` or `server/discover` answered).
    pub(super) negotiated: bool,
    /// `server/discover`s sent again after an `UnsupportedProtocolVersion`.
    pub(super) version_retries: u8,
}

impl Connection {
    pub(super) fn current_run(&mut self, generation: u64) -> Option<&mut Run> {
        self.run.as_mut().filter(|run| run.generation == generation)
    }

    pub(super) fn start_process(&mut self, ctx: &mut Context<Self>) {
        if self.phase == Phase::Stopping || self.run.is_some() || !self.registered {
            return;
        }
        let generation = self.generation + 1;
        let process = match Process::start(&self.config, &self.parts, generation, ctx) {
            Ok(process) => process,
            Err(error) => {
                // A missing command does not appear by restarting: fail now.
                tracing::error!(server = %self.name(), "{error}");
                self.give_up(error.to_string(), Some(Cause::new(error)), ctx);
                return;
            }
        };
        self.generation = generation;
        tracing::info!(server = %self.name(), pid = process.pid(), transport = self.config.transport.as_str(), "started {}", self.config.command);
        self.run = Some(Run {
            generation,
            process,
            outbox: VecDeque::new(),
            control_frames: 0,
            started_at: Instant::now(),
            ready: false,
            startup_timer: None,
            stdout_open: true,
            stderr_open: true,
            exit: None,
            listings: Default::default(),
            probing: None,
            listen: None,
            negotiated: false,
            version_retries: 0,
        });
        self.run_error = None;
        let startup_timer = self.later(self.config.timeouts.startup, "the start-up time-out", ctx, move |act, _| {
            if act.current_run(generation).is_some_and(|run| !run.ready) {
                let error = act.startup_timed_out();
                act.abort_run(error, Ending::Failure);
            }
        });
        if let Some(run) = self.run.as_mut() {
            run.startup_timer = Some(startup_timer);
        }
        self.negotiate(generation, ctx);
    }

    /// Why the start-up did not finish in time, naming the step that was
    /// running: the handshake, or the listing pages still unanswered.
    fn startup_timed_out(&self) -> ConnectError {
        let (server, after) = (self.config.name.clone(), self.config.timeouts.startup);
        let Some(run) = self.run.as_ref() else {
            return ConnectError::HandshakeTimeout { server, method: methods::INITIALIZE.into(), after };
        };
        if !run.negotiated {
            // Under `auto`, the discover probe is part of the `initialize` handshake.
            let method = if self.config.era == ConfiguredEra::Modern { methods::DISCOVER } else { methods::INITIALIZE };
            return ConnectError::HandshakeTimeout { server, method: method.into(), after };
        }
        let steps: Vec<String> = [Listing::Tools, Listing::Resources, Listing::Prompts]
            .into_iter()
            .filter(|what| run.listings[*what as usize].running)
            .map(|what| format!("{} page {}", what.method(), run.listings[what as usize].page))
            .collect();
        let step = match steps.is_empty() {
            true => "the listing".to_string(),
            false => steps.join(" and "),
        };
        ConnectError::StartupTimeout { server, step, after }
    }

    /// Ends the current run because of `error`: the process group is killed
    /// and the exit path decides what comes next.
    pub(super) fn abort_run(&mut self, error: ConnectError, ending: Ending) {
        tracing::warn!(server = %self.config.name, "{error}");
        if let Some(run) = self.run.as_ref() {
            run.process.kill();
        }
        self.run_error = Some((error, ending));
    }

    pub(super) fn on_exit(&mut self, generation: u64, exit: ExitInfo, ctx: &mut Context<Self>) {
        let Some(run) = self.current_run(generation) else { return };
        run.exit = Some(exit);
        self.later(DRAIN_AFTER_EXIT, "the end of a run", ctx, move |act, ctx| act.finish_run(generation, ctx));
        self.finish_run_if_drained(generation, ctx);
    }

    pub(super) fn on_stdout_closed(&mut self, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_mut() else { return };
        run.stdout_open = false;
        let generation = run.generation;
        if run.exit.is_none() {
            self.later(EXIT_AFTER_EOF, "a server that closed stdout", ctx, move |act, _| {
                let name = act.config.name.clone();
                if let Some(run) = act.current_run(generation).filter(|run| run.exit.is_none()) {
                    tracing::warn!(server = %name, "closed stdout but did not exit; killing it");
                    run.process.kill();
                }
            });
        }
        self.finish_run_if_drained(generation, ctx);
    }

    pub(super) fn finish_run_if_drained(&mut self, generation: u64, ctx: &mut Context<Self>) {
        if self.current_run(generation).is_some_and(|run| run.exit.is_some() && !run.stdout_open && !run.stderr_open) {
            self.finish_run(generation, ctx);
        }
    }

    /// The process is gone and its output read: fail what was in flight,
    /// then restart (through the Supervisor) or give up.
    fn finish_run(&mut self, generation: u64, ctx: &mut Context<Self>) {
        if self.current_run(generation).is_none() {
            return;
        }
        let Some(run) = self.run.take() else { return };
        self.last_sandbox = run.process.sandbox().or(self.last_sandbox.take());
        if let Some(violation) = run.process.sandbox_violation() {
            if self.stderr_tail.len() == STDERR_TAIL_LINES {
                self.stderr_tail.pop_front();
            }
            self.stderr_tail.push_back(violation.clone());
            self.sandbox_violation = Some(violation);
        }
        let exit = run.exit.unwrap_or(ExitInfo { code: None, signal: None });
        let stderr_tail = self.stderr_tail();
        let stopped = self.phase != Phase::Serving;
        let needs_login = run.process.needs_login().filter(|_| !stopped);
        let lost = run.process.lost();
        self.calls.fail_all(|| match (stopped, &needs_login, &lost) {
            (true, ..) => Failure::Stopped,
            (false, Some(_), _) => Failure::NeedsAuth,
            // A remote server: what broke says more than an exit status.
            (false, None, Some((lost, cause))) => {
                Failure::Internal(format!("{lost}; the call was not resent because tools may have side effects"), cause.clone())
            }
            (false, None, None) => Failure::Exited { exit, stderr_tail: stderr_tail.clone() },
        });
        if run.ready && self.phase != Phase::Stopping {
            self.registry.do_send_down(self.config.name.clone());
        }
        tracing::warn!(server = %self.config.name, pid = run.process.pid(), "server process ended: {exit}");
        if self.phase == Phase::Stopping {
            return;
        }
        if self.phase == Phase::Reconnecting {
            self.phase = Phase::Serving;
            self.set_state(ServerState::Pending);
            ctx.stop();
            return;
        }
        if let Some(message) = needs_login {
            return self.wait_for_login(message);
        }
        let (error, cause, ending) = match (self.run_error.take(), lost) {
            (Some((error, _)), _) if error.is_permanent() => return self.give_up(error.to_string(), Some(Cause::new(error)), ctx),
            (Some((error, ending)), _) => (error.to_string(), Some(Cause::new(error)), ending),
            (None, Some((lost, cause))) => (format!("server `{}`: {lost}", self.config.name), cause, Ending::Failure),
            (None, None) if !run.ready => {
                let error = ConnectError::Exited { server: self.config.name.clone(), exit, stderr_tail: Vec::new() };
                (error.to_string(), Some(Cause::new(error)), Ending::Failure)
            }
            (None, None) => (format!("server exited ({exit})"), None, if exit.is_clean() { Ending::Clean } else { Ending::Failure }),
        };
        self.last_error = Some(error.clone());
        match self.restarts.on_down(Instant::now(), run.started_at.elapsed(), ending) {
            Decision::Restart { attempt, after } => {
                tracing::info!(server = %self.config.name, attempt, "restarting in {after:?}");
                self.set_state(ServerState::Restarting { attempt, next_in: after });
                // The Supervisor restarts the actor; `started` schedules the spawn.
                ctx.stop();
            }
            Decision::CoolDown { reason, after } => self.cool_down(format!("{error}; {reason}"), cause, after, ctx),
            Decision::GiveUp { reason } => self.give_up(format!("{error}; {reason}"), cause, ctx),
        }
    }

    /// Marks the server failed for the cool-down `after`, then starts it
    /// again unless something else (a reconnect, a shutdown) came first.
    fn cool_down(&mut self, error: String, cause: Option<Cause>, after: Duration, ctx: &mut Context<Self>) {
        self.retry_at = Some(Instant::now() + after);
        self.give_up(error, cause, ctx);
        self.later(after, "a retry after the cool-down", ctx, |act, ctx| {
            let due = act.retry_at.is_some_and(|at| at <= Instant::now());
            if due && act.phase == Phase::Serving && act.run.is_none() && matches!(act.state, ServerState::Failed { .. }) {
                act.retry_at = None;
                tracing::info!(server = %act.config.name, "trying again after the cool-down");
                act.set_state(ServerState::Pending);
                act.start_process(ctx);
            }
        });
    }

    /// The server refused the credentials and only a user can fix that: no
    /// restarts until a reconnect; calls fail with `NeedsAuth`.
    fn wait_for_login(&mut self, message: String) {
        tracing::warn!(server = %self.config.name, "needs authorisation: {message}");
        self.last_error = Some(message);
        self.calls.fail_queued(|| Failure::NeedsAuth);
        self.set_state(ServerState::NeedsAuth);
    }

    /// Marks the server failed: no more restarts, waiting calls fail.
    /// `cause`: the error beneath `error`, kept for the callers' errors.
    pub(super) fn give_up(&mut self, error: String, cause: Option<Cause>, _ctx: &mut Context<Self>) {
        tracing::error!(server = %self.config.name, "failed: {error}");
        self.last_error = Some(error.clone());
        self.calls.fail_queued(|| Failure::GaveUp(error.clone(), cause.clone()));
        let retry_in = self.retry_in();
        let stderr_tail = self.stderr_tail.iter().cloned().collect();
        self.set_state(ServerState::Failed { error, stderr_tail, retry_in, cause });
    }
}
