//! The login routes of servers whose callers log in themselves (`auth =
//! { type = "oauth", per_caller = true }`; [`crate::oauth::LoginDesk`]):
//!
//! | request | who | answer |
//! | --- | --- | --- |
//! | `GET /login/{link}` | the caller's browser | a link given to a caller of the gateway's issuer, with `[serve.auth] login`: 302 to that issuer first ([`crate::oauth::LinkCheck`]); else 302 to the authorization server (PKCE, state); 400 page for a used, expired or unknown link |
//! | `GET /login/identity` | the issuer's redirect | the browser's token verified as any caller's; its subject the link's caller: 302 to the authorization server; another: 403, the link used up |
//! | `GET /login/callback` | the authorization server's redirect | the code exchanged, the caller's tokens stored; a page saying so; `notifications/elicitation/complete` to the caller's sessions |
//! | `DELETE /login/{server}` | a caller, with its own credentials | its own login to `server` deleted: `{"server", "revoked"}` |
//! | `GET /admin/logins` | an admin | `{"logins": [{server, caller, issuer, scopes, expires_at}]}` (servers it may see) |
//! | `DELETE /admin/logins/{server}/{caller}` | an admin | that login deleted: `{"server", "caller", "revoked"}`; audited |
//!
//! Invariants:
//! - the `GET`s pass the guard without the gateway's credentials (a
//!   browser has none): the link's 256 random bits, single use and
//!   [`crate::oauth::LINK_TTL`], and the login's `state`, are what admit them;
//! - with a link check, a link given to an issuer's caller reaches the third
//!   party only from a browser that logged in at the issuer as that caller
//!   (MCP's URL-mode elicitation asks it: the user who completes a flow is
//!   the one it was started for); a named key's link is a bearer capability;
//! - a login made or revoked ends the caller's connection to the server
//!   ([`admin::Admin::end_caller`]): its next call uses the login as it is;
//! - pages and answers hold no token, code or state.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::admin;
use super::guard::Caller;
use super::rejection::Rejection;
use super::Front;
use crate::identity::Proof;
use crate::oauth::LoginDesk;

/// The admin's list of stored logins.
pub const ADMIN_LOGINS_PATH: &str = "/admin/logins";
/// An admin's revocation of one caller's login.
pub const ADMIN_LOGIN_PATH: &str = "/admin/logins/{server}/{caller}";
/// A link, or a caller's own login (`DELETE`).
pub const LINK_PATH: &str = "/login/{link}";

/// A small HTML page.
fn page(status: StatusCode, text: &str) -> Response {
    let escaped = text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
    let body = format!("<!doctype html><meta charset=\"utf-8\"><title>mcpvisor</title><p>{escaped}</p>");
    (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-store")], body).into_response()
}

/// The answer of a gateway without per-caller login servers.
fn no_logins() -> Response {
    page(StatusCode::NOT_FOUND, "This gateway has no server whose callers log in themselves.")
}

/// A redirect the browser must not keep.
fn redirect(url: String) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, url), (header::CACHE_CONTROL, "no-store".into())]).into_response()
}

/// `GET /login/{link}`.
pub(super) async fn open_link(State(front): State<Arc<Front>>, Path(link): Path<String>) -> Response {
    let Some(desk) = &front.logins else { return no_logins() };
    let caller = desk.link_owner(&link).map(|(_, caller)| caller).filter(|caller| caller.starts_with("issuer:"));
    let checked = front.link_check.as_ref().zip(caller);
    let started = match checked {
        Some((check, caller)) => check.begin(&link, &caller).await,
        None => desk.open_link(&link).await,
    };
    match started {
        Ok(url) => redirect(url),
        Err(error) => page(StatusCode::BAD_REQUEST, &format!("The login cannot start: {error}")),
    }
}

/// `GET /login/identity?code&state` (or `?error`): the browser's login at
/// the gateway's issuer; on to the third party when it is the link's caller.
pub(super) async fn identity(State(front): State<Arc<Front>>, uri: Uri) -> Response {
    let (Some(desk), Some(check), Some(auth)) = (&front.logins, &front.link_check, &front.auth) else { return no_logins() };
    let query = uri.query().unwrap_or_default().as_bytes();
    let param = |name: &str| url::form_urlencoded::parse(query).find(|(key, _)| key == name).map(|(_, value)| value.into_owned());
    let proved = match check.finish(param("state").as_deref(), param("code"), param("error").as_deref()).await {
        Ok(proved) => proved,
        Err(error) => return page(StatusCode::BAD_REQUEST, &format!("The login failed: {error}")),
    };
    let identity = match auth.identify(Some(&proved.access_token)).await {
        Ok(identity) => identity,
        Err(rejection) => {
            let why = match rejection {
                Rejection::Missing => "no token".to_owned(),
                Rejection::Invalid(why) | Rejection::Unavailable(why) => why,
                Rejection::InsufficientScope(scopes) => format!("it lacks the scopes {}", scopes.join(" ")),
            };
            let text = format!("The gateway's issuer gave a token the gateway does not accept ({why}); open the link again");
            return page(StatusCode::BAD_REQUEST, &text);
        }
    };
    if identity.caller_key() != proved.caller {
        let server = desk.link_owner(&proved.link).map(|(server, _)| server).unwrap_or_default();
        desk.burn(&proved.link);
        // A security event: the audit log has it, with who opened the link.
        let action = format!("login link of {} refused: opened by {}", proved.caller, identity.caller_key());
        if let Some(log) = front.admin.as_ref().and_then(|admin| admin.audit()) {
            log.admin(Some(&identity), &server, &action, Some("a login link was opened by someone other than its caller; it is used up"));
        }
        let text = "This login link was given to another caller of the gateway, and the browser that opened it logged in as \
                    someone else, so it is used up. If you did not ask for it, someone may be trying to use your account: \
                    ignore it. Otherwise call the tool again from your own client for a link of your own.";
        return page(StatusCode::FORBIDDEN, text);
    }
    match desk.open_link(&proved.link).await {
        Ok(url) => redirect(url),
        Err(error) => page(StatusCode::BAD_REQUEST, &format!("The login cannot start: {error}")),
    }
}

