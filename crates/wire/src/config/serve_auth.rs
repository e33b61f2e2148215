//! The `[serve.auth]` table: the gateway as an OAuth 2.1 resource server
//! that accepts the access tokens of one issuer.
//!
//! ```toml
//! [serve.auth]
//! issuer = "https://login.example.com"            # its metadata and JWKS are fetched from there
//! audience = "https://mcp.example.com/mcp"        # this gateway's resource URI (required)
//! algorithms = ["RS256", "ES256"]                 # the default; never `none`, never HS*
//! leeway = "60s"                                  # clock skew allowed on exp/nbf (default 60s)
//! required_scopes = ["mcp:tools"]                 # every token must grant all of them
//! claims = ["email", "groups"]                    # claims kept in the caller's identity
//! jwks_min_refresh = "30s"                        # least time between two fetches of the JWKS (default 30s)
//! introspection = { client_id = "${INTROSPECT_ID}", client_secret = "${INTROSPECT_SECRET}" }
//! login = { client_id = "${GW_LOGIN_ID}", client_secret = "${GW_LOGIN_SECRET}" }
//! ```
//!
//! `login` makes the gateway a client of the issuer for one purpose: a
//! browser that opens a caller's per-caller login link logs in there first,
//! and must be that caller (`crate::oauth::LinkCheck`, a layer up); its
//! credentials are references, as introspection's are.
//!
//! `introspection` (RFC 7662, for opaque tokens) takes an optional
//! `endpoint` (else the issuer's metadata's `introspection_endpoint`), and
//! its `client_id` and `client_secret` must each be one `${VAR}` reference,
//! expanded when `serve` starts, like `[serve] token`.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};

use super::de::DeError;
use super::duration::parse_duration;
use super::serve_policy::{Reference, REFERENCE_PATTERN};
use super::values::{scalar, scalar_or, schema_as, Scalar, Strings, DURATION_PATTERN};

/// The signature algorithms a token may use: asymmetric only, since the
/// keys come from a public JWKS (HS* would make the public key a secret).
pub const ALGORITHMS: [&str; 9] = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"];
/// Used when `algorithms` is not set.
pub const DEFAULT_ALGORITHMS: [&str; 2] = ["RS256", "ES256"];
/// Used when `leeway` is not set.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(60);
/// Used when `jwks_min_refresh` is not set: a token naming an unknown key
/// makes the gateway fetch the JWKS again at most this often.
pub const DEFAULT_JWKS_MIN_REFRESH: Duration = Duration::from_secs(30);
/// The shortest `jwks_min_refresh` accepted (every bad token must not cost the issuer a request).
const MIN_JWKS_MIN_REFRESH: Duration = Duration::from_secs(1);
/// The longest `leeway` accepted: more would keep expired tokens alive.
const MAX_LEEWAY: Duration = Duration::from_secs(600);

/// `[serve.auth]`, checked but its `${VAR}` references not yet expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSettings {
    /// The issuer's URL, exactly as its tokens' `iss` says it.
    pub issuer: String,
    /// This gateway's resource URI: tokens must name it in `aud`.
    pub audience: String,
    /// Signature algorithms accepted, among [`ALGORITHMS`].
    pub algorithms: Vec<String>,
    pub leeway: Duration,
    pub required_scopes: Vec<String>,
    /// Claims copied into the caller's `Identity::claims`.
    pub claims: Vec<String>,
    pub introspection: Option<IntrospectionSettings>,
    /// The gateway as a client of the issuer (`login = { client_id,
    /// client_secret }`, `${VAR}` references as written): a browser that
    /// opens a caller's login link logs in here first, as that caller.
    pub login: Option<LoginClient>,
    /// The least time between two fetches of the issuer's JWKS.
    pub jwks_min_refresh: Duration,
}

/// `login = { client_id, client_secret }` of `[serve.auth]`.
#[derive(Clone, PartialEq, Eq)]
pub struct LoginClient {
    /// `${VAR}` references, as written.
    pub client_id: String,
    pub client_secret: String,
}

impl std::fmt::Debug for LoginClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginClient").finish_non_exhaustive()
    }
}

/// `introspection = { ... }` of `[serve.auth]`.
#[derive(Clone, PartialEq, Eq)]
pub struct IntrospectionSettings {
    /// Else the issuer's metadata's `introspection_endpoint`.
    pub endpoint: Option<String>,
    /// `${VAR}` references, as written.
    pub client_id: String,
    pub client_secret: String,
}

impl std::fmt::Debug for IntrospectionSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntrospectionSettings").field("endpoint", &self.endpoint).finish_non_exhaustive()
    }
}

