//! `serve --http` against slow and greedy clients: stalled request heads
//! and idle kept-alive connections are closed after their time-outs, and
//! past the connection caps a client gets 503 with `Retry-After` while
//! other clients are still served (docs/security.md, "Bounds").

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::gateway_http_support::{client, initialize, json_of, open_session, post, Gateway, LEGACY};

/// The second loopback address, standing for "another client".
const OTHER_CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

fn addr_of(gateway: &Gateway) -> SocketAddr {
    gateway.base.trim_start_matches("http://").parse().expect("a socket address")
}

/// Descriptors the gateway process holds now.
fn descriptors(gateway: &Gateway) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", gateway.child.id())).map(|entries| entries.count()).unwrap_or(0)
}

/// A connection that sent half a request line (or, `silent`, nothing) and stalls.
fn stalled(addr: SocketAddr, silent: bool) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("the gateway accepts");
    if !silent {
        stream.write_all(b"POST /mcp HTT").expect("half a request line is sent");
    }
    stream
}

/// A metric's value in Prometheus text.
fn metric(text: &str, series: &str) -> f64 {
    let line = text.lines().find(|line| line.strip_prefix(series).is_some_and(|rest| rest.starts_with(' ')));
    line.and_then(|line| line[series.len()..].trim().parse().ok()).unwrap_or_else(|| panic!("no {series} in:\n{text}"))
}

/// Reads until the gateway closes `stream` (or `limit` passes): what it sent, and whether it closed.
fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (String, bool) {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return (String::from_utf8_lossy(&received).into_owned(), true),
            Ok(n) => received.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (String::from_utf8_lossy(&received).into_owned(), true),
            Err(_) => return (String::from_utf8_lossy(&received).into_owned(), false),
        }
    }
}

