//! The token requests, made with the `oauth2` crate over [`Http`]: the
//! authorization URL with PKCE (S256), the code exchange, refreshing, and
//! the client-credentials grant. Every request carries `resource`
//! (RFC 8707) and the client's authentication (none, a secret in Basic or
//! in the body, or a `private_key_jwt` assertion).
//!
//! Errors name the authorization server and its OAuth error code; a body
//! the crate cannot read is never shown (it may hold a token).

use oauth2::basic::{BasicClient, BasicErrorResponse};
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointNotSet, EndpointSet, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, RefreshToken, RequestTokenError, Scope, TokenResponse, TokenUrl,
};
use url::Url;

use super::discovery::ServerMetadata;
use super::http::{Http, HttpError};
use super::jwt;
use super::registration::{Client, ClientAuth};
use super::store::{now_secs, Tokens};
use super::OAuthError;
use crate::config::Redactor;

type TokenClient = BasicClient<EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

/// Where token requests go and what they are for.
pub struct Target<'a> {
    pub server: &'a ServerMetadata,
    /// The MCP server, as the `resource` parameter.
    pub resource: &'a str,
    pub client: &'a Client,
}

/// A login under way: where to send the user, and what checks the answer.
pub struct PendingLogin {
    pub url: Url,
    pub state: CsrfToken,
    pub verifier: PkceCodeVerifier,
    pub redirect_uri: String,
    pub scopes: Vec<String>,
}

