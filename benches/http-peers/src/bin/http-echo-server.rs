//! The HTTP benchmark's server: MCP over Streamable HTTP, written by hand on
//! the standard library and serde_json (no SDK, no HTTP library), so that
//! every client pays the same, small, server cost.
//!
//! usage: http-echo-server PORT (0: any; the chosen port is printed on stdout)
//!
//! One thread per connection, HTTP/1.1 keep-alive. `POST /mcp` answers a
//! request with one JSON body (`application/json`), a notification or a
//! response with 202; `initialize` gets an `Mcp-Session-Id`. Methods:
//! `initialize`, `ping`, `tools/list` (one tool `echo`, input `{text}`),
//! `tools/call` echo; anything else (`server/discover` included) -32601.
//! `GET` is 405 (no server-initiated stream), `DELETE` 200.

use serde_json::{json, Value};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};

const VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
static SESSIONS: AtomicU64 = AtomicU64::new(1);

fn main() -> io::Result<()> {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    let listener = TcpListener::bind(("127.0.0.1", port))?;
    println!("{}", listener.local_addr()?.port());
    io::stdout().flush()?;
    for stream in listener.incoming().flatten() {
        std::thread::spawn(move || serve(stream));
    }
    Ok(())
}

/// One connection: requests one after another until the client closes it.
fn serve(stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut input = BufReader::with_capacity(1 << 16, stream.try_clone()?);
    let mut out = BufWriter::with_capacity(1 << 16, stream);
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let method = line.split(' ').next().unwrap_or("").to_string();
        let (mut length, mut close) = (0usize, false);
        loop {
            line.clear();
            if input.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap_or((header, ""));
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "connection" => close = value.trim().eq_ignore_ascii_case("close"),
                _ => {}
            }
        }
        let mut body = vec![0; length];
        input.read_exact(&mut body)?;
        match method.as_str() {
            "POST" => match answer(&body) {
                Some((response, session)) => {
                    let session = session.map(|s| format!("Mcp-Session-Id: {s}\r\n")).unwrap_or_default();
                    write!(
                        out,
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{session}Content-Length: {}\r\n\r\n",
                        response.len()
                    )?;
                    out.write_all(response.as_bytes())?;
                }
                None => out.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")?,
            },
            "DELETE" => out.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")?,
            _ => out.write_all(b"HTTP/1.1 405 Method Not Allowed\r\nAllow: POST, DELETE\r\nContent-Length: 0\r\n\r\n")?,
        }
        out.flush()?;
        if close {
            return Ok(());
        }
    }
}

/// The JSON answer to a POSTed message (None: a notification or a
/// response), with a new session id for `initialize`.
fn answer(body: &[u8]) -> Option<(String, Option<u64>)> {
    let request: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(_) => return Some((error(Value::Null, -32700, "parse error").to_string(), None)),
    };
    let id = request.get("id")?.clone();
    let method = request.get("method").and_then(Value::as_str)?;
    let params = request.get("params").unwrap_or(&Value::Null);
    let mut session = None;
    let result = match method {
        "initialize" => {
            let asked = params["protocolVersion"].as_str().unwrap_or("");
            let version = VERSIONS.iter().find(|v| **v == asked).unwrap_or(&VERSIONS[0]);
            session = Some(SESSIONS.fetch_add(1, Ordering::Relaxed));
            json!({
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "mcp-http-echo-server", "version": "0.1.0"}
            })
        }
        "ping" => json!({}),
        "tools/list" => json!({"tools": [{
            "name": "echo",
            "description": "Echo the given text back",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
        }]}),
        "tools/call" if params["name"].as_str() == Some("echo") => {
            json!({"content": [{"type": "text", "text": params["arguments"]["text"].as_str().unwrap_or("")}]})
        }
        "tools/call" => return Some((error(id, -32602, "unknown tool").to_string(), None)),
        _ => return Some((error(id, -32601, "method not found").to_string(), None)),
    };
    Some((json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(), session))
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}
