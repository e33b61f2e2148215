//! Replicas of `mcpvisor serve --http` behind a real nginx running
//! deploy/nginx.conf as docs/deploy.md gives it (only its addresses
//! change): three replicas (separate processes, the same configuration,
//! the demo server behind each, `--replica mcpvisor-N`), driven through
//! nginx by raw HTTP and by the official SDK clients (the Python SDK in
//! both eras, parked `input_required` calls included; the TypeScript SDK
//! over Streamable HTTP and HTTP+SSE), with a replica SIGKILLed mid-run.
//!
//! The tests that need nginx and the SDKs are `#[ignore]`d; `.ci/run` runs
//! them with `MCPVISOR_INTEROP=1 cargo test --test interop gateway_replicas:: -- --ignored`
//! after `.ci/interop-setup` and after installing nginx when it is missing
//! (`MCPVISOR_NGINX` names the binary, else `nginx` on PATH or in
//! /usr/sbin; a missing one fails, never skips). Every process is killed
//! when its guard drops, on failure too; every wait has a deadline.

use crate::gateway_http_support;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use crate::gateway_http_support::{call_modern, client, client_from, modern_meta, open_session, post, request, Gateway, BIN, LEGACY};
use crate::interop_support::http::free_port;
use crate::interop_support::installed;
use serde_json::{json, Value};

const REPLICAS: usize = 3;

/// The `[serve]` table every replica reads (one file for all, as in a
/// Deployment): settings added here apply to every replica of every test.
const SERVE_TABLE: &str = "";

/// How long a process may take to start, or a client script to finish a phase.
const PATIENCE: Duration = Duration::from_secs(60);

const NGINX_CONF: &str = include_str!("../../deploy/nginx.conf");

fn replica_config() -> String {
    format!("[servers.demo]\ncommand = {BIN:?}\nargs = [\"demo-server\"]\n{SERVE_TABLE}")
}

fn replica_name(index: usize) -> String {
    format!("mcpvisor-{index}")
}

/// `REPLICAS` gateways on loopback ports, replica `i` named `mcpvisor-i`.
fn start_replicas() -> Vec<Gateway> {
    start_replicas_with(&replica_config(), &[])
}

/// `REPLICAS` gateways reading one `config` with `env`.
fn start_replicas_with(config: &str, env: &[(&str, &str)]) -> Vec<Gateway> {
    (0..REPLICAS)
        .map(|index| {
            Gateway::start_with_config(config, "127.0.0.1:0", &["--replica", &replica_name(index)], env)
                .unwrap_or_else(|why| panic!("replica {index}: {why}"))
        })
        .collect()
}

/// The replica a session id names (what precedes its first `.`).
fn replica_of(session: &str) -> &str {
    session.split_once('.').map_or("", |(name, _)| name)
}

/// The nginx binary: `MCPVISOR_NGINX`, else `nginx` on PATH or in the sbin folders.
fn nginx_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("MCPVISOR_NGINX") {
        return PathBuf::from(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|folder| folder.join("nginx"))
        .find(|candidate| candidate.is_file())
        .expect("nginx is missing: install it (apt-get install nginx-light; .ci/run does) or set MCPVISOR_NGINX")
}

/// nginx in its own process group, SIGKILLed (workers too) when dropped.
struct Nginx {
    child: Child,
    /// `http://127.0.0.1:PORT`, without a path.
    base: String,
    dir: tempfile::TempDir,
}

