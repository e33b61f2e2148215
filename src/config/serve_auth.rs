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
//! ```
//!
//! `introspection` (RFC 7662, for opaque tokens) takes an optional
//! `endpoint` (else the issuer's metadata's `introspection_endpoint`), and
//! its `client_id` and `client_secret` must each be one `${VAR}` reference,
//! expanded when `serve` starts, like `[serve] token`.

use std::path::Path;
use std::time::Duration;

use toml_edit::Item;

use super::duration::parse_duration;
use super::expand::{is_only_reference, Syntax};
use crate::error::ConfigError;

const KEYS: [&str; 8] = ["issuer", "audience", "algorithms", "leeway", "required_scopes", "claims", "introspection", "jwks_min_refresh"];
const INTROSPECTION_KEYS: [&str; 3] = ["endpoint", "client_id", "client_secret"];

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
    /// The least time between two fetches of the issuer's JWKS.
    pub jwks_min_refresh: Duration,
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

/// An absolute `http(s)` URL, or why not.
fn http_url(text: &str) -> Result<url::Url, &'static str> {
    match url::Url::parse(text) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Ok(url),
        _ => Err("must be an absolute http(s) URL, such as \"https://login.example.com\""),
    }
}

/// Reads `[serve.auth]` of the file at `path`.
pub(crate) fn read(path: &Path, item: &Item) -> Result<AuthSettings, ConfigError> {
    let invalid = |field: &str, message: &str| ConfigError::InvalidSetting {
        file: path.into(),
        field: format!("serve.auth.{field}").trim_end_matches('.').into(),
        message: message.into(),
    };
    let table = item.as_table_like().ok_or_else(|| invalid("", "must be a table with issuer and audience"))?;
    let strings = |key: &str, value: &Item| -> Result<Vec<String>, ConfigError> {
        let list = value.as_array().ok_or_else(|| invalid(key, "must be a list of strings"))?;
        list.iter()
            .map(|entry| entry.as_str().map(str::to_string))
            .collect::<Option<_>>()
            .ok_or_else(|| invalid(key, "must hold strings only"))
    };
    let mut settings = AuthSettings {
        issuer: String::new(),
        audience: String::new(),
        algorithms: DEFAULT_ALGORITHMS.map(String::from).to_vec(),
        leeway: DEFAULT_LEEWAY,
        required_scopes: Vec::new(),
        claims: Vec::new(),
        introspection: None,
        jwks_min_refresh: DEFAULT_JWKS_MIN_REFRESH,
    };
    for (key, value) in table.iter() {
        match key {
            "issuer" | "audience" => {
                let text = value.as_str().ok_or_else(|| invalid(key, "must be a string URL"))?;
                http_url(text).map_err(|why| invalid(key, why))?;
                if key == "issuer" {
                    settings.issuer = text.to_string();
                } else {
                    settings.audience = text.to_string();
                }
            }
            "algorithms" => {
                let names = strings(key, value)?;
                if let Some(bad) = names.iter().find(|name| !ALGORITHMS.contains(&name.as_str())) {
                    let why = match bad.to_ascii_lowercase() {
                        lower if lower == "none" => "lists `none`: unsigned tokens are never accepted".to_string(),
                        lower if lower.starts_with("hs") => {
                            format!("lists {bad}: HMAC needs a shared secret, and the keys come from the issuer's public JWKS")
                        }
                        _ => format!("lists {bad:?}; the known ones are {}", ALGORITHMS.join(", ")),
                    };
                    return Err(invalid(key, &why));
                }
                if names.is_empty() {
                    return Err(invalid(key, "is empty: list at least one, such as [\"RS256\"]"));
                }
                settings.algorithms = names;
            }
            "leeway" => {
                let leeway = value.as_str().and_then(parse_duration).ok_or_else(|| invalid(key, "must be a duration such as \"60s\""))?;
                if leeway > MAX_LEEWAY {
                    return Err(invalid(key, "is over 10m: that would accept tokens long expired"));
                }
                settings.leeway = leeway;
            }
            "jwks_min_refresh" => {
                let every = value.as_str().and_then(parse_duration).ok_or_else(|| invalid(key, "must be a duration such as \"30s\""))?;
                if every < MIN_JWKS_MIN_REFRESH {
                    return Err(invalid(key, "is under 1s: each token naming an unknown key could then cost the issuer a request"));
                }
                settings.jwks_min_refresh = every;
            }
            "required_scopes" => settings.required_scopes = strings(key, value)?,
            "claims" => settings.claims = strings(key, value)?,
            "introspection" => settings.introspection = Some(read_introspection(path, value)?),
            _ => {
                return Err(ConfigError::UnknownKey {
                    file: path.into(),
                    server: None,
                    key: format!("serve.auth.{key}"),
                    known: KEYS.to_vec(),
                })
            }
        }
    }
    if settings.issuer.is_empty() {
        return Err(invalid("issuer", "is missing: the URL of the authorization server whose tokens are accepted"));
    }
    if settings.audience.is_empty() {
        return Err(invalid(
            "audience",
            "is missing: this gateway's own URL, such as \"https://mcp.example.com/mcp\", which tokens must name",
        ));
    }
    Ok(settings)
}

fn read_introspection(path: &Path, item: &Item) -> Result<IntrospectionSettings, ConfigError> {
    let invalid = |field: &str, message: &str| ConfigError::InvalidSetting {
        file: path.into(),
        field: format!("serve.auth.introspection.{field}").trim_end_matches('.').into(),
        message: message.into(),
    };
    let table = item.as_table_like().ok_or_else(|| invalid("", "must be a table with client_id and client_secret"))?;
    let (mut endpoint, mut client_id, mut client_secret) = (None, None, None);
    for (key, value) in table.iter() {
        let text = value.as_str().ok_or_else(|| invalid(key, "must be a string"))?;
        match key {
            "endpoint" => {
                http_url(text).map_err(|why| invalid(key, why))?;
                endpoint = Some(text.to_string());
            }
            "client_id" | "client_secret" => {
                if !is_only_reference(text, Syntax::Braced) {
                    return Err(invalid(
                        key,
                        "must be one reference such as \"${INTROSPECTION_SECRET}\": credentials stay out of the file",
                    ));
                }
                *(if key == "client_id" { &mut client_id } else { &mut client_secret }) = Some(text.to_string());
            }
            _ => {
                return Err(ConfigError::UnknownKey {
                    file: path.into(),
                    server: None,
                    key: format!("serve.auth.introspection.{key}"),
                    known: INTROSPECTION_KEYS.to_vec(),
                })
            }
        }
    }
    match (client_id, client_secret) {
        (Some(client_id), Some(client_secret)) => Ok(IntrospectionSettings { endpoint, client_id, client_secret }),
        (None, _) => Err(invalid("client_id", "is missing: the gateway authenticates to the introspection endpoint")),
        (_, None) => Err(invalid("client_secret", "is missing: the gateway authenticates to the introspection endpoint")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
