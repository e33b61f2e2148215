//! A stdio server run once per caller behind `mcpvisor serve --http`
//! (issue 35, item 3): the reference server `everything` (npm
//! `@modelcontextprotocol/server-everything`) with `per_caller`, its
//! environment filled from each caller's subject, claims and entry of the
//! callers' secrets file; its `get-env` tool answers its own process's
//! environment. Callers are named keys (alice team red, bob team blue,
//! dave with no secrets, erin, carol the admin). Checked: each caller's
//! calls reach a process holding its own values and never another's, even
//! interleaved; a secret-looking value is masked on its way back to the
//! caller; a caller without a value the environment needs is told which;
//! the processes are bounded (the next caller is refused naming the
//! setting), listed by identity in `/admin/status`, and ended when idle;
//! a restart by an admin ends them all, and the next call reads the file again.
//!
//! Run by `.ci/run` with `MCPVISOR_INTEROP=1 cargo test --test interop gateway_per_caller:: -- --ignored`.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use crate::gateway_http_support::{call_modern_as, client, json_of, modern_meta, request, Gateway, ALICE, BOB, CAROL};
use crate::interop_support::installed;
use serde_json::{json, Value};

const DAVE: &str = "dave-6a5b4c3d2e1f0a9b8c7d";
const ERIN: &str = "erin-1b2c3d4e5f6a7b8c9d0e";
const ALICE_TOKEN: &str = "alice-token-3f9a2b7c4d1e5f60";
const BOB_TOKEN: &str = "bob-token-8e7d6c5b4a3f2e10";
/// How long a test waits for a state it expects.
const PATIENCE: Duration = Duration::from_secs(30);

