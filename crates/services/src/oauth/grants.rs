//! The JWT-bearer grant (RFC 7523 §2.1): a JWT someone else issued is
//! presented at the token endpoint as `assertion`, with the client's own
//! authentication and `resource` (RFC 8707). Where the JWT comes from:
//!
//! - workload identity: the platform's token, from the configuration or a
//!   file read at every request (platforms rotate them);
//! - enterprise-managed authorization (SEP-990): the user's ID token is
//!   exchanged at the enterprise identity provider (RFC 8693 token exchange)
//!   for an identity assertion JWT authorization grant (ID-JAG) whose
//!   audience is the MCP server's authorization server and whose resource
//!   is the MCP server ([`IdJagRequest`]; a gateway's `Exchanger` asks the
//!   same with its caller's access token, and redeems the ID-JAG by
//!   [`redeem`]).
//!
//! `oauth2` has neither grant, so the form is built here and sent through
//! [`Http::send`] (same client, same body limit); the answers are read as
//! `oauth2`'s token and error responses. A refused grant is an error, never
//! a reason to try another grant. Errors name the server and the OAuth
//! error; assertions, ID tokens and secrets are masked in them.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use oauth2::basic::{BasicErrorResponse, BasicTokenResponse};
use serde::Deserialize;

use super::discovery::Discovery;
use super::flow::tokens;
use super::http::Http;
use super::jwt;
use super::registration::{Client, ClientAuth};
use super::store::Tokens;
use super::OAuthError;
use crate::config::{IdentityProvider, OAuthConfig, Redactor};

pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
pub(super) const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";
pub(super) const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";
const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";

/// Tokens for `scopes` by the JWT-bearer grant, with the assertion the
/// configuration names.
pub async fn jwt_bearer(
    http: &Http,
    config: &OAuthConfig,
    discovery: &Discovery,
    client: &Client,
    scopes: &[String],
) -> Result<Tokens, OAuthError> {
    let assertion = assertion(http, config, discovery, scopes).await?;
    let server = &discovery.server;
    let answer: BasicTokenResponse =
        redeem(http, &server.issuer, &server.token_endpoint, client, &assertion, &discovery.resource, scopes).await?;
    Ok(tokens(&answer, scopes, None))
}

/// The JWT-bearer grant at the token endpoint of `issuer`: `assertion`
/// for a token of `resource` and `scopes`, `client` authenticating itself;
/// the 2xx answer read as `T`.
pub(super) async fn redeem<T: serde::de::DeserializeOwned>(
    http: &Http,
    issuer: &str,
    token_endpoint: &str,
    client: &Client,
    assertion: &str,
    resource: &str,
    scopes: &[String],
) -> Result<T, OAuthError> {
    let mut form = vec![("grant_type", JWT_BEARER.to_owned()), ("assertion", assertion.to_owned()), ("resource", resource.to_owned())];
    if !scopes.is_empty() {
        form.push(("scope", scopes.join(" ")));
    }
    let basic = match &client.auth {
        ClientAuth::SecretBasic(secret) => Some((client.client_id.as_str(), secret.as_str())),
        ClientAuth::SecretPost(secret) => {
            form.extend([("client_id", client.client_id.clone()), ("client_secret", secret.clone())]);
            None
        }
        ClientAuth::PrivateKeyJwt(key) => {
            form.extend([
                ("client_id", client.client_id.clone()),
                ("client_assertion_type", jwt::ASSERTION_TYPE.to_owned()),
                ("client_assertion", jwt::client_assertion(key, &client.client_id, issuer)?),
            ]);
            None
        }
        ClientAuth::None => {
            form.push(("client_id", client.client_id.clone()));
            None
        }
    };
    let secrets = [Some(assertion), basic.map(|(_, secret)| secret)];
    let request = TokenRequest { endpoint: token_endpoint, party: issuer, what: "the assertion grant (RFC 7523)" };
    request.send(http, &form, basic, &secrets).await
}

/// The assertion to present: given, read from its file, or obtained from
/// the identity provider.
async fn assertion(http: &Http, config: &OAuthConfig, discovery: &Discovery, scopes: &[String]) -> Result<String, OAuthError> {
    if let Some(idp) = &config.identity_provider {
        return identity_assertion(http, idp, discovery, scopes).await;
    }
    given_or_file(config.assertion.as_deref(), config.assertion_file.as_deref(), "auth.assertion")
}

/// A token from the configuration or from a file (trimmed; a token never
/// ends in white space, a file usually does).
fn given_or_file(given: Option<&str>, file: Option<&str>, field: &str) -> Result<String, OAuthError> {
    let token = match (given, file) {
        (Some(token), _) => token.to_owned(),
        (None, Some(path)) => {
            std::fs::read_to_string(path).map_err(|e| OAuthError::new(format!("cannot read {field}_file {path}: {e}")))?
        }
        (None, None) => return Err(OAuthError::new(format!("the jwt_bearer grant needs {field} or {field}_file"))),
    };
    let token = token.trim();
    if token.is_empty() {
        return Err(OAuthError::new(format!("{field} is empty")));
    }
    Ok(token.to_owned())
}

