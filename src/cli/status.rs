//! `status` (every server started and its state shown) and `test` (one
//! server connected step by step, each step timed, failures explained).

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use super::output::{not_offered, table, Failure, Out, Paint, Piece};
use super::servers::Servers;
use super::session::{describe, warn_about, Session};
use super::{Cli, EXIT_CONNECTION};
use crate::actors::{ServerState, ServerStatus};
use crate::config::{Keyword, ServerConfig};
use crate::restart::RestartPolicy;

/// Lines of a server's stderr shown when it failed.
const STDERR_LINES: usize = 10;

#[derive(Debug, clap::Args)]
pub struct TestArgs {
    pub name: String,
}

pub async fn status(cli: &Cli, out: &Out) -> Result<u8, Failure> {
    let servers = Servers::load(cli)?;
    let session = Session::start(servers.to_start(None)?).await?;
    let statuses = session.handle.status().await;
    session.close().await;
    if !out.json {
        warn_about(&statuses);
    }
    let left_out = servers.left_out.iter().map(|left| {
        serde_json::json!({"name": left.name, "state": "left_out", "source": left.source.display().to_string(), "warning": left.reason})
    });
    let untrusted = servers.untrusted.iter().flat_map(|file| {
        file.servers.iter().map(move |server| {
            serde_json::json!({"name": server.name(), "state": "not_trusted", "source": file.path, "warning": file.why.reason()})
        })
    });
    out.json(&statuses.iter().map(|status| status_json(status, &servers)).chain(left_out).chain(untrusted).collect::<Vec<_>>());
    let mut rows =
        vec![["SERVER", "STATE", "PID", "TOOLS", "RESOURCES", "PROMPTS", "ERA", "RESTARTS", "UPTIME"].map(String::from).to_vec()];
    for s in &statuses {
        let uptime = s.uptime.map(|u| format!("{:.1}s", u.as_secs_f64())).unwrap_or_else(|| "-".into());
        let pid = s.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into());
        let era = s.era.clone().unwrap_or_else(|| "-".into());
        let counts = [s.tools, s.resources, s.prompts].map(|n| n.to_string());
        let [tools, resources, prompts] = counts;
        rows.push(vec![s.name.clone(), s.state.label().into(), pid, tools, resources, prompts, era, s.restarts.to_string(), uptime]);
    }
    for line in table(&rows) {
        out.line(line);
    }
    for (name, sandbox) in statuses.iter().filter_map(|s| Some((&s.name, s.sandbox.as_ref()?))) {
        out.line("");
        let warning = sandbox_warning(sandbox);
        let paint = if warning.is_empty() { Paint::Dim } else { Paint::Bad };
        out.pieces([Piece(paint, format!("{name}:")), Piece::plain(format!(" sandbox: {}{warning}", sandbox.achieved))]);
    }
    for entry in servers.entries.iter().filter(|entry| !entry.unmapped.is_empty()) {
        let (origin, keys) = (entry.defined_in.origin_name(), entry.unmapped.join(", "));
        out.line("");
        out.pieces([
            Piece(Paint::Bad, format!("{}:", entry.name())),
            Piece::plain(format!(" {origin}'s settings {keys} have no counterpart in mcpvisor and are not applied")),
        ]);
    }
    for left in &servers.left_out {
        out.line("");
        out.pieces([
            Piece(Paint::Bad, format!("{}:", left.name)),
            Piece::plain(format!(" left out ({}): {}", left.source.display(), left.reason)),
        ]);
    }
    for s in statuses.iter().filter(|s| !matches!(s.state, ServerState::Connected | ServerState::Disabled)) {
        out.line("");
        out.pieces([Piece(Paint::Bad, format!("{}:", s.name)), Piece::plain(format!(" {}", describe(s)))]);
        for line in tail(s) {
            out.pieces([Piece::plain("  "), Piece(Paint::Dim, line.clone())]);
        }
    }
    Ok(0)
}

/// The status as the runtime reports it, plus where the server is defined.
fn status_json(status: &ServerStatus, servers: &Servers) -> Value {
    let mut value = serde_json::to_value(status).unwrap_or_default();
    if let (Some(object), Ok(entry)) = (value.as_object_mut(), servers.get(&status.name)) {
        object.insert("transport".into(), entry.config().ok().map(|config| config.transport.as_str()).into());
        object.insert("origin".into(), entry.defined_in.origin_name().into());
        object.insert("source".into(), entry.defined_in.path().map(|p| p.display().to_string()).into());
        if !entry.unmapped.is_empty() {
            object.insert("unmapped".into(), entry.unmapped.clone().into());
        }
    }
    value
}

