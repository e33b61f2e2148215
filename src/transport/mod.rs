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

use std::fmt;

/// How a server process ended: an exit code or a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl ExitInfo {
    pub fn is_clean(&self) -> bool {
        self.code == Some(0)
    }

    pub fn from_status(status: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        ExitInfo { code: status.code(), signal: status.signal() }
    }
}

impl fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.code, self.signal) {
            (_, Some(sig)) => write!(f, "killed by signal {sig} ({})", signal_name(sig)),
            (Some(code), None) => write!(f, "exit code {code}"),
            (None, None) => f.write_str("exit status unknown"),
        }
    }
}

/// The conventional name of a Linux signal number.
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        _ => "other signal",
    }
}

pub use stdio::ExitWatch;
