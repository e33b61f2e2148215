//! The static credentials of a remote server (which kind a server gets is
//! chosen by `oauth::credentials_for`, beside the OAuth kind): the
//! `auth` of its configuration (`bearer`, `basic`, `api_key`) and its raw
//! `headers`, with `${VAR}` references already expanded
//! ([`crate::config::ServerConfig::expanded`]). Nothing here can renew a
//! refused value: a refusal means the configuration must change, so the
//! server waits for that (`needs_auth`) instead of retrying in a loop.

use base64::Engine;
use futures::future::BoxFuture;

use crate::config::{Auth, ServerConfig};
use crate::transport::credentials::{Challenge, Credentials, CredentialsError, Renewal, RequestLine};

/// Headers fixed by the configuration.
#[derive(Clone)]
pub struct StaticCredentials {
    server: String,
    headers: Vec<(String, String)>,
}

impl std::fmt::Debug for StaticCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("StaticCredentials").field("server", &self.server).field("headers", &names).finish()
    }
}

impl StaticCredentials {
    /// The `auth` header of `config`, if any. Its raw `headers` are sent by
    /// the transport itself, so a refusal names both.
    pub fn new(config: &ServerConfig) -> Self {
        let headers = config.auth.as_ref().and_then(auth_header).into_iter().collect();
        StaticCredentials { server: config.name.clone(), headers }
    }
}

/// The header a static `auth` entry sends (OAuth sends none of its own).
fn auth_header(auth: &Auth) -> Option<(String, String)> {
    Some(match auth {
        Auth::Bearer { token } => ("Authorization".into(), format!("Bearer {token}")),
        Auth::Basic { username, password } => {
            let pair = base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
            ("Authorization".into(), format!("Basic {pair}"))
        }
        Auth::ApiKey { header, value } => (header.clone(), value.clone()),
        Auth::OAuth(_) | Auth::TokenExchange(_) => return None,
    })
}

impl Credentials for StaticCredentials {
    fn headers(&self, _request: RequestLine<'_>) -> BoxFuture<'_, Result<Vec<(String, String)>, CredentialsError>> {
        Box::pin(async move { Ok(self.headers.clone()) })
    }

    fn refused(&self, challenge: Challenge) -> BoxFuture<'_, Result<Renewal, CredentialsError>> {
        let what = match self.headers.is_empty() {
            true => "no credentials are configured for it; add its `auth` (bearer, basic or api_key) or `headers`",
            false => "check the values of its `auth` and `headers` (and the variables they name)",
        };
        let message = format!(
            "server `{}` refused the request with HTTP {} (needs authorisation): {what}, then reconnect it",
            self.server, challenge.status
        );
        Box::pin(async move { Ok(Renewal::NeedsLogin { message }) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Transport;

    fn sent(auth: Auth) -> Vec<(String, String)> {
        let mut config = ServerConfig::remote("r", Transport::Http, "http://x/mcp");
        config.auth = Some(auth);
        let request = RequestLine { method: "POST", url: "http://x/mcp" };
        futures::executor::block_on(StaticCredentials::new(&config).headers(request)).unwrap()
    }

    #[test]
    fn each_kind_of_auth_sends_its_header() {
        assert_eq!(sent(Auth::Bearer { token: "t0k".into() }), [("Authorization".into(), "Bearer t0k".into())]);
        let basic = sent(Auth::Basic { username: "Aladdin".into(), password: "open sesame".into() });
        assert_eq!(basic, [("Authorization".into(), "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==".into())]);
        assert_eq!(sent(Auth::ApiKey { header: "X-Key".into(), value: "k".into() }), [("X-Key".into(), "k".into())]);
    }

    #[test]
    fn a_refusal_needs_a_user_and_shows_no_secret() {
        let mut config = ServerConfig::remote("r", Transport::Http, "http://x/mcp");
        config.auth = Some(Auth::Bearer { token: "s3cret-value".into() });
        let challenge = Challenge { status: 401, www_authenticate: None, resource: "http://x/mcp".into() };
        let renewal = futures::executor::block_on(StaticCredentials::new(&config).refused(challenge)).unwrap();
        let Renewal::NeedsLogin { message } = renewal else { panic!("{renewal:?}") };
        assert!(message.contains("server `r`") && message.contains("HTTP 401"), "{message}");
        assert!(!message.contains("s3cret"), "{message}");
    }
}
