//! The HTTP client of one remote server: rustls with the platform's roots
//! (no OpenSSL), proxies from `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` (reqwest
//! reads them), a connect time-out, TCP keep-alive so a dead peer is noticed
//! on idle streams, and redirects followed only within the server's origin
//! (credentials must not follow a redirect to another host).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use reqwest::redirect::Policy;
use reqwest::Url;

use crate::config::Timeouts;

/// The longest a TCP and TLS connection may take to open.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Redirects followed at most for one request.
const MAX_REDIRECTS: usize = 5;
/// Keep-alive probes on idle connections (the GET stream may idle for hours).
const KEEPALIVE: Duration = Duration::from_secs(30);

/// The client of servers at `url`'s origin with these time-outs: made once
/// per process and shared (a client is a handle to one connection pool;
/// making one loads the platform's root certificates, a few milliseconds
/// that every connect and reconnect paid before).
pub(super) fn build(timeouts: &Timeouts, url: &Url) -> Result<reqwest::Client, String> {
    static CLIENTS: OnceLock<Mutex<HashMap<(String, Duration), reqwest::Client>>> = OnceLock::new();
    let key = (url.origin().ascii_serialization(), CONNECT_TIMEOUT.min(timeouts.startup));
    let mut clients = CLIENTS.get_or_init(Mutex::default).lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(client) = clients.get(&key) {
        return Ok(client.clone());
    }
    let client = make(key.1, url)?;
    clients.insert(key, client.clone());
    Ok(client)
}

fn make(connect_timeout: Duration, url: &Url) -> Result<reqwest::Client, String> {
    // reqwest is built without a default crypto provider; an embedding
    // program that installed its own keeps it.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let origin = url.origin();
    let redirects = Policy::custom(move |attempt| {
        if attempt.previous().len() >= MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else if attempt.url().origin() != origin {
            let to = attempt.url().origin().ascii_serialization();
            attempt.error(format!("a redirect to another origin ({to}) was refused: credentials stay with the configured server"))
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .tcp_keepalive(KEEPALIVE)
        .redirect(redirects)
        .build()
        .map_err(|e| format!("cannot set up HTTP: {e}"))
}
