//! The interop tests, one binary (issue 32: one link of the crate per theme, not one per file).

#[path = "../common/mod.rs"]
mod common;
#[path = "../gateway_http_support/mod.rs"]
mod gateway_http_support;
#[path = "../gateway_support/mod.rs"]
mod gateway_support;
#[path = "../interop_support/mod.rs"]
mod interop_support;
#[path = "../model_server/mod.rs"]
mod model_server;
#[path = "../oauth_server/mod.rs"]
mod oauth_server;

mod gateway_auth;
mod gateway_http;
mod gateway_login;
mod gateway_per_caller;
mod gateway_replicas;
mod gateway_stdio;
mod model_sdks;
mod roots;
mod servers_http;
mod servers_stdio;
