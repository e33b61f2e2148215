//! The gateway tests, one binary (issue 32: one link of the crate per theme, not one per file).

#[path = "../cli_support/mod.rs"]
mod cli_support;
#[path = "../common/mod.rs"]
mod common;
#[path = "../gateway_http_support/mod.rs"]
mod gateway_http_support;
#[path = "../gateway_support/mod.rs"]
mod gateway_support;
#[path = "../oauth_server/mod.rs"]
mod oauth_server;
#[path = "../otel_support/mod.rs"]
mod otel_support;

mod gateway;
mod gateway_audit;
mod gateway_era_logs;
mod gateway_http;
mod gateway_http_audit;
mod gateway_http_deploy;
mod gateway_http_limits;
mod gateway_http_memory;
mod gateway_http_mrtr;
mod gateway_http_policy;
mod gateway_http_requests;
mod gateway_http_slow;
mod gateway_http_tenancy;
mod gateway_http_workers;
mod gateway_policy_stdio;
mod gateway_serve_config;
mod gateway_sessions;
mod gateway_tls;
mod isolation;
mod otel;
mod per_caller;
mod per_caller_login;
mod per_caller_login_check;
mod token_exchange;
mod token_exchange_id_jag;
mod top_admin;
