//! A gateway session in front of a server listing 20,000 tools, no two
//! with the same `inputSchema`: the heap its name tables and its
//! `tools/list` answers (every page, as a client walks them) add to the
//! runtime's at most is 5 times the listing's size (schemas stay text
//! until a page is written), and the tools it lists are whole. It holds
//! `crate::alone()`: the binary's global allocator counts the whole heap.

use std::time::Duration;

use mcpvisor::actors::gateway::ClientBridge;
use mcpvisor::config::{RuntimeConfig, ServerConfig};
use mcpvisor::Runtime;
use serde_json::json;

use crate::counting_alloc;
use crate::many_tools;

const TOOLS: usize = 20_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_session_lists_within_a_small_multiple_of_the_listing() {
    let _alone = crate::alone().await;
    let args = many_tools::many_tools(TOOLS, true);
    let answer = many_tools::answer_size(&args);
    let start = counting_alloc::live();
    let bridge = ClientBridge::default();
    let config = RuntimeConfig::new([ServerConfig::stdio("many", "python3", args)]);
    let handle = Runtime::builder(config).client_handlers(bridge.handlers()).start().expect("the runtime starts");
    assert!(handle.wait_ready(Duration::from_secs(60)).await, "the server did not settle");
    // The runtime lets go of what reading the listing held (memory_catalog_kept's bound), so
    // that the peak below is the gateway session's.
    crate::settled_within(start, 5 * answer, "the runtime's kept catalog").await;

    let before = counting_alloc::reset_peak();
    let (mut listed, mut seventh) = (0, None);
    many_tools::list_through_gateway(&handle, &bridge, |tool| {
        listed += 1;
        if tool["name"] == "many__tool_000007" {
            seventh = Some(tool.clone());
        }
    })
    .await;
    let peak = counting_alloc::peak().saturating_sub(before);
    eprintln!("a gateway session peaked at {peak} bytes beyond the runtime's for a {answer}-byte listing");
    assert_eq!(listed, TOOLS);
    let seventh = seventh.expect("tool_000007 is listed");
    assert_eq!(seventh["inputSchema"], json!({"type": "object", "properties": {"text_7": {"type": "string"}}}));
    assert_eq!(seventh["description"], "Tool number 7 of a large catalog.");
    // Parsed tools were held before: 20 times the listing (docs/benchmarks.md).
    assert!(peak <= 5 * answer, "a gateway session peaked at {peak} bytes for a {answer}-byte listing");
    handle.shutdown().await;
}
