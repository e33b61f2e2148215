//! The Hub's messages: what the owner of a runtime asks of it (adding,
//! removing, toggling and restarting servers, their status, shutdown).

use actix::prelude::*;

use crate::config::ServerConfig;
use crate::error::ManageError;
use crate::registry::Registry;
use crate::transport::in_process::InProcessHandler;
use crate::ServerStatus;

/// Starts a server (or reports why it cannot be added).
#[derive(Message)]
#[rtype(result = "Result<(), ManageError>")]
pub struct AddServer(pub ServerConfig);

/// Starts an in-process server with its handler, which the Hub keeps under
/// the server's name (replacing one it had) for later restarts and re-adds.
#[derive(Message)]
#[rtype(result = "Result<(), ManageError>")]
pub struct AddInProcess {
    pub config: ServerConfig,
    pub handler: InProcessHandler,
}

/// Stops a server and removes it and its tools.
#[derive(Message)]
#[rtype(result = "Result<(), ManageError>")]
pub struct RemoveServer(pub String);

/// Enables or disables a server. A disabled server keeps its process; its
/// tools leave the catalog and calls to it fail with `CallError::Disabled`.
#[derive(Message)]
#[rtype(result = "Result<(), ManageError>")]
pub struct Toggle {
    pub server: String,
    pub enabled: bool,
}

/// Restarts a server now; a failed server is revived with a fresh restart budget.
#[derive(Message)]
#[rtype(result = "Result<(), ManageError>")]
pub struct Reconnect(pub String);

/// Makes the running set equal to this list: new names are added, missing
/// ones removed, changed ones restarted with their new configuration;
/// unchanged servers are left running untouched.
#[derive(Message)]
#[rtype(result = "SetServersResult")]
pub struct SetServers(pub Vec<ServerConfig>);

/// What [`SetServers`] did, by server name.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SetServersResult {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
    /// Servers that could not be added or changed, with the reason; a
    /// changed server whose new configuration is invalid keeps running as it was.
    pub errors: Vec<(String, String)>,
}

/// The status of every server, sorted by name.
#[derive(Message)]
#[rtype(result = "Vec<ServerStatus>")]
pub struct Status;

/// The status of one server.
#[derive(Message)]
#[rtype(result = "Option<ServerStatus>")]
pub struct ServerStatusOf(pub String);

/// Resolves once every server is connected, failed or disabled.
#[derive(Message)]
#[rtype(result = "()")]
pub struct WaitReady;

/// The registry of this hub.
#[derive(Message)]
#[rtype(result = "Addr<Registry>")]
pub struct GetRegistry;

/// Stops every server (close stdin, wait, SIGTERM, wait, SIGKILL, reap) and
/// then the hub. Resolves when all are stopped.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown;

/// Forwards a fault to one connection (tests of panic recovery): the next
/// handler of `during` (a tool's name, or `"*"`) panics.
#[cfg(feature = "fault-injection")]
#[derive(Message)]
#[rtype(result = "bool")]
pub struct InjectPanic {
    pub server: String,
    pub during: String,
}
