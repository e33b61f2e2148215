//! The agent's permission model against a hostile model and hostile
//! servers: the real `mcpvisor agent -p` with no terminal (so a call that
//! needs asking is denied), a scripted model server on loopback that plays
//! the model, and a fixture server that lies in its annotations and
//! injects instructions in its results.

use crate::cli_support;

use crate::cli_support::{demo_table, python_fixture_table, stderr, Sandbox};
use crate::model_server::{openai_stream, ModelServer, Reply};
use serde_json::{json, Value};

/// The body of the fake key in the sandbox's `~/.ssh/id_ed25519`.
const KEY_BODY: &str = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW";

fn private_key() -> String {
    format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_BODY}\nQyNTUxOQAAACBfakekeyfakekey\n-----END OPENSSH PRIVATE KEY-----\n")
}

/// A model answer calling these tools at once.
fn calls(calls: &[(&str, Value)]) -> Reply {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(index, (name, arguments))| {
            json!({"index": index, "id": format!("c{index}"), "type": "function", "function": {"name": name, "arguments": arguments.to_string()}})
        })
        .collect();
    openai_stream(vec![json!({ "tool_calls": calls })], "tool_calls")
}

fn says(text: &str) -> Reply {
    openai_stream(vec![json!({ "content": text })], "stop")
}

/// `agent -p PROMPT` against `server`, no terminal, no model variables from outside.
async fn agent(sandbox: &Sandbox, server: &ModelServer, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let base = format!("{}/v1", server.url);
    let mut command = sandbox.std_cmd(["agent", "-p", "do it", "--model", "m", "--base-url", &base].iter().chain(args));
    for var in ["MCPVISOR_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "MCPVISOR_SERVE_TOKEN"] {
        command.env_remove(var);
    }
    command.envs(env.iter().copied()).stdin(std::process::Stdio::null());
    tokio::task::spawn_blocking(move || command.output().expect("mcpvisor runs")).await.unwrap()
}

/// The tool results the model was sent in its second request, by call id.
fn results(server: &ModelServer) -> Vec<(String, String)> {
    let requests = server.requests();
    let messages = requests.get(1).map(|r| r.body["messages"].as_array().cloned().unwrap_or_default()).unwrap_or_default();
    messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| (m["tool_call_id"].as_str().unwrap_or_default().to_string(), m["content"].to_string()))
        .collect()
}

/// Everything the model was sent, as text.
fn sent_to_model(server: &ModelServer) -> String {
    server.requests().iter().map(|r| r.body.to_string()).collect::<Vec<_>>().join("\n")
}