/// `GET /login/callback?code&state&iss` (or `?error`).
pub(super) async fn callback(State(front): State<Arc<Front>>, uri: Uri) -> Response {
    let Some(desk) = &front.logins else { return no_logins() };
    let query = uri.query().unwrap_or_default().as_bytes();
    let param = |name: &str| url::form_urlencoded::parse(query).find(|(key, _)| key == name).map(|(_, value)| value.into_owned());
    let (state, iss, error) = (param("state"), param("iss"), param("error"));
    let done = desk.callback(state.as_deref(), param("code"), iss.as_deref(), error.as_deref()).await;
    let logged_in = match done {
        Ok(logged_in) => logged_in,
        Err(error) => return page(StatusCode::BAD_REQUEST, &format!("The login failed: {error}")),
    };
    if let Some(admin) = &front.admin {
        admin.end_caller(&logged_in.server, &logged_in.caller).await;
    }
    let complete = json!({"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                          "params": {"elicitationId": logged_in.elicitation_id}});
    let told = front.sessions.notify_caller(&logged_in.caller, &complete.to_string());
    tracing::debug!(server = %logged_in.server, caller = %logged_in.caller, sessions = told, "told the caller's sessions of its login");
    page(StatusCode::OK, &format!("Logged in to {}: you can close this page and go back to your client.", logged_in.server))
}

/// `DELETE /login/{server}`: the caller's own login.
pub(super) async fn revoke_own(State(front): State<Arc<Front>>, Caller(caller): Caller, Path(server): Path<String>) -> Response {
    let Some(desk) = &front.logins else { return no_logins() };
    let Some(caller) = caller.filter(|caller| caller.proof != Proof::SharedToken) else {
        let message = "Forbidden: a caller revokes its own login with its own credentials (a named key or an access token)";
        return (StatusCode::FORBIDDEN, message).into_response();
    };
    revoke(&front, desk, &server, &caller.caller_key(), Some(&caller)).await
}

/// `GET /admin/logins[?server=NAME]`.
pub(super) async fn list(State(front): State<Arc<Front>>, Caller(caller): Caller, uri: Uri) -> Response {
    if let Err(refusal) = admin::admin_of(&front, caller.as_deref()) {
        return *refusal;
    }
    let query = uri.query().unwrap_or_default().as_bytes();
    let server = url::form_urlencoded::parse(query).find(|(key, _)| key == "server").map(|(_, value)| value.into_owned());
    let Some(desk) = &front.logins else { return axum::Json(json!({"logins": []})).into_response() };
    let heard = admin::heard(&front, &caller).await;
    let logins: Vec<_> = desk.list(server.as_deref()).into_iter().filter(|login| heard.contains(&login.server)).collect();
    axum::Json(json!({ "logins": logins })).into_response()
}

/// `DELETE /admin/logins/{server}/{caller}`.
pub(super) async fn admin_revoke(
    State(front): State<Arc<Front>>,
    Caller(caller): Caller,
    Path((server, whose)): Path<(String, String)>,
) -> Response {
    if let Err(refusal) = admin::admin_of(&front, caller.as_deref()) {
        return *refusal;
    }
    let Some(desk) = &front.logins else { return no_logins() };
    if front.gateway.heard_by(caller.clone(), vec![server.clone()]).await.is_empty() || !desk.serves(&server) {
        let message = format!("Not Found: `{server}` is not a server whose callers log in themselves");
        return (StatusCode::NOT_FOUND, message).into_response();
    }
    revoke(&front, desk, &server, &whose, caller.as_deref()).await
}

/// Deletes `whose` login to `server`, ends its connection and records it.
async fn revoke(front: &Front, desk: &LoginDesk, server: &str, whose: &str, by: Option<&crate::identity::Identity>) -> Response {
    let revoked = desk.revoke(server, whose);
    if let Some(admin) = &front.admin {
        admin.end_caller(server, whose).await;
        if let Some(log) = admin.audit() {
            let error = revoked.as_ref().err().map(ToString::to_string);
            log.admin(by, server, &format!("revoke login of {whose}"), error.as_deref());
        }
    }
    tracing::info!(server, caller = whose, by = by.map_or("loopback", |by| by.subject.as_str()), "revoked a caller's login");
    match revoked {
        Ok(revoked) => axum::Json(json!({"server": server, "caller": whose, "revoked": revoked})).into_response(),
        Err(error) => {
            (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(json!({"server": server, "error": error.to_string()}))).into_response()
        }
    }
}
