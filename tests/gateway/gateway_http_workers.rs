//! `serve --http --workers N` as a real process: the N-1 worker threads
//! beside the runtime's exist and serve connections and sessions; a call in
//! flight on any of them is drained by SIGTERM, and the process then exits
//! cleanly with no server left behind; `[serve] workers` is read, 0 refused.

use crate::gateway_http_support::{assert_all_gone, children_of, client, json_of, open_session, post, request, Gateway, SseReader, BIN};
use serde_json::json;

/// The gateway's worker threads (actix arbiters, whose names begin so): their ids.
fn worker_threads(pid: u32) -> Vec<u32> {
    threads_named(pid, "actix-rt|")
}

/// The ids of the threads of `pid` whose names begin with `prefix`.
fn threads_named(pid: u32, prefix: &str) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
    let named = |task: &std::fs::DirEntry| std::fs::read_to_string(task.path().join("comm")).unwrap_or_default().starts_with(prefix);
    tasks.filter(named).filter_map(|task| task.file_name().to_str()?.parse().ok()).collect()
}

/// CPU clock ticks (user + system) thread `tid` of `pid` has used.
fn cpu_ticks(pid: u32, tid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).unwrap_or_default();
    let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Fields 14 and 15 of stat(5): the 12th and 13th after the name.
    fields.get(11..13).map_or(0, |times| times.iter().filter_map(|time| time.parse::<u64>().ok()).sum())
}

#[tokio::test]
async fn every_worker_serves_and_sigterm_drains_the_calls_on_all_of_them() {
    let gateway = Gateway::start("127.0.0.1:0", &["--workers", "3"], &[("MCPVISOR_CONNECTION_THREADS", "2")]).expect("the gateway starts");
    let pid = gateway.child.id();
    let workers = worker_threads(pid);
    assert_eq!(workers.len(), 2, "3 workers: the runtime's thread and 2 arbiters");
    let connection_threads = threads_named(pid, "mcpvisor-conn-").len();
    assert_eq!(connection_threads, 1, "MCPVISOR_CONNECTION_THREADS=2 and one server: one connection thread, as it needs");

    // Each request comes on a new connection (the client keeps none idle),
    // so connections go round the workers and most calls reach their
    // session from another thread than the one it lives on.
    let url = gateway.mcp();
    let mut clients = Vec::new();
    for n in 0..4u64 {
        let url = url.clone();
        clients.push(tokio::spawn(async move {
            let http = client();
            let session = open_session(&http, &url).await;
            for id in 1..=150 {
                let text = format!("{n}-{id}");
                let call = request(id, "tools/call", json!({"name": "demo__echo", "arguments": {"text": text}}));
                let answer = json_of(post(&http, &url, &call).header("mcp-session-id", &session).send().await.unwrap()).await;
                assert_eq!(answer["result"]["content"][0]["text"], text, "{answer}");
            }
            (http, session)
        }));
    }
    let mut sessions = Vec::new();
    for served in clients {
        sessions.push(served.await.unwrap());
    }
    for worker in &workers {
        assert!(cpu_ticks(pid, *worker) > 0, "worker thread {worker} served none of 600 calls");
    }

    // A call in flight in every session, then SIGTERM: each is answered.
    let mut streams = Vec::new();
    for (http, session) in &sessions {
        let call = request(
            1000,
            "tools/call",
            json!({"name": "demo__progress", "arguments": {"steps": 10, "ms": 50}, "_meta": {"progressToken": 1}}),
        );
        let response = post(http, &url, &call).header("mcp-session-id", session).send().await.unwrap();
        let mut events = SseReader::new(response);
        assert_eq!(events.next().await.expect("a first event").data["method"], "notifications/progress");
        streams.push(events);
    }
    let servers = children_of(pid);
    assert!(!servers.is_empty(), "the demo server runs as a child of the gateway");
    gateway.terminate();
    for mut events in streams {
        // The call finishes although the gateway is stopping.
        let answer = events.answer_to(1000).await;
        assert!(answer["result"].is_object(), "{answer}");
    }
    let mut gateway = gateway;
    let (code, gateway) =
        tokio::task::spawn_blocking(move || (gateway.wait_exit(std::time::Duration::from_secs(60)), gateway)).await.unwrap();
    assert_eq!(code, Some(0), "the gateway exits cleanly after draining: {}", gateway.stderr_text());
    assert_all_gone(&servers);
}

#[test]
fn the_serve_table_sets_the_workers_and_zero_is_refused() {
    let toml = format!("[serve]\nworkers = 2\n\n[servers.demo]\ncommand = {BIN:?}\nargs = [\"demo-server\"]\n");
    let gateway = Gateway::start_with_config(&toml, "127.0.0.1:0", &[], &[]).expect("the gateway starts");
    assert_eq!(worker_threads(gateway.child.id()).len(), 1, "2 workers: the runtime's thread and 1 arbiter");
    // From four cores the gateway gives its one server a thread of its own; below, the runtime's thread serves it.
    let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
    let expected = usize::from(cores >= 4);
    assert_eq!(threads_named(gateway.child.id(), "mcpvisor-conn-").len(), expected, "{cores} cores");
    let flag_wins = Gateway::start_with_config(&toml, "127.0.0.1:0", &["--workers", "1"], &[("MCPVISOR_CONNECTION_THREADS", "0")])
        .expect("the gateway starts");
    let one_thread = flag_wins.child.id();
    assert!(worker_threads(one_thread).is_empty(), "--workers 1 and no connection threads: the runtime's thread alone");
    assert!(threads_named(one_thread, "mcpvisor-conn-").is_empty(), "MCPVISOR_CONNECTION_THREADS=0 starts none");

    let refused = Gateway::start("127.0.0.1:0", &["--workers", "0"], &[]).err().expect("--workers 0 is refused");
    assert!(refused.contains("--workers"), "{refused}");
}
