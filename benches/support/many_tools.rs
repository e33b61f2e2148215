//! The many-tools server of the memory bench and tests
//! (`tests/fixtures/misbehaving_server.py many-tools N [distinct]`), and a
//! gateway session that lists its tools page by page as a client does.

use std::process::{Command, Stdio};

use mcpvisor::actors::gateway::{ClientBridge, ServeOptions};
use mcpvisor::gateway::stdio;
use mcpvisor::Handle;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/misbehaving_server.py");

/// The fixture's arguments for `tools` tools, each with its own `inputSchema` if `distinct`.
pub fn many_tools(tools: usize, distinct: bool) -> Vec<String> {
    let mut args = vec![FIXTURE.to_string(), "many-tools".into(), tools.to_string()];
    args.extend(distinct.then(|| "distinct".to_string()));
    args
}

/// The size of the fixture's `tools/list` answer in bytes.
pub fn answer_size(args: &[String]) -> usize {
    let mut child =
        Command::new("python3").args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("python3 runs the fixture");
    let request = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n";
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), request).expect("the request is written");
    child.wait_with_output().expect("the fixture answers").stdout.len()
}

/// Lists every tool through one gateway session on `handle` (started with
/// `bridge`'s handlers), following `nextCursor`; each listed tool is shown
/// to `seen` and dropped, so the client keeps no page past the next.
#[allow(dead_code, reason = "not every user of this module runs a gateway")]
pub async fn list_through_gateway(handle: &Handle, bridge: &ClientBridge, mut seen: impl FnMut(&Value)) {
    let (mut input, served_input) = tokio::io::duplex(64 * 1024);
    let (served_output, output) = tokio::io::duplex(64 * 1024);
    let session = tokio::spawn(stdio::serve(handle.clone(), ServeOptions::default(), bridge.clone(), served_input, served_output));
    let mut lines = BufReader::new(output).lines();
    let (mut id, mut params) = (0, json!({}));
    loop {
        id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params});
        input.write_all(format!("{request}\n").as_bytes()).await.expect("the request is written");
        let page = loop {
            let line = lines.next_line().await.expect("the session answers").expect("the session is open");
            let message: Value = serde_json::from_str(&line).expect("the session writes JSON");
            if message["id"] == id {
                break message;
            }
        };
        let result = &page["result"];
        result["tools"].as_array().expect("a page of tools").iter().for_each(&mut seen);
        match result.get("nextCursor") {
            Some(cursor) => params = json!({"cursor": cursor}),
            None => break,
        }
    }
    drop(input);
    session.await.expect("the session ends");
}