/// RFC 8693 at the identity provider: the user's ID token for an ID-JAG
/// meant for the MCP server's authorization server and the MCP server.
async fn identity_assertion(http: &Http, idp: &IdentityProvider, discovery: &Discovery, scopes: &[String]) -> Result<String, OAuthError> {
    let id_token = given_or_file(idp.id_token.as_deref(), idp.id_token_file.as_deref(), "auth.identity_provider.id_token")?;
    let request = IdJagRequest {
        token_endpoint: &idp.token_endpoint,
        client_id: &idp.client_id,
        client_secret: idp.client_secret.as_deref(),
        subject_token: &id_token,
        subject_token_type: ID_TOKEN,
        audience: &discovery.server.issuer,
        resource: &discovery.resource,
        scopes,
    };
    request.send(http).await
}

/// An ID-JAG to ask an identity provider for (RFC 8693, SEP-990): the
/// subject's token for an assertion whose audience is an authorization
/// server and whose resource is an MCP server.
pub(super) struct IdJagRequest<'a> {
    pub(super) token_endpoint: &'a str,
    /// The client at the identity provider (HTTP Basic with a secret, else `client_id` in the body).
    pub(super) client_id: &'a str,
    pub(super) client_secret: Option<&'a str>,
    pub(super) subject_token: &'a str,
    /// [`ID_TOKEN`] for a user's login, [`ACCESS_TOKEN`] for a gateway's caller.
    pub(super) subject_token_type: &'static str,
    /// The authorization server's issuer identifier.
    pub(super) audience: &'a str,
    pub(super) resource: &'a str,
    pub(super) scopes: &'a [String],
}

#[derive(Deserialize)]
struct IdJagAnswer {
    access_token: String,
    issued_token_type: Option<String>,
}

impl IdJagRequest<'_> {
    /// The ID-JAG the identity provider issued (to present, never to show).
    pub(super) async fn send(&self, http: &Http) -> Result<String, OAuthError> {
        let mut form = vec![
            ("grant_type", TOKEN_EXCHANGE.to_owned()),
            ("requested_token_type", ID_JAG.to_owned()),
            ("subject_token", self.subject_token.to_owned()),
            ("subject_token_type", self.subject_token_type.to_owned()),
            ("audience", self.audience.to_owned()),
            ("resource", self.resource.to_owned()),
        ];
        if !self.scopes.is_empty() {
            form.push(("scope", self.scopes.join(" ")));
        }
        let basic = self.client_secret.map(|secret| (self.client_id, secret));
        if basic.is_none() {
            form.push(("client_id", self.client_id.to_owned()));
        }
        let secrets = [Some(self.subject_token), self.client_secret];
        let request = TokenRequest { endpoint: self.token_endpoint, party: self.token_endpoint, what: "the token exchange for an ID-JAG" };
        let answer: IdJagAnswer = request.send(http, &form, basic, &secrets).await?;
        match answer.issued_token_type.as_deref() {
            None | Some(ID_JAG) => Ok(answer.access_token),
            Some(other) => Err(OAuthError::new(format!("the identity provider {} issued a {other}, not an ID-JAG", self.token_endpoint))),
        }
    }
}

/// One form POST to a token endpoint.
pub(super) struct TokenRequest<'a> {
    pub(super) endpoint: &'a str,
    /// Who answers, for messages.
    pub(super) party: &'a str,
    pub(super) what: &'static str,
}

impl TokenRequest<'_> {
    /// Sends `form`, with the client in HTTP Basic when `basic` (its parts
    /// form-encoded first, RFC 6749 §2.3.1), and reads a 2xx answer as `T`.
    pub(super) async fn send<T: serde::de::DeserializeOwned>(
        &self,
        http: &Http,
        form: &[(&str, String)],
        basic: Option<(&str, &str)>,
        secrets: &[Option<&str>],
    ) -> Result<T, OAuthError> {
        let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        let mut request = ::http::Request::builder()
            .method(::http::Method::POST)
            .uri(self.endpoint)
            .header(::http::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(::http::header::ACCEPT, "application/json");
        if let Some((id, secret)) = basic {
            let encode = |text: &str| url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
            let pair = STANDARD.encode(format!("{}:{}", encode(id), encode(secret)));
            request = request.header(::http::header::AUTHORIZATION, format!("Basic {pair}"));
        }
        let request = request
            .body(body.into_bytes())
            .map_err(|e| OAuthError::new(format!("{} {:?} is not a usable URL: {e}", self.what, self.endpoint)))?;
        let mask = |message: String| {
            let secrets = secrets.iter().flatten().map(|secret| (*secret).to_owned());
            OAuthError::new(Redactor::with_secrets(secrets).text(&message).into_owned())
        };
        let response = http.send(request).await.map_err(|e| mask(format!("{} at {} failed: {e}", self.what, self.party)))?;
        if response.status().is_success() {
            return serde_json::from_slice(response.body())
                .map_err(|e| mask(format!("{} answered {} with something that is not a token response: {e}", self.party, self.what)));
        }
        let message = match serde_json::from_slice::<BasicErrorResponse>(response.body()) {
            Ok(refusal) => {
                let description = refusal.error_description().map(|d| format!(" ({d})")).unwrap_or_default();
                format!("{} refused {}: {}{description}", self.party, self.what, refusal.error())
            }
            Err(_) => format!("{} refused {} with HTTP {}", self.party, self.what, response.status().as_u16()),
        };
        Err(mask(message))
    }
}
