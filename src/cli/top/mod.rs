//! `top`: a live view of a pool, refreshed every `--interval` (1 s): each
//! server's state, pid, uptime, restarts, calls, latency, errors, CPU and
//! memory; keys to sort, filter, read a server's log and calls, restart,
//! enable or disable it. `--once` prints one frame (`--json`: one
//! snapshot) and exits.
//!
//! Two [`Source`]s give the same snapshot shape
//! ([`pool_snapshot`]): the configured servers started here ([`Local`]),
//! or a running `serve --http` read through its `/admin` endpoint
//! ([`Remote`], `--url`). The view model is `model`, the keys `app`, the
//! drawing `view`.

mod app;
mod model;
mod view;

use std::io::IsTerminal;
use std::time::Duration;

use futures::future::BoxFuture;
use ratatui::backend::{CrosstermBackend, TestBackend};
use ratatui::crossterm::{event, execute, terminal};
use ratatui::Terminal;
use serde_json::{json, Value};

use super::output::{Failure, Out};
use super::serve_http::TOKEN_VAR;
use super::servers::Servers;
use super::session::Session;
use super::{parse_seconds, secrets};
use super::{Cli, EXIT_OUTPUT};
use crate::gateway::http::admin::{pool_snapshot, Admin, AdminAction, PoolAdmin};
use app::{App, Command};
use model::Sample;

/// How long one snapshot or action may take before `top` says so.
const REQUEST_LIMIT: Duration = Duration::from_secs(10);
/// The largest answer read from a gateway (a bound against a peer that never stops; real snapshots are far smaller).
const MAX_ANSWER: usize = 16 << 20;
/// The frame `--once` prints when stdout is not a terminal.
const ONCE_SIZE: (u16, u16) = (80, 24);

#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// Watch a running `serve --http` at this URL (http://HOST:PORT)
    /// through its /admin endpoint, instead of starting the servers here.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// The environment variable holding the gateway's token (default MCPVISOR_SERVE_TOKEN).
    #[arg(long, value_name = "VAR", requires = "url")]
    pub token_env: Option<String>,
    /// Print one frame (with --json, one snapshot) and exit.
    #[arg(long)]
    pub once: bool,
    /// Seconds between refreshes (default 1); with --once, between the two
    /// snapshots the rates are measured over.
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    pub interval: Option<Duration>,
}

/// Where the snapshots come from, and who acts on the servers.
pub trait Source {
    /// The pool now, in [`pool_snapshot`]'s shape.
    fn snapshot(&self) -> BoxFuture<'_, Result<Value, String>>;
    fn act<'a>(&'a self, server: &'a str, action: AdminAction) -> BoxFuture<'a, Result<(), String>>;
    /// A few words for the title: `local pool`, or the URL.
    fn label(&self) -> String;
}

/// The configured servers, started by this command.
pub struct Local(Session);

impl Source for Local {
    fn snapshot(&self) -> BoxFuture<'_, Result<Value, String>> {
        Box::pin(async { Ok(pool_snapshot(&self.0.handle).await) })
    }

    fn act<'a>(&'a self, server: &'a str, action: AdminAction) -> BoxFuture<'a, Result<(), String>> {
        let done = PoolAdmin(self.0.handle.clone()).act(server, action);
        Box::pin(async move { done.await.map_err(|e| e.to_string()) })
    }

    fn label(&self) -> String {
        "local pool".into()
    }
}

/// A running gateway's `/admin` endpoint.
pub struct Remote {
    http: reqwest::Client,
    /// `http://HOST:PORT`, without a trailing slash or `/mcp`.
    base: String,
    token: Option<String>,
    /// Where the token came from, for errors (never the token).
    token_var: String,
}

