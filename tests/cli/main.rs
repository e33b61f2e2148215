//! The cli tests, one binary (issue 32: one link of the crate per theme, not one per file).

#[path = "../acp_support/mod.rs"]
mod acp_support;
#[path = "../cli_support/mod.rs"]
mod cli_support;
#[path = "../common/mod.rs"]
mod common;
#[path = "../gateway_http_support/mod.rs"]
mod gateway_http_support;
#[path = "../gateway_support/mod.rs"]
mod gateway_support;
#[path = "../http_fixture/mod.rs"]
mod http_fixture;
#[path = "../model_server/mod.rs"]
mod model_server;
#[path = "../oauth_server/mod.rs"]
mod oauth_server;
#[path = "../otel_support/mod.rs"]
mod otel_support;

mod acp;
mod cli;
mod cli_agent;
mod cli_calls;
mod cli_chat;
mod cli_config;
mod cli_import;
mod cli_manage;
mod cli_output;
mod cli_pins;
mod cli_redaction;
mod cli_remote;
mod cli_scan;
mod cli_secrets;
mod cli_serve_nesting;
mod cli_signals;
mod cli_terminal;
mod cli_tool_cache;
mod cli_tool_configs;
mod hostile_peers;
mod oauth_cli;
mod otel_agent;
mod permissions;
mod processes;
mod roots;
mod top_terminal;
