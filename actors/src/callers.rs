//! The callers of a server that acts as each caller: each authenticated
//! caller of the gateway reaches it through a connection of its own. For
//! a remote server (auth type `token_exchange`) that connection's
//! credentials are the caller's token exchanged for one meant for the
//! server ([`crate::oauth::Exchanger`]); for a stdio server with
//! `per_caller` it is a process of the caller's own, whose environment
//! holds the caller's values (`${caller.…}`, [`crate::config::per_caller`]);
//! for a remote server whose callers log in themselves (auth type `oauth`
//! with `per_caller`) it is a session with the caller's own stored login
//! ([`crate::oauth::CallerLogins`]), and a caller without one is answered
//! with a URL-mode elicitation (-32042) naming its login link.
//!
//! ```text
//! Handle::call_on(server) ─▶ Callers ─exchange─▶ issuer            (token_exchange)
//!                              │      ─secrets file─▶ env          (per_caller)
//!                              │      ─stored login─▶ credentials  (oauth per_caller; none: -32042 with a link)
//!                              └─▶ Connection "server" of caller K (started by the Hub on first use)
//! ```
//!
//! Invariants:
//! - a call, or a read (a resource, a prompt, a completion: [`Callers::operate`]),
//!   reaches the server only as its own caller: one without an
//!   identity, or with one that does not tell callers apart (the shared
//!   token; for an exchange also a named key, which no issuer vouches
//!   for), is refused naming the server; the caller's token never goes
//!   to the server, only to the token endpoint;
//! - the token is exchanged (or the process's environment made) before the call is
//!   routed, so an issuer's refusal, or a value the caller lacks, comes back to the caller
//!   as the call's error (`AsCaller`), naming what is missing;
//! - the Hub starts each caller's connection under its supervision and
//!   holds its only strong address, at most `max_callers` of them (the next
//!   caller is refused at once); one unused for `caller_idle` (no call in
//!   flight) is ended by the Hub's reaper, and its exchanged token forgotten;
//! - the catalog comes from the server's own connection, which lists as the
//!   gateway (a client-credentials token of the same client and audience;
//!   a process whose `${caller.…}` values are all empty);
//!   it never serves a tool call or a read (the Registry refuses calls by
//!   exposed name); only subscriptions, whose notices carry no content.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix::WeakAddr;
use rmcp::model::CallToolResult;

use super::connection::Connection;
use super::CallTool;
use crate::config::per_caller::{render_env, CallerFacts};
use crate::error::CallError;
use crate::identity::{Identity, Proof, Upstream};
use crate::oauth::{CallerLogins, Exchanger};
use crate::pool::CallerCounts;
use crate::protocol::error_codes::URL_ELICITATION_REQUIRED;

/// Asks the Hub for `caller`'s connection to `server`, started if needed.
#[derive(Message)]
#[rtype(result = "Result<Addr<Connection>, CallError>")]
pub struct StartCaller {
    pub server: String,
    /// The key its connection is kept by: `Identity::grant_key` for an
    /// exchange, `Identity::caller_key` for a process of its own.
    pub caller: String,
    /// `Identity::caller_key`: whose sessions may answer the connection's
    /// requests (sampling, elicitation, roots).
    pub who: String,
    pub start: CallerStart,
}

/// Asks the Hub to end `caller`'s connection to `server` (its login was
/// made or revoked): its next call starts a new one.
#[derive(Message)]
#[rtype(result = "()")]
pub struct EndCaller {
    pub server: String,
    /// `Identity::caller_key`.
    pub caller: String,
}

/// What a caller's connection is started with.
pub enum CallerStart {
    /// Credentials that exchange this subject's token.
    Exchange { subject: String },
    /// The process's environment, its `${caller.…}` filled in.
    Process { env: BTreeMap<String, String> },
    /// The caller's own stored login.
    Login,
}

/// How a server acts as each caller.
pub(crate) enum Acting {
    /// Each caller's token exchanged for one meant for the server.
    Exchange(Arc<Exchanger>),
    /// A process per caller: its `env` as configured (`${caller.…}` unfilled)
    /// and the file of the callers' secrets.
    Process { env: BTreeMap<String, String>, secrets: Option<PathBuf> },
    /// Each caller's own login to the server's authorization server.
    Login(Arc<CallerLogins>),
}

struct Entry {
    connection: WeakAddr<Connection>,
    last_used: Instant,
    /// Calls of the caller under way: a busy connection is never reaped.
    busy: usize,
}

