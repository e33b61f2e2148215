//! What one client, and all of them together, may make the HTTP front
//! hold: sessions, requests open at once (stateless ones and
//! `subscriptions/listen` streams included), and bytes kept for
//! resumption. Sessions and buffers are kept by `super::sessions`; the
//! requests are counted here.
//!
//! Invariants:
//! - a client is a [`ClientKey`]: the caller's identity when its
//!   credentials tell callers apart (an access token's subject and client,
//!   a named key), else its address, read from the request's
//!   `ConnectInfo<SocketAddr>` extension, which whatever accepts the
//!   connections inserts (every holder of the shared token is one
//!   identity, so those are counted by address);
//! - past a bound the answer is 503 with `Retry-After` and a JSON-RPC
//!   error whose `data.bound` names the bound; each refusal is counted;
//! - a [`Permit`] counts one open request until it is dropped, and the
//!   table of clients holds only clients with a request open.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::json;

use crate::identity::{Identity, Proof};
use crate::protocol::ErrorObject;
use crate::server::errors::SERVER_ERROR;

/// Who a request counts against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClientKey {
    /// A caller its credentials name: `(proof, subject, client id)`, from
    /// any address.
    Identity(Proof, String, Option<String>),
    /// The peer's IP address (the port changes with every connection).
    Address(IpAddr),
    /// No peer address was recorded (an embedding that serves the router
    /// itself): every such request shares one client's bounds.
    Unknown,
}

/// The extractor of a request's [`ClientKey`]; never fails.
pub struct Client(pub ClientKey);

impl<S: Send + Sync> FromRequestParts<S> for Client {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Client, Self::Rejection> {
        if let Some(identity) = parts.extensions.get::<Arc<Identity>>().filter(|identity| identity.proof != Proof::SharedToken) {
            return Ok(Client(ClientKey::Identity(identity.proof, identity.subject.clone(), identity.client_id.clone())));
        }
        let key = parts.extensions.get::<ConnectInfo<SocketAddr>>().map_or(ClientKey::Unknown, |info| ClientKey::Address(info.0.ip()));
        Ok(Client(key))
    }
}

/// The bounds, with their defaults in [`Limits::default`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `initialize`-era sessions one client may hold (at most the total,
    /// `HttpOptions::max_sessions`).
    pub sessions_per_client: usize,
    /// Requests open at once, all clients together: POSTs awaiting or
    /// streaming their answer (stateless ones and listen streams
    /// included) and GET streams.
    pub requests: usize,
    /// Requests one client may have open at once.
    pub requests_per_client: usize,
    /// Bytes of events one session keeps for resumption, all its streams together.
    pub buffer_per_session: usize,
    /// Bytes of events every session keeps for resumption, together.
    pub buffer_total: usize,
}

/// 64 sessions and 128 requests per client, 1024 requests in all; 16 MiB
/// kept per session (one answer of the codec's largest frame), 256 MiB in all.
impl Default for Limits {
    fn default() -> Limits {
        Limits {
            sessions_per_client: 64,
            requests: 1024,
            requests_per_client: 512,
            buffer_per_session: 16 * 1024 * 1024,
            buffer_total: 256 * 1024 * 1024,
        }
    }
}

/// A bound a request met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    Sessions,
    SessionsPerClient,
    Requests,
    RequestsPerClient,
}

impl Bound {
    pub const ALL: [Bound; 4] = [Bound::Sessions, Bound::SessionsPerClient, Bound::Requests, Bound::RequestsPerClient];

    /// The name `data.bound` and the metrics' `bound` label give it.
    pub fn label(self) -> &'static str {
        match self {
            Bound::Sessions => "sessions",
            Bound::SessionsPerClient => "sessions_per_client",
            Bound::Requests => "requests",
            Bound::RequestsPerClient => "requests_per_client",
        }
    }

    fn advice(self) -> &'static str {
        match self {
            Bound::Sessions => "end unused sessions with DELETE, or retry later",
            Bound::SessionsPerClient => "end this client's unused sessions with DELETE (its idle ones are ended to make room)",
            Bound::Requests => "retry later",
            Bound::RequestsPerClient => "wait for this client's open requests (or close listen streams), then retry",
        }
    }
}

/// Seconds a refused client is told to wait.
pub const RETRY_AFTER_SECS: u64 = 2;

/// A refusal: which bound, at what number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub bound: Bound,
    pub limit: usize,
}

impl Refused {
    /// The 503 answer, with `Retry-After` and the JSON-RPC error naming the bound.
    pub fn response(self, id: Option<&serde_json::Value>) -> Response {
        let Refused { bound, limit } = self;
        let what = match bound {
            Bound::Sessions => format!("the gateway holds {limit} sessions already"),
            Bound::SessionsPerClient => format!("this client holds {limit} sessions already, all in use"),
            Bound::Requests => format!("the gateway has {limit} requests open already"),
            Bound::RequestsPerClient => format!("this client has {limit} requests open already"),
        };
        let error = ErrorObject {
            code: SERVER_ERROR,
            message: format!("Too busy: {what} (bound `{}`); {}", bound.label(), bound.advice()),
            data: Some(json!({"kind": "gateway_bound", "bound": bound.label(), "limit": limit, "retryAfterSeconds": RETRY_AFTER_SECS})),
        };
        let mut response = super::rpc_error(StatusCode::SERVICE_UNAVAILABLE, id, error);
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
        response
    }
}

