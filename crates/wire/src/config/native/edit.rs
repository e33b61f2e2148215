//! Changing a file in place with `toml_edit`: only what differs is
//! touched, so comments, formatting and order stay.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, TableLike, Value};

use super::read::read_server;
use super::schema::{not_a_server_table, parse_document, servers_table_mut, Restart, DEFAULT_MAX_RESTARTS, KEYS};
use crate::config::duration::format_duration;
use crate::config::file::{read_optional, write_atomically};
use crate::config::token_exchange::{UpstreamAuthorizationServer, DEFAULT_CALLER_IDLE, DEFAULT_MAX_CALLERS};
use crate::config::{
    Auth, Grant, IdentityProvider, Keyword, Pinning, SecretsMode, SecretsPolicy, ServerConfig, ToolFilter, Transport, DEFAULT_MAX_LOGINS,
};
use crate::error::{ConfigError, ManageError};
use crate::rate_limit::{RateLimit, RateLimits};
use crate::restart::{Cooldown, RestartPolicy};

/// Adds the server, or replaces the definition of the server of that name.
/// Creates the file and its directory if needed.
pub fn upsert(path: &Path, config: &ServerConfig) -> Result<(), ConfigError> {
    config.validate().map_err(|source| ConfigError::Invalid { file: path.into(), source })?;
    if config.transport == Transport::InProcess {
        let message = "an in-process server lives in the program that registered it and cannot be written to a file".into();
        return Err(ConfigError::Invalid {
            file: path.into(),
            source: ManageError::InvalidConfig { server: config.name.clone(), message },
        });
    }
    edit(path, |document| {
        if !document.contains_key("servers") {
            let mut servers = Table::new();
            servers.set_implicit(true);
            document.insert("servers", Item::Table(servers));
        }
        let blank_file = document.to_string().trim().is_empty();
        let inline = document.get("servers").is_some_and(inline_servers);
        let servers = servers_table_mut(path, document)?;
        match servers.get_mut(&config.name) {
            Some(item) if item.is_table_like() => merge_item(item, desired(config)),
            Some(_) => return Err(not_a_server_table(path, &config.name)),
            None => {
                let mut table = Table::new();
                merge(&mut table, desired(config));
                let item = if inline {
                    Item::Value(Value::InlineTable(table.into_inline_table()))
                } else {
                    if !blank_file {
                        table.decor_mut().set_prefix("\n");
                    }
                    Item::Table(table)
                };
                servers.insert(&config.name, item);
            }
        }
        Ok(())
    })
}

/// Removes the server's table. Comment lines just above its header go with
/// it; comments separated from the header by a blank line stay.
pub fn remove(path: &Path, name: &str) -> Result<(), ConfigError> {
    edit(path, |document| {
        let unknown = || ConfigError::UnknownServer { file: path.into(), server: name.into() };
        if !document.contains_key("servers") {
            return Err(unknown());
        }
        let removed = servers_table_mut(path, document)?.remove(name).ok_or_else(unknown)?;
        if let Item::Table(table) = removed {
            keep_detached_comments(document, &table);
        }
        Ok(())
    })
}

/// Sets `enabled` of the server, changing nothing else.
pub fn set_enabled(path: &Path, name: &str, enabled: bool) -> Result<(), ConfigError> {
    edit(path, |document| {
        let unknown = || ConfigError::UnknownServer { file: path.into(), server: name.into() };
        if !document.contains_key("servers") {
            return Err(unknown());
        }
        let item = servers_table_mut(path, document)?.get_mut(name).ok_or_else(unknown)?;
        let config = ServerConfig { enabled, ..read_server(path, name, item)? };
        merge_item(item, desired(&config));
        Ok(())
    })
}

/// Reads the document (an empty one if the file is missing), changes it,
/// and writes it back if the text changed.
fn edit(path: &Path, change: impl FnOnce(&mut DocumentMut) -> Result<(), ConfigError>) -> Result<(), ConfigError> {
    let text = read_optional(path)?.unwrap_or_default();
    let mut document = parse_document(path, &text)?;
    change(&mut document)?;
    let edited = document.to_string();
    if edited != text {
        write_atomically(path, &edited)?;
    }
    Ok(())
}

/// Whether new servers should be written as inline tables, like the existing ones.
fn inline_servers(servers: &Item) -> bool {
    match servers.as_table_like() {
        Some(table) => {
            servers.is_inline_table() || table.is_dotted() || (!table.is_empty() && table.iter().all(|(_, item)| item.is_value()))
        }
        None => false,
    }
}

