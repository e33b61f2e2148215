//! The whole pool served as one MCP server: the passive parts.
//!
//! The active part is [`crate::actors::gateway::GatewaySession`], one per
//! downstream client session; a transport (stdio here, in [`stdio`];
//! Streamable HTTP elsewhere) owns the bytes and talks to a session only
//! through the seam described there: [`crate::actors::gateway::Inbound`]
//! messages in, [`outbox::Frame`]s out.
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`outbox`] | the bounded channels frames leave by, and the frames themselves |
//! | [`era`] | the server side of the protocol's eras: which era serves a request, `initialize` and `server/discover` answers |
//! | [`names`] | the routing tables: served names of tools and prompts, resource URIs and templates, back to their servers |
//! | [`bridge`] | servers' own requests (sampling, elicitation, roots) sent on to the gateway's client |
//! | [`roots`] | which roots the upstreams get (configured, the client's, or none), and who is told when the client's change |
//! | [`input`] | 2026-07-28 calls parked on `input_required` while a server's request waits for the client (MRTR) |
//! | [`listen`] | 2026-07-28 `subscriptions/listen` filters (shared with the demo server) |
//! | [`errors`] | a [`crate::CallError`] as the JSON-RPC error or `isError` result MCP expects |
//! | [`stdio`] | serving one session over stdin/stdout |
//! | [`http`] | serving sessions over Streamable HTTP and legacy HTTP+SSE (`serve --http`) |

pub mod bridge;
pub mod era;
pub mod errors;
pub mod http;
pub mod input;
pub mod listen;
pub mod names;
pub mod outbox;
pub mod roots;
pub mod stdio;
pub mod tasks;

/// What `serve` serves.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// `serve --server NAME`: only this server, its names unchanged
    /// (no `{server}__` prefix). `None`: every server, names prefixed.
    pub passthrough: Option<String>,
    /// Masks the servers' secret values in what the gateway itself writes
    /// from their output: the status resource (stderr tails) and the
    /// messages of failed calls.
    pub redactor: crate::config::Redactor,
    /// The routing tables, shared by every session of this gateway (an
    /// HTTP front serves each 2026-07-28 request with a session of its own,
    /// which must not list the pool afresh, nor forget the tools of a
    /// server that is restarting).
    pub routes: names::RoutesCache,
    /// The tasks of this gateway's sessions ([`tasks`]), shared as the
    /// routing tables are.
    pub tasks: std::sync::Arc<crate::task_store::TaskStore>,
    /// 2026-07-28 calls waiting for their client's input, shared by every
    /// session of this gateway like the routing tables.
    pub parked: input::ParkedCalls,
    /// Whether the client's roots reach the servers, and which servers
    /// asked for them: the same record as the [`bridge::ClientBridge`]'s
    /// (sessions tell it when their client's roots arrive or change).
    pub client_roots: roots::ClientRoots,
}

/// The caller label (`CallTool::with_caller`, the audit log's `caller`)
/// of the calls of a client over stdio. Over HTTP a session's label is its
/// `Mcp-Session-Id`.
pub const STDIO_CALLER: &str = "stdio";

/// The caller label of a stateless 2026-07-28 request over HTTP: it has
/// no session, and its peer address would often be a proxy's.
pub const STATELESS_CALLER: &str = "http:stateless";

/// The name this gateway gives itself in `initialize` and `server/discover`.
pub const SERVER_NAME: &str = "mcpvisor";

/// The built-in resource with every server's status.
pub const STATUS_URI: &str = "mcpvisor://status";