impl Remote {
    fn new(url: &str, token_var: &str) -> Result<Remote, Failure> {
        let base = url.trim().trim_end_matches('/').trim_end_matches("/mcp").trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Failure::usage(format!("--url {url}: give the gateway's address as http://HOST:PORT (or https://)")));
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(REQUEST_LIMIT)
            .build()
            .map_err(|e| Failure::connection(format!("cannot make an HTTP client: {e}")))?;
        let token = std::env::var(token_var).ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty());
        Ok(Remote { http, base, token, token_var: token_var.to_string() })
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Value, String> {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let response =
            request.send().await.map_err(|e| format!("cannot reach the gateway at {}: {}", self.base, crate::error::error_chain(&e)))?;
        let status = response.status();
        if status == reqwest::StatusCode::UNAUTHORIZED {
            let had = if self.token.is_some() { "refused the token in" } else { "needs a token; set" };
            return Err(format!("the gateway at {} {had} ${} (or name another variable with --token-env)", self.base, self.token_var));
        }
        let mut response = response;
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("the gateway at {} broke off its answer: {}", self.base, crate::error::error_chain(&e)))?
        {
            if body.len() + chunk.len() > MAX_ANSWER {
                return Err(format!(
                    "the gateway at {} answered more than {} MiB: is --url a mcpvisor gateway?",
                    self.base,
                    MAX_ANSWER >> 20
                ));
            }
            body.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&body);
        if !status.is_success() {
            let why: String = text.chars().take(300).collect();
            return Err(format!("the gateway at {} answered {status}: {why}", self.base));
        }
        serde_json::from_str(&text).map_err(|e| format!("the gateway at {} answered with something other than JSON ({e})", self.base))
    }
}

impl Source for Remote {
    fn snapshot(&self) -> BoxFuture<'_, Result<Value, String>> {
        Box::pin(self.send(self.http.get(format!("{}/admin/status", self.base))))
    }

    fn act<'a>(&'a self, server: &'a str, action: AdminAction) -> BoxFuture<'a, Result<(), String>> {
        let name: String = url::form_urlencoded::byte_serialize(server.as_bytes()).collect();
        let url = format!("{}/admin/servers/{name}/{}", self.base, action.as_str());
        Box::pin(async move { self.send(self.http.post(url)).await.map(|_| ()) })
    }

    fn label(&self) -> String {
        self.base.clone()
    }
}

pub async fn run(cli: &Cli, out: &Out, args: &TopArgs) -> Result<u8, Failure> {
    if out.json && !args.once {
        return Err(Failure::usage("top --json prints one snapshot: add --once"));
    }
    let terminal = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    if !args.once && !terminal {
        return Err(Failure::usage("top needs a terminal; use `top --once` (or `top --once --json`) in scripts"));
    }
    let interval = args.interval.unwrap_or(Duration::from_secs(1));
    match &args.url {
        Some(url) => {
            let source = Remote::new(url, args.token_env.as_deref().unwrap_or(TOKEN_VAR))?;
            show(&source, out, args.once, interval).await
        }
        None => {
            let servers = Servers::load(cli)?;
            let session = Session::launch(servers.to_start(None)?, |_| {})?;
            if args.once {
                session.settle().await;
            }
            let source = Local(session);
            let result = show(&source, out, args.once, interval).await;
            source.0.close().await;
            result
        }
    }
}

async fn show(source: &dyn Source, out: &Out, once: bool, interval: Duration) -> Result<u8, Failure> {
    if once {
        print_once(source, out, interval).await
    } else {
        live(source, interval).await
    }
}

async fn snapshot(source: &dyn Source) -> Result<Sample, String> {
    match tokio::time::timeout(REQUEST_LIMIT, source.snapshot()).await {
        // The frame is drawn past `Out`, so its texts (errors, stderr lines) are scrubbed here.
        Ok(snapshot) => snapshot.map(|mut snapshot| {
            secrets::scrub_json(&mut snapshot);
            Sample::parse(&snapshot)
        }),
        Err(_) => Err(format!("{} did not answer within {REQUEST_LIMIT:?}", source.label())),
    }
}

