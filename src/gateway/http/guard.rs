//! Who may talk to the gateway over HTTP: the DNS-rebinding checks
//! (`Origin`, and `Host` on a loopback bind) and the bearer token.
//!
//! Invariants:
//! - a request with an `Origin` not in the allow list is refused with 403
//!   (requests without `Origin`, from programs rather than browsers, pass);
//! - on a loopback bind, a `Host` that is not a loopback name is refused
//!   with 403: a rebound DNS name cannot reach the gateway through a browser;
//! - when a token, named keys or `[serve.auth]` are set, every path but
//!   `/healthz` needs `Authorization: Bearer TOKEN`: the shared token or a
//!   key (all compared in constant time), else an access token of the
//!   issuer ([`Authenticator`]); a wrong or missing one gets 401 with
//!   `WWW-Authenticate: Bearer` (with `[serve.auth]`, RFC 9728 challenges,
//!   and the resource metadata paths pass without credentials like
//!   `/healthz`);
//! - the login routes' `GET`s (a per-caller login's link and redirect,
//!   [`super::login`]) pass without credentials, after the rebinding checks;
//! - a request that passed with credentials carries the caller's
//!   [`Identity`] in its extensions (none when no credentials are asked);
//! - with `caller_tokens` (a server acts as each caller), the access token
//!   of an issuer's caller is kept there as that caller's latest, apart
//!   from its identity, for the exchange (`crate::caller_token`).

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::auth::{is_metadata_path, Authenticator, Rejection};
use super::keys::{constant_time_eq, holder, KeyRing};
use crate::caller_token::{CallerToken, CallerTokens};
use crate::identity::Identity;

/// Hosts a loopback origin or `Host` may name.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// The checks one server applies to every request.
#[derive(Debug, Clone)]
pub struct Guard {
    /// Origins allowed besides the loopback ones, exactly as browsers send
    /// them (`https://app.example.com`, no trailing slash).
    pub allowed_origins: Vec<String>,
    /// Whether loopback origins (`http://localhost:*`, ...) are allowed.
    pub loopback_origins: bool,
    /// The server listens on a loopback address only.
    pub loopback_bind: bool,
    /// The shared bearer token, if any.
    pub token: Option<String>,
    /// Named keys (`[serve.keys]`), each its own caller; any of them, or
    /// the token, admits a request.
    pub keys: KeyRing,
    /// The access tokens of an OAuth issuer, if `[serve.auth]` is set.
    pub auth: Option<Arc<Authenticator>>,
    /// Where an issuer's caller's token is kept, when a server acts as
    /// each caller (token exchange); `None`: no token is kept.
    pub caller_tokens: Option<CallerTokens>,
}

/// `host[:port]` without the port, `[::1]` keeping its brackets.
fn host_name(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority.split_inclusive(']').next().unwrap_or(authority);
    }
    authority.split(':').next().unwrap_or(authority)
}

fn is_loopback_authority(authority: &str) -> bool {
    let name = host_name(authority);
    let loopback_ip = name.trim_start_matches('[').trim_end_matches(']').parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    loopback_ip || LOOPBACK_HOSTS.iter().any(|host| name.eq_ignore_ascii_case(host))
}

impl Guard {
    fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim().trim_end_matches('/');
        if self.allowed_origins.iter().any(|allowed| allowed.trim_end_matches('/').eq_ignore_ascii_case(origin)) {
            return true;
        }
        let Some((scheme, authority)) = origin.split_once("://") else { return false };
        self.loopback_origins && matches!(scheme, "http" | "https") && is_loopback_authority(authority)
    }

    /// Why a request is refused, or `None` when it may go on.
    pub async fn refusal(&self, path: &str, headers: &HeaderMap) -> Option<Response> {
        self.admit(path, headers).await.err()
    }

    /// The DNS-rebinding checks: a refusal for a foreign `Origin`, or a
    /// non-loopback `Host` on a loopback bind.
    fn screen(&self, headers: &HeaderMap) -> Option<Response> {
        let text = |name: header::HeaderName| headers.get(name).map(|value| value.to_str().unwrap_or("\u{fffd}"));
        if let Some(origin) = text(header::ORIGIN) {
            if !self.origin_allowed(origin) {
                let message = format!("Forbidden: the origin {origin:?} is not allowed (add it to the gateway's allowed origins)");
                return Some((StatusCode::FORBIDDEN, message).into_response());
            }
        }
        if self.loopback_bind {
            if let Some(host) = text(header::HOST).filter(|host| !is_loopback_authority(host)) {
                let message = format!("Forbidden: the host {host:?} is not a loopback name, and this gateway listens on loopback only");
                return Some((StatusCode::FORBIDDEN, message).into_response());
            }
        }
        None
    }

    /// Who the request comes from (`None` when the gateway asks for no
    /// credentials, or on `/healthz` and the resource metadata), or why it
    /// is refused.
    pub async fn admit(&self, path: &str, headers: &HeaderMap) -> Result<Option<Arc<Identity>>, Response> {
        if let Some(refusal) = self.screen(headers) {
            return Err(refusal);
        }
        let open_path = path == super::HEALTH_PATH || (self.auth.is_some() && is_metadata_path(path));
        let keys = self.keys.get();
        if open_path || (self.token.is_none() && keys.is_empty() && self.auth.is_none()) {
            return Ok(None);
        }
        let authorization = headers.get(header::AUTHORIZATION).map(|value| value.to_str().unwrap_or("\u{fffd}"));
        let offered = authorization.and_then(|value| value.strip_prefix("Bearer ").or(value.strip_prefix("bearer "))).map(str::trim);
        let bytes = offered.map(str::as_bytes).unwrap_or_default();
        // The token and every key are compared whatever the others gave: the time taken does not tell which matched.
        let shared = self.token.as_deref().is_some_and(|token| constant_time_eq(bytes, token.as_bytes()));
        if let Some(identity) = holder(&keys, bytes) {
            return Ok(Some(identity));
        }
        if shared {
            return Ok(Some(Arc::new(Identity::shared_token())));
        }
        match &self.auth {
            Some(auth) => match auth.identify(offered).await {
                Ok(identity) => {
                    if let (Some(book), Some(token)) = (&self.caller_tokens, offered) {
                        book.offer(&identity.grant_key(), CallerToken::new(token));
                    }
                    Ok(Some(Arc::new(identity)))
                }
                Err(rejection) => {
                    if let Rejection::Invalid(why) = &rejection {
                        tracing::info!(path, "refused an access token: {why}");
                    }
                    Err(auth.refusal(&rejection))
                }
            },
            None => {
                let mut response =
                    (StatusCode::UNAUTHORIZED, "Unauthorized: send the gateway's token as `Authorization: Bearer TOKEN`").into_response();
                response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                Err(response)
            }
        }
    }
}