impl Nginx {
    /// Runs deploy/nginx.conf with `replicas` in place of its example addresses.
    fn start(replicas: &[Gateway]) -> Nginx {
        let port = free_port();
        let mut conf = NGINX_CONF.replace("listen 127.0.0.1:8080;", &format!("listen 127.0.0.1:{port};"));
        for (index, replica) in replicas.iter().enumerate() {
            let example = format!("127.0.0.1:{}", 8081 + index);
            let address = replica.base.trim_start_matches("http://");
            conf = conf.replace(&format!("{example};"), &format!("{address};")).replace(&format!("{example} "), &format!("{address} "));
        }
        assert!(!conf.contains("127.0.0.1:808"), "deploy/nginx.conf has an example address the test does not replace:\n{conf}");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = dir.path().join("nginx.conf");
        std::fs::write(&file, conf).unwrap();
        let mut command = Command::new(nginx_binary());
        command.arg("-p").arg(dir.path()).arg("-c").arg(&file).args(["-g", "daemon off;"]);
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("nginx starts");
        let mut nginx = Nginx { child, base: format!("http://127.0.0.1:{port}"), dir };
        let deadline = Instant::now() + PATIENCE;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            let exited = nginx.child.try_wait().ok().flatten();
            assert!(exited.is_none() && Instant::now() < deadline, "nginx did not listen ({exited:?}): {}", nginx.errors());
            std::thread::sleep(Duration::from_millis(20));
        }
        nginx
    }

    fn mcp(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// nginx's error log so far.
    fn errors(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SAFETY: kill has no memory-safety preconditions; the group is nginx's own.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// A client script whose stdout lines arrive on a channel; killed when dropped.
struct Script {
    name: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    output: String,
}

impl Script {
    fn start(name: &'static str, mut command: Command) -> Script {
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().expect("the client starts");
        let (sender, lines) = channel();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || stdout.lines().map_while(Result::ok).try_for_each(|line| sender.send(line)));
        Script { name, stdin: child.stdin.take(), child, lines, output: String::new() }
    }

    /// Reads lines until one contains `marker` (true; `None` matches no line)
    /// or stdout ends (false), failing past `PATIENCE`.
    fn read_until(&mut self, marker: Option<&str>) -> bool {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    eprintln!("{}: {line}", self.name);
                    self.output.push_str(&line);
                    self.output.push('\n');
                    assert!(!line.contains("\"ok\": false") && !line.contains("\"ok\":false"), "{}: a check failed: {line}", self.name);
                    if marker.is_some_and(|marker| line.contains(marker)) {
                        return true;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return false,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("{}: nothing for {PATIENCE:?}: {}", self.name, self.output),
            }
        }
    }

    fn say(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("the script's stdin");
        writeln!(stdin, "{line}").unwrap_or_else(|e| panic!("{}: cannot write to it: {e}", self.name));
    }

    /// Reads to the end; the number its `{"reinitialized": N}` line gives, once it exited successfully.
    fn finish(&mut self) -> u64 {
        assert!(self.read_until(Some("reinitialized")), "{}: ended before reporting: {}", self.name, self.output);
        self.read_until(None);
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("the script's status") {
                break status;
            }
            assert!(Instant::now() < deadline, "{}: did not exit", self.name);
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "{}: {status}: {}", self.name, self.output);
        let report = self.output.lines().find(|line| line.contains("reinitialized")).unwrap();
        serde_json::from_str::<Value>(report).unwrap()["reinitialized"].as_u64().expect("a count")
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The TypeScript SDK's package folder beside server-everything (as tests/interop/gateway_http.rs finds it).
fn typescript_sdk() -> (String, PathBuf) {
    let everything = installed("everything");
    let entry = everything.args.first().expect("server-everything's script");
    let sdk = Path::new(entry).ancestors().nth(3).expect("the @modelcontextprotocol folder").join("sdk");
    assert!(sdk.join("dist/esm/client/index.js").exists(), "{}: the TypeScript SDK is missing; run .ci/interop-setup", sdk.display());
    (everything.command, sdk)
}

fn script(name: &str) -> String {
    format!("{}/tests/interop/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_nginx_file_in_docs_is_the_tested_one() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/deploy.md")).unwrap();
    assert!(docs.contains(NGINX_CONF), "docs/deploy.md must quote deploy/nginx.conf whole, as it is");
}

#[tokio::test]
async fn a_named_replica_begins_every_session_id_with_its_name_and_a_bad_name_is_refused() {
    let gateway = Gateway::start("127.0.0.1:0", &["--replica", "mcpvisor-7"], &[]).expect("the gateway starts");
    let session = open_session(&client(), &gateway.mcp()).await;
    let (name, random) = session.split_once('.').expect("NAME.HEX");
    assert_eq!(name, "mcpvisor-7");
    assert!(random.len() == 32 && random.bytes().all(|byte| byte.is_ascii_hexdigit()), "128 random bits follow: {random}");
    for bad in ["Upper", "with.dot", "", &"x".repeat(64)] {
        let refused = Gateway::start("127.0.0.1:0", &["--replica", bad], &[]).err().expect("a bad name is refused");
        assert!(refused.contains("--replica") && refused.contains("lowercase letters"), "{refused}");
    }
}

