//! mcpvisor against real MCP servers over HTTP: the npm reference server
//! `everything` in its Streamable HTTP and HTTP+SSE modes, our Python SDK
//! 2.x server (tests/interop/modern_server.py) over stateless Streamable
//! HTTP, and our FastMCP server on the Python SDK's 1.x line
//! (tests/interop/fastmcp_server.py) over Streamable HTTP with sessions and
//! over HTTP+SSE. Each test starts its server on a free local port
//! (tests/interop_support/http.rs); `.ci/interop-setup` installs them.
//!
//! Like tests/interop/servers_stdio.rs, every test is `#[ignore]`d and `.ci/run` runs
//! them with `MCPVISOR_INTEROP=1 cargo test --test interop servers_http:: -- --ignored`
//! (a missing variable, manifest or server fails, never skips).
//!
//! | server | transport (config) | exercised |
//! | --- | --- | --- |
//! | everything | `http` at `/mcp`; `sse` at `/sse`; `http` at `/sse` (fallback) | the whole stdio survey: tools, structured content, image, resources, templates, prompts, completion, progress, logging, subscriptions, sampling, elicitation, roots, a task-required tool |
//! | py (mcp 2.x) | `http`, stateless, era auto and modern | progress, per-request logging, sampling/elicitation/roots as `input_required` rounds, resources, prompt, completion, `subscriptions/listen` |
//! | fastmcp (mcp 1.x) | `http` with sessions; `sse` | progress, logs, sampling, elicitation and roots as server requests, resources, prompt, `resources/subscribe` with updates on the session's stream |
//! | all five | `mcpvisor call` and `mcpvisor read` | the command line reaches each |

use std::time::Duration;

use crate::common::{status_of, text};
use crate::interop_support::everything::everything;
use crate::interop_support::http::HttpServer;
use crate::interop_support::python::{adds, counts_with_progress_and_logs, py};
use crate::interop_support::{call, era_of, next_event, object, resource_text, start, user};
use mcpvisor::actors::Event;
use mcpvisor::config::{Era, ServerConfig, Transport};
use serde_json::json;

/// The remote server `name` at `url`, in `era`.
fn remote(name: &str, transport: Transport, url: &str, era: Era) -> ServerConfig {
    let mut config = ServerConfig::remote(name, transport, url);
    config.era = era;
    config
}

