//! `list` and `info`: the configuration as mcpvisor sees it, secrets
//! redacted, with where each server is defined. Nothing is started.

use serde_json::{json, Value};

use super::output::{aligned, table, Failure, Out, Paint, Piece};
use super::servers::{env, DefinedIn, Entry, Servers};
use super::untrusted::{project_root, runs};
use super::Cli;
use crate::config::duration::format_duration;
use crate::config::{Auth, Keyword, ServerConfig};
use crate::rate_limit::RateLimit;
use crate::restart::{RestartLimits, RestartPolicy};

#[derive(Debug, clap::Args)]
pub struct InfoArgs {
    pub name: String,
}

/// The rows are made as they are printed (twice: the widths, then the
/// lines), each server parsed for its row and dropped, so what is held is
/// the servers as loaded ([`Entry`]).
pub fn list(cli: &Cli, out: &Out) -> Result<u8, Failure> {
    let servers = Servers::load(cli)?;
    let untrusted = || servers.untrusted.iter().flat_map(|file| file.servers.iter().map(move |server| (file, server)));
    let trusted = servers.entries.iter().map(|entry| match entry.definition.config() {
        Ok(config) => entry_json(entry, &config),
        Err(error) => json!({"name": entry.name(), "problem": error.to_string()}),
    });
    out.json_array(trusted.chain(untrusted().map(|(file, server)| {
        let to_trust = format!("mcpvisor trust {}", project_root(file).display());
        json!({"name": server.name(), "state": "not_trusted", "reason": file.why, "runs": runs(server), "file": file.path, "to_trust": to_trust})
    })));
    if out.json {
        return Ok(0);
    }
    let header = ["SERVER", "STATE", "TRANSPORT", "COMMAND / URL", "DEFINED IN"].map(String::from);
    let not_trusted = untrusted().map(|(file, server)| {
        let transport = server.config().map(|config| config.transport.as_str().to_string()).unwrap_or_default();
        [server.name().into(), "not trusted".into(), transport, runs(server), file.path.display().to_string()]
    });
    for line in aligned(std::iter::once(header).chain(servers.entries.iter().map(list_row)).chain(not_trusted)) {
        out.line(line);
    }
    for file in &servers.untrusted {
        out.line("");
        out.pieces([
            Piece(Paint::Bad, format!("{}:", file.path.display())),
            Piece::plain(format!(
                " not trusted ({}), so it starts nothing; review it, then run `mcpvisor trust {}`",
                file.why.reason(),
                project_root(file).display()
            )),
        ]);
    }
    if !servers.files.is_empty() {
        let files: Vec<String> = servers.files.iter().map(|f| f.display().to_string()).collect();
        out.line("");
        out.pieces([Piece(Paint::Dim, format!("Files read (later ones win): {}", files.join(", ")))]);
    }
    if servers.entries.iter().any(|e| e.defined_in == DefinedIn::BuiltIn) {
        out.line("");
        out.pieces([Piece(
            Paint::Dim,
            "No server is configured, so the built-in `demo` server is offered. Add yours with `mcpvisor add NAME -- COMMAND [ARGS...]`"
                .into(),
        )]);
        out.pieces([Piece(Paint::Dim, "or `mcpvisor import .mcp.json`.".into())]);
    }
    Ok(0)
}

/// A server's row in `list`; one that cannot be read again says why in place of its command.
fn list_row(entry: &Entry) -> [String; 5] {
    let defined_in = defined_in(&entry.defined_in);
    match entry.definition.config() {
        Ok(config) => {
            let config = config.redacted();
            let state = if config.enabled { "enabled" } else { "disabled" };
            let target = target(&config);
            [config.name, state.into(), config.transport.as_str().into(), target, defined_in]
        }
        Err(error) => [entry.name().into(), "invalid".into(), String::new(), error.to_string(), defined_in],
    }
}

pub fn info(cli: &Cli, out: &Out, args: &InfoArgs) -> Result<u8, Failure> {
    let servers = Servers::load(cli)?;
    let entry = servers.get(&args.name)?;
    let config = entry.config()?;
    let problem = config.expanded(env).err().map(|e| e.to_string());
    let mut value = entry_json(entry, &config);
    value["problem"] = problem.clone().into();
    out.json(&value);
    let config = config.redacted();
    out.pieces([Piece(Paint::Bold, config.name.clone())]);
    let mut rows = vec![vec!["defined in".to_string(), defined_in(&entry.defined_in)]];
    if let DefinedIn::File { overrides, .. } = &entry.defined_in {
        rows.extend(overrides.iter().map(|file| vec!["overrides".to_string(), file.display().to_string()]));
    }
    rows.extend(fields(&config).into_iter().map(|(key, value)| vec![key.to_string(), value]));
    for line in table(&rows) {
        out.line(format!("  {line}"));
    }
    if let Some(problem) = problem {
        out.pieces([Piece::plain("  "), Piece(Paint::Bad, "cannot start:".into()), Piece::plain(format!(" {problem}"))]);
    }
    Ok(0)
}

