//! Log messages and progress across the protocol eras through `mcpvisor
//! serve`, with demo servers that speak one era each: a handshake-era
//! client calling a 2026-07-28 server (its session's level, or the default,
//! goes upstream as the call's own level; the messages come back to the
//! session), a 2026-07-28 client calling a handshake-era server (the
//! messages at its request's level come on its request's stream), and two
//! HTTP sessions that each hear their own level only.

use crate::gateway_support::{demo_table, within, Gateway, BIN, PATIENCE};
use serde_json::{json, Value};

/// Two demo servers, `modern` (2026-07-28 only) and `legacy` (the
/// handshake only); what the gateway writes to `legacy` is copied to
/// [`LEGACY_INPUT`] in `dir`.
fn config(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let path = dir.path().join("servers.toml");
    let copy = dir.path().join(LEGACY_INPUT);
    let legacy = format!(
        "[servers.legacy]\ncommand = \"/bin/sh\"\nargs = [\"-c\", 'tee -a \"$0\" | \"$1\" demo-server --era legacy', {copy:?}, {BIN:?}]\n"
    );
    std::fs::write(&path, [demo_table("modern", &["--era", "modern"]), legacy].concat()).unwrap();
    path
}

const LEGACY_INPUT: &str = "legacy-input.jsonl";

/// The next `notifications/message` from `server` (the gateway's own are skipped).
async fn next_log(gateway: &mut Gateway, server: &str) -> Value {
    within(&format!("a log message from `{server}`"), async {
        loop {
            let log = gateway.notification("notifications/message").await;
            if log["params"]["logger"] == server {
                return log["params"].clone();
            }
        }
    })
    .await
}

/// The progress notifications received so far, taken out of the kept ones.
fn progress_received(gateway: &mut Gateway) -> Vec<Value> {
    let (progress, rest) = gateway.notifications.drain(..).partition(|n| n["method"] == "notifications/progress");
    gateway.notifications = rest;
    Vec::from(progress)
}

#[tokio::test]
async fn a_handshake_era_client_hears_a_2026_server_at_its_sessions_level() {
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = Gateway::start(&config(&dir), &[], json!({})).await;

    // No logging/setLevel yet: the default level (debug) rides on the call, as a handshake-era server would send it all.
    let sent = gateway.call_text("modern__log", json!({"level": "debug", "message": "quiet"})).await;
    assert_eq!(sent, "sent at debug", "the call carried a level upstream");
    let log = next_log(&mut gateway, "modern").await;
    assert_eq!((log["level"].as_str(), log["data"].as_str()), (Some("debug"), Some("quiet")), "{log}");

    let call = json!({"name": "modern__progress", "arguments": {"steps": 3, "ms": 1}, "_meta": {"progressToken": "era"}});
    assert_eq!(gateway.result("tools/call", call).await["content"][0]["text"], "done 3 steps");
    let progress = progress_received(&mut gateway);
    assert_eq!(progress.len(), 3, "{progress:?}");
    assert!(progress.iter().all(|n| n["params"]["progressToken"] == "era"), "{progress:?}");

    // The session's level is the calls' level from now on.
    gateway.result("logging/setLevel", json!({"level": "warning"})).await;
    assert_eq!(gateway.call_text("modern__log", json!({"level": "info", "message": "below"})).await, "filtered");
    assert_eq!(gateway.call_text("modern__log", json!({"level": "error", "message": "above"})).await, "sent at error");
    let log = next_log(&mut gateway, "modern").await;
    assert_eq!(log["data"], "above", "nothing below the session's level came first: {log}");
    // A handshake-era server is told the level by logging/setLevel, as before.
    assert_eq!(gateway.call_text("legacy__log", json!({"level": "info", "message": "below"})).await, "filtered");
    assert_eq!(gateway.close().await, Some(0));
    let written = std::fs::read_to_string(dir.path().join(LEGACY_INPUT)).unwrap();
    assert!(written.contains("logging/setLevel"), "{written}");
    assert!(!written.contains("io.modelcontextprotocol/logLevel"), "a handshake-era server gets no per-request level: {written}");
}