/// What one key of a server table should hold.
struct Desired {
    key: String,
    /// `None`: the key does not apply and must be absent.
    value: Option<Value>,
    /// An absent key means this value, so it is not added.
    is_default: bool,
}

impl Desired {
    fn new(key: &str, value: Option<Value>, is_default: bool) -> Self {
        Desired { key: key.into(), value, is_default }
    }
}

/// The server's keys, in [`KEYS`] order.
fn desired(config: &ServerConfig) -> Vec<Desired> {
    let defaults = ServerConfig::stdio("", "", Vec::<String>::new());
    let text = |value: &str| Some(Value::from(value));
    let non_empty = |value: &str| if value.is_empty() { None } else { text(value) };
    let seconds_value = |d: Duration| if d.subsec_nanos() == 0 { Value::from(d.as_secs() as i64) } else { Value::from(d.as_secs_f64()) };
    let seconds = |of: fn(&ServerConfig) -> Duration| (Some(seconds_value(of(config))), of(config) == of(&defaults));
    let count = |n: usize, default: usize| (Some(Value::from(n as i64)), n == default);
    let (restart, max_restarts) = match config.restart {
        RestartPolicy::Never => (Restart::Never, None),
        RestartPolicy::OnFailure { max_restarts } => (Restart::OnFailure, Some(max_restarts)),
        RestartPolicy::Always => (Restart::Always, None),
    };
    let (limits, default_limits) = (&config.restart_limits, &defaults.restart_limits);
    let backoff_is_default = (limits.initial_backoff, limits.max_backoff) == (default_limits.initial_backoff, default_limits.max_backoff);
    let fields: [(&str, (Option<Value>, bool)); KEYS.len()] = [
        ("transport", (text(config.transport.as_str()), config.transport == inferred_transport(config))),
        ("command", (non_empty(&config.command), false)),
        ("args", (Some(strings(&config.args)), config.args.is_empty())),
        ("env", (Some(map(&config.env)), config.env.is_empty())),
        ("cwd", (config.cwd.as_ref().and_then(|cwd| text(&cwd.to_string_lossy())), false)),
        ("inherit_env", (Some(Value::from(config.inherit_env)), !config.inherit_env)),
        ("url", (config.url.as_deref().and_then(text), false)),
        ("headers", (Some(map(&config.headers)), config.headers.is_empty())),
        ("auth", (config.auth.as_ref().map(auth), false)),
        ("enabled", (Some(Value::from(config.enabled)), config.enabled)),
        ("timeout", seconds(|c| c.timeouts.call)),
        ("startup_timeout", seconds(|c| c.timeouts.startup)),
        ("shutdown_grace", seconds(|c| c.timeouts.shutdown_grace)),
        ("max_timeout", seconds(|c| c.timeouts.max_call)),
        ("health_ping", (config.timeouts.health_ping.map(seconds_value), config.timeouts.health_ping.is_none())),
        ("restart", (text(restart.as_str()), config.restart == defaults.restart)),
        ("max_restarts", (max_restarts.map(|n| Value::from(i64::from(n))), max_restarts == Some(DEFAULT_MAX_RESTARTS))),
        ("intensity", count(limits.max_restarts_in_window, default_limits.max_restarts_in_window)),
        ("period", (Some(duration(limits.window)), limits.window == default_limits.window)),
        ("backoff", (Some(backoff(limits.initial_backoff, limits.max_backoff)), backoff_is_default)),
        ("cooldown", (Some(cooldown(limits.cooldown)), limits.cooldown == default_limits.cooldown)),
        ("era", (text(config.era.as_str()), config.era == defaults.era)),
        ("roots", (Some(strings(&config.roots)), config.roots.is_empty())),
        ("tools", (Some(tools(&config.tools)), config.tools.is_empty())),
        ("pin", (Some(pin(config.pin)), config.pin == Pinning::Withhold)),
        ("secrets", (Some(secrets(&config.secrets)), config.secrets.is_default())),
        ("withhold", (Some(Value::from(config.withhold.map_or("off", |severity| severity.as_str()))), config.withhold.is_none())),
        ("max_in_flight", count(config.limits.max_in_flight, defaults.limits.max_in_flight)),
        ("max_queued", count(config.limits.max_queued, defaults.limits.max_queued)),
        ("max_frame", count(config.limits.max_frame, defaults.limits.max_frame)),
        ("max_list_pages", count(config.limits.max_list_pages, defaults.limits.max_list_pages)),
        ("max_list_items", count(config.limits.max_list_items, defaults.limits.max_list_items)),
        ("limits", (Some(rate_limits(&config.rate_limits)), config.rate_limits.is_empty())),
        ("sandbox", (config.sandbox.as_ref().map(crate::config::sandbox::to_value), false)),
        ("per_caller", (config.per_caller.as_ref().map(|per_caller| crate::config::per_caller::to_value(per_caller, duration)), false)),
    ];
    fields.into_iter().map(|(key, (value, is_default))| Desired::new(key, value, is_default)).collect()
}

