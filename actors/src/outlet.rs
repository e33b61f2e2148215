//! Where a stream of notifications goes: an actor's mailbox or a channel.
//!
//! Both never block the sender: a recipient's mailbox and the channel are
//! unbounded, and a gone receiver drops what is sent to it.

use std::fmt;

use actix::prelude::*;
use tokio::sync::mpsc;

/// A destination for notifications of type `M`.
pub enum Outlet<M>
where
    M: Message<Result = ()> + Send,
{
    Recipient(Recipient<M>),
    Channel(mpsc::UnboundedSender<M>),
}

impl<M> Outlet<M>
where
    M: Message<Result = ()> + Send + 'static,
{
    /// An outlet whose notifications arrive on the returned receiver.
    pub fn channel() -> (Outlet<M>, mpsc::UnboundedReceiver<M>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Outlet::Channel(tx), rx)
    }

    /// Sends without waiting; lost only when the receiver is gone.
    pub fn send(&self, message: M) {
        match self {
            Outlet::Recipient(recipient) => recipient.do_send(message),
            Outlet::Channel(channel) => {
                let _ = channel.send(message);
            }
        }
    }
}

impl<M> Clone for Outlet<M>
where
    M: Message<Result = ()> + Send,
{
    fn clone(&self) -> Self {
        match self {
            Outlet::Recipient(recipient) => Outlet::Recipient(recipient.clone()),
            Outlet::Channel(channel) => Outlet::Channel(channel.clone()),
        }
    }
}

impl<M> fmt::Debug for Outlet<M>
where
    M: Message<Result = ()> + Send,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outlet::Recipient(_) => "Outlet(recipient)",
            Outlet::Channel(_) => "Outlet(channel)",
        })
    }
}
