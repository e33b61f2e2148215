//! One gateway session over stdin/stdout: newline-delimited JSON-RPC,
//! frames larger than the codec's limit refused, stdout written by one task.
//!
//! Everything of the session runs on the pool's own runtime thread (the
//! actix System of the [`Handle`]): reading, the session, its upstream
//! calls and writing, so a call crosses no thread. The process's own
//! stdin/stdout ([`serve_stdio`]) are read and written without blocking
//! when they are pipes or sockets (as an MCP client starts a server), and
//! through tokio's blocking stdio otherwise (a terminal, a file).
//!
//! End: when stdin ends, the requests still open are answered (within
//! [`DRAIN`]), then the rest are cancelled and the session stops.
//!
//! Back-pressure: the reader awaits each [`Inbound`], which resolves only
//! once a request is admitted, so while the session is full (its client not
//! reading its answers) stdin is not read and the client's writes block.
//! The writer sends whatever frames are ready in one write (at most
//! [`BATCH`] bytes), so a burst of answers costs one system call.

use std::os::fd::{AsFd, OwnedFd};

use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::codec::FramedRead;

use crate::actors::gateway::{ClientBridge, ServeOptions};
use crate::actors::gateway::{Closed, GatewaySession, Inbound, WhenIdle};
use crate::actors::hub;
use crate::codec::{JsonRpcCodec, DEFAULT_MAX_FRAME};
use crate::server::outbox::{Frame, Outbox};
use crate::Handle;

/// How long requests still open when stdin ends may take to be answered
/// (a client piping requests in closes its side before reading the
/// answers); the rest are then cancelled.
pub const DRAIN: std::time::Duration = std::time::Duration::from_secs(30);

/// How long frames already answered may take to be written once stdin closed.
const FLUSH: std::time::Duration = std::time::Duration::from_secs(2);

/// Bytes gathered into one write at most (a frame larger than this is
/// written alone).
pub const BATCH: usize = 64 * 1024;

/// Serves one client on `input`/`output` until `input` ends; `bridge`
/// (the one whose handlers the runtime was started with) lets this client
/// answer the servers' requests. Resolves when the session is over (or
/// the runtime stopped).
pub async fn serve<R, W>(handle: Handle, options: ServeOptions, bridge: ClientBridge, input: R, output: W)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    on_pool_thread(handle, options, bridge, move || (input, output)).await
}

/// Serves one client on this process's stdin/stdout (see [`serve`]).
pub async fn serve_stdio(handle: Handle, options: ServeOptions, bridge: ClientBridge) {
    on_pool_thread(handle, options, bridge, || (process_stdin(), process_stdout())).await
}

/// Runs the session on the pool's runtime thread, with the streams `open`
/// makes there (non-blocking descriptors belong to the runtime that polls them).
async fn on_pool_thread<F, R, W>(handle: Handle, options: ServeOptions, bridge: ClientBridge, open: F)
where
    F: FnOnce() -> (R, W) + Send + 'static,
    R: AsyncRead + Unpin + 'static,
    W: AsyncWrite + Unpin + 'static,
{
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    let pool = handle.clone();
    handle.hub().do_send(hub::Spawn(Box::new(move || {
        actix_rt::spawn(async move {
            let (input, output) = open();
            run(pool, options, bridge, input, output).await;
            let _ = done.send(());
        });
    })));
    // An error: the runtime stopped, and the session with it.
    let _ = finished.await;
}

async fn run<R, W>(handle: Handle, options: ServeOptions, bridge: ClientBridge, input: R, output: W)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + 'static,
{
    let (outbox, frames) = Outbox::new();
    let mut writer = actix_rt::spawn(write_frames(frames, output));
    let session = actix::Actor::start(GatewaySession::new(handle, options, outbox.clone(), super::STDIO_CALLER));
    bridge.attach(session.downgrade());
    let mut input = FramedRead::new(input, JsonRpcCodec::new(DEFAULT_MAX_FRAME));
    while let Some(Ok(frame)) = input.next().await {
        if session.send(Inbound { frame, stream: outbox.clone(), params: None }).await.is_err() {
            break;
        }
    }
    // Input ended: what was asked is still answered, within DRAIN.
    let _ = tokio::time::timeout(DRAIN, session.send(WhenIdle)).await;
    let _ = session.send(Closed).await;
    drop(session);
    drop(outbox);
    // The writer ends once every outbox clone is gone (the session's too).
    if tokio::time::timeout(FLUSH, &mut writer).await.is_err() {
        writer.abort();
    }
}

/// Writes frames as they come, each ready burst in one write.
async fn write_frames<W: AsyncWrite + Unpin>(mut frames: mpsc::Receiver<Frame>, mut output: W) {
    let mut batch = Vec::with_capacity(BATCH);
    while let Some(frame) = frames.recv().await {
        batch.extend_from_slice(&frame.0);
        while batch.len() < BATCH {
            let Ok(frame) = frames.try_recv() else { break };
            batch.extend_from_slice(&frame.0);
        }
        if output.write_all(&batch).await.is_err() || output.flush().await.is_err() {
            break;
        }
        batch.clear();
    }
}

/// This process's stdin: a non-blocking pipe or socket when it is one.
fn process_stdin() -> Box<dyn AsyncRead + Unpin> {
    match nonblocking(std::io::stdin().as_fd().try_clone_to_owned()) {
        Some(Descriptor::Pipe(fd)) => match tokio::net::unix::pipe::Receiver::from_owned_fd(fd) {
            Ok(pipe) => Box::new(pipe),
            Err(_) => Box::new(tokio::io::stdin()),
        },
        Some(Descriptor::Socket(socket)) => Box::new(socket),
        None => Box::new(tokio::io::stdin()),
    }
}

/// This process's stdout: a non-blocking pipe or socket when it is one.
fn process_stdout() -> Box<dyn AsyncWrite + Unpin> {
    match nonblocking(std::io::stdout().as_fd().try_clone_to_owned()) {
        Some(Descriptor::Pipe(fd)) => match tokio::net::unix::pipe::Sender::from_owned_fd(fd) {
            Ok(pipe) => Box::new(pipe),
            Err(_) => Box::new(tokio::io::stdout()),
        },
        Some(Descriptor::Socket(socket)) => Box::new(socket),
        None => Box::new(tokio::io::stdout()),
    }
}

enum Descriptor {
    Pipe(OwnedFd),
    Socket(tokio::net::UnixStream),
}

/// A copy of a standard descriptor, when it is a pipe or a Unix socket
/// (Node's child processes get socket pairs) the runtime can poll.
fn nonblocking(fd: std::io::Result<OwnedFd>) -> Option<Descriptor> {
    use std::os::unix::fs::FileTypeExt;
    let file = std::fs::File::from(fd.ok()?);
    let kind = file.metadata().ok()?.file_type();
    let fd = OwnedFd::from(file);
    if kind.is_fifo() {
        return Some(Descriptor::Pipe(fd));
    }
    if !kind.is_socket() {
        return None;
    }
    let socket = std::os::unix::net::UnixStream::from(fd);
    socket.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(socket).ok().map(Descriptor::Socket)
}