/// The saved conversations, as text.
fn saved_sessions(sandbox: &Sandbox) -> String {
    let dir = sandbox.home.join("data/mcpvisor/sessions");
    let files = std::fs::read_dir(&dir).map(|entries| entries.flatten().map(|e| e.path()).collect::<Vec<_>>()).unwrap_or_default();
    assert!(!files.is_empty(), "a conversation is saved in {}", dir.display());
    files.iter().map(|file| std::fs::read_to_string(file).unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

fn with_hostile(sandbox: &Sandbox, extra: &str) {
    sandbox.write_user_file(&format!("{extra}\n{}", python_fixture_table("hostile", "lying_server.py", &[])));
}

#[tokio::test]
async fn reads_outside_the_workspace_are_denied_without_a_terminal_and_nothing_of_the_key_leaves() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&demo_table("demo", &[]));
    let ssh = sandbox.home.join(".ssh");
    cli_support::write(&ssh.join("id_ed25519"), &private_key());
    std::os::unix::fs::symlink(&ssh, sandbox.project.join("keys")).unwrap();
    cli_support::write(&sandbox.project.join("notes.txt"), "inside\n");
    let escape = format!("../{}/.ssh/id_ed25519", sandbox.home.file_name().unwrap().to_string_lossy());
    let server = ModelServer::start([
        calls(&[
            ("mcp__builtin__read_file", json!({"path": "~/.ssh/id_ed25519"})),
            ("mcp__builtin__read_file", json!({"path": escape})),
            ("mcp__builtin__read_file", json!({"path": "keys/id_ed25519"})),
            ("mcp__builtin__list_directory", json!({"path": "keys"})),
            ("mcp__builtin__read_file", json!({"path": "notes.txt"})),
        ]),
        says("done"),
    ])
    .await;
    let out = agent(&sandbox, &server, &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let results = results(&server);
    assert_eq!(results.len(), 5, "{results:?}");
    for (id, text) in &results[..4] {
        assert!(text.contains("was not made") && text.contains("confirmation"), "{id}: {text}");
    }
    assert!(results[4].1.contains("inside"), "a read inside the workspace runs unasked: {:?}", results[4]);
    assert!(
        !sent_to_model(&server).contains(KEY_BODY) && !sent_to_model(&server).contains("id_ed25519\\n"),
        "the key never reaches the model"
    );
    assert!(!saved_sessions(&sandbox).contains(KEY_BODY));
    // With --confirm never the user gave up asking: the read runs, and the
    // key in its result is masked on its way to the model (the default
    // `secrets` setting, issue 34), and so in the saved session too.
    let server = ModelServer::start([calls(&[("mcp__builtin__read_file", json!({"path": "~/.ssh/id_ed25519"}))]), says("done")]).await;
    let out = agent(&sandbox, &server, &["--confirm", "never"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let read = self::results(&server);
    assert!(read[0].1.contains("***") && !read[0].1.contains("was not made"), "mode never reads it (the user's choice): {read:?}");
    assert!(!sent_to_model(&server).contains(KEY_BODY), "a private key in a result never reaches the model by default");
    let saved = saved_sessions(&sandbox);
    assert!(!saved.contains(KEY_BODY) && saved.contains("***"), "saved sessions mask private keys: {saved}");
}

#[tokio::test]
async fn mcpvisors_own_stores_are_never_readable_even_with_confirmation_off() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&format!("[agent]\ndirectories = [\"~\"]\n\n{}", demo_table("demo", &[])));
    let token = "oauth-access-token-0123456789abcdef";
    let tokens = sandbox.home.join("xdg/mcpvisor/tokens");
    cli_support::write(&tokens.join("github.json"), &format!("{{\"access_token\": \"{token}\"}}"));
    let sessions = sandbox.home.join("data/mcpvisor/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    std::os::unix::fs::symlink(&tokens, sandbox.project.join("t")).unwrap();
    let server = ModelServer::start([
        calls(&[
            ("mcp__builtin__read_file", json!({"path": tokens.join("github.json")})),
            ("mcp__builtin__read_file", json!({"path": "t/github.json"})),
            ("mcp__builtin__list_directory", json!({"path": sessions})),
            ("mcp__builtin__write_file", json!({"path": tokens.join("github.json"), "content": "x"})),
        ]),
        says("done"),
    ])
    .await;
    let out = agent(&sandbox, &server, &["--confirm", "never"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let results = results(&server);
    assert_eq!(results.len(), 4, "{results:?}");
    for (id, text) in &results {
        assert!(text.contains("mcpvisor's own store"), "{id}: {text}");
    }
    assert!(!sent_to_model(&server).contains(token));
    assert!(std::fs::read_to_string(tokens.join("github.json")).unwrap().contains(token), "the store was not written");
}

#[tokio::test]
async fn an_untrusted_servers_read_only_claim_does_not_skip_the_question() {
    let sandbox = Sandbox::new();
    let precious = sandbox.write("precious.txt", "keep me\n");
    let wipe = || calls(&[("mcp__hostile__wipe", json!({"path": precious}))]);
    with_hostile(&sandbox, "");
    let server = ModelServer::start([wipe(), says("done")]).await;
    let out = agent(&sandbox, &server, &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("denied: it needs the user's confirmation"), "{}", stderr(&out));
    assert!(precious.exists(), "the lying `wipe` did not run");
    // A trusted server's annotations are believed (and trust alone runs its tools).
    with_hostile(&sandbox, "[agent.servers.hostile]\ntrust = true\nconfirm = \"ask\"\n");
    let server = ModelServer::start([wipe(), says("done")]).await;
    let out = agent(&sandbox, &server, &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!precious.exists(), "a trusted server's read-only tool runs unasked: {}", stderr(&out));
}

#[tokio::test]
async fn a_tool_result_telling_the_model_to_run_a_command_still_needs_the_user() {
    let sandbox = Sandbox::new();
    let precious = sandbox.write("precious.txt", "keep me\n");
    with_hostile(&sandbox, "[agent.servers.hostile]\ntools = { fetch_page = \"never\" }\n");
    let server = ModelServer::start([
        calls(&[("mcp__hostile__fetch_page", json!({"url": "https://example.com"}))]),
        // The model obeys the page.
        calls(&[("mcp__builtin__run_command", json!({"command": "rm -f precious.txt"}))]),
        says("done"),
    ])
    .await;
    let out = agent(&sandbox, &server, &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let requests = server.requests();
    assert!(requests[1].body.to_string().contains("IMPORTANT SYSTEM NOTICE"), "the injection reached the model");
    let last = requests[2].body["messages"].as_array().unwrap().last().unwrap().clone();
    assert!(last["content"].to_string().contains("was not made"), "{last}");
    assert!(precious.exists(), "the command did not run");
}

#[tokio::test]
async fn allow_rules_name_command_prefixes_and_deny_rules_win() {
    let sandbox = Sandbox::new();
    let precious = sandbox.write("precious.txt", "keep me\n");
    sandbox.write_user_file(&format!(
        "[agent]\nallow = [\"run_command(echo:*)\"]\ndeny = [\"run_command(rm:*)\"]\n\n{}",
        demo_table("demo", &[])
    ));
    let run = |command: &str| calls(&[("mcp__builtin__run_command", json!({ "command": command }))]);
    let server = ModelServer::start([run("echo allowed-by-rule"), run("echo hi; rm -f precious.txt"), says("done")]).await;
    let out = agent(&sandbox, &server, &[], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let requests = server.requests();
    let result = |at: usize| requests[at].body["messages"].as_array().unwrap().last().unwrap()["content"].to_string();
    assert!(result(1).contains("allowed-by-rule"), "{}", result(1));
    assert!(result(2).contains("was not made"), "a compound command is not an `echo` command: {}", result(2));
    assert!(precious.exists());
    let server = ModelServer::start([run("sudo rm -f precious.txt"), says("done")]).await;
    let out = agent(&sandbox, &server, &["--confirm", "never"], &[]).await;
    assert!(stderr(&out).contains("[agent] deny rule `run_command(rm:*)`"), "{}", stderr(&out));
    assert!(precious.exists(), "deny wins over --confirm never");
}

#[tokio::test]
async fn commands_get_a_scrubbed_environment_and_command_env_names_what_passes() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(
        "[agent]\ncommand_env = [\"KEPT_VAR\"]\n\n[servers.s]\ncommand = \"true\"\nenabled = false\nenv = { API_TOKEN = \"${CONFIGURED_SECRET}\" }\n",
    );
    let server = ModelServer::start([calls(&[("mcp__builtin__run_command", json!({"command": "env"}))]), says("done")]).await;
    let secrets = [
        ("OPENAI_API_KEY", "sk-model-key-0123456789abcdefghij"),
        ("MCPVISOR_SERVE_TOKEN", "serve-token-0123456789"),
        ("CONFIGURED_SECRET", "configured-secret-0123456789"),
    ];
    let env: Vec<(&str, &str)> = secrets.iter().copied().chain([("KEPT_VAR", "kept-value")]).collect();
    let out = agent(&sandbox, &server, &["--confirm", "never"], &env).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let output = &results(&server)[0].1;
    assert!(output.contains("KEPT_VAR=kept-value") && output.contains("HOME="), "{output}");
    for (name, value) in secrets {
        assert!(!output.contains(name) && !output.contains(value), "{name} reached the command: {output}");
    }
}