/// The transport a table without a `transport` key has.
fn inferred_transport(config: &ServerConfig) -> Transport {
    if config.url.is_some() && config.command.is_empty() {
        Transport::Http
    } else {
        Transport::Stdio
    }
}

fn pin(pinning: Pinning) -> Value {
    match pinning {
        Pinning::Withhold => Value::from(true),
        Pinning::Notify => Value::from("notify"),
        Pinning::Off => Value::from(false),
    }
}

/// `"mask"` when both directions agree, else a table of those not at their default.
fn secrets(policy: &SecretsPolicy) -> Value {
    if policy.arguments == policy.results {
        return Value::from(policy.arguments.as_str());
    }
    let directions = [("arguments", policy.arguments), ("results", policy.results)];
    let set = directions.into_iter().filter(|(_, mode)| *mode != SecretsMode::Default);
    Value::InlineTable(set.map(|(direction, mode)| (direction, Value::from(mode.as_str()))).collect::<InlineTable>())
}

fn duration(span: Duration) -> Value {
    Value::from(format_duration(span))
}

fn backoff(initial: Duration, max: Duration) -> Value {
    Value::InlineTable([("initial", duration(initial)), ("max", duration(max))].into_iter().collect::<InlineTable>())
}

fn cooldown(cooldown: Option<Cooldown>) -> Value {
    match cooldown {
        Some(Cooldown { initial, max }) => backoff(initial, max),
        None => Value::from(false),
    }
}

fn rate_limits(limits: &RateLimits) -> Value {
    let mut table = rate_limit(&limits.server);
    let tools: InlineTable = limits.tools.iter().map(|(tool, limit)| (tool.as_str(), Value::InlineTable(rate_limit(limit)))).collect();
    if !tools.is_empty() {
        table.insert("tools", Value::InlineTable(tools));
    }
    Value::InlineTable(table)
}

fn rate_limit(limit: &RateLimit) -> InlineTable {
    let mut table = InlineTable::new();
    if let Some(rate) = limit.rate {
        table.insert("rate", if rate.fract() == 0.0 { Value::from(rate as i64) } else { Value::from(rate) });
    }
    if let Some(burst) = limit.burst {
        table.insert("burst", Value::from(i64::from(burst)));
    }
    if let Some(concurrent) = limit.concurrent {
        table.insert("concurrent", Value::from(concurrent as i64));
    }
    table
}

fn strings(list: &[String]) -> Value {
    Value::Array(list.iter().collect::<Array>())
}

fn map(map: &BTreeMap<String, String>) -> Value {
    Value::InlineTable(map.iter().map(|(key, value)| (key.as_str(), value.as_str())).collect::<InlineTable>())
}

fn tools(filter: &ToolFilter) -> Value {
    let lists = [("allow", &filter.allow), ("deny", &filter.deny)];
    Value::InlineTable(
        lists.into_iter().filter(|(_, list)| !list.is_empty()).map(|(key, list)| (key, strings(list))).collect::<InlineTable>(),
    )
}

