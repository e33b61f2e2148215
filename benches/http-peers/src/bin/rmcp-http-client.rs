//! rmcp (the official Rust SDK) over its Streamable HTTP client transport
//! (reqwest), used the way its docs show: `().serve(transport)`.
//!
//! usage: rmcp-http-client URL seq N | conc N K | connect R
//! The runtime is tokio's multi-thread one; RMCP_RUNTIME=current_thread runs
//! it on one thread and reports "rmcp-ct".

use mcp_http_peers::{arguments, report, WARMUP};
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Client = RunningService<RoleClient, ()>;

async fn connect_client(url: &str) -> Client {
    let client = ().serve(StreamableHttpClientTransport::from_uri(url.to_string())).await.expect("initialize");
    client.list_tools(None).await.expect("tools/list");
    client
}

async fn call(client: &Client) {
    let mut arguments = JsonObject::new();
    arguments.insert("text".into(), "hello world".into());
    let result = client.call_tool(CallToolRequestParams::new("echo").with_arguments(arguments)).await.expect("tools/call");
    assert_eq!(result.content[0].as_text().map(|t| t.text.as_str()), Some("hello world"));
}

/// K tasks, each calling back to back until N calls are made (K=1: sequential).
async fn calls(url: &str, n: usize, k: usize) -> (Duration, Vec<u64>) {
    let client = Arc::new(connect_client(url).await);
    for _ in 0..WARMUP {
        call(&client).await;
    }
    let next = Arc::new(AtomicUsize::new(0));
    let begin = Instant::now();
    let workers: Vec<_> = (0..k)
        .map(|_| {
            let (client, next) = (client.clone(), next.clone());
            tokio::spawn(async move {
                let mut lat = Vec::new();
                while next.fetch_add(1, Ordering::Relaxed) < n {
                    let t = Instant::now();
                    call(&client).await;
                    lat.push(t.elapsed().as_nanos() as u64);
                }
                lat
            })
        })
        .collect();
    let mut lat = Vec::with_capacity(n);
    for worker in workers {
        lat.extend(worker.await.expect("worker"));
    }
    let secs = begin.elapsed();
    if let Ok(client) = Arc::try_unwrap(client) {
        client.cancel().await.ok();
    }
    (secs, lat)
}

async fn connect(url: &str, runs: usize) -> (Duration, Vec<u64>) {
    let begin = Instant::now();
    let mut lat = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        let client = connect_client(url).await;
        lat.push(t.elapsed().as_nanos() as u64);
        client.cancel().await.ok();
    }
    (begin.elapsed(), lat)
}

fn main() {
    let current = std::env::var("RMCP_RUNTIME").as_deref() == Ok("current_thread");
    let mut runtime = if current { tokio::runtime::Builder::new_current_thread() } else { tokio::runtime::Builder::new_multi_thread() };
    let runtime = runtime.enable_all().build().expect("tokio runtime");
    let (url, mode, n) = arguments("rmcp-http-client");
    let (mode, (secs, lat), extra) = runtime.block_on(async {
        match (mode.as_str(), n.as_slice()) {
            ("seq", [n, ..]) => ("seq", calls(&url, *n, 1).await, String::new()),
            ("conc", [n, k, ..]) => ("conc", calls(&url, *n, *k).await, format!(r#","k":{k}"#)),
            ("connect", [r, ..]) => ("connect", connect(&url, *r).await, String::new()),
            _ => {
                eprintln!("usage: rmcp-http-client URL seq N | conc N K | connect R");
                std::process::exit(2)
            }
        }
    });
    report(if current { "rmcp-ct" } else { "rmcp" }, mode, secs, lat, &extra);
}
