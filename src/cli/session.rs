//! A runtime for one command: start the servers it needs, wait until each
//! has settled, let the command work, shut everything down.
//!
//! "Settled", for a one-shot command, means out of `pending`: connected,
//! failed, disabled, or restarting after a failed first start (a command
//! reports that at once instead of sitting through the backoff). The wait
//! is bounded by the servers' longest start-up time-out. While it lasts,
//! stderr shows a spinner per server when it is a terminal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::output::{report_text, warn, Failure, Layout};
use super::secrets;
use super::servers::{env, Entry, Servers};
use crate::actors::client_requests::ClientHandlers;
use crate::actors::{ServerState, ServerStatus};
use crate::caller_token::CallerTokens;
use crate::config::Redactor;
use crate::config::{RuntimeConfig, ServerConfig};
use crate::telemetry::Telemetry;
use crate::{Handle, Runtime};

/// Time for a server to leave `pending` on top of its start-up time-out.
const SETTLE_MARGIN: Duration = Duration::from_secs(1);
const POLL: Duration = Duration::from_millis(20);
/// The variable that sets how many threads the servers' connections run on
/// (docs/operations.md, "Threads"): a whole number, 0 for the runtime's own
/// thread; unset, one per core for `serve` and 0 for every other command.
const CONNECTION_THREADS: &str = "MCPVISOR_CONNECTION_THREADS";
/// Most connection threads the variable may ask for.
const MAX_CONNECTION_THREADS: usize = 1024;

/// The connection threads `value` (of [`CONNECTION_THREADS`]) asks for,
/// else `default`; a value that is not a count up to the bound is warned
/// about and the default is used.
fn connection_threads(value: Option<&str>, default: usize) -> usize {
    let Some(value) = value else { return default };
    match value.trim().parse::<usize>() {
        Ok(count) if count <= MAX_CONNECTION_THREADS => count,
        _ => {
            warn(format!("{CONNECTION_THREADS} must be a whole number from 0 to {MAX_CONNECTION_THREADS}, not {value:?}; using {default}"));
            default
        }
    }
}
/// Lines of a server's stderr added to the error when it is not connected.
const STDERR_LINES: usize = 5;

pub struct Session {
    pub handle: Handle,
    /// The servers started, in the order given.
    names: Vec<String>,
    /// How long they may take to settle.
    pub startup_bound: Duration,
}

impl Session {
    /// [`Session::launch`], then [`Session::settle`].
    pub async fn start<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> Result<Session, Failure> {
        let session = Session::launch(entries, |_| {})?;
        session.settle().await;
        Ok(session)
    }

