//! How a request to the server ended before it became a caller's error
//! ([`CallError`]) or a start-up step's ([`ConnectError`]).

use super::*;

/// How a request ended, before it is turned into a caller-facing error.
#[derive(Debug)]
pub(super) enum Failure {
    Rpc(ErrorObject),
    Exited {
        exit: ExitInfo,
        stderr_tail: Vec<String>,
    },
    /// The answer came but cannot be used; the sentence says why.
    Malformed(String),
    /// Something broke on our side of the connection: the sentence, and the error beneath it.
    Internal(String, Option<Cause>),
    /// The server has failed for good (restart policy or intensity).
    GaveUp(String, Option<Cause>),
    Disabled,
    Stopped,
    /// The server refused the credentials; a user must log in or fix them.
    NeedsAuth,
    /// The tool is withheld (by its pin or the scanner): the caller's refusal.
    Withheld(Box<CallError>),
}

pub(super) type Outcome = Result<Box<RawValue>, Failure>;

impl Failure {
    /// Something broke on our side, with no error beneath the sentence.
    pub(super) fn internal(message: String) -> Failure {
        Failure::Internal(message, None)
    }

    pub(super) fn into_call_error(self, server: &str, tool: &str) -> CallError {
        let (server, tool) = (server.to_string(), tool.to_string());
        match self {
            Failure::Rpc(e) if e.code == error_codes::INVALID_PARAMS => CallError::InvalidArguments { server, tool, message: e.message },
            Failure::Rpc(e) => CallError::Rpc { server, tool, code: e.code, message: e.message, data: e.data },
            Failure::Exited { exit, stderr_tail } => CallError::ServerExited { server, tool, exit, stderr_tail },
            Failure::Malformed(message) => CallError::Protocol { server, tool, message },
            Failure::Internal(message, cause) => CallError::Transport { server, tool, message, cause },
            Failure::GaveUp(error, cause) => CallError::Failed { server, tool, error, cause },
            Failure::Disabled => CallError::Disabled { server, tool },
            Failure::Stopped => CallError::Stopped { server, tool },
            Failure::NeedsAuth => CallError::NeedsAuth { server, tool },
            Failure::Withheld(refusal) => *refusal,
        }
    }

    /// A start-up step's failure, as a sentence naming the step (`method`).
    pub(super) fn into_connect_error(self, server: &str, method: &str) -> ConnectError {
        let server = server.to_string();
        let method = method.to_string();
        let message = match self {
            Failure::Rpc(e) => return ConnectError::Rpc { server, method, code: e.code, message: e.message },
            Failure::Exited { exit, stderr_tail } => return ConnectError::Exited { server, exit, stderr_tail },
            Failure::Malformed(message) | Failure::Internal(message, _) => message,
            Failure::GaveUp(error, _) => format!("the server had failed for good ({error})"),
            Failure::Disabled => "the server was disabled meanwhile".into(),
            Failure::Stopped => "the connection was stopped before the answer came".into(),
            Failure::NeedsAuth => "the server needs authorisation".into(),
            Failure::Withheld(refusal) => refusal.to_string(),
        };
        ConnectError::Protocol { server, method, message }
    }
}