fn auth(auth: &Auth) -> Value {
    let text = |value: &str| Some(Value::from(value));
    let pairs: Vec<(&str, Option<Value>)> = match auth {
        Auth::Bearer { token } => vec![("type", text("bearer")), ("token", text(token))],
        Auth::Basic { username, password } => {
            vec![("type", text("basic")), ("username", text(username)), ("password", text(password))]
        }
        Auth::ApiKey { header, value } => vec![("type", text("api_key")), ("header", text(header)), ("value", text(value))],
        Auth::OAuth(oauth) => vec![
            ("type", text("oauth")),
            ("client_id", oauth.client_id.as_deref().and_then(text)),
            ("client_secret", oauth.client_secret.as_deref().and_then(text)),
            ("scopes", Some(strings(&oauth.scopes)).filter(|_| !oauth.scopes.is_empty())),
            ("client_metadata_url", oauth.client_metadata_url.as_deref().and_then(text)),
            ("grant", Some(Value::from(oauth.grant.as_str())).filter(|_| oauth.grant != Grant::default())),
            ("private_key", oauth.private_key.as_deref().and_then(text)),
            ("dpop", Some(Value::from(false)).filter(|_| !oauth.dpop)),
            ("assertion", oauth.assertion.as_deref().and_then(text)),
            ("assertion_file", oauth.assertion_file.as_deref().and_then(text)),
            ("identity_provider", oauth.identity_provider.as_deref().map(identity_provider)),
            ("per_caller", oauth.per_caller.map(|_| Value::from(true))),
            ("max_callers", oauth.per_caller.filter(|p| p.max_callers != DEFAULT_MAX_CALLERS).map(|p| Value::from(p.max_callers as i64))),
            ("caller_idle", oauth.per_caller.filter(|p| p.caller_idle != DEFAULT_CALLER_IDLE).map(|p| duration(p.caller_idle))),
            ("max_logins", oauth.per_caller.filter(|p| p.max_logins != DEFAULT_MAX_LOGINS).map(|p| Value::from(p.max_logins as i64))),
        ],
        Auth::TokenExchange(exchange) => vec![
            ("type", text("token_exchange")),
            ("issuer", exchange.issuer.as_deref().and_then(text)),
            ("token_endpoint", exchange.token_endpoint.as_deref().and_then(text)),
            ("client_id", text(&exchange.client_id)),
            ("client_secret", text(&exchange.client_secret)),
            ("audience", exchange.audience.as_deref().and_then(text)),
            ("resource", exchange.resource.as_deref().and_then(text)),
            ("scopes", Some(strings(&exchange.scopes)).filter(|_| !exchange.scopes.is_empty())),
            ("max_callers", Some(Value::from(exchange.max_callers as i64)).filter(|_| exchange.max_callers != DEFAULT_MAX_CALLERS)),
            ("caller_idle", Some(duration(exchange.caller_idle)).filter(|_| exchange.caller_idle != DEFAULT_CALLER_IDLE)),
            ("authorization_server", exchange.authorization_server.as_ref().map(authorization_server)),
        ],
    };
    Value::InlineTable(pairs.into_iter().filter_map(|(key, value)| Some((key, value?))).collect::<InlineTable>())
}

fn authorization_server(server: &UpstreamAuthorizationServer) -> Value {
    let pairs = [("issuer", &server.issuer), ("client_id", &server.client_id), ("client_secret", &server.client_secret)];
    Value::InlineTable(pairs.into_iter().map(|(key, value)| (key, Value::from(value.as_str()))).collect::<InlineTable>())
}

fn identity_provider(idp: &IdentityProvider) -> Value {
    let pairs = [
        ("token_endpoint", Some(&idp.token_endpoint)),
        ("client_id", Some(&idp.client_id)),
        ("client_secret", idp.client_secret.as_ref()),
        ("id_token", idp.id_token.as_ref()),
        ("id_token_file", idp.id_token_file.as_ref()),
    ];
    Value::InlineTable(pairs.into_iter().filter_map(|(key, value)| Some((key, Value::from(value?.as_str())))).collect::<InlineTable>())
}

/// Makes the table `item` hold the desired keys, touching only what differs.
/// Does nothing if `item` is not a table.
fn merge_item(item: &mut Item, desired: Vec<Desired>) {
    let Some(table) = item.as_table_like_mut() else { return };
    let added = merge(table, desired);
    if let (true, Some(inline)) = (added, item.as_inline_table_mut()) {
        // Keys appended to an inline table would get odd spacing (`{ a = 1 , b = 2 }`).
        inline.fmt();
    }
}

/// Makes `table` hold the desired keys, touching only what differs; true if keys were added.
fn merge(table: &mut dyn TableLike, desired: Vec<Desired>) -> bool {
    let wanted: BTreeSet<&str> = desired.iter().filter(|d| d.value.is_some()).map(|d| d.key.as_str()).collect();
    let stale: Vec<String> = table.iter().map(|(key, _)| key.to_owned()).filter(|key| !wanted.contains(key.as_str())).collect();
    for key in stale {
        table.remove(&key);
    }
    let mut added = false;
    for Desired { key, value, is_default } in desired {
        let Some(value) = value else { continue };
        match table.get_mut(&key) {
            Some(item) => update(item, value),
            None if !is_default => {
                table.insert(&key, Item::Value(value));
                added = true;
            }
            None => {}
        }
    }
    added
}

