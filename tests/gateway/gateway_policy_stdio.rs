//! The access policy over stdio, where no credentials exist: every request
//! comes with `identity = null`, which a rule can allow by name, and a rule
//! that reads the identity's claims fails there and denies.

use crate::gateway_support;

use crate::gateway_support::{demo_table, Gateway};
use serde_json::json;

/// `serve` over stdio with `config` as its file (kept in the returned folder).
async fn serving(config: String) -> (tempfile::TempDir, Gateway) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("servers.toml");
    std::fs::write(&file, config).unwrap();
    let gateway = Gateway::start(&file, &[], json!({})).await;
    (dir, gateway)
}

#[tokio::test]
async fn over_stdio_identity_is_null() {
    let policy = r#"
[serve.policy]
default = "deny"
[[serve.policy.rules]]
name = "local-user"
effect = "allow"
servers = ["demo"]
when = 'identity == null'
[[serve.policy.rules]]
name = "red-team"
effect = "allow"
servers = ["other"]
when = 'identity.claims.team == "red"'
"#;
    let (_dir, mut gateway) = serving(format!("{}{}{policy}", demo_table("demo", &[]), demo_table("other", &[]))).await;
    let listed = gateway.result("tools/list", json!({})).await;
    let names: Vec<&str> = listed["tools"].as_array().unwrap().iter().map(|tool| tool["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"demo__echo"), "{names:?}");
    assert!(!names.iter().any(|name| name.starts_with("other__")), "{names:?}");
    let echoed = gateway.result("tools/call", json!({"name": "demo__echo", "arguments": {"text": "local"}})).await;
    assert_eq!(echoed["content"][0]["text"], "local");
    let refused = gateway.request("tools/call", json!({"name": "other__echo", "arguments": {"text": "x"}})).await;
    let message = refused["error"]["message"].as_str().unwrap_or_else(|| panic!("{refused}"));
    assert!(message.contains("this unauthenticated caller") && message.contains("the rule `red-team` could not be evaluated"), "{message}");
}

#[tokio::test]
async fn a_reloaded_policy_is_announced_as_changed_lists() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("servers.toml");
    let policy = |servers: &str| {
        format!(
            "{}[serve.policy]\ndefault = \"deny\"\n[[serve.policy.rules]]\nname = \"local\"\neffect = \"allow\"\nservers = [{servers}]\n",
            demo_table("demo", &[])
        )
    };
    std::fs::write(&config, policy("\"nothing\"")).unwrap();
    let mut gateway = Gateway::start(&config, &[], json!({})).await;
    let listed = gateway.result("tools/list", json!({})).await;
    assert_eq!(listed["tools"], json!([]), "{listed}");
    // The start's own announcements (the server connecting, gathered for 50 ms) may still come,
    // and nothing this caller may read says when they are over (the policy hides the status
    // resource too). They announce the old, empty lists: an announcement is the reload's when
    // the list it announces holds the newly allowed tool.
    gateway.notifications.clear();
    std::fs::write(&config, policy("\"demo\"")).unwrap();
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(gateway.child.id().unwrap() as i32, libc::SIGHUP) };
    let reloaded = async {
        loop {
            gateway.notification("notifications/tools/list_changed").await;
            let listed = gateway.result("tools/list", json!({})).await;
            if listed["tools"].as_array().is_some_and(|tools| tools.iter().any(|tool| tool["name"] == "demo__echo")) {
                break;
            }
        }
    };
    gateway_support::within("a tools/list_changed after SIGHUP announcing demo__echo", reloaded).await;
}

#[tokio::test]
async fn a_resource_rule_holds_however_the_uri_is_written() {
    let policy = r#"
[serve.policy]
default = "allow"
[[serve.policy.rules]]
name = "no-secrets"
effect = "deny"
resources = ["demo://item/secret*"]
"#;
    let (_dir, mut gateway) = serving(format!("{}{policy}", demo_table("demo", &[]))).await;
    let read = gateway.result("resources/read", json!({"uri": "demo://item/1"})).await;
    assert_eq!(read["contents"][0]["uri"], "demo://item/1", "{read}");
    // Each of these is demo://item/secret-1 to the server: the rule refuses them all.
    for written in [
        "demo://item/secret-1",
        "demo://item/./secret-1",
        "demo://item/%73ecret-1",
        "demo://item/public/%2e%2e/secret-1",
        "DEMO://ITEM/secret-1",
    ] {
        let refused = gateway.request("resources/read", json!({"uri": written})).await;
        let message = refused["error"]["message"].as_str().unwrap_or_else(|| panic!("{written} was read: {refused}"));
        assert!(message.contains("no-secrets"), "{written}: {message}");
    }
    // What has no one form is refused before any rule, naming why.
    let ambiguous = gateway.request("resources/read", json!({"uri": "demo://item//secret-1"})).await;
    assert_eq!(ambiguous["error"]["code"], -32602, "{ambiguous}");
    assert!(ambiguous["error"]["message"].as_str().unwrap().contains("empty segment"), "{ambiguous}");
}
