//! The seam between a remote transport and whatever supplies its
//! credentials: static values from the configuration (`bearer`, `basic`,
//! `api_key`, `headers`) or an OAuth 2.1 client that discovers, logs in,
//! refreshes and steps up. The transport only asks for the header to send
//! and reports refusals; it never sees how a token was obtained.
//!
//! Invariants every implementation keeps: `authorization` never blocks on
//! a user (a login that needs a browser is [`Renewal::NeedsLogin`], done
//! out of band by `mcpvisor auth NAME`); concurrent callers share one
//! refresh (a token that expires with calls waiting is renewed once, and
//! the calls go on with the new one); secrets appear in no error text.

use futures::future::BoxFuture;

/// A refusal by the server, as the transport saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// 401, or 403 (`insufficient_scope`).
    pub status: u16,
    /// The `WWW-Authenticate` header, as sent.
    pub www_authenticate: Option<String>,
    /// The MCP endpoint that refused (the protected resource).
    pub resource: String,
}

/// What to do after a refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renewal {
    /// Better credentials are in place: send the request again (the
    /// transport retries a bounded number of times).
    Retry,
    /// Only a user can fix it (log in, consent to more scopes): the server
    /// becomes `needs_auth`, and `message` says what to run.
    NeedsLogin { message: String },
}

/// Why credentials could not be had at all (a misconfigured client, an
/// authorization server that cannot be reached or answers wrongly).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CredentialsError {
    pub message: String,
}

/// The request credentials are asked for: a DPoP proof (RFC 9449) signs
/// its method and URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLine<'a> {
    /// `POST`, `GET`, `DELETE`.
    pub method: &'a str,
    /// The absolute URL the request goes to.
    pub url: &'a str,
}

/// Supplies the credentials of one remote server.
pub trait Credentials: Send + Sync + 'static {
    /// Extra headers to send on `request` (`Authorization`, an API key
    /// header, a DPoP proof), fresh at the time of the call.
    fn headers(&self, request: RequestLine<'_>) -> BoxFuture<'_, Result<Vec<(String, String)>, CredentialsError>>;

    /// The server refused a request; renew what can be renewed.
    fn refused(&self, challenge: Challenge) -> BoxFuture<'_, Result<Renewal, CredentialsError>>;

    /// The server at `url` sent a `DPoP-Nonce` header (on any answer, a
    /// refusal included, before [`Credentials::refused`] hears of it):
    /// the nonce its next proofs must carry. Ignored by default.
    fn nonce_offered(&self, url: &str, nonce: &str) {
        let _ = (url, nonce);
    }
}