/// The extractor of the request's caller (`None` when the gateway asks
/// for no credentials); never fails.
pub struct Caller(pub Option<Arc<Identity>>);

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Caller, Self::Rejection> {
        Ok(Caller(parts.extensions.get::<Arc<Identity>>().cloned()))
    }
}

/// Whether `method` on `path` passes without credentials: a browser's
/// login link, its login at the issuer and the third party's redirect
/// (`super::login`), all `GET`; what admits them is the link or `state`.
fn is_open_login(method: &axum::http::Method, path: &str) -> bool {
    method == axum::http::Method::GET && path.starts_with(&format!("{}/", crate::oauth::LOGIN_PATH))
}

/// The middleware that applies a [`Guard`] to every request. A request
/// that passed with credentials carries its caller's
/// `Arc<Identity>` on to the handlers.
pub async fn check(State(guard): State<Arc<Guard>>, mut request: Request, next: Next) -> Response {
    if is_open_login(request.method(), request.uri().path()) {
        // A browser's login link or redirect: no credentials, the rebinding checks still.
        return match guard.screen(request.headers()) {
            Some(refusal) => refusal,
            None => next.run(request).await,
        };
    }
    match guard.admit(request.uri().path(), request.headers()).await {
        Err(refusal) => refusal,
        Ok(identity) => {
            if let Some(identity) = identity {
                request.extensions_mut().insert(identity);
            }
            next.run(request).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;

    fn guard(token: Option<&str>) -> Guard {
        Guard {
            allowed_origins: vec!["https://app.example.com".into()],
            loopback_origins: true,
            loopback_bind: true,
            token: token.map(str::to_owned),
            keys: KeyRing::default(),
            auth: None,
            caller_tokens: None,
        }
    }

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        pairs.iter().map(|(name, value)| (name.clone(), HeaderValue::from_str(value).unwrap())).collect()
    }

    fn refusal_of(guard: &Guard, path: &str, headers: &HeaderMap) -> Option<Response> {
        futures::executor::block_on(guard.refusal(path, headers))
    }

    #[test]
    fn origins_and_hosts_are_checked() {
        let guard = guard(None);
        for allowed in ["http://localhost:3000", "http://127.0.0.1", "https://[::1]:8443", "https://app.example.com/"] {
            assert!(refusal_of(&guard, "/mcp", &headers(&[(header::ORIGIN, allowed)])).is_none(), "{allowed}");
        }
        for refused in ["http://evil.example.com", "http://localhost.evil.com", "null", "http://127.0.0.1.nip.io"] {
            let refusal = refusal_of(&guard, "/mcp", &headers(&[(header::ORIGIN, refused)])).expect(refused);
            assert_eq!(refusal.status(), StatusCode::FORBIDDEN);
        }
        assert!(refusal_of(&guard, "/mcp", &headers(&[(header::HOST, "localhost:8080")])).is_none());
        assert!(refusal_of(&guard, "/mcp", &headers(&[(header::HOST, "[::1]:8080")])).is_none());
        assert!(refusal_of(&guard, "/mcp", &headers(&[(header::HOST, "127.0.0.2:8080")])).is_none());
        assert_eq!(refusal_of(&guard, "/mcp", &headers(&[(header::HOST, "evil.example.com")])).unwrap().status(), StatusCode::FORBIDDEN);
    }

    #[test]
    fn the_token_is_required_except_for_health() {
        let guard = guard(Some("s3cret"));
        let refusal = refusal_of(&guard, "/mcp", &HeaderMap::new()).unwrap();
        assert_eq!(refusal.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(refusal.headers()[header::WWW_AUTHENTICATE], "Bearer");
        assert!(refusal_of(&guard, "/mcp", &headers(&[(header::AUTHORIZATION, "Bearer wrong!")])).is_some());
        let admitted =
            futures::executor::block_on(guard.admit("/mcp", &headers(&[(header::AUTHORIZATION, "Bearer s3cret")]))).ok().flatten();
        assert_eq!(admitted.as_deref(), Some(&Identity::shared_token()));
        assert!(refusal_of(&guard, super::super::HEALTH_PATH, &HeaderMap::new()).is_none());
        assert!(constant_time_eq(b"abc", b"abc") && !constant_time_eq(b"abc", b"abd") && !constant_time_eq(b"abc", b"ab"));
    }

    #[test]
    fn named_keys_admit_their_holders_besides_the_token() {
        let settings = crate::config::KeySettings {
            subject: "alice".into(),
            token: "${ALICE}".into(),
            token_file: None,
            scopes: vec!["tools:call".into()],
            claims: Default::default(),
        };
        let lookup = |_: &str| Some("0f3a9c2e7b1d4a6f8e0c2b4d6f8a0c1e".to_string());
        let keys = super::super::keys::load(&[settings], std::path::Path::new("servers.toml"), lookup).unwrap();
        let bearer = |token: &str| headers(&[(header::AUTHORIZATION, &format!("Bearer {token}"))]);
        let mut only_keys = guard(None);
        only_keys.keys = KeyRing::new(keys);
        let alice = block_on(only_keys.admit("/mcp", &bearer("0f3a9c2e7b1d4a6f8e0c2b4d6f8a0c1e"))).ok().flatten().unwrap();
        assert_eq!((alice.subject.as_str(), alice.proof), ("alice", crate::identity::Proof::Key));
        assert_eq!(
            block_on(only_keys.refusal("/mcp", &HeaderMap::new())).unwrap().status(),
            StatusCode::UNAUTHORIZED,
            "keys alone require credentials"
        );
        let both = Guard { token: Some("s3cret-shared".into()), ..only_keys.clone() };
        assert_eq!(block_on(both.admit("/mcp", &bearer("s3cret-shared"))).ok().flatten().as_deref(), Some(&Identity::shared_token()));
        assert!(block_on(both.refusal("/mcp", &bearer("0f3a9c2e7b1d4a6f8e0c2b4d6f8a0c1f"))).is_some());
        only_keys.keys.set(Vec::new());
        assert!(block_on(only_keys.admit("/mcp", &HeaderMap::new())).unwrap().is_none(), "the ring in force is read per request");
    }

    #[test]
    fn with_auth_the_shared_token_still_passes_and_the_metadata_is_open() {
        let settings = crate::config::AuthSettings {
            issuer: "http://127.0.0.1:9".into(),
            audience: "https://gw.example/mcp".into(),
            algorithms: vec!["RS256".into()],
            leeway: std::time::Duration::from_secs(60),
            required_scopes: Vec::new(),
            claims: Vec::new(),
            introspection: None,
            login: None,
            jwks_min_refresh: std::time::Duration::from_secs(30),
        };
        let guard = Guard { auth: Some(Arc::new(Authenticator::new(settings, None).unwrap())), ..guard(Some("s3cret")) };
        // (status, challenge, identity) of a request to `path` with headers `pairs`.
        let admit = |path: &str, pairs: &[(header::HeaderName, &str)]| match futures::executor::block_on(guard.admit(path, &headers(pairs)))
        {
            Ok(identity) => (StatusCode::OK, String::new(), identity),
            Err(refusal) => {
                let challenge = refusal.headers().get(header::WWW_AUTHENTICATE).map(|value| value.to_str().unwrap().to_string());
                (refusal.status(), challenge.unwrap_or_default(), None)
            }
        };
        assert_eq!(admit("/mcp", &[(header::AUTHORIZATION, "Bearer s3cret")]).2.as_deref(), Some(&Identity::shared_token()));
        for open in ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp", "/healthz"] {
            assert_eq!((admit(open, &[]).0, admit(open, &[]).2), (StatusCode::OK, None), "{open}");
        }
        let (status, challenge, _) = admit("/mcp", &[]);
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(challenge.contains("resource_metadata=\"https://gw.example/.well-known/oauth-protected-resource/mcp\""), "{challenge}");
        let (status, challenge, _) = admit("/mcp", &[(header::AUTHORIZATION, "Bearer wrong-and-opaque")]);
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
        let (status, _, _) = admit("/.well-known/oauth-protected-resource", &[(header::ORIGIN, "http://evil.example")]);
        assert_eq!(status, StatusCode::FORBIDDEN, "origins still apply");
    }
}