/// One token-exchange server's callers; shared by the Hub and every `Handle`.
pub struct Callers {
    server: String,
    acting: Acting,
    /// Where its settings are written: `auth` or `per_caller`.
    setting: &'static str,
    max: usize,
    idle: Duration,
    table: Mutex<HashMap<String, Entry>>,
    hub: Recipient<StartCaller>,
    started: AtomicU64,
    reaped: AtomicU64,
    refused: AtomicU64,
}

impl Callers {
    pub(crate) fn new(server: &str, acting: Acting, max: usize, idle: Duration, hub: Recipient<StartCaller>) -> Callers {
        let setting = if matches!(acting, Acting::Process { .. }) { "per_caller" } else { "auth" };
        Callers {
            server: server.to_owned(),
            acting,
            setting,
            max,
            idle,
            table: Mutex::new(HashMap::new()),
            hub,
            started: AtomicU64::new(0),
            reaped: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// The exchanger of a server whose callers' tokens are exchanged.
    pub(crate) fn exchanger(&self) -> Option<&Arc<Exchanger>> {
        match &self.acting {
            Acting::Exchange(exchanger) => Some(exchanger),
            _ => None,
        }
    }

    /// The logins of a server whose callers log in themselves.
    pub(crate) fn logins(&self) -> Option<&Arc<CallerLogins>> {
        match &self.acting {
            Acting::Login(logins) => Some(logins),
            _ => None,
        }
    }

    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Runs `call` on its caller's own connection.
    pub async fn call(&self, mut call: CallTool) -> Result<CallToolResult, CallError> {
        let (caller, connection, upstream) = self.caller_connection(call.identity.as_ref(), &call.name).await?;
        call.upstream = Some(upstream);
        let _busy = Busy::new(self, &caller);
        let tool = call.name.clone();
        let answer = connection.send(call).await;
        let answer = answer.unwrap_or_else(|_| Err(CallError::Stopped { server: self.server.clone(), tool: tool.clone() }));
        self.after(answer, &caller, &tool)
    }

    /// A failed request of a caller whose login just ended (refused, and
    /// refreshing could not fix it: the store deleted it) asks for a login.
    fn after<T>(&self, answer: Result<T, CallError>, caller: &str, label: &str) -> Result<T, CallError> {
        match (answer, self.logins()) {
            (Err(_), Some(logins)) if !logins.has_login(caller) => Err(self.login_needed(logins, caller, label)),
            (answer, _) => answer,
        }
    }

    /// The URL-mode elicitation (-32042) that sends `caller` to its login
    /// link; its message names the server and the link, for a client that
    /// cannot open URLs itself.
    fn login_needed(&self, logins: &CallerLogins, caller: &str, label: &str) -> CallError {
        let (server, tool) = (self.server.clone(), label.to_owned());
        match logins.link(caller) {
            Ok(link) => {
                let message =
                    format!("server `{}` needs you to log in to it once: open {} in a browser, then call again", self.server, link.url);
                let elicitation =
                    serde_json::json!({"mode": "url", "elicitationId": link.elicitation_id, "url": link.url, "message": message});
                CallError::Rpc {
                    server,
                    tool,
                    code: URL_ELICITATION_REQUIRED,
                    message,
                    data: Some(serde_json::json!({"elicitations": [elicitation]})),
                }
            }
            Err(error) => CallError::AsCaller { server, tool, message: format!("a login is needed, and {error}") },
        }
    }

    /// Runs any other request of a caller (a resource read, a prompt, a
    /// completion; `label` names it in errors) on its own connection, as a
    /// tool call is: the server never answers one caller with another's,
    /// nor with the gateway's, credentials.
    pub async fn operate<M, T>(&self, identity: Option<&Arc<Identity>>, label: &str, message: M) -> Result<T, CallError>
    where
        M: Message<Result = Result<T, CallError>> + Send + 'static,
        T: Send + 'static,
        Connection: Handler<M>,
    {
        let (caller, connection, _) = self.caller_connection(identity, label).await?;
        let _busy = Busy::new(self, &caller);
        let answer = connection.send(message).await;
        let answer = answer.unwrap_or_else(|_| Err(CallError::Stopped { server: self.server.clone(), tool: label.to_owned() }));
        self.after(answer, &caller, label)
    }

    /// The caller's key, its connection and the upstream identity it acts
    /// as there; refused (naming the server and `label`) for a request
    /// without a caller the server can be reached as.
    async fn caller_connection(
        &self,
        identity: Option<&Arc<Identity>>,
        label: &str,
    ) -> Result<(String, Addr<Connection>, Arc<Upstream>), CallError> {
        let refuse = |message: String| CallError::AsCaller { server: self.server.clone(), tool: label.to_owned(), message };
        let Some(identity) = identity else {
            let why = "the server acts as each caller of the gateway, and this request has no authenticated caller; send it \
                       through `mcpvisor serve --http` with an access token of the gateway's issuer ([serve.auth]) or a named key";
            return Err(refuse(why.into()));
        };
        if identity.proof == Proof::SharedToken && !matches!(self.acting, Acting::Exchange(_)) {
            let why = "the server acts as each caller of the gateway, and the shared token is one identity for everyone who \
                       holds it; authenticate with a named key or an access token of the gateway's issuer";
            return Err(refuse(why.into()));
        }
        match &self.acting {
            Acting::Exchange(exchanger) => {
                if !matches!(identity.proof, Proof::Jwt | Proof::Introspection) {
                    let why = format!(
                        "the server acts as each caller by exchanging the caller's access token, and `{}` proved itself with {} \
                         the issuer cannot exchange; authenticate with an access token of the gateway's issuer",
                        identity.subject,
                        if identity.proof == Proof::Key { "a named key" } else { "the shared token" }
                    );
                    return Err(refuse(why));
                }
                let caller = identity.grant_key();
                let exchanged = exchanger.for_caller(&caller, &identity.subject).await.map_err(|e| refuse(e.message))?;
                let upstream =
                    Upstream { subject: exchanged.subject.clone(), audience: exchanged.audience.clone(), scope: exchanged.scope.clone() };
                let connection = self.connection(&caller, identity, label).await?;
                Ok((caller, connection, Arc::new(upstream)))
            }
            Acting::Process { .. } => {
                let caller = identity.caller_key();
                let connection = self.connection(&caller, identity, label).await?;
                let upstream = Upstream { subject: identity.subject.clone(), audience: format!("process of {caller}"), scope: None };
                Ok((caller, connection, Arc::new(upstream)))
            }
            Acting::Login(logins) => {
                let caller = identity.caller_key();
                if !logins.has_login(&caller) {
                    return Err(self.login_needed(logins, &caller, label));
                }
                let connection = self.connection(&caller, identity, label).await?;
                // The third party's own subject is not known (its token is opaque to the gateway): the caller's login is named.
                let upstream = Upstream { subject: identity.subject.clone(), audience: logins.endpoint().to_owned(), scope: None };
                Ok((caller, connection, Arc::new(upstream)))
            }
        }
    }

    /// `caller`'s connection: the running one, or one the Hub starts.
    async fn connection(&self, caller: &str, identity: &Identity, tool: &str) -> Result<Addr<Connection>, CallError> {
        if let Some(connection) = self.lock().get_mut(caller).and_then(|entry| {
            entry.last_used = Instant::now();
            entry.connection.upgrade()
        }) {
            return Ok(connection);
        }
        let refuse = |message: String| CallError::AsCaller { server: self.server.clone(), tool: tool.to_owned(), message };
        let start = match &self.acting {
            Acting::Exchange(_) => CallerStart::Exchange { subject: identity.subject.clone() },
            Acting::Process { env, secrets } => CallerStart::Process { env: process_env(env, secrets, identity).await.map_err(refuse)? },
            Acting::Login(_) => CallerStart::Login,
        };
        let start = StartCaller { server: self.server.clone(), caller: caller.to_owned(), who: identity.caller_key(), start };
        let started = self.hub.send(start).await.unwrap_or_else(|_| Err(CallError::RuntimeStopped { tool: tool.to_owned() }));
        if let (Err(_), Some(exchanger)) = (&started, self.exchanger()) {
            // Refused: its exchanged token is not kept for a connection it does not have.
            exchanger.forget(caller);
        }
        started.map_err(|error| match error {
            CallError::AsCaller { server, message, .. } => CallError::AsCaller { server, tool: tool.to_owned(), message },
            other => other,
        })
    }

    /// The Hub started `caller`'s connection.
    pub(crate) fn admit(&self, caller: &str, connection: WeakAddr<Connection>) {
        self.started.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(caller.to_owned(), Entry { connection, last_used: Instant::now(), busy: 0 });
    }

    /// The Hub refused a caller over `max_callers`: the error to answer.
    pub(crate) fn refusal(&self, connections: usize) -> CallError {
        self.refused.fetch_add(1, Ordering::Relaxed);
        let message = format!(
            "the server already has {connections} per-caller connections, its {}.max_callers ({}); the gateway is overloaded for \
             this server: retry later (idle callers' connections end after {:?}), or raise {}.max_callers",
            self.setting, self.max, self.idle, self.setting
        );
        CallError::AsCaller { server: self.server.clone(), tool: String::new(), message }
    }

    /// Callers whose connection has been unused for `caller_idle`, taken
    /// out of the table (the Hub then ends their connections).
    pub(crate) fn take_idle(&self) -> Vec<String> {
        let now = Instant::now();
        let idle = self.take(|entry| entry.busy == 0 && now.duration_since(entry.last_used) >= self.idle);
        self.reaped.fetch_add(idle.len() as u64, Ordering::Relaxed);
        idle
    }

    /// Every caller, taken out of the table (the server is restarted: the
    /// Hub ends their connections, and each caller's next call starts a
    /// new one, exchanging again or reading the secrets file again).
    pub(crate) fn take_all(&self) -> Vec<String> {
        self.take(|_| true)
    }

    /// `caller`, taken out of the table (its login was made or revoked:
    /// the Hub ends its connection, and its next call starts a new one
    /// with the login as it is now).
    pub(crate) fn take_caller(&self, caller: &str) -> Vec<String> {
        let mut table = self.lock();
        table.remove(caller).map(|_| vec![caller.to_owned()]).unwrap_or_default()
    }

    /// The callers `which` picks, out of the table, their exchanged tokens forgotten.
    fn take(&self, which: impl Fn(&Entry) -> bool) -> Vec<String> {
        let mut table = self.lock();
        let taken: Vec<String> = table.iter().filter(|(_, entry)| which(entry)).map(|(caller, _)| caller.clone()).collect();
        for caller in &taken {
            table.remove(caller);
            if let Some(exchanger) = self.exchanger() {
                exchanger.forget(caller);
            }
        }
        taken
    }

    /// What `status` shows of them.
    pub fn counts(&self) -> CallerCounts {
        let table = self.lock();
        CallerCounts {
            connections: table.len(),
            callers: table.keys().cloned().collect::<BTreeSet<_>>().into_iter().collect(),
            max: self.max,
            started: self.started.load(Ordering::Relaxed),
            reaped: self.reaped.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            exchanges: self.exchanger().map_or(0, |exchanger| exchanger.exchanges()),
            logins: self.logins().map(|logins| logins.stored()),
        }
    }

    /// How often the Hub looks for idle connections.
    pub(crate) fn reap_every(&self) -> Duration {
        (self.idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The environment of `identity`'s process: `env` with its `${caller.…}`
/// filled from the identity and its table of the `secrets` file (read off
/// the caller's thread). `Err` says what is missing and what to do.
async fn process_env(
    env: &BTreeMap<String, String>,
    secrets: &Option<PathBuf>,
    identity: &Identity,
) -> Result<BTreeMap<String, String>, String> {
    let own = match secrets.clone() {
        Some(path) => {
            let key = identity.caller_key();
            let read = tokio::task::spawn_blocking(move || crate::caller_secrets::for_caller(&path, &key));
            read.await.map_err(|_| "reading the callers' secrets file failed".to_owned())??
        }
        None => BTreeMap::new(),
    };
    let facts = CallerFacts { subject: &identity.subject, claims: &identity.claims, secrets: &own };
    render_env(env, Some(&facts)).map_err(|why| format!("cannot start the process of caller `{}`: {why}", identity.subject))
}

/// A call under way on a caller's connection; the connection counts as
/// used until it ends.
struct Busy<'a> {
    callers: &'a Callers,
    caller: &'a str,
}

impl<'a> Busy<'a> {
    fn new(callers: &'a Callers, caller: &'a str) -> Busy<'a> {
        if let Some(entry) = callers.lock().get_mut(caller) {
            entry.busy += 1;
        }
        Busy { callers, caller }
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        if let Some(entry) = self.callers.lock().get_mut(self.caller) {
            entry.busy = entry.busy.saturating_sub(1);
            entry.last_used = Instant::now();
        }
    }
}