/// `[serve.auth]` as written.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServeAuthFile {
    /// The issuer's URL, exactly as its tokens' `iss` says it; its metadata and JWKS are fetched from there.
    issuer: Option<HttpUrl>,
    /// This gateway's resource URI: tokens must name it in `aud`.
    audience: Option<HttpUrl>,
    /// Signature algorithms accepted (default RS256 and ES256; never `none`, never HS*).
    algorithms: Option<Strings>,
    /// Clock skew allowed on exp/nbf (default 60s, at most 10m).
    leeway: Option<Lapse>,
    required_scopes: Option<Strings>,
    /// Claims kept in the caller's identity.
    claims: Option<Strings>,
    introspection: Option<IntrospectionFile>,
    /// The gateway as a client of the issuer, for browsers that open callers' login links (per-caller logins).
    login: Option<LoginClientFile>,
    /// Least time between two fetches of the JWKS (default 30s, at least 1s).
    jwks_min_refresh: Option<Lapse>,
}

/// `introspection = { endpoint, client_id, client_secret }` (RFC 7662).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct IntrospectionFile {
    endpoint: Option<HttpUrl>,
    client_id: Option<Credential>,
    client_secret: Option<Credential>,
}

/// `login = { client_id, client_secret }`: both references.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LoginClientFile {
    client_id: Credential,
    client_secret: Credential,
}

/// An absolute `http(s)` URL.
struct HttpUrl(String);

impl<'de> Deserialize<'de> for HttpUrl {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let url = |value: Scalar| match value {
            Scalar::Str(text) => match url::Url::parse(&text) {
                Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Ok(HttpUrl(text)),
                _ => Err("must be an absolute http(s) URL, such as \"https://login.example.com\"".to_string()),
            },
            _ => Err("must be a string URL".to_string()),
        };
        scalar_or(deserializer, "a string URL", url)
    }
}

/// A `${VAR}` reference to a credential of the introspection client.
struct Credential(String);

impl<'de> Deserialize<'de> for Credential {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let refused = "must be one reference such as \"${INTROSPECTION_SECRET}\": credentials stay out of the file";
        Reference::read(deserializer, "a string", refused).map(|reference| Credential(reference.0))
    }
}

/// A duration written with its unit, like `"60s"`.
struct Lapse(Duration);

impl<'de> Deserialize<'de> for Lapse {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let lapse = |value: Scalar| match value {
            Scalar::Str(text) => parse_duration(&text).map(Lapse),
            _ => None,
        };
        scalar(deserializer, "a duration such as \"60s\"", lapse)
    }
}

schema_as!(HttpUrl, { "type": "string", "format": "uri", "pattern": "^https?://" });
schema_as!(Credential, { "type": "string", "pattern": REFERENCE_PATTERN });
schema_as!(Lapse, { "type": "string", "pattern": DURATION_PATTERN });

