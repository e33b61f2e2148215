//! Two gateway sessions on one pool, through the library's seam
//! (`mcpvisor::gateway::stdio::serve` over in-memory pipes): a client that
//! stops reading holds only its own session; the other is served meanwhile.

use crate::common;

use mcpvisor::actors::gateway::ClientBridge;
use mcpvisor::actors::gateway::ServeOptions;
use mcpvisor::config::RuntimeConfig;
use mcpvisor::gateway::stdio;
use mcpvisor::Runtime;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::time::timeout;

/// How long one awaited line may take before the test fails (a bound against hangs, not a timing check).
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// A client's ends of one session: what it writes, and the lines it reads.
struct Client {
    input: DuplexStream,
    output: tokio::io::Lines<BufReader<DuplexStream>>,
}

fn session(handle: &mcpvisor::Handle, bridge: &ClientBridge) -> Client {
    let (input, served_input) = tokio::io::duplex(16 * 1024);
    let (served_output, output) = tokio::io::duplex(16 * 1024);
    tokio::spawn(stdio::serve(handle.clone(), ServeOptions::default(), bridge.clone(), served_input, served_output));
    Client { input, output: BufReader::new(output).lines() }
}

fn line(id: i64, method: &str, params: Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).unwrap();
    line.push(b'\n');
    line
}

impl Client {
    async fn call(&mut self, id: i64, name: &str, arguments: Value) -> Value {
        self.input.write_all(&line(id, "tools/call", json!({"name": name, "arguments": arguments}))).await.unwrap();
        loop {
            let text = timeout(PATIENCE, self.output.next_line())
                .await
                .expect("the session answers in time")
                .unwrap()
                .expect("the session answers");
            let message: Value = serde_json::from_str(&text).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_does_not_hold_up_another_session() {
    const FLOOD: i64 = 1000;
    let bridge = ClientBridge::default();
    let config = RuntimeConfig::new([common::demo("demo", &[])]);
    let handle = Runtime::builder(config).client_handlers(bridge.handlers()).start().expect("the runtime starts");
    let mut stuck = session(&handle, &bridge);
    let mut served = session(&handle, &bridge);
    assert_eq!(served.call(1, "demo__echo", json!({"text": "first"})).await["result"]["content"][0]["text"], "first");

    // The stuck client writes many calls with large answers and reads none of them.
    let mut stuck_input = stuck.input;
    let flood = tokio::spawn(async move {
        for id in 1..=FLOOD {
            stuck_input.write_all(&line(id, "tools/call", json!({"name": "demo__big", "arguments": {"bytes": 20_000}}))).await.unwrap();
        }
        stuck_input
    });
    for id in 2..22 {
        let answer = served.call(id, "demo__echo", json!({"text": format!("call {id}")})).await;
        assert_eq!(answer["result"]["content"][0]["text"], format!("call {id}"), "{answer}");
    }
    // Now it reads: every one of its calls was answered, in full.
    let mut answered = 0;
    while answered < FLOOD {
        let line = timeout(PATIENCE, stuck.output.next_line()).await.expect("the stuck session answers in time once read");
        let text = line.unwrap().expect("the stuck session answers once read");
        let message: Value = serde_json::from_str(&text).unwrap();
        if message.get("id").is_some() {
            assert_eq!(message["result"]["content"][0]["text"].as_str().map(str::len), Some(20_000), "{}", &text[..200.min(text.len())]);
            answered += 1;
        }
    }
    drop(flood.await.unwrap());
    handle.shutdown().await;
}
