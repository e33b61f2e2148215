//! The login desk of `serve --http` for servers whose callers log in
//! themselves (`auth = { type = "oauth", per_caller = true }`,
//! [`crate::oauth::LoginDesk`]): made from `[serve] public_url` and
//! `login_key`, its stored logins under `{state dir}/logins` (0700).
//! Without either setting such a server cannot be served, and `serve`
//! stops saying which field to set. With both, the desk is made even
//! before such a server is configured, so one added later (SIGHUP) is served.

use std::sync::Arc;

use super::output::{warn, Failure};
use super::servers::env;
use crate::config::{ServeSettings, ServerConfig};
use crate::oauth::{per_caller_login, LinkCheck, LoginDesk, LoginKey};

/// The desk, when a server of `configs` has its callers log in; `http`:
/// whether the gateway serves HTTP (over stdio such servers refuse every call).
pub fn desk(configs: &[ServerConfig], settings: Option<&ServeSettings>, http: bool) -> Result<Option<Arc<LoginDesk>>, Failure> {
    let names: Vec<&str> = configs.iter().filter(|config| per_caller_login(config).is_some()).map(|config| config.name.as_str()).collect();
    let configured = settings.is_some_and(|settings| settings.public_url.is_some() && settings.login_key.is_some());
    let first = match names.first() {
        Some(first) => *first,
        None if configured && http => "(none yet)",
        None => return Ok(None),
    };
    let names = names.join("`, `");
    if !http {
        warn(format!(
            "server `{names}` has each caller log in itself (auth.per_caller), which only `serve --http` does; over stdio its \
             tools answer every call with an error"
        ));
        return Ok(None);
    }
    let file = settings.map_or_else(|| "the configuration".to_owned(), |settings| settings.file.display().to_string());
    let missing = |field: &str, what: &str| {
        Failure::usage(format!(
            "server `{first}` has each caller log in itself (auth.per_caller), which needs `{field}` in the [serve] table of {file}: \
             {what} (docs/gateway.md, \"Per-caller logins\")"
        ))
    };
    let public_url = settings
        .and_then(|settings| settings.public_url.clone())
        .ok_or_else(|| missing("public_url", "the gateway's base URL as callers' browsers reach it, such as \"https://gw.example.com\""))?;
    let key = match settings {
        Some(settings) => settings.login_key(env)?,
        None => None,
    };
    let key = key.ok_or_else(|| missing("login_key", "a reference such as \"${MCPVISOR_LOGIN_KEY}\" to 32 random bytes in base64"))?;
    let key = LoginKey::from_base64(&key).map_err(|error| Failure::usage(format!("[serve] in {file}: {error}")))?;
    let dir = crate::user_dirs::state_dir(env)
        .ok_or_else(|| Failure::usage("cannot keep callers' logins: neither XDG_STATE_HOME nor HOME is set"))?
        .join("logins");
    crate::user_dirs::ensure_private(&dir)
        .map_err(|e| Failure::usage(format!("cannot create or restrict {} for callers' logins: {e}", dir.display())))?;
    Ok(Some(Arc::new(LoginDesk::new(&public_url, key, dir))))
}

/// The check of who opens a login link, when `[serve.auth]` has a `login`
/// client; without one (and with a desk), a warning that links given to
/// the issuer's callers are bearer capabilities.
pub fn link_check(desk: Option<&LoginDesk>, settings: Option<&ServeSettings>) -> Result<Option<Arc<LinkCheck>>, Failure> {
    let (Some(desk), Some(settings)) = (desk, settings) else { return Ok(None) };
    let Some(auth) = &settings.auth else { return Ok(None) };
    let Some((client_id, client_secret)) = settings.login_client(env)? else {
        warn(format!(
            "the login links of per-caller login servers are not checked: whoever opens one first logs in as the caller it was \
             given to; set `login = {{ client_id, client_secret }}` in [serve.auth] of {} so that the browser logs in at {} as \
             that caller first (docs/gateway.md, \"Per-caller logins\")",
            settings.file.display(),
            auth.issuer
        ));
        return Ok(None);
    };
    let issued = (auth.issuer.as_str(), auth.audience.as_str(), auth.required_scopes.as_slice());
    let check = LinkCheck::new(issued, (&client_id, &client_secret), desk.public_url())
        .map_err(|error| Failure::usage(format!("[serve.auth] login: {error}")))?;
    Ok(Some(Arc::new(check)))
}
