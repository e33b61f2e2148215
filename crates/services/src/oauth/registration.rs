//! Which client mcpvisor is towards an authorization server, in the MCP
//! specification's order: a client registered beforehand (the
//! configuration's `client_id`), else the client ID metadata document
//! (`client_metadata_url`, when the server says it supports them), else
//! dynamic registration (RFC 7591) at the server's `registration_endpoint`.

use serde::Deserialize;

use super::discovery::ServerMetadata;
use super::http::{Answer, Http};
use super::store::StoredClient;
use super::OAuthError;
use crate::config::OAuthConfig;

/// How the client proves itself at the token endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientAuth {
    /// A public client: only `client_id` in the body.
    None,
    /// `client_secret_basic`: HTTP Basic.
    SecretBasic(String),
    /// `client_secret_post`: the secret in the body.
    SecretPost(String),
    /// `private_key_jwt`: a signed assertion (the key's PEM).
    PrivateKeyJwt(String),
}

/// A client as the token endpoint sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    pub client_id: String,
    pub auth: ClientAuth,
    /// Where it came from, for messages: configuration, metadata document, registration.
    pub origin: ClientOrigin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientOrigin {
    Configured,
    MetadataDocument,
    Registered,
}

impl Client {
    /// A client registered earlier and kept in the token file.
    pub fn stored(stored: &StoredClient) -> Client {
        let auth = match (&stored.client_secret, stored.auth_method.as_deref()) {
            (Some(secret), Some("client_secret_post")) => ClientAuth::SecretPost(secret.clone()),
            (Some(secret), _) => ClientAuth::SecretBasic(secret.clone()),
            (None, _) => ClientAuth::None,
        };
        Client { client_id: stored.client_id.clone(), auth, origin: ClientOrigin::Registered }
    }

    /// What to keep in the token file: only registered clients (the
    /// configuration's are read from it again).
    pub fn to_store(&self) -> Option<StoredClient> {
        if self.origin != ClientOrigin::Registered {
            return None;
        }
        let (secret, method) = match &self.auth {
            ClientAuth::SecretBasic(secret) => (Some(secret.clone()), "client_secret_basic"),
            ClientAuth::SecretPost(secret) => (Some(secret.clone()), "client_secret_post"),
            _ => (None, "none"),
        };
        Some(StoredClient { client_id: self.client_id.clone(), client_secret: secret, auth_method: Some(method.into()) })
    }
}

/// The configuration's own client, if it names one.
pub fn configured(config: &OAuthConfig, server: &ServerMetadata) -> Option<Client> {
    let client_id = config.client_id.clone()?;
    let auth = match (&config.client_secret, &config.private_key) {
        (_, Some(key)) => ClientAuth::PrivateKeyJwt(key.clone()),
        (Some(secret), None)
            if !server.supports_auth_method("client_secret_basic") && server.supports_auth_method("client_secret_post") =>
        {
            ClientAuth::SecretPost(secret.clone())
        }
        (Some(secret), None) => ClientAuth::SecretBasic(secret.clone()),
        (None, None) => ClientAuth::None,
    };
    Some(Client { client_id, auth, origin: ClientOrigin::Configured })
}

/// The client for a login that will come back to `redirect_uri`.
pub async fn client_for_login(
    http: &Http,
    config: &OAuthConfig,
    server: &ServerMetadata,
    redirect_uri: &str,
    scopes: &[String],
) -> Result<Client, OAuthError> {
    if let Some(client) = configured(config, server) {
        return Ok(client);
    }
    if let Some(url) = config.client_metadata_url.as_ref().filter(|_| server.client_id_metadata_document_supported) {
        return Ok(Client { client_id: url.clone(), auth: ClientAuth::None, origin: ClientOrigin::MetadataDocument });
    }
    let Some(endpoint) = &server.registration_endpoint else {
        let hint = if config.client_metadata_url.is_some() { " and does not accept client ID metadata documents" } else { "" };
        return Err(OAuthError::new(format!(
            "the authorization server {} offers no dynamic client registration{hint}; register a client with it and set auth.client_id",
            server.issuer
        )));
    };
    register(http, endpoint, server, redirect_uri, scopes).await
}

#[derive(Deserialize)]
struct Registered {
    client_id: String,
    client_secret: Option<String>,
    token_endpoint_auth_method: Option<String>,
}

/// RFC 7591: registers a public, native client with the loopback redirect.
async fn register(
    http: &Http,
    endpoint: &str,
    server: &ServerMetadata,
    redirect_uri: &str,
    scopes: &[String],
) -> Result<Client, OAuthError> {
    let mut request = serde_json::json!({
        "client_name": "mcpvisor",
        // A program on the user's machine with a loopback redirect (the
        // 2026-07-28 specification asks registrations to say so).
        "application_type": "native",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    if !scopes.is_empty() {
        request["scope"] = scopes.join(" ").into();
    }
    let registered: Registered = match http.post_json(endpoint, &request).await? {
        Answer::Ok(registered) => registered,
        Answer::Failed { status, body, .. } => {
            return Err(OAuthError::new(format!(
                "the authorization server {} refused to register mcpvisor ({status}): {body}",
                server.issuer
            )))
        }
    };
    let auth = match (registered.client_secret, registered.token_endpoint_auth_method.as_deref()) {
        (Some(secret), Some("client_secret_post")) => ClientAuth::SecretPost(secret),
        (Some(secret), _) => ClientAuth::SecretBasic(secret),
        (None, _) => ClientAuth::None,
    };
    Ok(Client { client_id: registered.client_id, auth, origin: ClientOrigin::Registered })
}
