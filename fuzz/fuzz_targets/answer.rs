//! Answer matching: what a connection does with each line a server sends.
//! Each line is parsed as a JSON-RPC message (`Message::parse`, as the
//! codec does); a response's id is what finds the waiting call, and its
//! result is read as the MCP result types; an oversized line is matched by
//! the id `peek_id` finds in its first bytes.
//!
//! Properties: never panics; `peek_id` on the head of a line that parses
//! as a response finds that response's id or nothing, never another id
//! (which would fail an unrelated call).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpvisor_wire::codec::peek_id;
use mcpvisor_wire::protocol::schema::ToolContract;
use mcpvisor_wire::protocol::Message;
use rmcp::model::{CallToolResult, ListToolsResult};

/// How many leading bytes of an oversized frame the codec keeps.
const HEAD_LEN: usize = 256;

fuzz_target!(|data: &[u8]| {
    for line in data.split(|&b| b == b'\n') {
        let peeked = peek_id(&line[..line.len().min(HEAD_LEN)]);
        let Ok(message) = Message::parse(line) else { continue };
        if let Message::Response { id: Some(id), outcome } = message {
            if let Some(peeked) = peeked {
                assert_eq!(peeked, id, "peek_id found another id than the response's in {:?}", String::from_utf8_lossy(line));
            }
            if let Ok(raw) = outcome {
                let _ = serde_json::from_str::<CallToolResult>(raw.get());
                if let Ok(list) = serde_json::from_str::<ListToolsResult>(raw.get()) {
                    for tool in &list.tools {
                        let contract = ToolContract::of(tool, false);
                        let _ = contract.check_arguments(&serde_json::Value::Null);
                    }
                }
            }
        }
    }
});