/// Refusals so far, by bound.
#[derive(Debug, Default)]
pub struct Refusals([AtomicU64; Bound::ALL.len()]);

impl Refusals {
    pub fn count(&self, refused: Refused) -> Refused {
        self.0[refused.bound as usize].fetch_add(1, Ordering::Relaxed);
        refused
    }

    /// `(bound label, refusals)` for every bound.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        Bound::ALL.iter().map(|bound| (bound.label(), self.0[*bound as usize].load(Ordering::Relaxed))).collect()
    }
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    by_client: HashMap<ClientKey, usize>,
}

/// The requests open now, in all and by client.
#[derive(Debug)]
pub struct Requests {
    open: Mutex<Open>,
    /// Of them, `subscriptions/listen` streams.
    listening: AtomicUsize,
    max: usize,
    max_per_client: usize,
}

impl Requests {
    pub fn new(limits: &Limits) -> Arc<Requests> {
        Arc::new(Requests {
            open: Mutex::default(),
            listening: AtomicUsize::new(0),
            max: limits.requests.max(1),
            max_per_client: limits.requests_per_client.clamp(1, limits.requests.max(1)),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one more request of `client` (a listen stream when
    /// `listen`), unless a bound is reached.
    pub fn admit(self: &Arc<Self>, client: &ClientKey, listen: bool) -> Result<Permit, Refused> {
        let mut open = self.lock();
        let mine = open.by_client.get(client).copied().unwrap_or(0);
        if mine >= self.max_per_client {
            return Err(Refused { bound: Bound::RequestsPerClient, limit: self.max_per_client });
        }
        if open.total >= self.max {
            return Err(Refused { bound: Bound::Requests, limit: self.max });
        }
        open.total += 1;
        open.by_client.insert(client.clone(), mine + 1);
        if listen {
            self.listening.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Permit { requests: self.clone(), client: client.clone(), listen })
    }

    /// `(open requests, of them listen streams)`.
    pub fn counts(&self) -> (usize, usize) {
        (self.lock().total, self.listening.load(Ordering::Relaxed))
    }
}

/// One open request, counted until dropped.
#[derive(Debug)]
pub struct Permit {
    requests: Arc<Requests>,
    client: ClientKey,
    listen: bool,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut open = self.requests.lock();
        open.total = open.total.saturating_sub(1);
        if let Some(mine) = open.by_client.get_mut(&self.client) {
            *mine = mine.saturating_sub(1);
            if *mine == 0 {
                open.by_client.remove(&self.client);
            }
        }
        if self.listen {
            self.requests.listening.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_bounded_per_client_and_in_total_and_released() {
        let limits = Limits { requests: 3, requests_per_client: 2, ..Limits::default() };
        let requests = Requests::new(&limits);
        let (a, b) = (ClientKey::Address([127, 0, 0, 1].into()), ClientKey::Address([127, 0, 0, 2].into()));
        let first = requests.admit(&a, true).unwrap();
        let _second = requests.admit(&a, false).unwrap();
        assert_eq!(requests.admit(&a, false).unwrap_err().bound, Bound::RequestsPerClient);
        let _third = requests.admit(&b, false).unwrap();
        assert_eq!(requests.admit(&b, false).unwrap_err().bound, Bound::Requests);
        assert_eq!(requests.counts(), (3, 1));
        drop(first);
        assert_eq!(requests.counts(), (2, 0));
        assert!(requests.admit(&b, false).is_ok(), "a released slot is free again");
        assert_eq!(requests.lock().by_client.len(), 2);
    }

    fn client_of(identity: Option<Identity>) -> ClientKey {
        let (mut parts, ()) = axum::http::Request::new(()).into_parts();
        parts.extensions.insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 7], 4000))));
        if let Some(identity) = identity {
            parts.extensions.insert(Arc::new(identity));
        }
        futures::executor::block_on(Client::from_request_parts(&mut parts, &())).map(|client| client.0).unwrap_or(ClientKey::Unknown)
    }

    #[test]
    fn token_holders_count_per_identity_and_the_shared_token_per_address() {
        let address = ClientKey::Address([127, 0, 0, 7].into());
        assert_eq!(client_of(None), address);
        assert_eq!(client_of(Some(Identity::shared_token())), address);
        let alice = Identity { subject: "alice".into(), client_id: Some("cli".into()), proof: Proof::Jwt, ..Identity::shared_token() };
        assert_eq!(client_of(Some(alice)), ClientKey::Identity(Proof::Jwt, "alice".into(), Some("cli".into())));
    }
}
