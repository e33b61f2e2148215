//! A server listing 20,000 tools, no two with the same `inputSchema`: the
//! catalog the runtime keeps once ready is at most 5 times the listing's
//! size (schemas are kept as text), the tools it hands out are whole, kept
//! tools are handed out for less than the listing, and calls are still
//! checked against the schemas. It holds `crate::alone()`: the binary's
//! global allocator counts the whole process's heap.

use std::time::Duration;

use mcpvisor::config::{RuntimeConfig, ServerConfig};
use mcpvisor::{CallError, Runtime};
use serde_json::json;

use crate::counting_alloc;
use crate::many_tools;

const TOOLS: usize = 20_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kept_catalog_is_a_small_multiple_of_its_listing() {
    let _alone = crate::alone().await;
    let args = many_tools::many_tools(TOOLS, true);
    let answer = many_tools::answer_size(&args);
    let before = counting_alloc::reset_peak();
    let handle = Runtime::start(RuntimeConfig::new([ServerConfig::stdio("many", "python3", args)])).unwrap();
    assert!(handle.wait_ready(Duration::from_secs(60)).await, "the server did not settle");
    // What the listing's reading held is let go soon after: the kept catalog is what stays.
    let kept = crate::settled_within(before, 5 * answer, "the kept catalog").await;
    let peak = counting_alloc::peak().saturating_sub(before);
    eprintln!("kept {kept} bytes (peak {peak}) for a {answer}-byte listing");
    // Parsed schemas were kept before: 16 times the listing (docs/benchmarks.md).
    assert!(kept <= 5 * answer, "the catalog keeps {kept} bytes for a {answer}-byte listing");

    let tools = handle.list_tools().await;
    assert_eq!(tools.len(), TOOLS);
    let tool = &tools.iter().find(|entry| entry.tool.name == "tool_000007").expect("tool_000007 is listed").tool;
    let expected = json!({"type": "object", "properties": {"text_7": {"type": "string"}}});
    assert_eq!(serde_json::Value::Object((*tool.input_schema).clone()), expected);
    assert_eq!(tool.description.as_deref(), Some("Tool number 7 of a large catalog."));
    drop(tools);

    // Kept tools are handed out with the registry's texts: the names are copied, not the schemas.
    let ready = counting_alloc::reset_peak();
    let kept_tools = handle.list_kept_tools().await;
    let handed_out = counting_alloc::peak().saturating_sub(ready);
    eprintln!("handing the kept catalog out took {handed_out} bytes");
    assert_eq!(kept_tools.len(), TOOLS);
    assert!(handed_out <= answer, "handing the kept catalog out took {handed_out} bytes for a {answer}-byte listing");
    let kept = &kept_tools.iter().find(|entry| entry.tool.name() == "tool_000007").expect("tool_000007 is listed").tool;
    assert_eq!(json!(kept)["inputSchema"], expected, "a kept tool is written whole");
    drop(kept_tools);

    let refused = handle.call_tool("mcp__many__tool_000007", json!({"text_7": 5})).await;
    match refused {
        Err(CallError::InvalidArguments { message, .. }) => assert!(message.contains("text_7"), "{message}"),
        other => panic!("a number for a string argument was not refused: {other:?}"),
    }
    handle.shutdown().await;
}
