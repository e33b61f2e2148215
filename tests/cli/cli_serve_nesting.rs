//! A gateway never starts itself (issue 18, item 2): a project whose
//! `.mcp.json` lists `mcpvisor serve` (what `claude mcp add -s project`
//! writes) is started the way a client starts it, in the project directory
//! without `--config`, and the processes under it are counted.

use crate::cli_support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use crate::cli_support::{stderr, Sandbox, BIN};
use serde_json::{json, Value};

/// A bound against hangs, not a timing check.
const PATIENCE: Duration = Duration::from_secs(60);

/// `.mcp.json` with the demo server and `extra` entries.
fn mcp_json(extra: Value) -> String {
    let mut servers = json!({"demo": {"command": BIN, "args": ["demo-server"]}});
    servers.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    json!({"mcpServers": servers}).to_string()
}

/// `mcpvisor serve` in the sandbox's project, spoken to over its pipes.
struct Served {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: i64,
}

impl Served {
    fn start(sandbox: &Sandbox) -> Served {
        let mut child = sandbox
            .std_cmd(["serve"])
            .env_remove("MCPVISOR_GATEWAY_DEPTH")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mcpvisor serve starts");
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut served = Served { child, stdin, lines, next_id: 0 };
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "claude-code", "version": "1"}});
        served.result("initialize", init);
        served.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        served
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").and_then(|()| stdin.flush()).expect("the gateway reads stdin");
    }

    fn result(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + PATIENCE;
        loop {
            let line = self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("the gateway answers in time");
            let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout carries only JSON-RPC ({e}): {line}"));
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
        }
    }

    fn tool_names(&mut self) -> Vec<String> {
        let listed = self.result("tools/list", json!({}));
        listed["tools"].as_array().unwrap().iter().map(|tool| tool["name"].as_str().unwrap().to_string()).collect()
    }

    /// Closes stdin, waits (bounded) for the exit; its stderr.
    fn close(mut self) -> String {
        drop(self.stdin.take());
        let deadline = Instant::now() + PATIENCE;
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the gateway exits once stdin closes");
            std::thread::sleep(Duration::from_millis(50));
        }
        stderr(&self.child.wait_with_output().unwrap())
    }
}

/// Every process below `root`, as (pid, command line).
fn descendants(root: u32) -> Vec<(u32, String)> {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // The command name may hold spaces and parentheses: fields follow the last ')'.
        let Some(ppid) = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok()) else { continue };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        parents.push((pid, ppid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
    }
    let mut found: Vec<(u32, String)> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for (pid, ppid, cmdline) in &parents {
            if *ppid == parent && !found.iter().any(|(seen, _)| seen == pid) {
                found.push((*pid, cmdline.clone()));
                frontier.push(*pid);
            }
        }
    }
    found
}

/// Gateways (`mcpvisor serve`) below `root`, the most seen in `window`.
fn most_gateways_below(root: u32, window: Duration) -> (usize, Vec<(u32, String)>) {
    let deadline = Instant::now() + window;
    let mut most = (0, Vec::new());
    while Instant::now() < deadline {
        let below = descendants(root);
        let gateways = below.iter().filter(|(_, cmdline)| cmdline.contains(BIN) && cmdline.contains(" serve")).count();
        if gateways >= most.0 {
            most = (gateways, below);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    most
}

#[test]
fn a_project_listing_the_gateway_itself_gets_one_gateway_a_warning_and_its_other_servers() {
    let sandbox = Sandbox::new();
    sandbox.write(".mcp.json", &mcp_json(json!({"mcpvisor": {"type": "stdio", "command": BIN, "args": ["serve"], "env": {}}})));
    sandbox.trust();

    let mut served = Served::start(&sandbox);
    let tools = served.tool_names();
    assert!(tools.iter().any(|name| name.contains("demo")), "the other servers are served: {tools:?}");
    assert!(!tools.iter().any(|name| name.contains("mcpvisor__")), "the gateway serves no tools of its own copy: {tools:?}");
    let (gateways, below) = most_gateways_below(served.child.id(), Duration::from_secs(2));
    assert_eq!(gateways, 0, "no gateway below the gateway: {below:?}");
    assert_eq!(below.len(), 1, "only the demo server runs below it: {below:?}");
    let stderr = served.close();
    assert!(stderr.contains("`mcpvisor`") && stderr.contains("left out") && stderr.contains("this gateway itself"), "{stderr}");

    let (status, code) = sandbox.json(["status", "--json"]);
    assert_eq!(code, 0, "{status}");
    let rows = status.as_array().unwrap();
    let demo = rows.iter().find(|row| row["name"] == "demo").unwrap();
    assert_eq!(demo["state"], "connected", "{status}");
    let left = rows.iter().find(|row| row["name"] == "mcpvisor").unwrap_or_else(|| panic!("the left-out entry is shown: {status}"));
    assert_eq!(left["state"], "left_out");
    assert!(left["warning"].as_str().unwrap().contains("this gateway itself"), "{left}");
    assert!(left["source"].as_str().unwrap().ends_with(".mcp.json"), "{left}");

    let text = sandbox.cmd(["status"]).output().unwrap();
    let text = cli_support::stdout(&text);
    assert!(text.contains("mcpvisor: left out"), "{text}");
}

#[test]
fn a_chain_through_a_wrapper_ends_at_the_depth_bound() {
    let sandbox = Sandbox::new();
    // `sh -c` hides the program, so only the depth marker can stop this chain.
    let chain = json!({"chain": {"command": "sh", "args": ["-c", format!("exec '{BIN}' serve")]}});
    sandbox.write(".mcp.json", &mcp_json(chain));
    sandbox.trust();

    let mut served = Served::start(&sandbox);
    let tools = served.tool_names();
    assert!(tools.iter().any(|name| name.contains("demo")), "{tools:?}");
    let (gateways, below) = most_gateways_below(served.child.id(), Duration::from_secs(4));
    // Depths 1 and 2 serve; depth 3 refuses at once (and is restarted with back-off).
    assert!((2..=3).contains(&gateways), "the chain stops at the bound: {gateways} gateways below: {below:?}");
    assert!(below.len() <= 12, "a bounded number of processes: {below:?}");
    served.close();
}

#[test]
fn a_gateway_at_the_depth_bound_refuses_to_start_and_says_why() {
    let sandbox = Sandbox::new();
    sandbox.write(".mcp.json", &mcp_json(json!({})));
    sandbox.trust();
    let output = sandbox.std_cmd(["serve"]).env("MCPVISOR_GATEWAY_DEPTH", "3").stdin(Stdio::null()).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = stderr(&output);
    assert!(stderr.contains("MCPVISOR_GATEWAY_DEPTH=3") && stderr.contains("Remove the entry"), "{stderr}");
}