/// Whether the gateway has closed `stream` already (without waiting).
fn closed_now(stream: &mut TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let closed = match stream.read(&mut byte) {
        Ok(n) => n == 0,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    stream.set_nonblocking(false).unwrap();
    closed
}

async fn initialize_from(local: IpAddr, url: &str) -> reqwest::Response {
    let _ = client();
    let http = reqwest::Client::builder().pool_max_idle_per_host(0).local_address(local).build().unwrap();
    let sent = post(&http, url, &initialize(LEGACY)).send();
    tokio::time::timeout(Duration::from_secs(5), sent).await.expect("an answer within 5 s").expect("an HTTP answer")
}

async fn metrics(gateway: &Gateway) -> String {
    client().get(format!("{}/metrics", gateway.base)).send().await.unwrap().text().await.unwrap()
}

#[tokio::test]
async fn stalled_heads_are_bounded_per_address_and_closed_after_the_header_timeout() {
    let gateway =
        Gateway::start("127.0.0.1:0", &["--header-timeout", "3", "--max-connections-per-client", "20"], &[]).expect("the gateway starts");
    let addr = addr_of(&gateway);
    let before = descriptors(&gateway);
    let opened = Instant::now();
    // 10 half request lines and 10 silent connections fill this address's share; 20 more are refused.
    let mut held: Vec<TcpStream> = (0..20).map(|n| stalled(addr, n % 2 == 0)).collect();
    let mut refused: Vec<TcpStream> = (0..20).map(|_| TcpStream::connect(addr).unwrap()).collect();
    for stream in &mut refused {
        stream.write_all(format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes()).unwrap();
    }
    for stream in &mut refused {
        let (answer, closed) = read_until_closed(stream, Duration::from_secs(5));
        assert!(closed, "a connection past the cap is closed at once");
        assert!(answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{answer}");
        assert!(answer.contains("Retry-After: 5\r\n") && answer.contains("20 connections at most are served from one address"), "{answer}");
    }
    drop(refused);
    // An HTTP client from the address at its cap is told why, at once.
    let answer = initialize_from(IpAddr::V4(Ipv4Addr::LOCALHOST), &gateway.mcp()).await;
    assert_eq!(answer.status(), 503);
    assert_eq!(answer.headers()["retry-after"], "5");
    // A flood that never sends nor closes: refused (past MAX_LINGERING, closed unanswered), holding no descriptors.
    let flood: Vec<TcpStream> = (0..300).map(|_| TcpStream::connect(addr).unwrap()).collect();

    // Another client is served while this address is at its cap ...
    let answer = initialize_from(OTHER_CLIENT, &gateway.mcp()).await;
    assert_eq!(answer.status(), 200);
    assert_eq!(json_of(answer).await["result"]["protocolVersion"], LEGACY);
    let during = descriptors(&gateway);
    let bound = before + 20 + mcpvisor::gateway::http::MAX_LINGERING + 5;
    assert!(during <= bound, "the gateway holds {during} descriptors with 20 admitted and 300 refused connections (it held {before})");
    let still_open = held.iter_mut().map(closed_now).filter(|closed| !closed).count();
    if opened.elapsed() < Duration::from_millis(2500) {
        assert_eq!(still_open, 20, "the stalled connections were held while the other client was served");
    }

    // The header time-out closes every stalled connection, and the address is served again.
    for stream in &mut held {
        let (answer, closed) = read_until_closed(stream, Duration::from_secs(10));
        assert!(closed && answer.is_empty(), "a stalled head is closed, without an answer: {answer:?}");
    }
    assert!(opened.elapsed() >= Duration::from_secs(3), "no stalled connection was closed before the header time-out");
    let answer = initialize_from(IpAddr::V4(Ipv4Addr::LOCALHOST), &gateway.mcp()).await;
    assert_eq!(answer.status(), 200);
    let text = metrics(&gateway).await;
    assert_eq!(metric(&text, "mcpvisor_http_connections_refused_total{bound=\"per_client\"}"), 321.0);
    drop(flood);
    assert_eq!(metric(&text, "mcpvisor_http_connections_timed_out_total{timeout=\"header\"}"), 20.0);
    assert!(metric(&text, "mcpvisor_http_connections_open") <= 2.0, "{text}");
}

#[tokio::test]
async fn past_the_total_cap_every_address_gets_503_until_a_connection_closes() {
    let gateway = Gateway::start("127.0.0.1:0", &["--max-connections", "4"], &[]).expect("the gateway starts");
    let addr = addr_of(&gateway);
    let held: Vec<TcpStream> = (0..4).map(|_| stalled(addr, false)).collect();
    let answer = initialize_from(OTHER_CLIENT, &gateway.mcp()).await;
    assert_eq!(answer.status(), 503);
    assert_eq!(answer.headers()["retry-after"], "5");
    let text = answer.text().await.unwrap();
    assert!(text.contains("the gateway serves 4 connections at most"), "{text}");
    drop(held);
    // The slots come back as the gateway notices the closes.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let answer = initialize_from(OTHER_CLIENT, &gateway.mcp()).await;
        if answer.status() == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "a closed connection's slot was never given back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(metric(&metrics(&gateway).await, "mcpvisor_http_connections_refused_total{bound=\"total\"}") >= 1.0);
}

#[test]
fn an_idle_kept_alive_connection_is_closed_after_the_idle_timeout() {
    let gateway = Gateway::start("127.0.0.1:0", &["--idle-timeout", "1", "--header-timeout", "60"], &[]).expect("the gateway starts");
    let mut stream = TcpStream::connect(addr_of(&gateway)).unwrap();
    let host = addr_of(&gateway);
    let asked = format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n");
    stream.write_all(asked.as_bytes()).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut chunk = [0u8; 4096];
    let n = stream.read(&mut chunk).unwrap();
    let answer = String::from_utf8_lossy(&chunk[..n]).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let answered = Instant::now();
    // A second request on the same connection shows it is kept alive.
    stream.write_all(asked.as_bytes()).unwrap();
    let n = stream.read(&mut chunk).unwrap();
    assert!(String::from_utf8_lossy(&chunk[..n]).starts_with("HTTP/1.1 200"));
    // Then nothing: closed after the idle time-out (1 s), long before the header one (60 s).
    let (rest, closed) = read_until_closed(&mut stream, Duration::from_secs(10));
    assert!(closed && rest.is_empty(), "the idle connection is closed: {rest:?}");
    let waited = answered.elapsed();
    assert!(waited >= Duration::from_secs(1) && waited < Duration::from_secs(10), "closed after {waited:?}");
}

#[tokio::test]
async fn a_stream_outlives_the_idle_timeout() {
    let gateway = Gateway::start("127.0.0.1:0", &["--idle-timeout", "1", "--header-timeout", "1"], &[]).expect("the gateway starts");
    let http = client();
    let session = open_session(&http, &gateway.mcp()).await;
    let stream = http
        .get(gateway.mcp())
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", LEGACY)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let mut body = stream;
    // Past both time-outs, the stream (being served) is still open. The pool's
    // notifications (its tools/list_changed once the demo server has listed)
    // may come meanwhile; anything else, or the stream ending, fails.
    let deadline = tokio::time::Instant::now() + Duration::from_millis(2500);
    loop {
        match tokio::time::timeout_at(deadline, body.chunk()).await {
            Err(_still_open) => break,
            Ok(Ok(Some(chunk))) => {
                let event = String::from_utf8_lossy(&chunk);
                assert!(
                    event.contains(r#""method":"notifications/"#) && !event.contains(r#""id":"#),
                    "the stream sent something other than a notification while served: {event}"
                );
            }
            ended => panic!("the stream ended while served: {ended:?}"),
        }
    }
}