fn tail(status: &ServerStatus) -> &[String] {
    let tail = match &status.state {
        ServerState::Failed { stderr_tail, .. } if !stderr_tail.is_empty() => stderr_tail,
        _ => &status.stderr_tail,
    };
    &tail[tail.len().saturating_sub(STDERR_LINES)..]
}

/// One timed step of `test`.
#[derive(Debug, Serialize)]
struct Step {
    step: &'static str,
    ok: bool,
    ms: f64,
    detail: String,
}

/// Steps are printed as they finish; `--json` prints them all at the end.
struct Steps<'a> {
    out: &'a Out,
    done: Vec<Step>,
}

impl Steps<'_> {
    fn record(&mut self, step: &'static str, took: Duration, outcome: Result<String, String>) -> bool {
        let ok = outcome.is_ok();
        let detail = outcome.unwrap_or_else(|e| e);
        let mark = if ok { Piece(Paint::Good, "✓".into()) } else { Piece(Paint::Bad, "✗".into()) };
        let ms = took.as_secs_f64() * 1000.0;
        self.out.pieces([Piece::plain("  "), mark, Piece::plain(format!(" {step:<16} {ms:>8.1} ms  {detail}"))]);
        self.done.push(Step { step, ok, ms, detail });
        ok
    }
}

/// Connects with restarts off (a failure is final and shown at once), and
/// watches the start-up's phases in the server's status: a pid (the
/// process runs), a protocol version (the handshake is done), `connected`
/// (tools, resources and prompts are listed). Then pings and lists.
/// A disabled server is tested too: testing is how to check it before
/// enabling it.
pub async fn test(cli: &Cli, out: &Out, args: &TestArgs) -> Result<u8, Failure> {
    let servers = Servers::load(cli)?;
    let entry = servers.get(&args.name)?;
    let config = entry.config()?;
    out.pieces([
        Piece::plain("Testing "),
        Piece(Paint::Bold, format!("`{}`", args.name)),
        Piece::plain(format!(" ({})", summary(&config))),
    ]);
    let session = Session::launch([entry], |config| {
        config.enabled = true;
        config.restart = RestartPolicy::Never;
    })?;
    let mut steps = Steps { out, done: Vec::new() };
    let first_step = if config.url.is_some() { "connect" } else { "start process" };
    let connected = start_up(&session, &args.name, first_step, &mut steps).await;
    if connected {
        operations(&session, &args.name, &mut steps).await;
    }
    let status = session.status_of(&args.name).await.ok();
    session.close().await;
    let ok = steps.done.iter().all(|s| s.ok);
    let stderr_tail: Vec<String> = status.as_ref().map(|s| tail(s).to_vec()).unwrap_or_default();
    if !ok {
        if !stderr_tail.is_empty() {
            out.line("  last lines of the server's stderr:");
            for line in &stderr_tail {
                out.pieces([Piece::plain("    "), Piece(Paint::Dim, line.clone())]);
            }
        }
        if let Some(hint) = steps.done.iter().find(|s| !s.ok).and_then(|s| hint(&s.detail)) {
            out.pieces([Piece::plain("  "), Piece(Paint::Warn, "hint:".into()), Piece::plain(format!(" {hint}"))]);
        }
    } else {
        out.line(format!("`{}` works.", args.name));
    }
    out.json(&serde_json::json!({ "server": args.name, "ok": ok, "steps": steps.done, "stderr_tail": stderr_tail }));
    Ok(if ok { 0 } else { EXIT_CONNECTION })
}

/// The command or URL of a server, for the heading.
fn summary(config: &ServerConfig) -> String {
    let config = config.redacted();
    match &config.url {
        Some(url) => format!("{} {url}", config.transport.as_str()),
        None => format!("stdio: {}", std::iter::once(&config.command).chain(&config.args).cloned().collect::<Vec<_>>().join(" ")),
    }
}

/// The `sandbox` warning: what is not enforced, and the last limit hit.
fn sandbox_warning(sandbox: &crate::sandbox::SandboxStatus) -> String {
    let mut warning = String::new();
    if !sandbox.gaps.is_empty() {
        warning.push_str(&format!(" (warning: not enforced: {})", sandbox.gaps.join("; ")));
    }
    if let Some(violation) = &sandbox.violation {
        warning.push_str(&format!(" (warning: {violation})"));
    }
    warning
}

