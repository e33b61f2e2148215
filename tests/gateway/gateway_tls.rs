//! `serve --http` terminating TLS itself: a client trusting the
//! certificate initializes over HTTPS; after the files are replaced and
//! SIGHUP sent, new connections get the new certificate, and a bad pair
//! keeps the old one. Also the start-up warnings: a key readable by
//! others, a non-loopback bind without TLS.

use crate::gateway_http_support;

use std::path::Path;
use std::time::{Duration, Instant};

use crate::gateway_http_support::{initialize, json_of, post, Gateway, LEGACY};

/// A fresh self-signed certificate for 127.0.0.1 and localhost: (certificate PEM, key PEM).
fn self_signed() -> (String, String) {
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()]).expect("a certificate");
    (made.cert.pem(), made.signing_key.serialize_pem())
}

fn write_pair(dir: &Path, (cert, key): &(String, String), mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(dir.join("cert.pem"), cert).unwrap();
    std::fs::write(dir.join("key.pem"), key).unwrap();
    std::fs::set_permissions(dir.join("key.pem"), std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A client that trusts `cert` only, on a new connection per request.
fn trusting(cert: &str) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cert = reqwest::Certificate::from_pem(cert.as_bytes()).unwrap();
    reqwest::Client::builder().tls_certs_only([cert]).pool_max_idle_per_host(0).build().unwrap()
}

async fn initializes(http: &reqwest::Client, url: &str) -> Result<(), String> {
    let response = post(http, url, &initialize(LEGACY)).send().await.map_err(|e| format!("{e:?}"))?;
    let answer = json_of(response).await;
    (answer["result"]["protocolVersion"] == LEGACY).then_some(()).ok_or_else(|| answer.to_string())
}

fn hang_up(gateway: &Gateway) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(gateway.child.id() as i32, libc::SIGHUP) };
}

#[tokio::test]
async fn tls_is_served_and_reloaded_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let first = self_signed();
    write_pair(dir.path(), &first, 0o600);
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let args = ["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()];
    let gateway = Gateway::start("127.0.0.1:0", &args, &[]).expect("the gateway starts");
    assert!(gateway.base.starts_with("https://127.0.0.1:"), "{}", gateway.base);
    let url = gateway.mcp();
    initializes(&trusting(&first.0), &url).await.expect("initialize over TLS");
    let second = self_signed();
    assert!(initializes(&trusting(&second.0), &url).await.is_err(), "a client trusting another certificate is refused");

    write_pair(dir.path(), &second, 0o600);
    hang_up(&gateway);
    let deadline = Instant::now() + Duration::from_secs(10);
    while initializes(&trusting(&second.0), &url).await.is_err() {
        assert!(Instant::now() < deadline, "the new certificate was not served: {}", gateway.stderr_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(initializes(&trusting(&first.0), &url).await.is_err(), "new connections no longer get the old certificate");

    // A bad pair (the new key with the old certificate) keeps the one in use, and says why.
    std::fs::write(&cert, &first.0).unwrap();
    hang_up(&gateway);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !gateway.stderr_text().contains("not reloaded") {
        assert!(Instant::now() < deadline, "no word of the refused reload: {}", gateway.stderr_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    initializes(&trusting(&second.0), &url).await.expect("the previous pair still serves");
    assert!(!gateway.stderr_text().contains("PRIVATE KEY"), "{}", gateway.stderr_text());
}

#[test]
fn a_key_readable_by_others_is_served_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    write_pair(dir.path(), &self_signed(), 0o644);
    let key = dir.path().join("key.pem");
    let toml = format!(
        "[servers.demo]\ncommand = {:?}\nargs = [\"demo-server\"]\n[serve]\ntls_cert = {:?}\ntls_key = {:?}\n",
        gateway_http_support::BIN,
        dir.path().join("cert.pem"),
        key
    );
    let gateway = Gateway::start_with_config(&toml, "127.0.0.1:0", &[], &[]).expect("the gateway starts");
    assert!(gateway.base.starts_with("https://"), "the [serve] table's pair is served: {}", gateway.base);
    let stderr = gateway.stderr_text();
    assert!(
        stderr.contains("is readable by other users (mode 644)") && stderr.contains(&format!("chmod 600 {}", key.display())),
        "{stderr}"
    );
}

#[test]
fn a_bad_pair_stops_serve_before_it_listens() {
    let dir = tempfile::tempdir().unwrap();
    write_pair(dir.path(), &self_signed(), 0o600);
    std::fs::write(dir.path().join("key.pem"), "not a key").unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let refused = Gateway::start("127.0.0.1:0", &["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()], &[]);
    let message = refused.err().expect("serve refuses a key it cannot read");
    assert!(message.contains("cannot serve TLS") && message.contains(&format!("tls_key {}", key.display())), "{message}");
}

#[test]
fn a_public_bind_without_tls_warns_and_names_the_proxy_way() {
    let gateway = Gateway::start("0.0.0.0:0", &[], &[("MCPVISOR_SERVE_TOKEN", "t0ken-for-the-warning-test")]).expect("the gateway starts");
    let stderr = gateway.stderr_text();
    assert!(stderr.contains("serves plain HTTP beyond this machine") && stderr.contains("docs/gateway.md"), "{stderr}");
    assert!(!stderr.contains("t0ken-for-the-warning-test"), "{stderr}");
    let loopback = Gateway::loopback();
    assert!(!loopback.stderr_text().contains("plain HTTP beyond"), "{}", loopback.stderr_text());
}

#[test]
fn top_over_https_names_why_the_certificate_was_refused() {
    let dir = tempfile::tempdir().unwrap();
    write_pair(dir.path(), &self_signed(), 0o600);
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let args = ["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()];
    let gateway = Gateway::start("127.0.0.1:0", &args, &[]).expect("the gateway starts");
    // The system's roots do not know a self-signed certificate.
    let output = std::process::Command::new(gateway_http_support::BIN)
        .args(["top", "--once", "--url", &gateway.base])
        .env("HOME", dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("top runs");
    let said = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{said}");
    assert!(said.contains("cannot reach the gateway at https://"), "{said}");
    assert!(said.to_lowercase().contains("certificate"), "the reason is kept: {said}");
}
