//! The issuer of `[serve.auth]` as the gateway knows it: its metadata
//! (RFC 8414, else OpenID discovery) and its signing keys (JWKS), fetched
//! when first needed and kept.
//!
//! Invariants:
//! - a token whose key is known is checked from memory, at once: no
//!   caller with a known key ever waits for the issuer (no lock is held
//!   across a fetch);
//! - the keys are fetched again when they are older than [`KEYS_TTL`] (in
//!   the background: the old ones serve meanwhile), or when a token names a
//!   key they lack (that caller waits for the fetch); never more than once per
//!   `min_refresh` (`[serve.auth] jwks_min_refresh`, 30 s by default: a
//!   stream of tokens with made-up `kid`s costs the issuer one request per
//!   30 s, not one per token), and one fetch at a time;
//! - a failed fetch keeps the keys known so far;
//! - at most [`MAX_KEYS`] keys are kept, of a document of at most the
//!   OAuth client's `MAX_BODY_BYTES`; keys that are not for signatures,
//!   symmetric keys, and keys jsonwebtoken cannot read are skipped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;
use serde_json::Value;

use crate::oauth::http::{Answer, Http};

/// Keys older than this are fetched again before use.
pub const KEYS_TTL: Duration = Duration::from_secs(15 * 60);
/// The most keys kept from one JWKS.
pub const MAX_KEYS: usize = 64;

/// The parts of the issuer's metadata the gateway uses.
#[derive(Debug, Clone, Deserialize)]
pub struct Metadata {
    pub issuer: Option<String>,
    pub jwks_uri: Option<String>,
    pub introspection_endpoint: Option<String>,
}

/// One signing key of the issuer.
pub struct Key {
    pub kid: Option<String>,
    /// The `alg` the JWKS pins the key to, if it does.
    pub algorithm: Option<Algorithm>,
    pub key: DecodingKey,
}

#[derive(Default)]
struct Known {
    metadata: Option<Metadata>,
    keys: Vec<Arc<Key>>,
    fetched: Option<Instant>,
    /// The last tries to fetch the metadata and the keys (each rate-limited on its own).
    metadata_attempt: Option<Instant>,
    keys_attempt: Option<Instant>,
}

/// The issuer's metadata and keys, shared by every request.
pub struct Issuer {
    inner: Arc<Inner>,
}

struct Inner {
    url: String,
    min_refresh: Duration,
    http: Http,
    /// What is known; never held across an await.
    known: std::sync::Mutex<Known>,
    /// Held across each fetch: one at a time.
    fetching: Arc<tokio::sync::Mutex<()>>,
    /// Fetches of the JWKS so far (for logs and tests).
    fetches: AtomicU64,
}

/// Why no key could be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// The keys are known, and none fits the token.
    Unknown,
    /// The issuer could not be asked (the text says why, naming its URL).
    Unreachable(String),
}

impl Issuer {
    pub fn new(url: &str, min_refresh: Duration, http: Http) -> Issuer {
        let url = url.trim_end_matches('/').to_string();
        let inner = Inner { url, min_refresh, http, known: Default::default(), fetching: Arc::default(), fetches: AtomicU64::new(0) };
        Issuer { inner: Arc::new(inner) }
    }

    pub fn fetches(&self) -> u64 {
        self.inner.fetches.load(Ordering::Relaxed)
    }

    /// The issuer's metadata, fetched at the first call (and retried at
    /// most once per `min_refresh` while it fails).
    pub async fn metadata(&self) -> Result<Metadata, String> {
        if let Some(metadata) = self.inner.lock().metadata.clone() {
            return Ok(metadata);
        }
        let _fetching = self.inner.fetching.lock().await;
        self.inner.metadata_fetching().await
    }

