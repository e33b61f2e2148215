//! The seam between a connection and its server's process: the only code
//! that knows the server is a child process over stdio (spawn, pid, process
//! group, stdin, stdout and stderr, signals). A remote transport will put
//! its own kind of peer beside this one; the rest of the connection sees
//! frames and stderr lines arriving as stream items, the end as `Exited`,
//! and writes through [`Process::take_input`].

use std::future::Future;

use tokio::process::ChildStdin;

use super::*;

/// One running server process.
pub(super) struct Process {
    pid: u32,
    group: ProcessGroup,
    exit: ExitWatch,
    /// `None` while a write is under way (the write owns it) or once closed.
    stdin: Option<ChildStdin>,
    /// Stdin was closed on purpose: a finished write does not reopen it.
    closing: bool,
}

impl Process {
    /// Starts the server of run `generation` and attaches its output to the
    /// connection.
    pub(super) fn start(config: &ServerConfig, generation: u64, ctx: &mut Context<Connection>) -> Result<Process, ConnectError> {
        let child = stdio::spawn(config)?;
        ctx.add_stream(FramedRead::new(child.stdout, JsonRpcCodec::new(config.limits.max_frame)));
        ctx.add_stream(FramedRead::new(child.stderr, LogLines::default()));
        // The exit is awaited off the context (actix polls every future of
        // a context on each wake-up, so none may linger) and reported as a message.
        let me = ctx.address().downgrade();
        let exit = child.exit.clone();
        actix_rt::spawn(async move {
            let exit = exit.wait().await;
            if let Some(me) = me.upgrade() {
                me.do_send(Exited { generation, exit });
            }
        });
        Ok(Process { pid: child.pid, group: child.group, exit: child.exit, stdin: Some(child.stdin), closing: false })
    }

    pub(super) fn pid(&self) -> u32 {
        self.pid
    }

    /// Kills the whole process group at once.
    pub(super) fn kill(&self) {
        self.group.signal(libc::SIGKILL);
    }

    /// Stops the server politely: stdin is closed (MCP's stdio shutdown),
    /// then SIGTERM and SIGKILL follow `grace` apart. The future ends once
    /// the process has exited; it needs no access to the connection.
    pub(super) fn stop(&mut self, grace: Duration) -> impl Future<Output = ExitInfo> + 'static {
        self.closing = true;
        self.stdin = None;
        stdio::shutdown(self.group, self.exit.clone(), grace)
    }

    /// The server's input, for one write; give it back with [`Process::return_input`].
    pub(super) fn take_input(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// Gives the input back after a write; it is dropped if stdin was closed meanwhile.
    pub(super) fn return_input(&mut self, stdin: ChildStdin) -> bool {
        if self.closing {
            return false;
        }
        self.stdin = Some(stdin);
        true
    }

    pub(super) fn can_write(&self) -> bool {
        self.stdin.is_some()
    }
}

/// The server process of run `generation` has exited and been reaped.
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
