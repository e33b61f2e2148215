//! Finding who issues tokens for an MCP server: its protected-resource
//! metadata (RFC 9728), then its authorization server's metadata (RFC 8414,
//! else OpenID Connect discovery), both path-aware, in the MCP
//! specification's order.
//!
//! - Resource metadata: the challenge's `resource_metadata` URL, else
//!   `/.well-known/oauth-protected-resource{path}`, else
//!   `/.well-known/oauth-protected-resource` at the server's origin. A
//!   server with none (a 2025-03-26 server) has its metadata at the
//!   origin's `/.well-known/oauth-authorization-server` (that revision's
//!   "authorization base URL"), and without metadata there either, the
//!   2025-03-26 default endpoints (`/authorize`, `/token`, `/register` at
//!   the origin).
//! - Server metadata of issuer `https://as/{path}`:
//!   `/.well-known/oauth-authorization-server/{path}`,
//!   `/.well-known/openid-configuration/{path}`,
//!   `/{path}/.well-known/openid-configuration`; without a path the first
//!   two at the root. The document's `issuer` must be the one asked for
//!   (RFC 8414 §3.3), except on the 2025-03-26 path: there the client has
//!   no issuer identifier to compare with (the URL comes from the MCP
//!   server's, not from an issuer), so the issuer the document names is
//!   taken, and the redirect's `iss` is checked against it (RFC 9207).

use super::dpop::ALGORITHM;
use crate::config::OAuthConfig;
use serde::Deserialize;
use url::Url;

use super::http::{Answer, Http};
use super::OAuthError;

/// RFC 9728 protected-resource metadata, the fields OAuth acts on.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ResourceMetadata {
    pub resource: Option<String>,
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    pub scopes_supported: Option<Vec<String>>,
    /// RFC 9728 §2: the resource accepts only DPoP-bound tokens.
    #[serde(default)]
    pub dpop_bound_access_tokens_required: bool,
}

/// RFC 8414 authorization-server metadata, the fields OAuth acts on.
#[derive(Debug, Clone, Deserialize)]
pub struct ServerMetadata {
    pub issuer: String,
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: String,
    pub registration_endpoint: Option<String>,
    pub code_challenge_methods_supported: Option<Vec<String>>,
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
    /// RFC 9449 §5.1: the algorithms of DPoP proofs it accepts.
    pub dpop_signing_alg_values_supported: Option<Vec<String>>,
}

impl ServerMetadata {
    /// PKCE with S256 is required: a server that does not say it offers it
    /// is refused (the MCP specification's rule).
    pub fn check_pkce(&self) -> Result<(), OAuthError> {
        let offered = self.code_challenge_methods_supported.as_deref().unwrap_or_default();
        if offered.iter().any(|method| method == "S256") {
            return Ok(());
        }
        Err(OAuthError::new(format!(
            "the authorization server {} does not offer PKCE with S256 (code_challenge_methods_supported: {offered:?}); mcpvisor refuses to log in without it",
            self.issuer
        )))
    }

    pub fn supports_auth_method(&self, method: &str) -> bool {
        match &self.token_endpoint_auth_methods_supported {
            Some(methods) => methods.iter().any(|m| m == method),
            // RFC 8414 §2: the default is client_secret_basic.
            None => method == "client_secret_basic",
        }
    }
}

/// What discovery found for one MCP server.
#[derive(Debug, Clone)]
pub struct Discovery {
    /// The `resource` parameter to send (RFC 8707).
    pub resource: String,
    pub resource_metadata: ResourceMetadata,
    pub server: ServerMetadata,
}

/// Discovers the authorization server of the MCP endpoint `endpoint`.
pub async fn discover(http: &Http, endpoint: &str, resource_metadata_url: Option<&str>) -> Result<Discovery, OAuthError> {
    let endpoint_url = parse_url(endpoint)?;
    let resource_metadata = resource_metadata(http, &endpoint_url, resource_metadata_url).await?;
    let resource = match (&resource_metadata, resource_metadata.as_ref().and_then(|m| m.resource.as_deref())) {
        (_, Some(declared)) => checked_resource(&endpoint_url, declared)?,
        _ => canonical(&endpoint_url),
    };
    let server = match resource_metadata.as_ref().and_then(|m| m.authorization_servers.first()) {
        Some(issuer) => server_metadata(http, issuer).await?,
        None => match metadata_at(http, &origin(&endpoint_url), Issuer::AsDeclared).await {
            Ok(server) => server,
            Err(error) => {
                tracing::info!("{error}; using the 2025-03-26 default endpoints");
                default_endpoints(&endpoint_url)
            }
        },
    };
    Ok(Discovery { resource, resource_metadata: resource_metadata.unwrap_or_default(), server })
}

/// A server of the 2025-03-26 era without any metadata: its origin is the
/// authorization server, at `/authorize`, `/token` and `/register` (that
/// revision's defaults). PKCE with S256 was required of every server then.
fn default_endpoints(endpoint: &Url) -> ServerMetadata {
    let base = origin(endpoint);
    ServerMetadata {
        issuer: base.clone(),
        authorization_endpoint: Some(format!("{base}/authorize")),
        token_endpoint: format!("{base}/token"),
        registration_endpoint: Some(format!("{base}/register")),
        code_challenge_methods_supported: Some(vec!["S256".into()]),
        token_endpoint_auth_methods_supported: None,
        client_id_metadata_document_supported: false,
        authorization_response_iss_parameter_supported: false,
        dpop_signing_alg_values_supported: None,
    }
}

