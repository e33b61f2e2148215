//! The runtime tests, one binary (issue 32: one link of the crate per theme, not one per file).

#[path = "../common/mod.rs"]
mod common;
#[path = "../gateway_http_support/mod.rs"]
mod gateway_http_support;
#[path = "../http_fixture/mod.rs"]
mod http_fixture;
#[path = "../model_server/mod.rs"]
mod model_server;
#[path = "../oauth_server/mod.rs"]
mod oauth_server;

mod agent;
mod audit;
mod builtin_tools;
mod calls;
mod client;
mod embedding;
mod faults;
mod in_process;
mod llm;
mod management;
mod metrics;
mod misbehaving;
mod naming;
mod oauth;
mod oauth_dpop;
mod panics;
mod pin_notify;
mod rate_limits;
mod remote;
mod sandbox;
mod sandbox_doors;
mod sessions;
mod skills;
mod supervision;
mod threads;
