//! The scripted model server of the agent's tests, read by the official
//! `openai` and `anthropic` Python SDKs: proof that what the tests feed our
//! providers is the real wire format, as the vendors' own clients parse it.
//! Run by `.ci/run` (the SDKs come from `.ci/model-sdks-setup`):
//! `MCPVISOR_MODEL_SDKS_PY=/path/to/python cargo test --test interop model_sdks:: -- --ignored`.

use crate::model_server::{anthropic_stream, openai_stream, openai_whole, ModelServer, Reply};
use serde_json::{json, Value};

#[tokio::test]
#[ignore = "needs the official SDKs: run by .ci/run with MCPVISOR_MODEL_SDKS_PY"]
async fn the_official_sdks_read_the_scripted_answers_as_scripted() {
    let python = std::env::var("MCPVISOR_MODEL_SDKS_PY").expect("MCPVISOR_MODEL_SDKS_PY names the python that has openai and anthropic");
    let call = json!({"index": 0, "id": "call_1", "type": "function", "function": {"name": "mcp__demo__add", "arguments": "{\"a\":2,"}});
    let rest = json!({"index": 0, "function": {"arguments": "\"b\":3}"}});
    let tool_use = json!({"type": "tool_use", "id": "toolu_1", "name": "mcp__demo__add", "input": {}});
    let whole_anthropic = json!({"id": "msg_2", "type": "message", "role": "assistant", "model": "scripted", "stop_reason": "tool_use",
        "stop_sequence": null, "content": [{"type": "text", "text": "Adding."},
        {"type": "tool_use", "id": "toolu_2", "name": "mcp__demo__add", "input": {"a": 2, "b": 3}}],
        "usage": {"input_tokens": 20, "output_tokens": 6}});
    let server = ModelServer::start([
        openai_stream(
            vec![
                json!({"role": "assistant", "content": "Adding"}),
                json!({"content": "."}),
                json!({"tool_calls": [call]}),
                json!({"tool_calls": [rest]}),
            ],
            "tool_calls",
        ),
        openai_whole(
            Some("five"),
            vec![json!({"id": "call_2", "type": "function", "function": {"name": "mcp__demo__add", "arguments": "{\"a\":2,\"b\":3}"}})],
            "tool_calls",
        ),
        anthropic_stream(
            vec![
                (json!({"type": "text", "text": ""}), vec![json!({"type": "text_delta", "text": "Adding."})]),
                (
                    tool_use,
                    vec![
                        json!({"type": "input_json_delta", "partial_json": "{\"a\":2,"}),
                        json!({"type": "input_json_delta", "partial_json": "\"b\":3}"}),
                    ],
                ),
            ],
            "tool_use",
        ),
        Reply::Json(whole_anthropic),
    ])
    .await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/model_sdks.py");
    let url = server.url.clone();
    let output =
        tokio::task::spawn_blocking(move || std::process::Command::new(python).arg(script).arg(url).output().unwrap()).await.unwrap();
    assert!(output.status.success(), "the SDKs failed:\n{}", String::from_utf8_lossy(&output.stderr));
    let parsed: Value = serde_json::from_slice(&output.stdout).unwrap();

    let add = |id: &str| json!({"id": id, "name": "mcp__demo__add", "arguments": "{\"a\":2,\"b\":3}"});
    assert_eq!(parsed["openai_stream"], json!({"text": "Adding.", "calls": [add("call_1")], "finish": "tool_calls", "usage": [11, 7]}));
    assert_eq!(parsed["openai_whole"], json!({"text": "five", "calls": [add("call_2")], "finish": "tool_calls", "usage": [5, 3]}));
    let blocks = |id: &str| {
        json!([{"type": "text", "text": "Adding.", "id": null, "name": null, "input": null},
               {"type": "tool_use", "text": null, "id": id, "name": "mcp__demo__add", "input": {"a": 2, "b": 3}}])
    };
    assert_eq!(parsed["anthropic_stream"], json!({"blocks": blocks("toolu_1"), "stop": "tool_use", "usage": [13, 9]}));
    assert_eq!(parsed["anthropic_whole"], json!({"blocks": blocks("toolu_2"), "stop": "tool_use", "usage": [20, 6]}));
    let paths: Vec<String> = server.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths, ["/v1/chat/completions", "/v1/chat/completions", "/v1/messages", "/v1/messages"]);
}
