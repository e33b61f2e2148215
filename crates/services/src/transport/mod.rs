//! Transports: how frames reach a server and come back.
//!
//! The seam the connection actor sees is narrow: a stream of decoded
//! [`crate::codec::Frame`]s, an `AsyncWrite` taking newline-terminated frames,
//! a stream of log lines, and an [`ExitWatch`] that resolves when the peer is
//! gone. Stdio provides all four from a child process, [`in_process`] from
//! a task of the runtime over in-memory pipes; a remote transport provides
//! the same shapes over HTTP.

pub mod credentials;
pub mod http;
pub mod in_process;
pub mod stdio;

/// Plain data of layer 1, re-exported where the transports that report it live.
pub use crate::error::{signal_name, ExitInfo};

pub use stdio::ExitWatch;