#[tokio::test]
#[ignore = "needs nginx (MCPVISOR_NGINX or on PATH)"]
async fn a_session_reaches_its_replica_through_nginx_whatever_address_it_comes_from() {
    let replicas = start_replicas();
    let nginx = Nginx::start(&replicas);
    let mut sessions = Vec::new();
    for n in 2..=13u8 {
        sessions.push(open_session(&client_from(n), &nginx.mcp()).await);
    }
    let placed: BTreeSet<&str> = sessions.iter().map(|session| replica_of(session)).collect();
    assert!(placed.len() >= 2, "the pool spreads clients by address: {placed:?}");
    assert!(placed.iter().all(|name| (0..REPLICAS).any(|index| replica_name(index) == *name)), "{placed:?}");
    // The same sessions from other addresses: the pool would place these
    // elsewhere, the id routes them home.
    for (index, session) in sessions.iter().enumerate() {
        let http = client_from(20 + index as u8);
        let ping = post(&http, &nginx.mcp(), &request(1, "ping", json!({})))
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", LEGACY)
            .send()
            .await
            .unwrap();
        assert_eq!(ping.status(), 200, "session {index} of {} from another address: {}", replica_of(session), nginx.errors());
    }
}

#[tokio::test]
#[ignore = "needs nginx (MCPVISOR_NGINX or on PATH)"]
async fn a_parked_call_is_retried_on_its_replica_and_refused_clearly_on_another() {
    let replicas = start_replicas();
    let nginx = Nginx::start(&replicas);
    let http = client();
    let sample = |id: u64, extra: Value| {
        let mut meta = modern_meta();
        meta["io.modelcontextprotocol/clientCapabilities"] = json!({"sampling": {}});
        let mut params = json!({"name": "demo__sample", "arguments": {"prompt": "hi"}, "_meta": meta});
        params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        request(id, "tools/call", params)
    };
    let sampled = json!({"role": "assistant", "content": {"type": "text", "text": "the model says hi"}, "model": "m"});
    let park = |answer: Value| answer["result"]["requestState"].as_str().unwrap_or_else(|| panic!("input_required: {answer}")).to_string();

    let state = park(call_modern(&http, &nginx.mcp(), &sample(1, json!({}))).await);
    let retry = sample(2, json!({"inputResponses": {"sampling": sampled}, "requestState": state}));
    let answer = call_modern(&http, &nginx.mcp(), &retry).await;
    assert_eq!(answer["result"]["content"][0]["text"], "the model says hi", "the retry through nginx reached its replica: {answer}");

    // Which replica parks this client's calls: the one its sessions land on.
    let home = open_session(&http, &nginx.mcp()).await;
    let state = park(call_modern(&http, &nginx.mcp(), &sample(3, json!({}))).await);
    let elsewhere = replicas.iter().enumerate().find(|(index, _)| replica_name(*index) != replica_of(&home)).expect("another replica").1;
    let retry = sample(4, json!({"inputResponses": {"sampling": sampled}, "requestState": state}));
    let refused = call_modern(&http, &elsewhere.mcp(), &retry).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("unknown, used already, or expired") && message.contains("call the tool again"), "{message}");
}

#[test]
#[ignore = "needs MCPVISOR_INTEROP=1, .ci/interop-setup and nginx"]
fn the_sdk_clients_initialize_again_when_their_replica_is_killed_mid_run() {
    let python = installed("py").command;
    let (node, sdk) = typescript_sdk();
    let mut replicas = start_replicas();
    let nginx = Nginx::start(&replicas);
    // Every client here comes from 127.0.0.1, so the pool places them all on one replica: this one.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let home = runtime.block_on(open_session(&client(), &nginx.mcp()));
    let home = (0..REPLICAS).find(|index| replica_name(*index) == replica_of(&home)).expect("a replica's session");

    const SESSIONS: u64 = 2;
    let mut command = Command::new(python);
    command.arg(script("replicas_client.py")).arg(nginx.mcp()).arg(SESSIONS.to_string());
    let mut python = Script::start("python", command);
    let mut command = Command::new(node);
    command.arg(script("replicas_client.mjs")).arg(&nginx.base).arg(&sdk).arg(SESSIONS.to_string());
    let mut typescript = Script::start("typescript", command);
    for script in [&mut python, &mut typescript] {
        assert!(script.read_until(Some("\"phase\"")), "{}: ended before it was ready: {}", script.name, script.output);
    }

    let killed = &mut replicas[home];
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(killed.child.id() as i32, libc::SIGKILL) };
    assert_eq!(killed.wait_exit(PATIENCE), Some(-1), "the replica died of SIGKILL");

    for script in [&mut python, &mut typescript] {
        script.say("go");
        let reinitialized = script.finish();
        assert_eq!(reinitialized, SESSIONS, "{}: every session of the killed replica initialized again: {}", script.name, script.output);
    }
    for (index, replica) in replicas.iter_mut().enumerate().filter(|(index, _)| *index != home) {
        assert_eq!(replica.child_exited(), None, "replica {index} still serves");
    }
}

