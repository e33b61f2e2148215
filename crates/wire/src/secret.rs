//! What passes between a model and a server, as named when it holds a
//! secret: the [`SecretKind`] found (never the secret) and the
//! [`Direction`] it went. Plain words shared by the redactor
//! (`config::redact`), the `secrets` setting and the errors, so neither
//! of those two depends on the other.

/// What kind of secret was found, never what it was. Ordered: when
/// secrets overlap, the first kind here names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SecretKind {
    /// A PEM private key block (`-----BEGIN … PRIVATE KEY-----`).
    PrivateKey,
    /// The value of a configured secret (an env value under a secret name,
    /// a header, an auth secret) of any configured server.
    Configured,
    /// A well-known token shape (`ghp_…`, `sk-…`, `AKIA…`, a JWT, ...).
    Token,
    /// The credentials after `Authorization` or `Bearer`.
    Authorization,
    /// The password (or token user) of a URL's userinfo.
    UrlPassword,
    /// The value of a secret-looking name (`password=…`, `--api-key …`).
    NamedValue,
}

impl SecretKind {
    pub const ALL: [SecretKind; 6] = [
        SecretKind::PrivateKey,
        SecretKind::Configured,
        SecretKind::Token,
        SecretKind::Authorization,
        SecretKind::UrlPassword,
        SecretKind::NamedValue,
    ];

    /// The kind's label in metrics, audit lines and errors.
    pub fn as_str(self) -> &'static str {
        match self {
            SecretKind::PrivateKey => "private_key",
            SecretKind::Configured => "configured",
            SecretKind::Token => "token",
            SecretKind::Authorization => "authorization",
            SecretKind::UrlPassword => "url_password",
            SecretKind::NamedValue => "named_value",
        }
    }

    /// How a person reads it: "a private key".
    pub fn described(self) -> &'static str {
        match self {
            SecretKind::PrivateKey => "a private key",
            SecretKind::Configured => "the value of a configured secret",
            SecretKind::Token => "an API or cloud token",
            SecretKind::Authorization => "Authorization or Bearer credentials",
            SecretKind::UrlPassword => "a password in a URL",
            SecretKind::NamedValue => "a value given under a secret's name",
        }
    }
}

/// Which way a call's contents go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    /// From the model (the caller) to the server.
    Arguments,
    /// From the server back to the model.
    Results,
}

impl Direction {
    pub const ALL: [Direction; 2] = [Direction::Arguments, Direction::Results];

    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Arguments => "arguments",
            Direction::Results => "results",
        }
    }
}