    /// The keys that may have signed a token with `kid` and `algorithm`
    /// (see the module docs): known ones at once, from memory (stale ones
    /// start a refresh in the background); for a `kid` not known, after the
    /// one fetch at a time, at most once per `min_refresh`.
    pub async fn keys_for(&self, kid: Option<&str>, algorithm: Algorithm) -> Result<Vec<Arc<Key>>, KeyError> {
        let inner = &self.inner;
        let (found, fresh) = inner.fitting(kid, algorithm);
        if !found.is_empty() {
            if !fresh {
                Inner::refresh_in_background(inner);
            }
            return Ok(found);
        }
        let _fetching = inner.fetching.lock().await;
        // A fetch that ended while this one waited may have brought the key.
        let (found, _) = inner.fitting(kid, algorithm);
        if !found.is_empty() {
            return Ok(found);
        }
        let (tried_lately, fetched) = {
            let known = inner.lock();
            (known.keys_attempt.is_some_and(|at| at.elapsed() < inner.min_refresh), known.fetched.is_some())
        };
        if tried_lately {
            return match fetched {
                true => Err(KeyError::Unknown),
                false => Err(KeyError::Unreachable(format!("the keys of the issuer {} could not be fetched lately", inner.url))),
            };
        }
        if let Err(why) = inner.refetch().await {
            tracing::warn!(issuer = %inner.url, "cannot refresh the issuer's signing keys: {why}");
            if inner.lock().fetched.is_none() {
                return Err(KeyError::Unreachable(why));
            }
        }
        let (found, _) = inner.fitting(kid, algorithm);
        if found.is_empty() {
            Err(KeyError::Unknown)
        } else {
            Ok(found)
        }
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The known keys that fit `kid` and `algorithm`, and whether the keys are fresh.
    fn fitting(&self, kid: Option<&str>, algorithm: Algorithm) -> (Vec<Arc<Key>>, bool) {
        let known = self.lock();
        let fits =
            |key: &&Arc<Key>| kid.is_none_or(|kid| key.kid.as_deref() == Some(kid)) && key.algorithm.is_none_or(|alg| alg == algorithm);
        (known.keys.iter().filter(fits).cloned().collect(), known.fetched.is_some_and(|at| at.elapsed() < KEYS_TTL))
    }

    /// Refreshes stale keys on a task of their own, unless a fetch is under
    /// way or was tried within `min_refresh`: nobody waits for it.
    fn refresh_in_background(inner: &Arc<Inner>) {
        let Ok(fetching) = inner.fetching.clone().try_lock_owned() else { return };
        if inner.lock().keys_attempt.is_some_and(|at| at.elapsed() < inner.min_refresh) {
            return;
        }
        let inner = inner.clone();
        tokio::spawn(async move {
            let _fetching = fetching;
            if let Err(why) = inner.refetch().await {
                tracing::warn!(issuer = %inner.url, "cannot refresh the issuer's signing keys (the known ones stay): {why}");
            }
        });
    }

    /// The metadata; the caller holds `fetching`.
    async fn metadata_fetching(&self) -> Result<Metadata, String> {
        {
            let mut known = self.lock();
            if let Some(metadata) = &known.metadata {
                return Ok(metadata.clone());
            }
            if known.metadata_attempt.is_some_and(|at| at.elapsed() < self.min_refresh) {
                let every = self.min_refresh;
                return Err(format!("the metadata of the issuer {} could not be fetched lately; retrying in at most {every:?}", self.url));
            }
            known.metadata_attempt = Some(Instant::now());
        }
        let mut failures = Vec::new();
        for path in ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"] {
            let url = well_known(&self.url, path);
            match self.http.get_json::<Metadata>(&url).await {
                Ok(Answer::Ok(metadata)) => {
                    if let Some(issuer) = metadata.issuer.as_deref().filter(|issuer| issuer.trim_end_matches('/') != self.url) {
                        return Err(format!(
                            "{url} names the issuer {issuer:?}, not {}; set serve.auth.issuer to the issuer's exact URL",
                            self.url
                        ));
                    }
                    self.lock().metadata = Some(metadata.clone());
                    return Ok(metadata);
                }
                Ok(Answer::Failed { status, .. }) => failures.push(format!("{url}: HTTP {status}")),
                Err(error) => failures.push(error.to_string()),
            }
        }
        Err(format!("cannot read the metadata of the issuer {}: {}", self.url, failures.join("; ")))
    }

    /// Fetches the keys; the caller holds `fetching`.
    async fn refetch(&self) -> Result<(), String> {
        self.lock().keys_attempt = Some(Instant::now());
        let metadata = self.metadata_fetching().await?;
        let jwks_uri = metadata.jwks_uri.ok_or_else(|| format!("the metadata of the issuer {} has no jwks_uri", self.url))?;
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let document = match self.http.get_json::<Value>(&jwks_uri).await.map_err(|e| e.to_string())? {
            Answer::Ok(document) => document,
            Answer::Failed { status, .. } => return Err(format!("{jwks_uri} answered HTTP {status}")),
        };
        let keys = parse_jwks(&document).map_err(|why| format!("{jwks_uri}: {why}"))?;
        tracing::debug!(issuer = %self.url, keys = keys.len(), "fetched the issuer's signing keys");
        let mut known = self.lock();
        known.keys = keys;
        known.fetched = Some(Instant::now());
        Ok(())
    }
}

/// `base` with a well-known `path` put in front of its path (RFC 8414 §3).
fn well_known(base: &str, path: &str) -> String {
    match url::Url::parse(base) {
        Ok(url) => {
            let rest = url.path().trim_end_matches('/');
            format!("{}{path}{rest}", url.origin().ascii_serialization())
        }
        Err(_) => format!("{base}{path}"),
    }
}

