//! Where a stream of notifications goes: a channel or a function (for any
//! tokio program), or an actor's mailbox (the actix side: [`to_actor`]).
//!
//! None blocks the sender: a recipient's mailbox and the channel are
//! unbounded, a gone receiver drops what is sent to it, and a function is
//! the embedder's promise not to block.

use std::fmt;
use std::sync::Arc;

use actix::prelude::*;
use tokio::sync::mpsc;

/// A destination for notifications of type `M`.
pub struct Outlet<M>(Destination<M>)
where
    M: Message<Result = ()> + Send;

enum Destination<M>
where
    M: Message<Result = ()> + Send,
{
    Recipient(Recipient<M>),
    Channel(mpsc::UnboundedSender<M>),
    Function(Arc<dyn Fn(M) + Send + Sync>),
}

impl<M> Outlet<M>
where
    M: Message<Result = ()> + Send + 'static,
{
    /// An outlet whose notifications arrive on the returned receiver.
    pub fn channel() -> (Outlet<M>, mpsc::UnboundedReceiver<M>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Outlet(Destination::Channel(tx)), rx)
    }

    /// An outlet that calls `function` with each notification, on the
    /// runtime's thread: it must not block.
    pub fn function(function: impl Fn(M) + Send + Sync + 'static) -> Outlet<M> {
        Outlet(Destination::Function(Arc::new(function)))
    }

    /// Sends without waiting; lost only when the receiver is gone.
    pub fn send(&self, message: M) {
        match &self.0 {
            Destination::Recipient(recipient) => recipient.do_send(message),
            Destination::Channel(channel) => {
                let _ = channel.send(message);
            }
            Destination::Function(function) => function(message),
        }
    }
}

/// The actix side of [`Outlet`]: each notification goes to `recipient`.
pub fn to_actor<M>(recipient: Recipient<M>) -> Outlet<M>
where
    M: Message<Result = ()> + Send,
{
    Outlet(Destination::Recipient(recipient))
}

impl<M> Clone for Outlet<M>
where
    M: Message<Result = ()> + Send,
{
    fn clone(&self) -> Self {
        Outlet(match &self.0 {
            Destination::Recipient(recipient) => Destination::Recipient(recipient.clone()),
            Destination::Channel(channel) => Destination::Channel(channel.clone()),
            Destination::Function(function) => Destination::Function(function.clone()),
        })
    }
}

impl<M> fmt::Debug for Outlet<M>
where
    M: Message<Result = ()> + Send,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match &self.0 {
            Destination::Recipient(_) => "Outlet(recipient)",
            Destination::Channel(_) => "Outlet(channel)",
            Destination::Function(_) => "Outlet(function)",
        })
    }
}
