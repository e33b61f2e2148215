//! The live parts of a runtime: what a configuration file cannot say.
//!
//! [`crate::config::RuntimeConfig`] holds plain values; the objects that do
//! work (in-process tool handlers, the answerers of server requests, the
//! telemetry with its writer thread, OAuth authorizers) travel beside it, in
//! [`Parts`], from `Runtime::builder` (or [`super::Hub::start_with`]) to the
//! Hub, which hands each connection its [`ServerParts`].
//!
//! Invariants:
//! - handlers and authorizers are found by server name when a server is
//!   added, so a server added later (or again, after `SetServers`) under a
//!   name the runtime was given a handler for gets that handler;
//! - an in-process server without a handler is not an error until it
//!   starts: its connection then fails with `ConnectError::NoHandler`,
//!   which names the server and how to give one.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::client_requests::ClientHandlers;
use crate::oauth::Authorizer;
use crate::telemetry::Telemetry;
use crate::transport::in_process::InProcessHandler;

/// Everything live a runtime starts with. Cheap to clone: each part is shared.
#[derive(Clone, Default)]
pub struct Parts {
    /// Answerers of the requests servers send to the client (roots,
    /// sampling, elicitation); each has a default.
    pub client_handlers: ClientHandlers,
    /// Where every tool call is counted and, if an audit log is set,
    /// written down; `Handle::metrics` reads it.
    pub telemetry: Telemetry,
    /// The tools of in-process servers, by server name.
    pub in_process: BTreeMap<String, InProcessHandler>,
    /// Who follows the authorization URL when an OAuth login is needed
    /// while connecting, by server name. A server without one leaves the
    /// login to the user (`needs_auth`).
    pub authorizers: BTreeMap<String, Arc<dyn Authorizer>>,
    /// Tool definitions pinned on first use; `None`: not pinned.
    pub pins: Option<Arc<crate::integrity::pins::PinStore>>,
    /// The configured secrets of every server, kept out of what passes
    /// between models and servers; each connection adds its server's.
    pub secrets: crate::integrity::secrets::SecretBook,
    /// Each gateway caller's latest access token, written by the gateway's
    /// front, read by the servers that act as each caller (token exchange).
    pub caller_tokens: crate::caller_token::CallerTokens,
    /// The gateway's login desk, for the servers whose callers log in
    /// themselves (`auth = { type = "oauth", per_caller = true }`); `None`
    /// outside `serve --http` with `[serve] public_url` and `login_key`.
    pub caller_logins: Option<Arc<crate::oauth::LoginDesk>>,
}

impl Parts {
    /// The parts that belong to server `name`.
    pub fn for_server(&self, name: &str) -> ServerParts {
        ServerParts {
            in_process: self.in_process.get(name).cloned(),
            authorizer: self.authorizers.get(name).cloned(),
            pins: self.pins.clone(),
            secrets: self.secrets.clone(),
            credentials: None,
            caller: None,
        }
    }
}

impl fmt::Debug for Parts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Parts")
            .field("client_handlers", &self.client_handlers)
            .field("telemetry", &self.telemetry)
            .field("in_process", &self.in_process)
            .field("authorizers", &self.authorizers.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// One server's live parts, kept by its connection across restarts.
#[derive(Clone, Default)]
pub struct ServerParts {
    /// The handler of an in-process server.
    pub in_process: Option<InProcessHandler>,
    /// The authorizer of a remote server's OAuth logins.
    pub authorizer: Option<Arc<dyn Authorizer>>,
    /// The runtime's tool pins, shared by every connection.
    pub pins: Option<Arc<crate::integrity::pins::PinStore>>,
    /// The runtime's book of configured secrets, shared by every connection.
    pub secrets: crate::integrity::secrets::SecretBook,
    /// The credentials of a remote server, when not those its `auth` says
    /// (a token-exchange server's, one caller's or the gateway's own).
    pub credentials: Option<Arc<dyn crate::transport::credentials::Credentials>>,
    /// The caller a per-caller connection serves (`Identity::caller_key`):
    /// only that caller's sessions may answer its server's requests.
    pub caller: Option<String>,
}

impl fmt::Debug for ServerParts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerParts").field("in_process", &self.in_process).field("authorizer", &self.authorizer.is_some()).finish()
    }
}