/// The signing keys of a JWKS document (see the module docs for what is skipped).
pub fn parse_jwks(document: &Value) -> Result<Vec<Arc<Key>>, String> {
    let entries = document.get("keys").and_then(Value::as_array).ok_or("the document has no `keys` list")?;
    let mut keys = Vec::new();
    for entry in entries.iter().take(MAX_KEYS) {
        let Ok(jwk) = serde_json::from_value::<Jwk>(entry.clone()) else { continue };
        let for_signing = !matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption) | Some(PublicKeyUse::Other(_)));
        if !for_signing || matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
            continue;
        }
        let algorithm = match jwk.common.key_algorithm {
            Some(alg) => match alg.to_string().parse::<Algorithm>() {
                Ok(alg) => Some(alg),
                Err(_) => continue,
            },
            None => None,
        };
        if let Ok(key) = DecodingKey::from_jwk(&jwk) {
            keys.push(Arc::new(Key { kid: jwk.common.key_id.clone(), algorithm, key }));
        }
    }
    if entries.len() > MAX_KEYS {
        tracing::warn!("the issuer's JWKS lists {} keys; the first {MAX_KEYS} are used", entries.len());
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An issuer on loopback: its metadata, and a JWKS with the key `known`
    /// that answers after `jwks_delay` from the second fetch on.
    async fn slow_issuer(jwks_delay: Duration) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let base = url.clone();
        let served = Arc::new(AtomicU64::new(0));
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (base, served) = (base.clone(), served.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buffer = [0u8; 1024];
                    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
                        let Ok(n) = stream.read(&mut buffer).await else { return };
                        if n == 0 {
                            return;
                        }
                        head.extend_from_slice(&buffer[..n]);
                    }
                    let head = String::from_utf8_lossy(&head);
                    let body = if head.starts_with("GET /jwks") {
                        if served.fetch_add(1, Ordering::Relaxed) > 0 {
                            tokio::time::sleep(jwks_delay).await;
                        }
                        json!({"keys": [{"kty": "RSA", "kid": "known", "alg": "RS256", "use": "sig", "n": "sXch", "e": "AQAB"}]})
                    } else {
                        json!({"issuer": base, "jwks_uri": format!("{base}/jwks")})
                    };
                    let body = body.to_string();
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                });
            }
        });
        url
    }

    /// `keys_for` held its lock across the JWKS fetch: one token with an
    /// unknown `kid` while the issuer was slow made every valid token wait.
    #[tokio::test]
    async fn a_known_key_is_served_from_memory_while_an_unknown_one_is_fetched() {
        let url = slow_issuer(Duration::from_secs(20)).await;
        let issuer = Arc::new(Issuer::new(&url, Duration::ZERO, Http::new().unwrap()));
        assert_eq!(issuer.keys_for(Some("known"), Algorithm::RS256).await.unwrap().len(), 1);
        let fetching = issuer.clone();
        let unknown = tokio::spawn(async move { fetching.keys_for(Some("made-up"), Algorithm::RS256).await.map(|keys| keys.len()) });
        // The unknown kid's fetch is under way (and slow) once a second fetch has started.
        let deadline = Instant::now() + Duration::from_secs(10);
        while issuer.fetches() < 2 {
            assert!(Instant::now() < deadline, "the unknown kid started no fetch");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let known = tokio::time::timeout(Duration::from_secs(2), issuer.keys_for(Some("known"), Algorithm::RS256)).await;
        assert_eq!(known.expect("a known key waits for no fetch").unwrap().len(), 1);
        assert!(!unknown.is_finished(), "the unknown kid still waits for its fetch");
        unknown.abort();
    }

    #[test]
    fn well_known_urls_put_the_suffix_before_the_path() {
        assert_eq!(well_known("https://idp.example", "/.well-known/x"), "https://idp.example/.well-known/x");
        assert_eq!(well_known("https://idp.example/tenant/", "/.well-known/x"), "https://idp.example/.well-known/x/tenant");
    }

    #[test]
    fn only_asymmetric_signing_keys_are_kept_and_their_number_is_bounded() {
        let rsa = json!({"kty": "RSA", "kid": "r", "alg": "RS256", "use": "sig", "n": "sXch", "e": "AQAB"});
        let document = json!({"keys": [
            rsa,
            {"kty": "RSA", "kid": "enc", "use": "enc", "n": "sXch", "e": "AQAB"},
            {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
            {"kty": "XYZ", "kid": "strange"},
        ]});
        let keys = parse_jwks(&document).unwrap();
        assert_eq!(keys.iter().map(|key| key.kid.as_deref()).collect::<Vec<_>>(), [Some("r")]);
        assert_eq!(keys[0].algorithm, Some(Algorithm::RS256));
        let many = json!({"keys": vec![rsa.clone(); MAX_KEYS + 10]});
        assert_eq!(parse_jwks(&many).unwrap().len(), MAX_KEYS);
        assert!(parse_jwks(&json!({"nokeys": 1})).is_err());
    }
}