// ---------------------------------------------------------------- everything

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn everything_streamable_http() {
    let server = HttpServer::start("everything-http");
    everything(remote("everything", Transport::Http, &server.url, Era::Auto)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn everything_sse() {
    let server = HttpServer::start("everything-sse");
    everything(remote("everything", Transport::Sse, &server.url, Era::Auto)).await;
}

/// `transport = "http"` pointed at a legacy HTTP+SSE server: the first POST
/// is refused, a GET opens an SSE stream, and the client goes on over SSE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn everything_http_falls_back_to_sse() {
    let server = HttpServer::start("everything-sse");
    everything(remote("everything", Transport::Http, &server.url, Era::Auto)).await;
}

// ---------------------------------------------------------------- py (mcp 2.x, stateless)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn py_stateless_http_auto() {
    let server = HttpServer::start("py-http");
    py(remote("py", Transport::Http, &server.url, Era::Auto), "modern").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn py_stateless_http_modern() {
    let server = HttpServer::start("py-http");
    py(remote("py", Transport::Http, &server.url, Era::Modern), "modern").await;
}

// ---------------------------------------------------------------- fastmcp (mcp 1.x)

/// The checks of tests/interop/fastmcp_server.py against `config` (a server
/// named `fastmcp`): the `initialize` era, server requests, subscriptions.
async fn fastmcp(config: ServerConfig) {
    let (handlers, asked) = user(&["/tmp/interop-fastmcp-root"]);
    let how = format!("{:?}", config.transport);
    let handle = start(config, Some(handlers)).await;
    let (era, version) = era_of(&handle, "fastmcp").await;
    assert_eq!(era, "legacy", "{how}: {version}");
    let status = status_of(&handle, "fastmcp").await;
    assert_eq!((status.tools, status.resources, status.prompts), (6, 1, 1), "{how}: {status:?}");

    adds(&handle, "fastmcp").await;
    let mut events = handle.subscribe();
    counts_with_progress_and_logs(&handle, "fastmcp", &mut events).await;

    // Elicitation, sampling and roots: requests from the server, answered by the embedder.
    assert_eq!(text(&call(&handle, "fastmcp", "ask_name", json!({})).await), "accept:Ada", "{how}: the default is kept");
    let summary = text(&call(&handle, "fastmcp", "summarize", json!({"text": "actors and supervisors"})).await);
    assert_eq!(summary, "summary by interop-model: model says: Summarize: actors and supervisors", "{how}");
    assert_eq!(text(&call(&handle, "fastmcp", "list_roots", json!({})).await), "file:///tmp/interop-fastmcp-root", "{how}");
    {
        let asked = asked.lock().unwrap();
        assert_eq!(asked.elicited, ["What is your name?"]);
        assert_eq!(asked.sampled[0]["systemPrompt"], "You summarize in one line.");
    }

    // Resources, template, prompt.
    let note = handle.read_resource("fastmcp", "note://hello").await.unwrap();
    assert_eq!(resource_text(&note.contents), "hello from fastmcp");
    let echoed = handle.read_resource("fastmcp", "note://echo/actix").await.unwrap();
    assert_eq!(resource_text(&echoed.contents), "echo: actix");
    let review = handle.get_prompt("fastmcp", "review", object(json!({"code": "fn main() {}"}))).await.unwrap();
    assert_eq!(serde_json::to_value(&review.messages).unwrap()[0]["content"]["text"], "Please review this code:\nfn main() {}");

    // Subscriptions: the update comes outside any request (the session's GET
    // stream over Streamable HTTP, the one stream over SSE).
    handle.subscribe_resource("fastmcp", "note://hello").await.unwrap();
    assert_eq!(text(&call(&handle, "fastmcp", "touch", json!({"uri": "note://hello"})).await), "touched note://hello");
    let updated = next_event(&mut events, Duration::from_secs(10), "resources/updated", |e| match e {
        Event::ResourceUpdated { server, uri } if server == "fastmcp" => Some(uri),
        _ => None,
    });
    assert_eq!(updated.await, "note://hello", "{how}");
    handle.unsubscribe_resource("fastmcp", "note://hello").await.unwrap();
    assert!(handle.ping("fastmcp").await.is_ok(), "{how}");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn fastmcp_streamable_http() {
    let server = HttpServer::start("fastmcp-http");
    fastmcp(remote("fastmcp", Transport::Http, &server.url, Era::Auto)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
async fn fastmcp_sse() {
    let server = HttpServer::start("fastmcp-sse");
    fastmcp(remote("fastmcp", Transport::Sse, &server.url, Era::Auto)).await;
}

// ---------------------------------------------------------------- the command line

/// Runs `mcpvisor --config FILE ARGS...` in a sandbox whose only server is
/// `name` at `url`; returns stdout, failing with stderr on a non-zero exit.
fn mcpvisor(name: &str, transport: &str, url: &str, args: &[&str]) -> String {
    let sandbox = tempfile::tempdir().unwrap();
    let config = sandbox.path().join("servers.toml");
    std::fs::write(&config, format!("[servers.{name}]\nurl = \"{url}\"\ntransport = \"{transport}\"\n")).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mcpvisor"))
        .arg("--config")
        .arg(&config)
        .args(args)
        .current_dir(sandbox.path())
        .env("HOME", sandbox.path())
        .env("XDG_CONFIG_HOME", sandbox.path().join("config"))
        .env("XDG_CACHE_HOME", sandbox.path().join("cache"))
        .env_remove("MCPVISOR_CONFIG")
        .output()
        .expect("mcpvisor runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "mcpvisor {args:?} on {url}: {}\nstdout:\n{stdout}\nstderr:\n{stderr}", output.status);
    stdout.into_owned()
}

#[test]
#[ignore = "needs MCPVISOR_INTEROP=1 and .ci/interop-setup"]
fn the_command_line_calls_and_reads_over_http_and_sse() {
    for (manifest, transport) in [("everything-http", "http"), ("everything-sse", "sse")] {
        let server = HttpServer::start(manifest);
        let echoed = mcpvisor("everything", transport, &server.url, &["call", "everything", "echo", r#"{"message": "hi"}"#]);
        assert_eq!(echoed.trim(), "Echo: hi", "{manifest}");
        let summed = mcpvisor("everything", transport, &server.url, &["call", "everything", "get-sum", "--arg", "a=2", "--arg", "b=3"]);
        assert_eq!(summed.trim(), "The sum of 2 and 3 is 5.", "{manifest}");
        let read = mcpvisor("everything", transport, &server.url, &["read", "everything", "demo://resource/dynamic/text/1"]);
        assert!(read.contains("Resource 1: This is a plaintext resource"), "{manifest}: {read}");
    }
    for (manifest, name, transport, note) in [
        ("py-http", "py", "http", "hello from python"),
        ("fastmcp-http", "fastmcp", "http", "hello from fastmcp"),
        ("fastmcp-sse", "fastmcp", "sse", "hello from fastmcp"),
    ] {
        let server = HttpServer::start(manifest);
        let added = mcpvisor(name, transport, &server.url, &["call", name, "add", "--arg", "a=2", "--arg", "b=40"]);
        assert_eq!(added.trim(), "42", "{manifest}");
        let read = mcpvisor(name, transport, &server.url, &["read", name, "note://hello"]);
        assert_eq!(read.trim(), note, "{manifest}");
    }
}