/// `command args...` or the URL.
fn target(config: &ServerConfig) -> String {
    match &config.url {
        Some(url) => url.clone(),
        None => std::iter::once(&config.command).chain(&config.args).map(|a| shell_word(a)).collect::<Vec<_>>().join(" "),
    }
}

/// A word as a shell would need it written.
fn shell_word(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+%".contains(c)) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

fn defined_in(defined_in: &DefinedIn) -> String {
    match defined_in {
        DefinedIn::File { path, .. } => format!("{} ({})", path.display(), defined_in.origin_name()),
        DefinedIn::BuiltIn => "built-in (no server is configured)".into(),
    }
}

fn restart(policy: RestartPolicy) -> String {
    match policy {
        RestartPolicy::Never => "never".into(),
        RestartPolicy::OnFailure { max_restarts } => format!("on-failure (at most {max_restarts} in a row)"),
        RestartPolicy::Always => "always".into(),
    }
}

fn auth(auth: &Auth) -> String {
    match auth {
        Auth::Bearer { token } => format!("bearer {token}"),
        Auth::Basic { username, password } => format!("basic {username}:{password}"),
        Auth::ApiKey { header, value } => format!("api key {header}: {value}"),
        Auth::OAuth(oauth) => {
            let mut shown = format!("oauth ({})", oauth.grant.as_str());
            let parts = [
                ("client_id", &oauth.client_id),
                ("client_secret", &oauth.client_secret),
                ("client_metadata_url", &oauth.client_metadata_url),
                ("private_key", &oauth.private_key),
                ("assertion", &oauth.assertion),
                ("assertion_file", &oauth.assertion_file),
            ];
            for (key, value) in parts {
                if let Some(value) = value {
                    shown.push_str(&format!(", {key} {value}"));
                }
            }
            if !oauth.scopes.is_empty() {
                shown.push_str(&format!(", scopes {}", oauth.scopes.join(" ")));
            }
            if let Some(idp) = &oauth.identity_provider {
                shown.push_str(&format!(", identity provider {} (client {})", idp.token_endpoint, idp.client_id));
            }
            shown
        }
        Auth::TokenExchange(exchange) => {
            let at = exchange.issuer.as_deref().or(exchange.token_endpoint.as_deref()).unwrap_or_default();
            let mut shown = format!("token exchange at {at} (client {}), each caller its own connection", exchange.client_id);
            for (key, value) in [("audience", &exchange.audience), ("resource", &exchange.resource)] {
                if let Some(value) = value {
                    shown.push_str(&format!(", {key} {value}"));
                }
            }
            if !exchange.scopes.is_empty() {
                shown.push_str(&format!(", scopes {}", exchange.scopes.join(" ")));
            }
            if let Some(server) = &exchange.authorization_server {
                shown.push_str(&format!(", for an ID-JAG redeemed at {} (client {})", server.issuer, server.client_id));
            }
            shown
        }
    }
}

/// The fields of an (already redacted) configuration worth showing, as text.
fn fields(config: &ServerConfig) -> Vec<(&'static str, String)> {
    let mut fields = vec![
        ("enabled", config.enabled.to_string()),
        ("transport", config.transport.as_str().into()),
        ("scope", format!("{:?}", config.scope).to_lowercase()),
    ];
    match &config.url {
        Some(url) => fields.push(("url", url.clone())),
        None => fields.push(("command", target(config))),
    }
    if let Some(cwd) = &config.cwd {
        fields.push(("cwd", cwd.display().to_string()));
    }
    fields.extend(config.env.iter().map(|(k, v)| ("env", format!("{k}={v}"))));
    if config.inherit_env {
        fields.push(("inherit_env", "true".into()));
    }
    fields.extend(config.headers.iter().map(|(k, v)| ("header", format!("{k}: {v}"))));
    if let Some(a) = &config.auth {
        fields.push(("auth", auth(a)));
    }
    fields.push(("era", config.era.as_str().into()));
    if !config.tools.allow.is_empty() {
        fields.push(("tools allow", config.tools.allow.join(", ")));
    }
    if !config.tools.deny.is_empty() {
        fields.push(("tools deny", config.tools.deny.join(", ")));
    }
    let t = &config.timeouts;
    fields.push(("timeout", format!("{} s per call (at most {} s with progress)", t.call.as_secs_f64(), t.max_call.as_secs_f64())));
    fields.push(("startup_timeout", format!("{} s", t.startup.as_secs_f64())));
    fields.push(("restart", restart(config.restart)));
    fields.push(("supervision", supervision(&config.restart_limits)));
    if let Some(sandbox) = &config.sandbox {
        let asked = crate::config::sandbox::to_value(sandbox).to_string();
        fields.push(("sandbox", format!("{} (what the kernel enforces: `mcpvisor status`)", asked.trim())));
    }
    if !config.rate_limits.server.is_empty() {
        fields.push(("limits", rate_limit(&config.rate_limits.server)));
    }
    for (tool, limit) in config.rate_limits.tools.iter().filter(|(_, limit)| !limit.is_empty()) {
        fields.push(("limits", format!("{tool}: {}", rate_limit(limit))));
    }
    fields
}

/// `10/s (burst 20), 4 at once`.
fn rate_limit(limit: &RateLimit) -> String {
    let rate = limit.rate.map(|rate| format!("{rate}/s (burst {})", limit.burst.map_or("= rate".into(), |b| b.to_string())));
    let concurrent = limit.concurrent.map(|n| format!("{n} at once"));
    [rate, concurrent].into_iter().flatten().collect::<Vec<_>>().join(", ")
}

fn rate_limit_json(limit: &RateLimit) -> Value {
    json!({"rate": limit.rate, "burst": limit.burst, "concurrent": limit.concurrent})
}

/// Intensity, backoff and cool-down in one line, as the TOML spells them.
fn supervision(limits: &RestartLimits) -> String {
    let d = |span| format_duration(span);
    let cooldown = match limits.cooldown {
        Some(c) => format!("cool-down {} doubling to {}", d(c.initial), d(c.max)),
        None => "no cool-down (failed for good)".into(),
    };
    format!(
        "at most {} restarts in {}, backoff {} doubling to {}, then {cooldown}",
        limits.max_restarts_in_window,
        d(limits.window),
        d(limits.initial_backoff),
        d(limits.max_backoff)
    )
}

fn supervision_json(limits: &RestartLimits) -> Value {
    let d = |span| format_duration(span);
    json!({
        "intensity": limits.max_restarts_in_window,
        "period": d(limits.window),
        "backoff": {"initial": d(limits.initial_backoff), "max": d(limits.max_backoff)},
        "cooldown": limits.cooldown.map(|c| json!({"initial": d(c.initial), "max": d(c.max)})),
    })
}

/// A server's redacted configuration (`config`, the entry's) and origin, for `--json`.
fn entry_json(entry: &Entry, config: &ServerConfig) -> Value {
    let c = config.redacted();
    let (source, overrides) = match &entry.defined_in {
        DefinedIn::File { path, overrides, .. } => {
            (Some(path.display().to_string()), overrides.iter().map(|p| p.display().to_string()).collect())
        }
        DefinedIn::BuiltIn => (None, Vec::new()),
    };
    let (restart, max_restarts) = match c.restart {
        RestartPolicy::Never => ("never", None),
        RestartPolicy::OnFailure { max_restarts } => ("on-failure", Some(max_restarts)),
        RestartPolicy::Always => ("always", None),
    };
    json!({
        "name": c.name,
        "enabled": c.enabled,
        "transport": c.transport.as_str(),
        "command": (!c.command.is_empty()).then_some(&c.command),
        "args": c.args,
        "cwd": c.cwd,
        "env": c.env,
        "inherit_env": c.inherit_env,
        "url": c.url,
        "headers": c.headers,
        "auth": c.auth.as_ref().map(auth),
        "era": c.era.as_str(),
        "tools": {"allow": c.tools.allow, "deny": c.tools.deny},
        "timeout_secs": c.timeouts.call.as_secs_f64(),
        "startup_timeout_secs": c.timeouts.startup.as_secs_f64(),
        "restart": restart,
        "max_restarts": max_restarts,
        "supervision": supervision_json(&c.restart_limits),
        "sandbox": c.sandbox.as_ref().map(|s| crate::config::sandbox::to_value(s).to_string().trim().to_string()),
        "limits": {
            "server": rate_limit_json(&c.rate_limits.server),
            "tools": c.rate_limits.tools.iter().map(|(tool, limit)| (tool.clone(), rate_limit_json(limit))).collect::<serde_json::Map<_, _>>(),
        },
        "scope": format!("{:?}", c.scope).to_lowercase(),
        "origin": entry.defined_in.origin_name(),
        "source": source,
        "overrides": overrides,
    })
}