/// Times the phases of the start-up; true when the server connected.
async fn start_up(session: &Session, name: &str, first_step: &'static str, steps: &mut Steps<'_>) -> bool {
    const POLL: Duration = Duration::from_millis(2);
    let started = Instant::now();
    let deadline = started + session.startup_bound;
    let mut phase_start = started;
    let (mut spawned, mut negotiated) = (false, false);
    loop {
        let Ok(status) = session.status_of(name).await else { return false };
        let now = Instant::now();
        let reached = status.remote.as_ref().filter(|remote| remote.reached);
        if !spawned && (status.pid.is_some() || reached.is_some()) {
            let detail = match reached {
                Some(remote) => remote.url.clone(),
                None => match &status.sandbox {
                    Some(sandbox) => format!("pid {}, sandbox: {}{}", status.pid.unwrap_or(0), sandbox.achieved, sandbox_warning(sandbox)),
                    None => format!("pid {}", status.pid.unwrap_or(0)),
                },
            };
            spawned = steps.record(first_step, now - phase_start, Ok(detail));
            phase_start = now;
        }
        if !negotiated && status.protocol_version.is_some() {
            let mut detail = format!(
                "{} era, protocol {}, server {}",
                status.era.as_deref().unwrap_or("?"),
                status.protocol_version.as_deref().unwrap_or("?"),
                status.server_info.as_deref().unwrap_or("(no serverInfo)")
            );
            if let Some(remote) = &status.remote {
                detail.push_str(&format!(", over {}", remote.transport));
                if let Some(session) = &remote.session {
                    detail.push_str(&format!(", session {session}"));
                }
            }
            negotiated = steps.record("handshake", now - phase_start, Ok(detail));
            phase_start = now;
        }
        let step = match (spawned, negotiated) {
            (false, _) => first_step,
            (true, false) => "handshake",
            (true, true) => "list",
        };
        match &status.state {
            ServerState::Connected => {
                let detail = format!("{} tools, {} resources, {} prompts", status.tools, status.resources, status.prompts);
                return steps.record("list", now - phase_start, Ok(detail));
            }
            ServerState::Pending if now < deadline => tokio::time::sleep(POLL).await,
            ServerState::Pending => {
                let error = format!("still starting after {:.1} s", session.startup_bound.as_secs_f64());
                return steps.record(step, now - phase_start, Err(error));
            }
            _ => return steps.record(step, now - phase_start, Err(describe(&status))),
        }
    }
}

/// Ping and the lists a client asks for later, each timed.
async fn operations(session: &Session, name: &str, steps: &mut Steps<'_>) {
    let handle = &session.handle;
    let started = Instant::now();
    let ping = handle.ping(name).await.map(|rtt| format!("round trip {:.1} ms", rtt.as_secs_f64() * 1000.0));
    steps.record("ping", started.elapsed(), ping.map_err(|e| e.to_string()));
    let started = Instant::now();
    let resources = handle.list_resources(name).await.map(|r| format!("{} resources", r.len()));
    steps.record("resources/list", started.elapsed(), optional(resources));
    let started = Instant::now();
    let prompts = handle.list_prompts(name).await.map(|p| format!("{} prompts", p.len()));
    steps.record("prompts/list", started.elapsed(), optional(prompts));
}

/// A capability the server does not offer is not a failure.
fn optional(result: Result<String, crate::CallError>) -> Result<String, String> {
    result.or_else(|error| not_offered(&error).ok_or_else(|| error.to_string()))
}

/// What to do about a failed step, from its message.
fn hint(detail: &str) -> Option<&'static str> {
    let hints = [
        ("command not found", "check the command's spelling, install it, or give its full path; the PATH above is the one used"),
        ("No such file or directory", "check the command's spelling, install it, or give its full path; the PATH above is the one used"),
        ("Permission denied", "make the command executable (chmod +x) or run it through its interpreter"),
        ("did not answer initialize", "the server did not answer the handshake: check that it speaks MCP over stdio (not HTTP), that it does not wait for input, or raise startup_timeout"),
        ("exited during start-up", "the server stopped before the handshake; its stderr above usually says why (a missing variable, a bad argument)"),
    ];
    hints.into_iter().find(|(marker, _)| detail.contains(marker)).map(|(_, hint)| hint)
}
