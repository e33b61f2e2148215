//! The seam between a connection and its server: the only code that knows
//! what the server is. A child process over stdio (spawn, pid, process
//! group, signals) or an in-process server (a task of the runtime over
//! in-memory pipes, [`crate::transport::in_process`]) or a remote server
//! (a bridge task turning frames into HTTP, [`crate::transport::http`],
//! which hands over its messages already parsed). The rest of the connection
//! sees frames and log lines arriving as stream items, the end as
//! `Exited`, and writes through [`Process::take_input`]; the one thing it
//! may not get is a pid.

use std::future::Future;
use std::sync::{Arc, Mutex};

use futures::future::Either;
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_stream::wrappers::ReceiverStream;

use super::*;
use crate::sandbox::SandboxStatus;
use crate::transport::{http, in_process};

/// Where the connection writes frames to the server.
pub(super) type Input = Box<dyn AsyncWrite + Unpin>;
type Output = Box<dyn AsyncRead + Unpin>;

/// What the server is, as far as stopping it goes.
enum Kind {
    Child { pid: u32, group: ProcessGroup, sandbox: Option<SandboxStatus>, violation: Arc<Mutex<Option<String>>> },
    InProcess(in_process::ServerTask),
    Remote(http::RemoteTask),
}

/// One running server.
pub(super) struct Process {
    kind: Kind,
    exit: ExitWatch,
    /// `None` while a write is under way (the write owns it) or once closed.
    input: Option<Input>,
    /// The input was closed on purpose: a finished write does not reopen it.
    closing: bool,
}

impl Process {
    /// Starts the server of run `generation` and attaches its output to the
    /// connection.
    pub(super) fn start(
        config: &ServerConfig,
        parts: &ServerParts,
        generation: u64,
        ctx: &mut Context<Connection>,
    ) -> Result<Process, ConnectError> {
        let (kind, exit, input, pipes): (Kind, ExitWatch, Input, Option<(Output, Output)>) = match config.transport {
            Transport::InProcess => {
                let handler = parts.in_process.as_ref().ok_or_else(|| ConnectError::NoHandler { server: config.name.clone() })?;
                let peer = in_process::start(handler, &config.name);
                (Kind::InProcess(peer.task), peer.exit, Box::new(peer.input), Some((Box::new(peer.output), Box::new(peer.log))))
            }
            Transport::Http | Transport::Sse => {
                let credentials = match &parts.credentials {
                    Some(given) => given.clone(),
                    None => crate::oauth::credentials_for(config, parts.authorizer.clone()),
                };
                let peer = http::start(config, credentials)?;
                ctx.add_stream(ReceiverStream::new(peer.messages).map(Ok::<_, std::io::Error>));
                ctx.add_stream(ReceiverStream::new(peer.log).map(Ok::<_, std::io::Error>));
                (Kind::Remote(peer.task), peer.exit, Box::new(peer.input), None)
            }
            Transport::Stdio => {
                let child = stdio::spawn(config)?;
                let kind = Kind::Child { pid: child.pid, group: child.group, sandbox: child.sandbox, violation: child.violation };
                (kind, child.exit, Box::new(child.stdin), Some((Box::new(child.stdout), Box::new(child.stderr))))
            }
        };
        if let Some((output, log)) = pipes {
            ctx.add_stream(FramedRead::new(output, JsonRpcCodec::new(config.limits.max_frame)));
            ctx.add_stream(FramedRead::new(log, LogLines::default()));
        }
        // The exit is awaited off the context (actix polls every future of
        // a context on each wake-up, so none may linger) and reported as a message.
        let me = ctx.address().downgrade();
        let exit_watch = exit.clone();
        actix_rt::spawn(async move {
            let exit = exit_watch.wait().await;
            if let Some(me) = me.upgrade() {
                me.do_send(Exited { generation, exit });
            }
        });
        Ok(Process { kind, exit, input: Some(input), closing: false })
    }

    /// The server's process id; `None` for a server without a process of its own.
    pub(super) fn pid(&self) -> Option<u32> {
        match self.kind {
            Kind::Child { pid, .. } => Some(pid),
            Kind::InProcess(_) | Kind::Remote(_) => None,
        }
    }

    /// What the server's sandbox enforces (`None`: not sandboxed).
    pub(super) fn sandbox(&self) -> Option<SandboxStatus> {
        match &self.kind {
            Kind::Child { sandbox, .. } => sandbox.clone(),
            _ => None,
        }
    }

    /// Once the server has exited: the sandbox limit it hit, as a sentence.
    pub(super) fn sandbox_violation(&self) -> Option<String> {
        match &self.kind {
            Kind::Child { violation, .. } => violation.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            _ => None,
        }
    }

    /// Ends the server at once: the whole process group is killed, or the
    /// in-process server's task aborted.
    pub(super) fn kill(&self) {
        match &self.kind {
            Kind::Child { group, .. } => group.signal(libc::SIGKILL),
            Kind::InProcess(task) => task.kill(),
            Kind::Remote(task) => task.kill(),
        }
    }

    /// Stops the server politely: its input is closed (MCP's stdio
    /// shutdown), then a child gets SIGTERM and SIGKILL `grace` apart, and
    /// an in-process server or a remote bridge (which deletes its session)
    /// is killed after `grace`. The future ends once
    /// the server has ended; it needs no access to the connection.
    pub(super) fn stop(&mut self, grace: Duration) -> impl Future<Output = ExitInfo> + 'static {
        self.closing = true;
        self.input = None;
        let exit = self.exit.clone();
        match &self.kind {
            Kind::Child { group, .. } => Either::Left(stdio::shutdown(*group, exit, grace)),
            Kind::InProcess(task) => Either::Right(Either::Left(in_process::shutdown(task.clone(), exit, grace))),
            Kind::Remote(task) => Either::Right(Either::Right(http::shutdown(task.clone(), exit, grace))),
        }
    }

    /// The server's input, for one write; give it back with [`Process::return_input`].
    pub(super) fn take_input(&mut self) -> Option<Input> {
        self.input.take()
    }

    /// Gives the input back after a write; it is dropped if the input was closed meanwhile.
    pub(super) fn return_input(&mut self, input: Input) -> bool {
        if self.closing {
            return false;
        }
        self.input = Some(input);
        true
    }

    /// Set when a remote server refused its credentials for good: what
    /// the user must do.
    pub(super) fn needs_login(&self) -> Option<String> {
        match &self.kind {
            Kind::Remote(task) => task.needs_login(),
            _ => None,
        }
    }

    /// What a remote server's status shows of its transport.
    pub(super) fn remote_status(&self) -> Option<http::RemoteStatus> {
        match &self.kind {
            Kind::Remote(task) => Some(task.status()),
            _ => None,
        }
    }

    /// Set when a remote server was lost: how (a sentence naming its URL).
    pub(super) fn lost(&self) -> Option<(String, Option<Cause>)> {
        match &self.kind {
            Kind::Remote(task) => task.lost(),
            _ => None,
        }
    }

    pub(super) fn can_write(&self) -> bool {
        self.input.is_some()
    }
}

/// The server of run `generation` has ended (a process: exited and been reaped).
#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct Exited {
    generation: u64,
    exit: ExitInfo,
}

impl Handler<Exited> for Connection {
    type Result = ();

    fn handle(&mut self, msg: Exited, ctx: &mut Context<Self>) {
        let _ = self.guarded("the exit of the server", ctx, |act, ctx| act.on_exit(msg.generation, msg.exit, ctx));
    }
}
