//! [`Reply`]: a handler's answer that is computed later and is abandoned
//! when the asker stops waiting.
//!
//! actix's own `ResponseFuture` is detached: it runs to the end even when
//! the caller has dropped its `send()` future. A `Reply` is raced against
//! the closing of the reply channel instead, so a dropped caller drops the
//! work, and with it any drop guard inside (that is how a call is cancelled
//! on the wire when its caller goes away).

use std::future::Future;
use std::pin::Pin;

use actix::dev::{MessageResponse, OneshotSender};
use actix::{Actor, Message};

pub enum Reply<T> {
    Ready(T),
    Later(Pin<Box<dyn Future<Output = T>>>),
}

impl<T> Reply<T> {
    pub fn later(future: impl Future<Output = T> + 'static) -> Self {
        Reply::Later(Box::pin(future))
    }
}

impl<A, M, T> MessageResponse<A, M> for Reply<T>
where
    A: Actor,
    M: Message<Result = T>,
    T: 'static,
{
    fn handle(self, _: &mut A::Context, tx: Option<OneshotSender<T>>) {
        match (self, tx) {
            (Reply::Ready(value), Some(tx)) => {
                let _ = tx.send(value);
            }
            (Reply::Ready(_), None) => {}
            (Reply::Later(future), None) => {
                actix_rt::spawn(future);
            }
            (Reply::Later(future), Some(mut tx)) => {
                actix_rt::spawn(async move {
                    tokio::select! {
                        biased;
                        value = future => { let _ = tx.send(value); }
                        () = tx.closed() => {}
                    }
                });
            }
        }
    }
}