const ALICE_KEY: &str = "alice-0f3a9c2e7b1d4a6f8e0c";
const BOB_KEY: &str = "bob-9e8d7c6b5a4f3e2d1c0b";

/// An HTTP client from `127.0.0.N` that sends `key` with every request.
fn keyed_client_from(n: u8, key: &str) -> reqwest::Client {
    let _ = client();
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {key}").parse().unwrap());
    let address = std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, n));
    reqwest::Client::builder().pool_max_idle_per_host(0).local_address(address).default_headers(headers).build().unwrap()
}

/// The tool names one session lists.
async fn tool_names(http: &reqwest::Client, url: &str, session: &str) -> BTreeSet<String> {
    let listed = post(http, url, &request(2, "tools/list", json!({})))
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", LEGACY)
        .send()
        .await
        .unwrap();
    let listed = gateway_http_support::json_of(listed).await;
    let tools = listed["result"]["tools"].as_array().unwrap_or_else(|| panic!("a tool list: {listed}"));
    tools.iter().filter_map(|tool| tool["name"].as_str().map(str::to_string)).collect()
}

/// Keys and a policy from the one file every replica reads: alice and bob
/// are the same callers with the same rights on whichever replica they
/// land, and a session one opened is not found for the other.
#[tokio::test]
#[ignore = "needs nginx (MCPVISOR_NGINX or on PATH)"]
async fn identities_and_policies_are_the_same_on_every_replica() {
    let config = format!(
        "{}\n[serve.keys.alice]\ntoken = \"${{ALICE_KEY}}\"\nclaims = {{ team = \"red\" }}\n\
         [serve.keys.bob]\ntoken = \"${{BOB_KEY}}\"\nclaims = {{ team = \"blue\" }}\n\n\
         [serve.policy]\ndefault = \"deny\"\n\
         [[serve.policy.rules]]\nname = \"everyone-echoes\"\neffect = \"allow\"\ntools = [\"echo\"]\n\
         [[serve.policy.rules]]\nname = \"red-adds\"\neffect = \"allow\"\ntools = [\"add\"]\nwhen = 'identity.claims.team == \"red\"'\n",
        replica_config()
    );
    let replicas = start_replicas_with(&config, &[("ALICE_KEY", ALICE_KEY), ("BOB_KEY", BOB_KEY)]);
    let nginx = Nginx::start(&replicas);
    let mut placed = BTreeSet::new();
    for n in 2..=13u8 {
        for (key, expected) in [(ALICE_KEY, vec!["demo__add", "demo__echo"]), (BOB_KEY, vec!["demo__echo"])] {
            let http = keyed_client_from(n, key);
            let session = open_session(&http, &nginx.mcp()).await;
            placed.insert(replica_of(&session).to_string());
            let names = tool_names(&http, &nginx.mcp(), &session).await;
            let expected: BTreeSet<String> = expected.into_iter().map(str::to_string).collect();
            assert_eq!(names, expected, "from 127.0.0.{n} on {}", replica_of(&session));
            // The other caller, through the same ingress, cannot use this session.
            let other = keyed_client_from(n, if key == ALICE_KEY { BOB_KEY } else { ALICE_KEY });
            let ping = post(&other, &nginx.mcp(), &request(3, "ping", json!({})))
                .header("mcp-session-id", &session)
                .header("mcp-protocol-version", LEGACY)
                .send()
                .await
                .unwrap();
            assert_eq!(ping.status(), 404, "another caller's session is not found on {}", replica_of(&session));
        }
    }
    assert!(placed.len() >= 2, "the callers landed on several replicas: {placed:?}");
    let anonymous = post(&client(), &nginx.mcp(), &request(1, "ping", json!({}))).send().await.unwrap();
    assert_eq!(anonymous.status(), 401, "every replica asks for credentials");
}