/// Whether styles may be used: not when `NO_COLOR` is set to anything but empty.
fn colour() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty())
}

/// Two snapshots `interval` apart (for the rates), then one frame or, with `--json`, the rows.
async fn print_once(source: &dyn Source, out: &Out, interval: Duration) -> Result<u8, Failure> {
    let first = snapshot(source).await.map_err(Failure::connection)?;
    tokio::time::sleep(interval).await;
    let second = snapshot(source).await.map_err(Failure::connection)?;
    let mut app = App::new(source.label(), false);
    app.update(Some(&first), second);
    if out.json {
        out.json(&json!({"source": app.source, "totals": app.totals, "servers": app.rows, "calls": app.latest.calls}));
        return Ok(0);
    }
    let (width, height) = if std::io::stdout().is_terminal() { terminal::size().unwrap_or(ONCE_SIZE) } else { ONCE_SIZE };
    for line in frame_text(&app, width, height) {
        out.line(line);
    }
    Ok(0)
}

/// One frame of `app` as lines of text, trailing blanks trimmed.
fn frame_text(app: &App, width: u16, height: u16) -> Vec<String> {
    let Ok(mut terminal) = Terminal::new(TestBackend::new(width, height));
    if terminal.draw(|frame| view::draw(frame, app)).is_err() {
        return Vec::new();
    }
    let buffer = terminal.backend().buffer();
    let lines = (0..height).map(|y| (0..width).map(|x| buffer[(x, y)].symbol()).collect::<String>().trim_end().to_string());
    lines.collect()
}

/// Puts the terminal back (main screen, cooked mode, cursor) however `live` ends.
struct Screen;

impl Screen {
    fn enter() -> std::io::Result<Screen> {
        terminal::enable_raw_mode()?;
        let screen = Screen;
        execute!(std::io::stdout(), terminal::EnterAlternateScreen)?;
        Ok(screen)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = execute!(std::io::stdout(), terminal::LeaveAlternateScreen, ratatui::crossterm::cursor::Show);
        let _ = terminal::disable_raw_mode();
    }
}

/// The live view: a frame after every snapshot and every key, until a quit key.
async fn live(source: &dyn Source, interval: Duration) -> Result<u8, Failure> {
    let failed = |e: std::io::Error| Failure { code: EXIT_OUTPUT, message: format!("cannot draw on the terminal: {e}") };
    let _screen = Screen::enter().map_err(failed)?;
    let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stdout())).map_err(failed)?;
    // Keys are read on a thread of their own: crossterm's read blocks.
    let (keys, mut pressed) = tokio::sync::mpsc::channel(64);
    std::thread::spawn(move || loop {
        match event::read() {
            Ok(event::Event::Key(key)) if keys.blocking_send(key).is_err() => return,
            Ok(_) => {}
            Err(_) => return,
        }
    });
    let mut app = App::new(source.label(), colour());
    let mut previous: Option<Sample> = None;
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => match snapshot(source).await {
                Ok(sample) => {
                    app.update(previous.as_ref(), sample.clone());
                    previous = Some(sample);
                }
                Err(why) => app.message = Some(why),
            },
            key = pressed.recv() => match key.map(|key| app.key(key)) {
                None | Some(Command::Quit) => break,
                Some(Command::Nothing) => {}
                Some(Command::Act(server, action)) => {
                    let done = tokio::time::timeout(REQUEST_LIMIT, source.act(&server, action)).await;
                    app.message = Some(match done {
                        Ok(Ok(())) => format!("{} of {server}: done", action.as_str()),
                        Ok(Err(why)) => format!("{} of {server} failed: {why}", action.as_str()),
                        Err(_) => format!("{} of {server}: no answer within {REQUEST_LIMIT:?}", action.as_str()),
                    });
                    ticks.reset_immediately();
                }
            },
        }
        terminal.draw(|frame| view::draw(frame, &app)).map_err(failed)?;
    }
    Ok(0)
}
