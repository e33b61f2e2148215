//! mcpvisor's layer 2, services: the parts that do the work of one concern
//! each, without a mailbox: child processes and HTTP sessions, OAuth,
//! sandboxes, telemetry, model providers, policies, integrity checks and the
//! one MCP server side.
//!
//! An internal crate of the workspace (docs/architecture.md, "Layers"): its
//! API is what `mcpvisor` re-exports, and nothing here is covered by semver
//! on its own. It depends only on `mcpvisor-wire` (layer 1), whose modules
//! it names as its own (`crate::protocol`, `crate::config`, ...) through the
//! imports below, so a path reads the same in every layer.

// Its modules' docs link to their private parts (a policy's step budget, a
// sandbox's `apply`) for the maintainers who read them with
// `--document-private-items`; an embedder reads `mcpvisor`'s docs instead.
#![allow(rustdoc::private_intra_doc_links)]

pub mod builtin_tools; // the agent's built-in tools, as the in-process server `builtin`
pub mod caller_secrets; // each caller's secrets, for servers run once per caller
pub mod catalog_cache; // each server's tool list kept on disk
pub mod integrity; // tool pins and the scanner of tools' texts
pub mod llm; // model providers behind one `ChatModel` seam
pub mod oauth; // OAuth 2.1 for remote servers
pub mod policy; // the gateway's access rules (`[serve.policy]`)
pub mod pool; // the pool as plain data: catalog entries, server states
pub mod sandbox; // Landlock, a network namespace, rlimits, a cgroup, seccomp
pub mod server; // the one MCP server side
pub mod sessions; // the agent's saved conversations
pub mod skills; // servers' skills (SEP-2640)
pub mod telemetry; // call metrics, the audit log, OpenTelemetry
pub mod tool_search; // ranking a catalog's tools against a query
pub mod transport; // stdio children, in-process servers, Streamable HTTP and SSE

pub(crate) use mcpvisor_wire::{caller_token, civil_date, codec, config, error, identity, naming, protocol, sse, task_store, user_dirs};
