//! Why a request's credentials were not accepted, as the resource server
//! ([`super::auth`]) and its introspection memory ([`super::introspected`])
//! say it. No variant quotes a token.

/// Why a request's token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// No bearer token was sent.
    Missing,
    /// The token was refused; the text says why without quoting it.
    Invalid(String),
    /// The token lacks some of these required scopes.
    InsufficientScope(Vec<String>),
    /// The issuer could not be asked (its keys or introspection).
    Unavailable(String),
}
