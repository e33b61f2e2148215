//! TLS for the HTTP front (`[serve] tls_cert`/`tls_key`), on rustls
//! with the ring provider, HTTP/1.1 only (ALPN `http/1.1`).
//!
//! Invariants:
//! - each new connection takes the pair loaded last; a reload that fails
//!   (unreadable file, no certificate, no key, a key that does not match)
//!   keeps the pair in use and says why;
//! - the key's contents never reach a log or an error: errors name the
//!   file only;
//! - a key file readable by its group or by others is served, with a
//!   warning naming the file and `chmod 600`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// The certificate chain and key the front serves, reloadable.
#[derive(Clone)]
pub struct Certificates {
    cert: PathBuf,
    key: PathBuf,
    current: Arc<RwLock<TlsAcceptor>>,
}

impl std::fmt::Debug for Certificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificates").field("cert", &self.cert).field("key", &self.key).finish_non_exhaustive()
    }
}

impl Certificates {
    /// Loads the PEM chain at `cert` and the PEM key at `key`.
    pub fn load(cert: &Path, key: &Path) -> Result<Certificates, String> {
        let acceptor = acceptor(cert, key)?;
        Ok(Certificates { cert: cert.into(), key: key.into(), current: Arc::new(RwLock::new(acceptor)) })
    }

    /// The acceptor for a new connection.
    pub fn acceptor(&self) -> TlsAcceptor {
        self.current.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Reads both files again; on failure the pair in use stays.
    pub fn reload(&self) -> Result<(), String> {
        let acceptor = acceptor(&self.cert, &self.key)?;
        *self.current.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = acceptor;
        Ok(())
    }

    /// Reloads on every `SIGHUP`; never returns (pending for ever when
    /// SIGHUP cannot be watched).
    pub async fn reload_on_hangup(&self) {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hangups) = signal(SignalKind::hangup()) else { return std::future::pending().await };
        while hangups.recv().await.is_some() {
            match self.reload() {
                Ok(()) => {
                    warn_if_key_exposed(&self.key);
                    tracing::info!(cert = %self.cert.display(), "SIGHUP: TLS certificate reloaded; new connections use it");
                    eprintln!("mcpvisor: SIGHUP: TLS certificate {} reloaded", self.cert.display());
                }
                Err(why) => {
                    tracing::warn!("SIGHUP: TLS certificate not reloaded, the previous one stays: {why}");
                    eprintln!("mcpvisor: warning: SIGHUP: TLS certificate not reloaded, the previous one stays: {why}");
                }
            }
        }
        std::future::pending().await
    }

    pub fn key_path(&self) -> &Path {
        &self.key
    }
}

/// Warns (stderr and log) when the key at `key` is readable by its group or others.
pub fn warn_if_key_exposed(key: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(metadata) = std::fs::metadata(key) else { return };
    if metadata.permissions().mode() & 0o077 != 0 {
        let message = format!(
            "the TLS key {} is readable by other users (mode {:o}): run `chmod 600 {}`",
            key.display(),
            metadata.permissions().mode() & 0o777,
            key.display()
        );
        tracing::warn!("{message}");
        eprintln!("mcpvisor: warning: {message}");
    }
}

fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| format!("tls_cert {}: not a readable PEM certificate chain ({e})", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("tls_cert {}: holds no PEM certificate (-----BEGIN CERTIFICATE-----)", cert.display()));
    }
    // The parse error is named by its kind only: its text could quote the key.
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        let kind = match e {
            rustls::pki_types::pem::Error::Io(io) => io.kind().to_string(),
            rustls::pki_types::pem::Error::NoItemsFound => "no PEM private key in it".to_string(),
            _ => "not a PEM private key".to_string(),
        };
        format!("tls_key {}: {kind}", key.display())
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| format!("tls_cert {} and tls_key {} do not make a pair rustls can serve: {e}", cert.display(), key.display()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
