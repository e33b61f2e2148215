//! One gateway session over stdin/stdout: newline-delimited JSON-RPC,
//! frames larger than the codec's limit refused, stdout written by one task.
//!
//! Back-pressure: the reader awaits each [`Inbound`], which resolves only
//! once a request is admitted, so while the session is full (its client not
//! reading its answers) stdin is not read and the client's writes block.

use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio_util::codec::FramedRead;

use super::bridge::ClientBridge;
use super::outbox::Outbox;
use super::ServeOptions;
use crate::actors::gateway::{Closed, GatewaySession, Inbound};
use crate::actors::hub;
use crate::codec::{JsonRpcCodec, DEFAULT_MAX_FRAME};
use crate::Handle;

/// How long frames already answered may take to be written once stdin closed.
const FLUSH: std::time::Duration = std::time::Duration::from_secs(2);

/// Serves one client on `input`/`output` until `input` ends; `bridge`
/// (the one whose handlers the runtime was started with) lets this client
/// answer the servers' requests.
pub async fn serve<R, W>(handle: Handle, options: ServeOptions, bridge: ClientBridge, input: R, mut output: W)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (outbox, mut frames) = Outbox::new();
    let mut writer = tokio::spawn(async move {
        while let Some(frame) = frames.recv().await {
            if output.write_all(&frame.0).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    });
    let (started, session) = tokio::sync::oneshot::channel();
    let starting = GatewaySession::new(handle.clone(), options, outbox.clone(), super::STDIO_CALLER);
    handle.hub().do_send(hub::Spawn(Box::new(move || {
        let session = actix::Actor::start(starting);
        bridge.attach(session.downgrade());
        let _ = started.send(session);
    })));
    let Ok(session) = session.await else { return };
    let mut input = FramedRead::new(input, JsonRpcCodec::new(DEFAULT_MAX_FRAME));
    while let Some(frame) = input.next().await {
        let frame = match frame {
            Ok(frame) => frame,
            Err(_) => break,
        };
        if session.send(Inbound { frame, stream: outbox.clone() }).await.is_err() {
            break;
        }
    }
    let _ = session.send(Closed).await;
    drop(session);
    drop(outbox);
    // The writer ends once every outbox clone is gone (the session's too).
    if tokio::time::timeout(FLUSH, &mut writer).await.is_err() {
        writer.abort();
    }
}