async fn resource_metadata(http: &Http, endpoint: &Url, from_header: Option<&str>) -> Result<Option<ResourceMetadata>, OAuthError> {
    let mut candidates = Vec::new();
    if let Some(url) = from_header {
        candidates.push(url.to_owned());
    }
    let path = endpoint.path().trim_end_matches('/');
    if !path.is_empty() {
        candidates.push(format!("{}/.well-known/oauth-protected-resource{path}", origin(endpoint)));
    }
    candidates.push(format!("{}/.well-known/oauth-protected-resource", origin(endpoint)));
    for url in candidates {
        match http.get_json::<ResourceMetadata>(&url).await? {
            Answer::Ok(metadata) => return Ok(Some(metadata)),
            Answer::Failed { status, .. } if (400..500).contains(&status) => continue,
            // The URL may come from the server's challenge: its page is not shown, only what kind it was.
            Answer::Failed { status, content_type, .. } => {
                let kind = if content_type.is_empty() { "no content type".to_owned() } else { content_type };
                return Err(OAuthError::new(format!(
                    "{url} answered {status} ({kind}) for the protected-resource metadata; try again later, or ask the server's operator"
                )));
            }
        }
    }
    Ok(None)
}

/// How the `issuer` of a metadata document is checked.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Issuer {
    /// It must be the issuer whose metadata was asked for (RFC 8414 §3.3).
    Identical,
    /// Taken as the document says: the 2025-03-26 authorization base URL,
    /// which is the MCP server's origin rather than an issuer identifier.
    AsDeclared,
}

/// Fetches the metadata of `issuer` from the first well-known URL that has it.
pub async fn server_metadata(http: &Http, issuer: &str) -> Result<ServerMetadata, OAuthError> {
    metadata_at(http, issuer, Issuer::Identical).await
}

async fn metadata_at(http: &Http, issuer: &str, check: Issuer) -> Result<ServerMetadata, OAuthError> {
    let issuer_url = parse_url(issuer)?;
    let base = origin(&issuer_url);
    let path = issuer_url.path().trim_end_matches('/');
    let candidates = if path.is_empty() {
        vec![format!("{base}/.well-known/oauth-authorization-server"), format!("{base}/.well-known/openid-configuration")]
    } else {
        vec![
            format!("{base}/.well-known/oauth-authorization-server{path}"),
            format!("{base}/.well-known/openid-configuration{path}"),
            format!("{base}{path}/.well-known/openid-configuration"),
        ]
    };
    let mut tried = Vec::new();
    for url in candidates {
        match http.get_json::<ServerMetadata>(&url).await? {
            Answer::Ok(metadata) => {
                if check == Issuer::Identical && metadata.issuer.trim_end_matches('/') != issuer.trim_end_matches('/') {
                    return Err(OAuthError::new(format!(
                        "{url} names the issuer {:?}, not {issuer:?} whose metadata it should be (RFC 8414 §3.3); refusing it",
                        metadata.issuer
                    )));
                }
                return Ok(metadata);
            }
            Answer::Failed { status, .. } => tried.push(format!("{url} ({status})")),
        }
    }
    Err(OAuthError::new(format!("no authorization-server metadata for {issuer}: tried {}", tried.join(", "))))
}

/// The resource a metadata document declares, if it covers `endpoint`
/// (same origin, a prefix of its path).
fn checked_resource(endpoint: &Url, declared: &str) -> Result<String, OAuthError> {
    let declared_url = parse_url(declared)?;
    let prefix = declared_url.path().trim_end_matches('/');
    let path = endpoint.path();
    let covers =
        origin(&declared_url) == origin(endpoint) && (path == prefix || path.starts_with(&format!("{prefix}/")) || prefix.is_empty());
    if covers {
        Ok(declared.to_owned())
    } else {
        Err(OAuthError::new(format!(
            "the protected-resource metadata is for {declared}, not for {}; refusing to send tokens for it",
            canonical(endpoint)
        )))
    }
}

fn parse_url(url: &str) -> Result<Url, OAuthError> {
    let parsed = Url::parse(url).map_err(|e| OAuthError::new(format!("{url:?} is not a URL: {e}")))?;
    if matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some() {
        Ok(parsed)
    } else {
        Err(OAuthError::new(format!("{url:?} is not an http(s) URL")))
    }
}

/// `scheme://host[:port]`.
fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// The URL without fragment or query, as the `resource` parameter (RFC 8707 §2).
fn canonical(url: &Url) -> String {
    let mut url = url.clone();
    url.set_fragment(None);
    url.set_query(None);
    url.to_string()
}

impl Discovery {
    /// Whether tokens for this discovery should be DPoP-bound (see the
    /// module docs of `dpop`).
    pub fn wants_dpop(&self, config: &OAuthConfig) -> bool {
        if !config.dpop {
            return false;
        }
        let offered = self.server.dpop_signing_alg_values_supported.as_deref().unwrap_or_default();
        if offered.iter().any(|alg| alg == ALGORITHM) {
            return true;
        }
        if self.resource_metadata.dpop_bound_access_tokens_required && offered.is_empty() {
            return true;
        }
        if !offered.is_empty() {
            tracing::info!(issuer = %self.server.issuer, "DPoP is offered only with {offered:?}, not {ALGORITHM}; using bearer tokens");
        }
        false
    }

    /// The scopes to ask for, in the MCP specification's order: those the
    /// configuration names, else the challenge's `scope`, else everything
    /// the resource's metadata lists in `scopes_supported`, else none (the
    /// parameter is left out).
    pub fn scopes(&self, configured: &[String], challenged: &[String]) -> Vec<String> {
        if !configured.is_empty() {
            return configured.to_vec();
        }
        if !challenged.is_empty() {
            return challenged.to_vec();
        }
        self.resource_metadata.scopes_supported.clone().unwrap_or_default()
    }
}