impl ServeAuthFile {
    pub(crate) fn into_settings(self) -> Result<AuthSettings, DeError> {
        let issuer = self
            .issuer
            .ok_or_else(|| DeError::field("issuer", "is missing: the URL of the authorization server whose tokens are accepted"))?;
        let audience = self.audience.ok_or_else(|| {
            DeError::field(
                "audience",
                "is missing: this gateway's own URL, such as \"https://mcp.example.com/mcp\", which tokens must name",
            )
        })?;
        let algorithms = self.algorithms.map_or_else(|| DEFAULT_ALGORITHMS.map(String::from).to_vec(), |names| names.0);
        if let Some(bad) = algorithms.iter().find(|name| !ALGORITHMS.contains(&name.as_str())) {
            let why = match bad.to_ascii_lowercase() {
                lower if lower == "none" => "lists `none`: unsigned tokens are never accepted".to_string(),
                lower if lower.starts_with("hs") => {
                    format!("lists {bad}: HMAC needs a shared secret, and the keys come from the issuer's public JWKS")
                }
                _ => format!("lists {bad:?}; the known ones are {}", ALGORITHMS.join(", ")),
            };
            return Err(DeError::field("algorithms", why));
        }
        if algorithms.is_empty() {
            return Err(DeError::field("algorithms", "is empty: list at least one, such as [\"RS256\"]"));
        }
        let leeway = self.leeway.map_or(DEFAULT_LEEWAY, |lapse| lapse.0);
        if leeway > MAX_LEEWAY {
            return Err(DeError::field("leeway", "is over 10m: that would accept tokens long expired"));
        }
        let jwks_min_refresh = self.jwks_min_refresh.map_or(DEFAULT_JWKS_MIN_REFRESH, |lapse| lapse.0);
        if jwks_min_refresh < MIN_JWKS_MIN_REFRESH {
            return Err(DeError::field(
                "jwks_min_refresh",
                "is under 1s: each token naming an unknown key could then cost the issuer a request",
            ));
        }
        let introspection = match self.introspection {
            None => None,
            Some(IntrospectionFile { endpoint, client_id, client_secret }) => {
                let missing = |key: &str| {
                    DeError::field(&format!("introspection.{key}"), "is missing: the gateway authenticates to the introspection endpoint")
                };
                let client_id = client_id.ok_or_else(|| missing("client_id"))?.0;
                let client_secret = client_secret.ok_or_else(|| missing("client_secret"))?.0;
                Some(IntrospectionSettings { endpoint: endpoint.map(|url| url.0), client_id, client_secret })
            }
        };
        Ok(AuthSettings {
            issuer: issuer.0,
            audience: audience.0,
            algorithms,
            leeway,
            required_scopes: self.required_scopes.map_or_else(Vec::new, |scopes| scopes.0),
            claims: self.claims.map_or_else(Vec::new, |claims| claims.0),
            introspection,
            login: self.login.map(|login| LoginClient { client_id: login.client_id.0, client_secret: login.client_secret.0 }),
            jwks_min_refresh,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::de::{from_node, Node};
    use std::path::Path;

    /// Reads (as `[serve]` does) `[serve.auth]` of the file at `path`.
    fn read(path: &Path, item: &toml_edit::Item) -> Result<AuthSettings, crate::error::ConfigError> {
        let table: ServeAuthFile = from_node(Node::Item(item), "serve.auth", &[]).map_err(|error| error.into_setting_error(path))?;
        table.into_settings().map_err(|error| error.under("serve.auth").into_setting_error(path))
    }

    fn auth(body: &str) -> Result<AuthSettings, String> {
        let document: toml_edit::DocumentMut = format!("[serve.auth]\n{body}\n").parse().unwrap();
        read(Path::new("/etc/mcpvisor/servers.toml"), &document["serve"]["auth"]).map_err(|e| e.to_string())
    }

    const BASE: &str = "issuer = \"https://idp.example\"\naudience = \"https://gw.example/mcp\"";

    #[test]
    fn defaults_and_every_key() {
        let settings = auth(BASE).unwrap();
        assert_eq!(
            (settings.algorithms, settings.leeway, settings.introspection),
            (vec!["RS256".into(), "ES256".into()], DEFAULT_LEEWAY, None)
        );
        let full = auth(&format!(
            "{BASE}\nalgorithms = [\"PS256\"]\nleeway = \"5s\"\nrequired_scopes = [\"mcp\"]\nclaims = [\"email\"]\n\
             introspection = {{ client_id = \"${{ID}}\", client_secret = \"${{SECRET}}\" }}"
        ))
        .unwrap();
        assert_eq!((full.algorithms, full.leeway), (vec!["PS256".to_string()], Duration::from_secs(5)));
        assert_eq!((full.required_scopes, full.claims), (vec!["mcp".to_string()], vec!["email".to_string()]));
        let introspection = full.introspection.unwrap();
        assert_eq!((introspection.endpoint.as_deref(), introspection.client_secret.as_str()), (None, "${SECRET}"));
        assert!(!format!("{introspection:?}").contains("SECRET"));
    }

    #[test]
    fn errors_name_the_file_and_the_key() {
        for (body, expected) in [
            ("audience = \"https://gw.example/mcp\"", "`serve.auth.issuer` is missing"),
            ("issuer = \"https://idp.example\"", "`serve.auth.audience` is missing"),
            ("issuer = \"idp.example\"", "`serve.auth.issuer` must be an absolute http(s) URL"),
            (&format!("{BASE}\nalgorithms = [\"none\"]"), "`serve.auth.algorithms` lists `none`"),
            (&format!("{BASE}\nalgorithms = [\"HS256\"]"), "lists HS256: HMAC needs a shared secret"),
            (&format!("{BASE}\nalgorithms = []"), "`serve.auth.algorithms` is empty"),
            (&format!("{BASE}\nleeway = \"1h\""), "`serve.auth.leeway` is over 10m"),
            (&format!("{BASE}\nleeway = 60"), "`serve.auth.leeway` must be a duration"),
            (&format!("{BASE}\njwks_min_refresh = \"10ms\""), "`serve.auth.jwks_min_refresh` is under 1s"),
            (&format!("{BASE}\nclaims = [1]"), "`serve.auth.claims` must hold strings only"),
            (
                &format!("{BASE}\nintrospection = {{ client_id = \"id\", client_secret = \"${{S}}\" }}"),
                "`serve.auth.introspection.client_id` must be one reference",
            ),
            (&format!("{BASE}\nintrospection = {{ client_id = \"${{I}}\" }}"), "`serve.auth.introspection.client_secret` is missing"),
            (&format!("{BASE}\njwks = \"x\""), "unknown key `serve.auth.jwks`"),
        ] {
            let message = auth(body).unwrap_err();
            assert!(message.starts_with("/etc/mcpvisor/servers.toml: ") && message.contains(expected), "{message}");
        }
    }
}