#[tokio::test]
async fn a_2026_client_hears_a_handshake_era_server_on_its_requests_stream() {
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = Gateway::spawn(&config(&dir), &[]);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/logLevel": "info",
        "progressToken": "modern",
    });
    let call = |level: &str, message: &str| json!({"name": "legacy__log", "arguments": {"level": level, "message": message}, "_meta": meta.clone()});
    // The handshake-era server sends everything (it was never told a level); the request hears info and above.
    assert_eq!(gateway.result("tools/call", call("debug", "below")).await["content"][0]["text"], "sent at debug");
    assert_eq!(gateway.result("tools/call", call("info", "heard")).await["content"][0]["text"], "sent at info");
    let log = next_log(&mut gateway, "legacy").await;
    assert_eq!((log["level"].as_str(), log["data"].as_str()), (Some("info"), Some("heard")), "{log}");

    let progress = json!({"name": "legacy__progress", "arguments": {"steps": 3, "ms": 1}, "_meta": meta});
    let done = gateway.result("tools/call", progress).await;
    assert_eq!((done["content"][0]["text"].as_str(), done["resultType"].as_str()), (Some("done 3 steps"), Some("complete")));
    let progress = progress_received(&mut gateway);
    assert_eq!(progress.len(), 3, "{progress:?}");
    assert!(progress.iter().all(|n| n["params"]["progressToken"] == "modern"), "{progress:?}");
    assert_eq!(gateway.close().await, Some(0));
}

mod http {
    use super::*;
    use crate::gateway_http_support::{client, json_of, open_session, post, request, Gateway, SseReader, LEGACY};

    /// The next log message from `server` on a session's GET stream.
    async fn next_log(stream: &mut SseReader, server: &str) -> Value {
        loop {
            let event = tokio::time::timeout(PATIENCE, stream.next()).await.expect("a log message in time");
            let event = event.expect("the session's stream stays open");
            if event.data["method"] == "notifications/message" && event.data["params"]["logger"] == server {
                return event.data["params"].clone();
            }
        }
    }

    #[tokio::test]
    async fn each_handshake_era_session_hears_a_2026_server_at_its_own_level() {
        let toml = demo_table("modern", &["--era", "modern"]);
        let gateway = Gateway::start_with_config(&toml, "127.0.0.1:0", &[], &[]).expect("the gateway starts");
        let (http, url) = (client(), gateway.mcp());
        let (quiet, chatty) = (open_session(&http, &url).await, open_session(&http, &url).await);
        let stream = |session: &str| {
            http.get(&url).header("accept", "text/event-stream").header("mcp-session-id", session).header("mcp-protocol-version", LEGACY)
        };
        let mut quiet_stream = SseReader::new(stream(&quiet).send().await.unwrap());
        let mut chatty_stream = SseReader::new(stream(&chatty).send().await.unwrap());
        let post_to = |session: &str, id: u64, method: &str, params: Value| {
            post(&http, &url, &request(id, method, params)).header("mcp-session-id", session).header("mcp-protocol-version", LEGACY).send()
        };

        let set = json_of(post_to(&quiet, 1, "logging/setLevel", json!({"level": "error"})).await.unwrap()).await;
        assert!(set["result"].is_object(), "{set}");
        // The other session keeps the default: its call asks for everything, over the server's own level (error).
        let log = |level: &str, message: &str| json!({"name": "modern__log", "arguments": {"level": level, "message": message}});
        let sent = json_of(post_to(&chatty, 2, "tools/call", log("info", "for chatty")).await.unwrap()).await;
        assert_eq!(sent["result"]["content"][0]["text"], "sent at info", "{sent}");
        assert_eq!(next_log(&mut chatty_stream, "modern").await["data"], "for chatty");
        let sent = json_of(post_to(&chatty, 3, "tools/call", log("error", "for both")).await.unwrap()).await;
        assert_eq!(sent["result"]["content"][0]["text"], "sent at error", "{sent}");
        assert_eq!(next_log(&mut chatty_stream, "modern").await["data"], "for both");
        // Messages reach each session in order: the quiet one's first is the error.
        assert_eq!(next_log(&mut quiet_stream, "modern").await["data"], "for both", "the quiet session hears error and above only");
    }
}
