//! `auth NAME` and `logout NAME`: OAuth logins of remote servers.
//!
//! `auth` asks the server for its challenge, discovers its authorization
//! server, registers mcpvisor if needed, and opens the authorization URL in
//! the browser (always printing it on stderr too, for a machine without
//! one or with `--no-browser`); a listener on 127.0.0.1 receives the
//! redirect, and the tokens are kept under the user's configuration
//! directory (`tokens/`, files 0600). A machine client
//! (`grant = "client_credentials"`) gets its token without a browser.
//! `logout` forgets every kept token of the server.

use futures::future::BoxFuture;
use serde_json::json;

use super::output::{Failure, Out};
use super::servers::{env, Servers};
use super::Cli;
use crate::config::{Auth, Transport};
use crate::oauth::{Authorizer, OAuthCredentials, OAuthError, SystemBrowser, TokenStore, LOGIN_TIMEOUT};

#[derive(Debug, clap::Args)]
pub struct AuthArgs {
    pub name: String,
    /// Print the authorization URL instead of opening a browser.
    #[arg(long)]
    pub no_browser: bool,
}

#[derive(Debug, clap::Args)]
pub struct LogoutArgs {
    pub name: String,
}

/// Prints the URL, then opens it unless told not to.
struct CliBrowser {
    server: String,
    open: bool,
}

impl Authorizer for CliBrowser {
    fn open<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<(), OAuthError>> {
        Box::pin(async move {
            eprintln!("To log in to `{}`, open this URL in a browser:\n{url}", self.server);
            if self.open && SystemBrowser.open(url).await.is_err() {
                eprintln!("(no browser could be opened: open the URL above yourself)");
            }
            eprintln!("Waiting for the login to come back (at most {} s)...", LOGIN_TIMEOUT.as_secs());
            Ok(())
        })
    }
}

pub async fn auth(cli: &Cli, out: &Out, args: &AuthArgs) -> Result<u8, Failure> {
    let servers = Servers::load(cli)?;
    let config = servers.get(&args.name)?.config()?.expanded(env)?;
    if !matches!(config.transport, Transport::Http | Transport::Sse) {
        return Err(Failure::usage(format!("server `{}` is not a remote server: only http and sse servers log in", config.name)));
    }
    if let Some(auth) = config.auth.as_ref().filter(|auth| !matches!(auth, Auth::OAuth(_))) {
        let kind = match auth {
            Auth::Bearer { .. } => "a bearer token",
            Auth::Basic { .. } => "basic auth",
            Auth::TokenExchange(_) => "token exchange (each caller of the gateway acts as itself)",
            _ => "an API key",
        };
        return Err(Failure::usage(format!(
            "server `{}` is configured with {kind}, not OAuth: there is nothing to log in to",
            config.name
        )));
    }
    let store = token_store()?;
    let credentials = OAuthCredentials::new(&config, Some(store), None).map_err(|e| Failure::usage(e.to_string()))?;
    let browser = CliBrowser { server: config.name.clone(), open: !args.no_browser };
    let logged_in = credentials
        .log_in(&browser, LOGIN_TIMEOUT)
        .await
        .map_err(|e| Failure::connection(format!("login to `{}` failed: {e}", config.name)))?;
    out.json(&json!({ "server": config.name, "issuer": logged_in.issuer, "scopes": logged_in.scopes }));
    let scopes = if logged_in.scopes.is_empty() { String::new() } else { format!(" (scopes: {})", logged_in.scopes.join(" ")) };
    out.line(format!("Logged in to `{}` with {}{scopes}.", config.name, logged_in.issuer));
    Ok(0)
}

pub fn logout(out: &Out, args: &LogoutArgs) -> Result<u8, Failure> {
    let forgot = token_store()?.forget(&args.name).map_err(|e| Failure::connection(e.to_string()))?;
    out.json(&json!({ "server": args.name, "forgot": forgot }));
    if forgot {
        out.line(format!("Forgot the tokens of `{}`.", args.name));
    } else {
        out.line(format!("No tokens were kept for `{}`.", args.name));
    }
    Ok(0)
}

fn token_store() -> Result<TokenStore, Failure> {
    TokenStore::user(env).ok_or_else(|| Failure::usage("no directory for tokens: set XDG_CONFIG_HOME or HOME"))
}
