//! The HTTP benchmark's floor: the least a client can do. Standard library
//! only, hand-written HTTP/1.1 requests on keep-alive connections, the
//! response read by its Content-Length and only scanned for its id.
//!
//! usage: http-floor URL seq N | conc N K | connect R
//! `conc`: K threads, each with a connection of its own (HTTP/1.1 has one
//! request in flight per connection), calling until N calls are made.

use mcp_http_peers::{arguments, report, WARMUP};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Connection {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    host: String,
    path: String,
    session: Option<String>,
    next_id: u64,
}

impl Connection {
    fn open(url: &str) -> Connection {
        let rest = url.strip_prefix("http://").expect("an http:// URL");
        let (host, path) = rest.split_once('/').map(|(h, p)| (h.to_string(), format!("/{p}"))).unwrap_or((rest.to_string(), "/".into()));
        let stream = TcpStream::connect(&host).expect("the server listens");
        stream.set_nodelay(true).expect("nodelay");
        let reader = BufReader::with_capacity(1 << 16, stream.try_clone().expect("clone"));
        Connection { reader, writer: stream, host, path, session: None, next_id: 1 }
    }

    /// POSTs `body`; returns the response body and the session id header.
    fn post(&mut self, body: &str) -> (Vec<u8>, Option<String>) {
        let session =
            self.session.as_ref().map(|s| format!("Mcp-Session-Id: {s}\r\nMCP-Protocol-Version: 2025-11-25\r\n")).unwrap_or_default();
        let request = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{session}Content-Length: {}\r\n\r\n{body}",
            self.path,
            self.host,
            body.len()
        );
        self.writer.write_all(request.as_bytes()).expect("write");
        let (mut length, mut session, mut line) = (0usize, None, String::new());
        loop {
            line.clear();
            assert!(self.reader.read_line(&mut line).expect("read") > 0, "the server closed the connection");
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().expect("a length");
                } else if name.eq_ignore_ascii_case("mcp-session-id") {
                    session = Some(value.trim().to_string());
                }
            }
        }
        let mut response = vec![0; length];
        self.reader.read_exact(&mut response).expect("body");
        (response, session)
    }

    /// One request; checks that the answer carries its id.
    fn request(&mut self, method: &str, params: &str) {
        let id = self.next_id;
        self.next_id += 1;
        let (response, _) = self.post(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#));
        let needle = format!(r#""id":{id}"#);
        assert!(response.windows(needle.len()).any(|w| w == needle.as_bytes()), "answer to {id}");
    }

    fn initialize(url: &str) -> Connection {
        let mut connection = Connection::open(url);
        let (response, session) = connection.post(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"floor","version":"0"}}}"#,
        );
        assert!(!response.is_empty(), "initialize answered");
        connection.session = session;
        connection.post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        connection.request("tools/list", "{}");
        connection
    }

    /// A connection of the same session.
    fn join(url: &str, session: Option<String>) -> Connection {
        Connection { session, ..Connection::open(url) }
    }

    fn echo(&mut self) {
        self.request("tools/call", r#"{"name":"echo","arguments":{"text":"hello world"}}"#);
    }
}

fn calls(url: &str, n: usize, k: usize) -> (Duration, Vec<u64>) {
    let mut first = Connection::initialize(url);
    for _ in 0..WARMUP {
        first.echo();
    }
    let session = first.session.clone();
    let mut connections = vec![first];
    connections.extend((1..k).map(|_| Connection::join(url, session.clone())));
    let next = Arc::new(AtomicUsize::new(0));
    let begin = Instant::now();
    let workers: Vec<_> = connections
        .into_iter()
        .map(|mut connection| {
            let next = next.clone();
            std::thread::spawn(move || {
                let mut lat = Vec::new();
                while next.fetch_add(1, Ordering::Relaxed) < n {
                    let t = Instant::now();
                    connection.echo();
                    lat.push(t.elapsed().as_nanos() as u64);
                }
                lat
            })
        })
        .collect();
    let lat: Vec<u64> = workers.into_iter().flat_map(|w| w.join().expect("worker")).collect();
    (begin.elapsed(), lat)
}

fn connect(url: &str, runs: usize) -> (Duration, Vec<u64>) {
    let begin = Instant::now();
    let lat = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let connection = Connection::initialize(url);
            let took = t.elapsed().as_nanos() as u64;
            drop(connection);
            took
        })
        .collect();
    (begin.elapsed(), lat)
}

fn main() {
    let (url, mode, n) = arguments("http-floor");
    let (mode, (secs, lat), extra) = match (mode.as_str(), n.as_slice()) {
        ("seq", [n, ..]) => ("seq", calls(&url, *n, 1), String::new()),
        ("conc", [n, k, ..]) => ("conc", calls(&url, *n, *k), format!(r#","k":{k}"#)),
        ("connect", [r, ..]) => ("connect", connect(&url, *r), String::new()),
        _ => {
            eprintln!("usage: http-floor URL seq N | conc N K | connect R");
            std::process::exit(2)
        }
    };
    report("floor", mode, secs, lat, &extra);
}