impl Target<'_> {
    fn token_client(&self) -> Result<TokenClient, OAuthError> {
        let token_url = TokenUrl::new(self.server.token_endpoint.clone())
            .map_err(|e| OAuthError::new(format!("the token endpoint of {} is not a URL: {e}", self.server.issuer)))?;
        let client = BasicClient::new(ClientId::new(self.client.client_id.clone())).set_token_uri(token_url);
        Ok(match &self.client.auth {
            ClientAuth::SecretBasic(secret) => {
                client.set_client_secret(ClientSecret::new(secret.clone())).set_auth_type(AuthType::BasicAuth)
            }
            ClientAuth::SecretPost(secret) => {
                client.set_client_secret(ClientSecret::new(secret.clone())).set_auth_type(AuthType::RequestBody)
            }
            ClientAuth::None | ClientAuth::PrivateKeyJwt(_) => client.set_auth_type(AuthType::RequestBody),
        })
    }

    /// `resource`, and the client assertion of a `private_key_jwt` client.
    fn extra_params(&self) -> Result<Vec<(&'static str, String)>, OAuthError> {
        let mut params = vec![("resource", self.resource.to_owned())];
        if let ClientAuth::PrivateKeyJwt(key) = &self.client.auth {
            params.push(("client_assertion_type", jwt::ASSERTION_TYPE.to_owned()));
            params.push(("client_assertion", jwt::client_assertion(key, &self.client.client_id, &self.server.issuer)?));
        }
        Ok(params)
    }

    /// The authorization URL of a login coming back to `redirect_uri`.
    pub fn authorization_url(&self, redirect_uri: &str, scopes: &[String]) -> Result<PendingLogin, OAuthError> {
        self.server.check_pkce()?;
        let endpoint = self.server.authorization_endpoint.clone().ok_or_else(|| {
            OAuthError::new(format!("the authorization server {} has no authorization_endpoint for a browser login", self.server.issuer))
        })?;
        super::http::require_secure(&endpoint, "the authorization endpoint")?;
        let auth_url = AuthUrl::new(endpoint).map_err(|e| OAuthError::new(format!("the authorization endpoint is not a URL: {e}")))?;
        let redirect = RedirectUrl::new(redirect_uri.to_owned()).map_err(|e| OAuthError::new(format!("bad redirect URI: {e}")))?;
        let client = self.token_client()?.set_auth_uri(auth_url).set_redirect_uri(redirect);
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (url, state) = client
            .authorize_url(CsrfToken::new_random)
            .add_scopes(scopes.iter().cloned().map(Scope::new))
            .set_pkce_challenge(challenge)
            .add_extra_param("resource", self.resource)
            .url();
        Ok(PendingLogin { url, state, verifier, redirect_uri: redirect_uri.to_owned(), scopes: scopes.to_vec() })
    }

    /// Exchanges the code of a finished login for tokens.
    pub async fn exchange_code(&self, http: &Http, login: PendingLogin, code: String) -> Result<Tokens, OAuthError> {
        let redirect = RedirectUrl::new(login.redirect_uri.clone()).map_err(|e| OAuthError::new(format!("bad redirect URI: {e}")))?;
        let client = self.token_client()?.set_redirect_uri(redirect);
        let code_text = code.clone();
        let verifier_text = login.verifier.secret().clone();
        let mut request = client.exchange_code(AuthorizationCode::new(code)).set_pkce_verifier(login.verifier);
        for (name, value) in self.extra_params()? {
            request = request.add_extra_param(name, value);
        }
        let answer = request.request_async(http).await.map_err(|e| self.refused("the code exchange", e, &[&code_text, &verifier_text]))?;
        Ok(tokens(&answer, &login.scopes, None))
    }

    /// Renews tokens with a refresh token; the old refresh token is kept
    /// when the server does not send a new one.
    pub async fn refresh(&self, http: &Http, refresh_token: &str, scopes: &[String]) -> Result<Tokens, OAuthError> {
        let client = self.token_client()?;
        let refresh = RefreshToken::new(refresh_token.to_owned());
        let mut request = client.exchange_refresh_token(&refresh);
        for (name, value) in self.extra_params()? {
            request = request.add_extra_param(name, value);
        }
        let answer = request.request_async(http).await.map_err(|e| self.refused("refreshing the token", e, &[refresh_token]))?;
        Ok(tokens(&answer, scopes, Some(refresh_token)))
    }

    /// The client-credentials grant: a machine client's token, no user.
    pub async fn client_credentials(&self, http: &Http, scopes: &[String]) -> Result<Tokens, OAuthError> {
        let client = self.token_client()?;
        let mut request = client.exchange_client_credentials().add_scopes(scopes.iter().cloned().map(Scope::new));
        for (name, value) in self.extra_params()? {
            request = request.add_extra_param(name, value);
        }
        let answer = request.request_async(http).await.map_err(|e| self.refused("the client-credentials grant", e, &[]))?;
        Ok(tokens(&answer, scopes, None))
    }

    /// The refusal as text; the server's own words are masked for every
    /// secret of the request (it may echo a token or the secret back).
    fn refused(&self, what: &str, error: RequestTokenError<HttpError, BasicErrorResponse>, secrets: &[&str]) -> OAuthError {
        let issuer = &self.server.issuer;
        let message = match error {
            RequestTokenError::ServerResponse(answer) => {
                let description = answer.error_description().map(|d| format!(" ({d})")).unwrap_or_default();
                format!("{issuer} refused {what}: {}{description}", answer.error())
            }
            RequestTokenError::Request(e) => format!("{what} at {issuer} failed: {e}"),
            RequestTokenError::Parse(e, _) => {
                format!("{issuer} answered {what} with something that is not a token response: {}", e.inner())
            }
            RequestTokenError::Other(e) => format!("{what} at {issuer} failed: {e}"),
        };
        let client_secret = match &self.client.auth {
            ClientAuth::SecretBasic(secret) | ClientAuth::SecretPost(secret) => Some(secret.as_str()),
            _ => None,
        };
        let all = secrets.iter().copied().chain(client_secret).map(str::to_owned);
        OAuthError::new(Redactor::with_secrets(all).text(&message).into_owned())
    }
}

pub(super) fn tokens(answer: &oauth2::basic::BasicTokenResponse, asked: &[String], old_refresh: Option<&str>) -> Tokens {
    Tokens {
        access_token: answer.access_token().secret().clone(),
        refresh_token: answer.refresh_token().map(|t| t.secret().clone()).or_else(|| old_refresh.map(str::to_owned)),
        expires_at: answer.expires_in().map(|d| now_secs().saturating_add(d.as_secs())),
        scopes: answer.scopes().map(|scopes| scopes.iter().map(|s| s.to_string()).collect()).unwrap_or_else(|| asked.to_vec()),
        dpop: answer.token_type().as_ref().eq_ignore_ascii_case("dpop"),
    }
}