    /// Expands and validates the enabled servers of `entries` (a problem is
    /// a usage error naming the server and the field), lets `adjust` change
    /// them, and starts them all (disabled ones are shown as such).
    pub fn launch<'a>(entries: impl IntoIterator<Item = &'a Entry>, adjust: impl Fn(&mut ServerConfig)) -> Result<Session, Failure> {
        Session::launch_configs(prepare(entries, adjust)?, Default::default(), Default::default())
    }

    /// Starts these prepared servers ([`prepare`]); `handlers` answer their
    /// requests; `telemetry` counts their calls (and may keep an audit log).
    /// Their connections share the runtime's thread (a command's calls come
    /// from that thread) unless [`CONNECTION_THREADS`] says otherwise.
    pub fn launch_configs(configs: Vec<ServerConfig>, handlers: ClientHandlers, telemetry: Telemetry) -> Result<Session, Failure> {
        Session::launch_spread(configs, handlers, telemetry, 0, (CallerTokens::default(), None))
    }

    /// [`Session::launch_configs`] with the connections spread over at most
    /// `threads` threads unless [`CONNECTION_THREADS`] says otherwise (the
    /// gateway: its sessions' calls come from every worker).
    pub fn launch_spread(
        configs: Vec<ServerConfig>,
        handlers: ClientHandlers,
        telemetry: Telemetry,
        threads: usize,
        (caller_tokens, logins): (CallerTokens, Option<Arc<crate::oauth::LoginDesk>>),
    ) -> Result<Session, Failure> {
        let startup_bound = configs.iter().filter(|c| c.enabled).map(|c| c.timeouts.startup).max().unwrap_or_default() + SETTLE_MARGIN;
        let names: Vec<String> = configs.iter().map(|c| c.name.clone()).collect();
        let connection_threads = connection_threads(std::env::var(CONNECTION_THREADS).ok().as_deref(), threads);
        let mut builder = Runtime::builder(RuntimeConfig { end_orphans: true, connection_threads, ..RuntimeConfig::new(configs) })
            .client_handlers(handlers)
            .telemetry(telemetry)
            .caller_tokens(caller_tokens);
        if let Some(desk) = logins {
            builder = builder.caller_logins(desk);
        }
        // Every command pins the tools it sees, so a changed tool is withheld wherever it would be offered.
        if let Some(pins) = crate::integrity::pins::pins_file(|name| std::env::var(name).ok()) {
            builder = builder.pin_tools(pins);
        }
        let handle = builder.start().map_err(|e| Failure::connection(format!("cannot start the runtime: {e}")))?;
        Ok(Session { handle, names, startup_bound })
    }

    /// Polls the servers' states, drawing a spinner each, until none is pending.
    pub async fn settle(&self) {
        let spinners = Spinners::new(&self.names);
        let deadline = Instant::now() + self.startup_bound;
        loop {
            let statuses = self.handle.status().await;
            spinners.show(&statuses);
            if statuses.iter().all(|s| s.state != ServerState::Pending) || Instant::now() >= deadline {
                spinners.finish(&statuses);
                return;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// One server's status; the server was started by this session.
    pub async fn status_of(&self, name: &str) -> Result<ServerStatus, Failure> {
        self.handle.server_status(name).await.ok_or_else(|| Failure::connection(format!("server `{name}` is not running in this session")))
    }

    /// Fails unless `name` is connected, saying why it is not.
    pub async fn require_connected(&self, name: &str) -> Result<(), Failure> {
        let status = self.status_of(name).await?;
        match status.state {
            ServerState::Connected => Ok(()),
            ServerState::Disabled => Err(Failure::usage(format!("server `{name}` is disabled; enable it with `mcpvisor enable {name}`"))),
            _ => {
                let mut message = format!("server `{name}` is {}; `mcpvisor test {name}` explains why", describe(&status));
                let tail = &status.stderr_tail[status.stderr_tail.len().saturating_sub(STDERR_LINES)..];
                if !tail.is_empty() {
                    message.push_str("\nits last stderr lines:");
                    tail.iter().for_each(|line| message.push_str(&format!("\n  {line}")));
                }
                Err(Failure::connection(message))
            }
        }
    }

    /// The names of the connected servers.
    pub async fn connected(&self) -> Vec<String> {
        self.handle.status().await.into_iter().filter(|s| s.state == ServerState::Connected).map(|s| s.name).collect()
    }

    pub async fn close(self) {
        self.handle.shutdown().await;
    }
}

/// The enabled servers of `entries` expanded and validated (a problem is a
/// usage error naming the server and the field), after `adjust`; the secret
/// values among them are scrubbed from everything printed from now on.
pub fn prepare<'a>(entries: impl IntoIterator<Item = &'a Entry>, adjust: impl Fn(&mut ServerConfig)) -> Result<Vec<ServerConfig>, Failure> {
    let mut configs = Vec::new();
    for entry in entries {
        let mut config = entry.config()?;
        adjust(&mut config);
        if config.enabled {
            config = config.expanded(env)?;
        }
        config.validate()?;
        configs.push(config);
    }
    secrets::install(Redactor::from_configs(&configs));
    Ok(configs)
}

/// Starts the selected servers. With one server asked for by name, it must
/// connect; with all, those that did not are named in a warning and the
/// command goes on with the others.
pub async fn start_selected(servers: &Servers, only: Option<&str>, leaving_out: &str) -> Result<Session, Failure> {
    start_entries(servers.to_start(only)?, only, leaving_out).await
}

/// [`start_selected`] for the given entries (`only` among them).
pub async fn start_entries(entries: Vec<&Entry>, only: Option<&str>, leaving_out: &str) -> Result<Session, Failure> {
    let session = Session::start(entries).await?;
    match only {
        Some(name) => {
            if let Err(failure) = session.require_connected(name).await {
                session.close().await;
                return Err(failure);
            }
        }
        None => {
            for status in session.handle.status().await {
                if !matches!(status.state, ServerState::Connected | ServerState::Disabled) {
                    warn(format_args!("server `{}` is {}; {leaving_out}", status.name, describe(&status)));
                }
            }
        }
    }
    Ok(session)
}

/// Shows each server's `warnings` (tools left out, names disambiguated or
/// in collision) on stderr, one `warning:` line each.
pub fn warn_about(statuses: &[ServerStatus]) {
    for status in statuses {
        for warning in &status.warnings {
            warn(format_args!("server `{}`: {warning}", status.name));
        }
    }
}

/// A server's state in a few words, with its error when it has one.
pub fn describe(status: &ServerStatus) -> String {
    let error = |error: &str| error.lines().next().unwrap_or_default().to_string();
    match &status.state {
        ServerState::Failed { error: e, retry_in: Some(left), .. } => {
            format!("failed (next try in {:.1}s): {}", left.as_secs_f64(), error(e))
        }
        ServerState::Failed { error: e, .. } => format!("failed: {}", error(e)),
        ServerState::Restarting { attempt, .. } => match &status.last_error {
            Some(e) => format!("restarting (attempt {attempt}) after: {}", error(e)),
            None => format!("restarting (attempt {attempt})"),
        },
        ServerState::Connected => format!("connected ({} tools)", status.tools),
        // OAuth says a user must log in; static credentials say what to change in the configuration.
        ServerState::NeedsAuth => match &status.last_error {
            Some(e) if e.contains("log in") => format!("needs_auth: {}; log in with `mcpvisor auth {}`", error(e), status.name),
            Some(e) => format!("needs_auth: {}", error(e)),
            None => format!("needs_auth: log in with `mcpvisor auth {}`", status.name),
        },
        other => other.label().to_string(),
    }
}

/// Above this many servers, one bar counts them instead of a spinner each:
/// indicatif ticks every spinner on a thread of its own, and a thousand
/// spinners are no use to anyone.
const MAX_SPINNERS: usize = 8;

/// Start-up progress on stderr: a spinner per server, or one counting bar
/// for many servers; nothing at all (no bar, no ticking thread) when stderr
/// is not a terminal.
enum Spinners {
    Hidden,
    Each(Vec<(String, ProgressBar)>),
    Count(ProgressBar),
}

impl Spinners {
    fn new(names: &[String]) -> Spinners {
        let target = ProgressDrawTarget::stderr();
        if target.is_hidden() {
            return Spinners::Hidden;
        }
        let multi = MultiProgress::with_draw_target(target);
        let spinner = |template: &str| {
            let bar = multi.add(ProgressBar::new_spinner().with_style(style(template)));
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        };
        if names.len() > MAX_SPINNERS {
            let bar = spinner("{spinner} {msg}");
            bar.set_message(format!("starting {} servers", names.len()));
            return Spinners::Count(bar);
        }
        let bars = names
            .iter()
            .map(|name| {
                let bar = spinner("{spinner} {prefix:.bold} {msg}").with_prefix(name.clone());
                bar.set_message("starting");
                (name.clone(), bar)
            })
            .collect();
        Spinners::Each(bars)
    }

    fn show(&self, statuses: &[ServerStatus]) {
        match self {
            Spinners::Hidden => {}
            Spinners::Each(bars) => {
                for (name, bar) in bars {
                    if let Some(status) = statuses.iter().find(|s| &s.name == name) {
                        bar.set_message(report_text(&describe(status), Layout::OneLine));
                    }
                }
            }
            Spinners::Count(bar) => {
                let settled = statuses.iter().filter(|s| s.state != ServerState::Pending).count();
                bar.set_message(format!("{settled} of {} servers started", statuses.len()));
            }
        }
    }

    fn finish(&self, statuses: &[ServerStatus]) {
        match self {
            Spinners::Hidden => {}
            Spinners::Each(bars) => {
                for (name, bar) in bars {
                    let status = statuses.iter().find(|s| &s.name == name);
                    let mark = match status.map(|s| &s.state) {
                        Some(ServerState::Connected) => "✓",
                        Some(ServerState::Disabled) => "-",
                        _ => "✗",
                    };
                    bar.set_style(style("{msg}"));
                    let described = status.map(describe).unwrap_or_default();
                    bar.finish_with_message(report_text(&format!("{mark} {name} {described}"), Layout::OneLine));
                }
            }
            Spinners::Count(bar) => {
                let connected = statuses.iter().filter(|s| s.state == ServerState::Connected).count();
                let settled = statuses.iter().all(|s| matches!(s.state, ServerState::Connected | ServerState::Disabled));
                let mark = if settled { "✓" } else { "✗" };
                bar.set_style(style("{msg}"));
                bar.finish_with_message(format!("{mark} {connected} of {} servers connected", statuses.len()));
            }
        }
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_spinner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needing_auth(error: Option<&str>) -> ServerStatus {
        ServerStatus { last_error: error.map(String::from), ..ServerStatus::new("web", ServerState::NeedsAuth) }
    }

    #[test]
    fn needs_auth_says_to_log_in_only_when_a_login_can_help() {
        let oauth = describe(&needing_auth(Some("server \"web\" needs a user to log in with https://as")));
        assert!(oauth.ends_with("; log in with `mcpvisor auth web`"), "{oauth}");
        let fixed = describe(&needing_auth(Some("server `web` refused ...: check the values of its `auth` and `headers`")));
        assert!(!fixed.contains("mcpvisor auth"), "{fixed}");
    }

    #[test]
    fn connection_threads_are_a_bounded_count_or_the_default() {
        assert_eq!(connection_threads(None, 2), 2);
        assert_eq!(connection_threads(Some("0"), 2), 0);
        assert_eq!(connection_threads(Some(" 4 "), 0), 4);
        for bad in ["-1", "four", "", "1025"] {
            assert_eq!(connection_threads(Some(bad), 3), 3, "{bad:?}");
        }
    }
}