/// The gateway in front of `everything`, run per caller; the secrets file lives in the returned directory.
fn start() -> (Gateway, tempfile::TempDir) {
    let everything = installed("everything");
    let dir = tempfile::tempdir().unwrap();
    let secrets = dir.path().join("caller-secrets.toml");
    std::fs::write(
        &secrets,
        format!(
            "[key.alice]\nPROFILE = \"alice-profile\"\nAPI_TOKEN = {ALICE_TOKEN:?}\n[key.bob]\nPROFILE = \"bob-profile\"\n\
             API_TOKEN = {BOB_TOKEN:?}\n[key.erin]\nPROFILE = \"erin-profile\"\nAPI_TOKEN = \"erin-token-0a9b8c7d6e5f\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).unwrap();
    let toml = format!(
        "[servers.everything]\ncommand = {:?}\nargs = {:?}\n\
         env = {{ WHO = \"${{caller.subject}}\", TEAM = \"${{caller.claims.team:-none}}\", PROFILE = \"${{caller.secret.PROFILE}}\", \
         API_TOKEN = \"${{caller.secret.API_TOKEN}}\" }}\n\
         per_caller = {{ max_callers = 2, caller_idle = \"8s\", secrets = {:?} }}\n\n\
         [serve.keys.alice]\ntoken = \"${{ALICE_KEY}}\"\nclaims = {{ team = \"red\" }}\n\
         [serve.keys.bob]\ntoken = \"${{BOB_KEY}}\"\nclaims = {{ team = \"blue\" }}\n\
         [serve.keys.dave]\ntoken = \"${{DAVE_KEY}}\"\n[serve.keys.erin]\ntoken = \"${{ERIN_KEY}}\"\n\
         [serve.keys.carol]\ntoken = \"${{CAROL_KEY}}\"\nscopes = [\"mcpvisor:admin\"]\n",
        everything.command,
        everything.args,
        secrets.to_str().unwrap(),
    );
    let env = [("ALICE_KEY", ALICE), ("BOB_KEY", BOB), ("CAROL_KEY", CAROL), ("DAVE_KEY", DAVE), ("ERIN_KEY", ERIN)];
    (Gateway::start_with_config(&toml, "127.0.0.1:0", &[], &env).expect("the gateway starts"), dir)
}

/// `key`'s call of `everything`'s `get-env`: the JSON-RPC answer.
async fn get_env(gateway: &Gateway, key: &str) -> Value {
    let params = json!({"name": "everything__get-env", "arguments": {}, "_meta": modern_meta()});
    call_modern_as(&client(), &gateway.mcp(), &request(3, "tools/call", params), Some(key)).await
}

/// The environment a successful `get-env` answer shows.
fn environment(answer: &Value) -> Value {
    let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("not a get-env result: {answer}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("get-env's text is not JSON ({e}): {text}"))
}

/// `everything`'s `callers`, as `/admin/status` shows them to carol.
async fn callers(gateway: &Gateway) -> Value {
    let status = client().get(format!("{}/admin/status", gateway.base)).bearer_auth(CAROL).send().await.unwrap();
    let status = json_of(status).await;
    let servers = status["servers"].as_array().cloned().unwrap_or_default();
    servers.into_iter().find(|server| server["name"] == "everything").map(|server| server["callers"].clone()).unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "interop: needs .ci/interop-setup and MCPVISOR_INTEROP=1"]
async fn each_caller_reaches_a_process_of_its_own_holding_only_its_own_secrets() {
    let (gateway, dir) = start();
    let stderr = gateway.stderr_text();
    assert!(stderr.contains("`everything` runs a process per caller without a sandbox"), "the shared filesystem is warned of: {stderr}");

    // Interleaved, concurrent: every answer is its own caller's process's.
    let calls = (0..16).map(|i| {
        let (gateway, key) = (&gateway, if i % 2 == 0 { ALICE } else { BOB });
        async move { (key, get_env(gateway, key).await) }
    });
    for (key, answer) in futures::future::join_all(calls).await {
        let env = environment(&answer);
        let text = answer.to_string();
        let (who, team, profile, own, other) = match key {
            ALICE => ("alice", "red", "alice-profile", ALICE_TOKEN, BOB_TOKEN),
            _ => ("bob", "blue", "bob-profile", BOB_TOKEN, ALICE_TOKEN),
        };
        assert_eq!((env["WHO"].as_str(), env["TEAM"].as_str(), env["PROFILE"].as_str()), (Some(who), Some(team), Some(profile)), "{env}");
        assert!(!text.contains(other) && !text.contains(if who == "alice" { "bob-profile" } else { "alice-profile" }), "{text}");
        assert!(env["API_TOKEN"].is_string() && !text.contains(own), "a secret-looking value is masked on its way back: {env}");
    }
    let seen = callers(&gateway).await;
    assert_eq!(seen["callers"], json!(["key:alice", "key:bob"]), "{seen}");
    assert_eq!((seen["connections"].as_u64(), seen["max"].as_u64(), seen["started"].as_u64()), (Some(2), Some(2), Some(2)), "{seen}");

    // dave has no table in the secrets file: told what his process lacks.
    let refused = get_env(&gateway, DAVE).await;
    let message = refused.to_string();
    assert!(message.contains("${caller.secret.API_TOKEN}") && message.contains("caller `dave`"), "{refused}");
    // erin has one, but two callers' processes run already.
    let refused = get_env(&gateway, ERIN).await;
    assert!(refused.to_string().contains("per_caller.max_callers (2)"), "{refused}");

    // Idle processes end; then erin gets hers.
    let deadline = Instant::now() + PATIENCE;
    while callers(&gateway).await["connections"] != 0 {
        assert!(Instant::now() < deadline, "idle callers' processes were not ended: {}", callers(&gateway).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let env = environment(&get_env(&gateway, ERIN).await);
    assert_eq!((env["WHO"].as_str(), env["TEAM"].as_str(), env["PROFILE"].as_str()), (Some("erin"), Some("none"), Some("erin-profile")));
    let seen = callers(&gateway).await;
    assert_eq!((seen["callers"].clone(), seen["reaped"].as_u64()), (json!(["key:erin"]), Some(2)), "{seen}");

    // Revoked: erin's table removed, the server restarted by an admin; her next call starts a new process, which lacks it.
    let secrets = dir.path().join("caller-secrets.toml");
    let kept: String = std::fs::read_to_string(&secrets).unwrap().split("[key.erin]").next().unwrap().to_owned();
    std::fs::write(&secrets, kept).unwrap();
    let restart = client().post(format!("{}/admin/servers/everything/restart", gateway.base)).bearer_auth(CAROL).send().await.unwrap();
    assert_eq!(restart.status(), 200);
    assert_eq!(callers(&gateway).await["connections"], 0, "a restart ends every caller's process");
    let refused = get_env(&gateway, ERIN).await;
    assert!(refused.to_string().contains("caller `erin`: env.API_TOKEN needs"), "{refused}");

    let stderr = gateway.stderr_text();
    for secret in [ALICE_TOKEN, BOB_TOKEN, "alice-profile"] {
        assert!(!stderr.contains(secret), "no caller's value is logged: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "interop: needs .ci/interop-setup and MCPVISOR_INTEROP=1"]
async fn the_catalog_lists_as_nobody_and_a_secrets_file_others_may_read_is_refused() {
    let (gateway, dir) = start();
    let params = json!({"_meta": modern_meta()});
    let listed = call_modern_as(&client(), &gateway.mcp(), &request(1, "tools/list", params), Some(DAVE)).await;
    let names: Vec<&str> = listed["result"]["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"everything__get-env"), "every caller sees the catalog, listed by a process of nobody's: {listed}");
    assert_eq!(callers(&gateway).await["connections"], 0, "listing starts no caller's process");

    std::fs::set_permissions(dir.path().join("caller-secrets.toml"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = get_env(&gateway, ALICE).await;
    let message = refused.to_string();
    assert!(message.contains("may be read by others (mode 644)") && message.contains("chmod 600"), "{refused}");
    assert!(!message.contains(ALICE_TOKEN), "{refused}");
}