/// Makes `item` equal to `value`: unchanged if it already is, merged key by
/// key if both are tables, else replaced keeping the old comments.
fn update(item: &mut Item, value: Value) {
    if plain_item(item) == Some(plain_value(&value)) {
        return;
    }
    if let (true, Value::InlineTable(new)) = (item.is_table_like(), &value) {
        let desired = new.iter().map(|(key, value)| Desired::new(key, Some(value.clone()), false)).collect();
        return merge_item(item, desired);
    }
    match item.as_value_mut() {
        Some(old) => {
            let decor = old.decor().clone();
            *old = value;
            *old.decor_mut() = decor;
        }
        None => *item = Item::Value(value),
    }
}

/// The data of a TOML item without its formatting (numbers as floats), to
/// tell a real change from a different spelling.
fn plain_item(item: &Item) -> Option<serde_json::Value> {
    match item {
        Item::None => None,
        Item::Value(value) => Some(plain_value(value)),
        Item::Table(table) => Some(plain_table(table)),
        Item::ArrayOfTables(tables) => Some(serde_json::Value::Array(tables.iter().map(|table| plain_table(table)).collect())),
    }
}

fn plain_table(table: &dyn TableLike) -> serde_json::Value {
    serde_json::Value::Object(table.iter().filter_map(|(key, item)| Some((key.to_owned(), plain_item(item)?))).collect())
}

fn plain_value(value: &Value) -> serde_json::Value {
    use serde_json::Value as Json;
    let number = |n: f64| serde_json::Number::from_f64(n).map_or(Json::Null, Json::Number);
    match value {
        Value::String(s) => Json::String(s.value().clone()),
        Value::Integer(i) => number(*i.value() as f64),
        Value::Float(f) => number(*f.value()),
        Value::Boolean(b) => Json::Bool(*b.value()),
        Value::Datetime(d) => Json::String(d.value().to_string()),
        Value::Array(array) => Json::Array(array.iter().map(plain_value).collect()),
        Value::InlineTable(table) => plain_table(table),
    }
}

/// After `removed` left the document: its leading comment lines up to the
/// last blank line were not about it, so they move to the next table (or
/// the end of the document).
fn keep_detached_comments(document: &mut DocumentMut, removed: &Table) {
    let prefix = removed.decor().prefix().and_then(|raw| raw.as_str()).unwrap_or("");
    let mut detached_end = 0;
    let mut offset = 0;
    for line in prefix.split_inclusive('\n') {
        offset += line.len();
        if line.trim().is_empty() {
            detached_end = offset;
        }
    }
    let detached = prefix[..detached_end].trim_end();
    if detached.is_empty() {
        return;
    }
    let detached = format!("{detached}\n");
    let mut positions = Vec::new();
    table_positions(document.as_table(), &mut positions);
    let after = removed.position().unwrap_or(isize::MAX);
    match positions.into_iter().filter(|p| *p > after).min().and_then(|next| table_at(document.as_table_mut(), next)) {
        Some(next) => {
            let own = next.decor().prefix().and_then(|raw| raw.as_str()).unwrap_or("").to_owned();
            next.decor_mut().set_prefix(format!("{detached}{own}"));
        }
        None => {
            let trailing = document.trailing().as_str().unwrap_or("").to_owned();
            document.set_trailing(format!("{detached}{trailing}"));
        }
    }
}

/// Document positions of the tables that have a header, at any depth.
fn table_positions(table: &Table, positions: &mut Vec<isize>) {
    for (_, item) in table.iter() {
        if let Some(child) = item.as_table() {
            positions.extend(child.position().filter(|_| !child.is_implicit()));
            table_positions(child, positions);
        }
    }
}

/// The table whose header is at document position `position`.
fn table_at(table: &mut Table, position: isize) -> Option<&mut Table> {
    for (_, item) in table.iter_mut() {
        let Some(child) = item.as_table_mut() else { continue };
        if child.position() == Some(position) && !child.is_implicit() {
            return Some(child);
        }
        if let Some(found) = table_at(child, position) {
            return Some(found);
        }
    }
    None
}

#[cfg(test)]
#[path = "edit_tests.rs"]
mod tests;
