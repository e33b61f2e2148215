//! Embedding mcpvisor in a multi-threaded tokio program.
//!
//! `Runtime::start` runs the actor system on its own thread; the `Handle`
//! it returns is `Send + Sync + Clone`, so tasks on any worker thread call
//! tools through it concurrently. Dropping the last handle stops every
//! server and reaps it.
//!
//! Run: `cargo run --example embed`. The servers are the bundled demo
//! server, run by this same executable when its first argument is
//! `demo-server`.

use std::time::Duration;

use mcpvisor::config::{RuntimeConfig, ServerConfig};
use mcpvisor::{CallError, Runtime};
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("demo-server") {
        std::process::exit(mcpvisor::demo_server::run(Default::default()));
    }
    tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build()?.block_on(embed())
}

async fn embed() -> Result<(), Box<dyn std::error::Error>> {
    let this_exe = std::env::current_exe()?.to_string_lossy().into_owned();
    let servers = ["left", "right"].map(|name| ServerConfig::stdio(name, this_exe.clone(), ["demo-server"]));
    let handle = Runtime::start(RuntimeConfig::new(servers))?;
    if !handle.wait_ready(Duration::from_secs(10)).await {
        return Err("the demo servers did not start within 10 s".into());
    }
    for tool in handle.list_tools().await.iter().filter(|t| t.tool.name == "add") {
        println!("found {} (server {})", tool.name, tool.server);
    }

    // Eight tasks on four worker threads share one handle.
    let tasks: Vec<_> = (0..8)
        .map(|task| {
            let handle = handle.clone();
            tokio::spawn(async move {
                let server = if task % 2 == 0 { "left" } else { "right" };
                let mut total = 0.0;
                for i in 0..25 {
                    let result = handle.call_tool(&format!("mcp__{server}__add"), json!({"a": task, "b": i})).await?;
                    total += result.structured_content.as_ref().and_then(|v| v["sum"].as_f64()).unwrap_or_default();
                }
                Ok::<_, CallError>((task, server, total))
            })
        })
        .collect();
    for task in tasks {
        let (task, server, total) = task.await??;
        println!("task {task} on {server}: 25 calls, sum of sums {total}");
    }

    // Errors are typed and say what to do.
    if let Err(error) = handle.call_tool("mcp__left__no_such_tool", None).await {
        println!("as expected: {error}");
    }
    for status in handle.status().await {
        println!("{}: {} (pid {:?}, {} tools, {} restarts)", status.name, status.state.label(), status.pid, status.tools, status.restarts);
    }
    // Dropping the last handle would also do this, blocking the thread.
    handle.shutdown().await;
    Ok(())
}
