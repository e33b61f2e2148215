//! The audit log against real calls to the demo server: one valid JSON
//! line per call, secrets never written, rotation at the size limit.

use std::path::Path;
use std::time::Duration;

use crate::common::demo;
use mcpvisor::config::RuntimeConfig;
use mcpvisor::telemetry::{AuditArguments, AuditConfig, Telemetry};
use mcpvisor::{CallError, CallTool, Handle, Runtime};
use serde_json::{json, Value};

const CONFIGURED_SECRET: &str = "cfg-secret-7f3a9c2e1b";

async fn start_with(audit: AuditConfig) -> Handle {
    let telemetry = Telemetry::default().with_audit(audit).unwrap();
    let server = demo("demo", &[]).with_env("DEMO_API_TOKEN", CONFIGURED_SECRET);
    let handle = Runtime::builder(RuntimeConfig::new([server])).telemetry(telemetry).start().unwrap();
    assert!(handle.wait_ready(Duration::from_secs(20)).await);
    handle
}

/// Every line of the file, each parsed as one JSON object.
fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    assert!(text.is_empty() || text.ends_with('\n'), "lines end with a newline");
    text.lines().map(|line| serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_line_per_call_with_caller_digest_duration_and_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("logs/calls.jsonl");
    let handle = start_with(AuditConfig::file(&path)).await;
    let arguments = json!({"text": "hello"});
    handle.call(CallTool::new("mcp__demo__echo", arguments.clone()).with_caller("session-1")).await.unwrap();
    handle.call_tool("mcp__demo__fail", json!({})).await.unwrap();
    let slow = handle.call(CallTool::new("mcp__demo__sleep", json!({"ms": 5000})).with_timeout(Duration::from_millis(30))).await;
    assert!(matches!(slow, Err(CallError::Timeout { .. })));
    assert!(handle.telemetry().audit().unwrap().flush(Duration::from_secs(10)));
    let lines = lines(&path);
    assert_eq!(lines.len(), 3, "{lines:?}");
    let echo = &lines[0];
    let digest = ring::digest::digest(&ring::digest::SHA256, serde_json::to_string(&arguments).unwrap().as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        (&echo["caller"], &echo["server"], &echo["tool"], &echo["arguments"], &echo["outcome"], &echo["error_kind"]),
        (&json!("session-1"), &json!("demo"), &json!("echo"), &json!({"sha256": hex}), &json!("ok"), &Value::Null)
    );
    assert!(echo["time"].as_str().is_some_and(|t| t.len() == 24 && t.ends_with('Z')), "{echo}");
    assert!(echo["duration_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{echo}");
    assert_eq!((&lines[1]["outcome"], &lines[1]["caller"]), (&json!("tool_error"), &Value::Null));
    assert_eq!((&lines[2]["outcome"], &lines[2]["error_kind"]), (&json!("timeout"), &json!("timeout")));
    assert_eq!(handle.metrics().await.audit_dropped, 0);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redacted_arguments_keep_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.jsonl");
    let handle = start_with(AuditConfig { arguments: AuditArguments::Redacted, ..AuditConfig::file(&path) }).await;
    let text = format!("use {CONFIGURED_SECRET} with Bearer abcdef0123456789abcdef please");
    let arguments = json!({"text": text, "api_key": "hunter2-hunter2", "nested": {"password": "pw-123456"}});
    // The call's own outcome does not matter: every call is audited.
    let _ = handle.call(CallTool::new("mcp__demo__echo", arguments)).await;
    assert!(handle.telemetry().audit().unwrap().flush(Duration::from_secs(10)));
    let written = std::fs::read_to_string(&path).unwrap();
    for secret in [CONFIGURED_SECRET, "hunter2-hunter2", "pw-123456", "abcdef0123456789abcdef"] {
        assert!(!written.contains(secret), "{secret} was written: {written}");
    }
    let line = &lines(&path)[0];
    assert!(line["arguments"]["text"].as_str().is_some_and(|t| t.starts_with("use ***") && t.ends_with("please")), "{line}");
    assert_eq!(line["arguments"]["api_key"], json!("***"));
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_rotate_at_the_size_limit_keeping_n() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.jsonl");
    let handle = start_with(AuditConfig { max_size: 1024, keep: 2, ..AuditConfig::file(&path) }).await;
    for i in 0..40 {
        handle.call_tool("mcp__demo__echo", json!({"text": format!("call {i}")})).await.unwrap();
    }
    assert!(handle.telemetry().audit().unwrap().flush(Duration::from_secs(10)));
    let rotated = |n: usize| dir.path().join(format!("calls.jsonl.{n}"));
    assert!(
        rotated(1).exists() && rotated(2).exists() && !rotated(3).exists(),
        "{:?}",
        std::fs::read_dir(dir.path()).unwrap().collect::<Vec<_>>()
    );
    let mut total = 0;
    for file in [rotated(2), rotated(1), path.clone()] {
        let size = std::fs::metadata(&file).unwrap().len();
        assert!(size <= 1024, "{file:?} is {size} bytes");
        total += lines(&file).len();
    }
    // Each line is about 200 bytes: 3 files of at most 1024 hold the last calls only.
    assert!((10..40).contains(&total), "{total} lines kept");
    let last = lines(&path).pop().unwrap();
    assert_eq!(last["tool"], json!("echo"));
    handle.shutdown().await;
}
