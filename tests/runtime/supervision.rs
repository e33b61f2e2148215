//! Supervision as data: the TOML's `intensity`, `period`, `backoff` and
//! `cooldown` drive a real crash-looping server.

use std::path::Path;
use std::time::Duration;

use crate::common::{text, wait_status};
use mcpvisor::config::native;
use mcpvisor::config::RuntimeConfig;
use mcpvisor::{Event, Runtime, ServerState};

/// The TOML table of a demo server with `flags` and the extra `keys`.
fn from_toml(name: &str, command: &str, args: &[&str], keys: &str) -> mcpvisor::config::ServerConfig {
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    let text = format!("[servers.{name}]\ncommand = {command:?}\nargs = [{}]\n{keys}\n", args.join(", "));
    native::parse(Path::new("servers.toml"), &text).expect("the table reads").remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_loop_fails_after_the_configured_intensity() {
    let exe = env!("CARGO_BIN_EXE_mcpvisor");
    let keys = "intensity = 2\nperiod = \"1m\"\nbackoff = { initial = \"10ms\", max = \"20ms\" }\ncooldown = false";
    let config = from_toml("looper", exe, &["demo-server", "--exit-immediately", "3"], keys);
    let handle = Runtime::start(RuntimeConfig::default()).unwrap();
    let mut events = handle.subscribe();
    handle.add_server(config).await.unwrap();
    let mut attempts = Vec::new();
    let (error, retry_in) = loop {
        match tokio::time::timeout(Duration::from_secs(20), events.recv()).await.expect("events keep coming") {
            Some(Event::ServerState { state: ServerState::Restarting { attempt, next_in }, .. }) => {
                assert!(next_in <= Duration::from_millis(24), "backoff capped at 20ms ± jitter: {next_in:?}");
                attempts.push(attempt);
            }
            Some(Event::ServerState { state: ServerState::Failed { error, retry_in, .. }, .. }) => break (error, retry_in),
            Some(_) => {}
            None => panic!("event stream ended"),
        }
    };
    assert_eq!(attempts, [1, 2], "two restarts (intensity = 2), then failed");
    assert!(error.contains("restarted 2 times within 60s") && error.contains("not restarting again"), "{error}");
    assert_eq!(retry_in, None, "cooldown = false gives the server up for good");
    let status = handle.server_status("looper").await.unwrap();
    assert_eq!(status.restarts, 2);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_server_is_tried_again_after_the_cool_down_and_recovers() {
    // Fails its first two starts, then serves: intensity 1 lets one restart
    // through, the second failure cools down, and the try after it works.
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("starts");
    let script = format!(
        "n=$(cat {c} 2>/dev/null || echo 0); echo $((n+1)) > {c}; if [ \"$n\" -lt 2 ]; then echo \"start $n fails\" >&2; exit 1; fi; exec {exe} demo-server",
        c = counter.display(),
        exe = env!("CARGO_BIN_EXE_mcpvisor")
    );
    let keys = "intensity = 1\nbackoff = { initial = \"10ms\", max = \"10ms\" }\ncooldown = { initial = \"300ms\", max = \"1s\" }";
    let config = from_toml("flaky", "sh", &["-c", &script], keys);
    let handle = Runtime::start(RuntimeConfig::default()).unwrap();
    let mut events = handle.subscribe();
    handle.add_server(config).await.unwrap();
    let mut states = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(20), events.recv()).await.expect("events keep coming") {
            Some(Event::ServerState { state, .. }) => {
                let connected = state == ServerState::Connected;
                if let ServerState::Failed { retry_in, error, .. } = &state {
                    assert!(
                        retry_in.is_some_and(|left| left <= Duration::from_millis(300)),
                        "the first cool-down is `initial`: {retry_in:?}"
                    );
                    assert!(error.contains("trying again in 300ms"), "{error}");
                    // The status counts the cool-down down.
                    let status = handle.server_status("flaky").await.unwrap();
                    if let ServerState::Failed { retry_in: Some(left), .. } = status.state {
                        assert!(left <= Duration::from_millis(300), "{left:?}");
                        let json = serde_json::to_value(&status).unwrap();
                        assert!(json["retry_in_ms"].as_u64().is_some_and(|ms| ms <= 300), "{json}");
                        assert_eq!(json["state"], "failed");
                    }
                }
                states.push(state.label());
                if connected {
                    break;
                }
            }
            Some(_) => {}
            None => panic!("event stream ended"),
        }
    }
    assert_eq!(states, ["restarting", "failed", "pending", "connected"], "{states:?}");
    let result = handle.call_tool("mcp__flaky__echo", serde_json::json!({"text": "back"})).await.unwrap();
    assert_eq!(text(&result), "back");
    assert_eq!(std::fs::read_to_string(&counter).unwrap().trim(), "3");
    let status = wait_status(&handle, "flaky", |s| s.state == ServerState::Connected).await;
    assert_eq!(status.restarts, 1, "the try after a cool-down is not a restart");
    handle.shutdown().await;
}
