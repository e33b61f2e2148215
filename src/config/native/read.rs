//! Reading one server's table: strict, every error naming the file, the
//! server and the key, and saying what to write.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use toml_edit::{Item, TableLike, Value};

use super::schema::{
    not_a_server_table, Restart, BACKOFF_KEYS, DEFAULT_MAX_RESTARTS, IDENTITY_PROVIDER_KEYS, KEYS, LIMITS_KEYS, OAUTH_KEYS, TOOLS_KEYS,
};
use crate::config::duration::parse_duration;
use crate::config::{Auth, Grant, IdentityProvider, Keyword, OAuthConfig, ServerConfig, ToolFilter, Transport};
use crate::error::ConfigError;
use crate::rate_limit::{RateLimit, RateLimits};
use crate::restart::{Cooldown, RestartPolicy};

/// Reads the values of one server's table, naming the file, the server and
/// the key in every error.
struct Reader<'a> {
    file: &'a Path,
    server: &'a str,
}

impl Reader<'_> {
    fn invalid(&self, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::InvalidField { file: self.file.into(), server: self.server.into(), field: field.into(), message: message.into() }
    }

    fn unknown_key(&self, key: String, known: &[&'static str]) -> ConfigError {
        ConfigError::UnknownKey { file: self.file.into(), server: Some(self.server.into()), key, known: known.to_vec() }
    }

    fn string(&self, field: &str, item: &Item) -> Result<String, ConfigError> {
        item.as_str().map(str::to_owned).ok_or_else(|| self.invalid(field, format!("must be a string, not {}", item.type_name())))
    }

    fn bool(&self, field: &str, item: &Item) -> Result<bool, ConfigError> {
        item.as_bool().ok_or_else(|| self.invalid(field, format!("must be true or false, not {}", item.type_name())))
    }

    fn strings(&self, field: &str, item: &Item) -> Result<Vec<String>, ConfigError> {
        let array = item
            .as_array()
            .ok_or_else(|| self.invalid(field, format!("must be an array of strings, like [\"a\", \"b\"], not {}", item.type_name())))?;
        let string = |(i, value): (usize, &Value)| {
            value
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| self.invalid(&format!("{field}[{i}]"), format!("must be a string, not {}", value.type_name())))
        };
        array.iter().enumerate().map(string).collect()
    }

    fn table<'i>(&self, field: &str, item: &'i Item, example: &str) -> Result<&'i dyn TableLike, ConfigError> {
        item.as_table_like().ok_or_else(|| self.invalid(field, format!("must be a table, like {example}, not {}", item.type_name())))
    }

    fn map(&self, field: &str, item: &Item) -> Result<BTreeMap<String, String>, ConfigError> {
        let table = self.table(field, item, "{ NAME = \"value\" }")?;
        table.iter().map(|(key, value)| Ok((key.to_owned(), self.string(&format!("{field}.{key}"), value)?))).collect()
    }

    fn keyword<K: Keyword>(&self, field: &str, item: &Item) -> Result<K, ConfigError> {
        let word = self.string(field, item)?;
        K::parse(&word).ok_or_else(|| self.invalid(field, format!("is {word:?}; write one of {}", K::choices())))
    }

    fn transport(&self, item: &Item) -> Result<Transport, ConfigError> {
        if item.as_str() == Some(Transport::InProcess.as_str()) {
            let why = "is \"in-process\": such a server is registered in code by the program that embeds mcpvisor, never read from a file; write \"stdio\", \"http\" or \"sse\"";
            return Err(self.invalid("transport", why));
        }
        self.keyword("transport", item)
    }

    fn seconds(&self, field: &str, item: &Item) -> Result<Duration, ConfigError> {
        let seconds = item.as_float().or_else(|| item.as_integer().map(|i| i as f64));
        seconds
            .filter(|s| *s > 0.0)
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .ok_or_else(|| self.invalid(field, "must be a number of seconds greater than zero, like 60 or 2.5"))
    }

    /// A span of time: a string with a unit (`"100ms"`, `"60s"`, `"10m"`,
    /// `"1h"`) or a number of seconds; greater than zero.
    fn duration(&self, field: &str, item: &Item) -> Result<Duration, ConfigError> {
        let wrong =
            || self.invalid(field, "must be a span of time greater than zero, like \"100ms\", \"60s\", \"10m\" or a number of seconds");
        match item.as_str() {
            Some(text) => parse_duration(text).filter(|d| !d.is_zero()).ok_or_else(wrong),
            None => self.seconds(field, item).map_err(|_| wrong()),
        }
    }

    /// `{ initial = "100ms", max = "30s" }`: either key may be left out
    /// (then `default`'s is kept); `max` must not be below `initial`.
    fn backoff(&self, field: &str, item: &Item, default: (Duration, Duration)) -> Result<(Duration, Duration), ConfigError> {
        let table = self.table(field, item, "{ initial = \"100ms\", max = \"30s\" }")?;
        let (mut initial, mut max) = default;
        for (key, value) in table.iter() {
            match key {
                "initial" => initial = self.duration(&format!("{field}.{key}"), value)?,
                "max" => max = self.duration(&format!("{field}.{key}"), value)?,
                _ => return Err(self.unknown_key(format!("{field}.{key}"), &BACKOFF_KEYS)),
            }
        }
        if max < initial {
            return Err(self.invalid(
                &format!("{field}.max"),
                format!("({max:?}) is shorter than {field}.initial ({initial:?}); make it at least as long"),
            ));
        }
        Ok((initial, max))
    }

    /// `cooldown = { initial = "30s", max = "10m" }`, or `false` to give a
    /// server up for good after its restart intensity.
    fn cooldown(&self, item: &Item) -> Result<Option<Cooldown>, ConfigError> {
        if let Some(on) = item.as_bool() {
            return Ok(on.then(Cooldown::default));
        }
        let default = Cooldown::default();
        let (initial, max) = self.backoff("cooldown", item, (default.initial, default.max)).map_err(|error| match error {
            ConfigError::InvalidField { field, message, .. } if field == "cooldown" => {
                self.invalid("cooldown", format!("{message}, or false to give the server up for good"))
            }
            error => error,
        })?;
        Ok(Some(Cooldown { initial, max }))
    }

    /// `limits = { rate = 10, burst = 20, concurrent = 4, tools = { NAME = { ... } } }`.
    fn rate_limits(&self, item: &Item) -> Result<RateLimits, ConfigError> {
        let example = "{ rate = 10, burst = 20, concurrent = 4 }";
        let table = self.table("limits", item, example)?;
        let mut limits = RateLimits { server: self.rate_limit("limits", table, &LIMITS_KEYS)?, tools: BTreeMap::new() };
        if let Some(tools) = table.get("tools") {
            let tools = self.table("limits.tools", tools, "{ TOOL = { rate = 1, concurrent = 1 } }")?;
            for (tool, item) in tools.iter() {
                let field = format!("limits.tools.{tool}");
                let table = self.table(&field, item, example)?;
                limits.tools.insert(tool.to_owned(), self.rate_limit(&field, table, &LIMITS_KEYS[..3])?);
            }
        }
        Ok(limits)
    }

    fn rate_limit(&self, field: &str, table: &dyn TableLike, known: &[&'static str]) -> Result<RateLimit, ConfigError> {
        let mut limit = RateLimit::default();
        for (key, item) in table.iter() {
            let path = format!("{field}.{key}");
            match key {
                "rate" => {
                    let rate = item.as_float().or_else(|| item.as_integer().map(|i| i as f64)).filter(|r| r.is_finite() && *r > 0.0);
                    limit.rate =
                        Some(rate.ok_or_else(|| {
                            self.invalid(&path, "must be a number of calls per second greater than zero, like 10 or 0.5")
                        })?);
                }
                "burst" => limit.burst = Some(self.count(&path, item, 1)?),
                "concurrent" => limit.concurrent = Some(self.count(&path, item, 1)?),
                "tools" if known.contains(&"tools") => {}
                _ => return Err(self.unknown_key(path, known)),
            }
        }
        if limit.burst.is_some() && limit.rate.is_none() {
            return Err(self
                .invalid(&format!("{field}.burst"), format!("needs {field}.rate: a burst is the calls let through at once above a rate")));
        }
        Ok(limit)
    }

    fn count<T: TryFrom<i64>>(&self, field: &str, item: &Item, min: i64) -> Result<T, ConfigError> {
        item.as_integer()
            .filter(|n| *n >= min)
            .and_then(|n| T::try_from(n).ok())
            .ok_or_else(|| self.invalid(field, format!("must be a whole number of at least {min}")))
    }

    fn tools(&self, item: &Item) -> Result<ToolFilter, ConfigError> {
        let table = self.table("tools", item, "{ allow = [\"read_*\"], deny = [\"*delete*\"] }")?;
        let mut filter = ToolFilter::default();
        for (key, value) in table.iter() {
            let list = self.strings(&format!("tools.{key}"), value)?;
            match key {
                "allow" => filter.allow = list,
                "deny" => filter.deny = list,
                _ => return Err(self.unknown_key(format!("tools.{key}"), &TOOLS_KEYS)),
            }
        }
        Ok(filter)
    }

    fn auth(&self, item: &Item) -> Result<Auth, ConfigError> {
        let table = self.table("auth", item, "{ type = \"bearer\", token = \"${TOKEN}\" }")?;
        let kind = table
            .get("type")
            .ok_or_else(|| self.invalid("auth.type", "is missing; write type = \"bearer\", \"basic\", \"api_key\" or \"oauth\""))?;
        let kind = self.string("auth.type", kind)?;
        let known: &[&'static str] = match kind.as_str() {
            "bearer" => &["type", "token"],
            "basic" => &["type", "username", "password"],
            "api_key" => &["type", "header", "value"],
            "oauth" => &OAUTH_KEYS,
            _ => return Err(self.invalid("auth.type", format!("is {kind:?}; write \"bearer\", \"basic\", \"api_key\" or \"oauth\""))),
        };
        if let Some((key, _)) = table.iter().find(|(key, _)| !known.contains(key)) {
            return Err(self.unknown_key(format!("auth.{key}"), known));
        }
        if kind == "oauth" {
            return self.oauth(table).map(Auth::OAuth);
        }
        let field = |key: &str| {
            let path = format!("auth.{key}");
            table
                .get(key)
                .ok_or_else(|| self.invalid(&path, format!("is missing; {kind} auth needs {}", known[1..].join(" and "))))
                .and_then(|item| self.string(&path, item))
        };
        Ok(match kind.as_str() {
            "bearer" => Auth::Bearer { token: field("token")? },
            "basic" => Auth::Basic { username: field("username")?, password: field("password")? },
            _ => Auth::ApiKey { header: field("header")?, value: field("value")? },
        })
    }

    /// The keys of `auth = { type = "oauth", ... }`, every one optional, and
    /// what a client-credentials grant cannot do without.
    fn oauth(&self, table: &dyn TableLike) -> Result<OAuthConfig, ConfigError> {
        let text = |key: &str| table.get(key).map(|item| self.string(&format!("auth.{key}"), item)).transpose();
        let config = OAuthConfig {
            client_id: text("client_id")?,
            client_secret: text("client_secret")?,
            scopes: table.get("scopes").map(|item| self.strings("auth.scopes", item)).transpose()?.unwrap_or_default(),
            client_metadata_url: text("client_metadata_url")?,
            grant: table.get("grant").map(|item| self.keyword("auth.grant", item)).transpose()?.unwrap_or_default(),
            private_key: text("private_key")?,
            dpop: table.get("dpop").map(|item| self.bool("auth.dpop", item)).transpose()?.unwrap_or(true),
            assertion: text("assertion")?,
            assertion_file: text("assertion_file")?,
            identity_provider: table.get("identity_provider").map(|item| self.identity_provider(item).map(Box::new)).transpose()?,
            ..OAuthConfig::default()
        };
        if config.client_secret.is_some() && config.private_key.is_some() {
            return Err(self.invalid("auth.private_key", "and auth.client_secret are both set; a client authenticates with one of them"));
        }
        if config.client_id.is_none() && (config.client_secret.is_some() || config.private_key.is_some()) {
            return Err(self.invalid("auth.client_id", "is missing; a client secret or private key belongs to a pre-registered client_id"));
        }
        if config.grant == Grant::ClientCredentials && config.client_secret.is_none() && config.private_key.is_none() {
            let message = "needs auth.client_id with auth.client_secret or auth.private_key: a machine client must authenticate itself";
            return Err(self.invalid("auth.grant", message));
        }
        if let Some((field, message)) = config.assertion_problem() {
            return Err(self.invalid(field, message));
        }
        Ok(config)
    }

    /// `identity_provider = { token_endpoint, client_id, ... }` of a `jwt_bearer` grant.
    fn identity_provider(&self, item: &Item) -> Result<IdentityProvider, ConfigError> {
        let example = "{ token_endpoint = \"https://idp.example.com/token\", client_id = \"...\", id_token_file = \"...\" }";
        let table = self.table("auth.identity_provider", item, example)?;
        if let Some((key, _)) = table.iter().find(|(key, _)| !IDENTITY_PROVIDER_KEYS.contains(key)) {
            return Err(self.unknown_key(format!("auth.identity_provider.{key}"), &IDENTITY_PROVIDER_KEYS));
        }
        let text = |key: &str| table.get(key).map(|item| self.string(&format!("auth.identity_provider.{key}"), item)).transpose();
        let required = |key: &str| {
            text(key)?.ok_or_else(|| self.invalid(&format!("auth.identity_provider.{key}"), "is missing; the identity provider needs it"))
        };
        Ok(IdentityProvider {
            token_endpoint: required("token_endpoint")?,
            client_id: required("client_id")?,
            client_secret: text("client_secret")?,
            id_token: text("id_token")?,
            id_token_file: text("id_token_file")?,
        })
    }

    fn restart(&self, restart: Option<&Item>, max_restarts: Option<&Item>) -> Result<RestartPolicy, ConfigError> {
        let kind = restart.map(|item| self.keyword::<Restart>("restart", item)).transpose()?;
        let max_restarts = max_restarts.map(|item| self.count::<u32>("max_restarts", item, 0)).transpose()?;
        Ok(match (kind, max_restarts) {
            (Some(Restart::OnFailure), max) => RestartPolicy::OnFailure { max_restarts: max.unwrap_or(DEFAULT_MAX_RESTARTS) },
            (_, Some(_)) => {
                return Err(self.invalid("max_restarts", "applies only with restart = \"on-failure\"; set that or remove max_restarts"))
            }
            (Some(Restart::Never), None) => RestartPolicy::Never,
            (Some(Restart::Always), None) => RestartPolicy::Always,
            (None, None) => RestartPolicy::default(),
        })
    }
}

pub(super) fn read_server(path: &Path, name: &str, item: &Item) -> Result<ServerConfig, ConfigError> {
    let r = Reader { file: path, server: name };
    let table = item.as_table_like().ok_or_else(|| not_a_server_table(path, name))?;
    let mut config = ServerConfig::stdio(name, "", Vec::<String>::new());
    let mut transport = None;
    for (key, item) in table.iter() {
        match key {
            "transport" => transport = Some(r.transport(item)?),
            "command" => config.command = r.string(key, item)?,
            "args" => config.args = r.strings(key, item)?,
            "env" => config.env = r.map(key, item)?,
            "cwd" => config.cwd = Some(r.string(key, item)?.into()),
            "inherit_env" => config.inherit_env = r.bool(key, item)?,
            "url" => config.url = Some(r.string(key, item)?),
            "headers" => config.headers = r.map(key, item)?,
            "auth" => config.auth = Some(r.auth(item)?),
            "enabled" => config.enabled = r.bool(key, item)?,
            "timeout" => config.timeouts.call = r.seconds(key, item)?,
            "startup_timeout" => config.timeouts.startup = r.seconds(key, item)?,
            "shutdown_grace" => config.timeouts.shutdown_grace = r.seconds(key, item)?,
            "max_timeout" => config.timeouts.max_call = r.seconds(key, item)?,
            "health_ping" => config.timeouts.health_ping = Some(r.seconds(key, item)?),
            "restart" | "max_restarts" => {}
            "intensity" => config.restart_limits.max_restarts_in_window = r.count(key, item, 1)?,
            "period" => config.restart_limits.window = r.duration(key, item)?,
            "backoff" => {
                let limits = &mut config.restart_limits;
                (limits.initial_backoff, limits.max_backoff) = r.backoff(key, item, (limits.initial_backoff, limits.max_backoff))?;
            }
            "cooldown" => config.restart_limits.cooldown = r.cooldown(item)?,
            "limits" => config.rate_limits = r.rate_limits(item)?,
            "era" => config.era = r.keyword(key, item)?,
            "roots" => config.roots = r.strings(key, item)?,
            "tools" => config.tools = r.tools(item)?,
            "max_in_flight" => config.limits.max_in_flight = r.count(key, item, 1)?,
            "max_queued" => config.limits.max_queued = r.count(key, item, 0)?,
            "max_frame" => config.limits.max_frame = r.count(key, item, 1024)?,
            "max_list_pages" => config.limits.max_list_pages = r.count(key, item, 1)?,
            "max_list_items" => config.limits.max_list_items = r.count(key, item, 1)?,
            "sandbox" => config.sandbox = Some(crate::config::sandbox::read(path, name, key, item)?),
            _ => return Err(r.unknown_key(key.into(), &KEYS)),
        }
    }
    config.restart = r.restart(table.get("restart"), table.get("max_restarts"))?;
    config.transport = match transport {
        Some(transport) => transport,
        None if config.url.is_some() && !config.command.is_empty() => {
            return Err(
                r.invalid("transport", "is needed when both `command` and `url` are set; write transport = \"stdio\", \"http\" or \"sse\"")
            )
        }
        None if config.url.is_some() => Transport::Http,
        None => Transport::Stdio,
    };
    config.validate().map_err(|source| ConfigError::Invalid { file: path.into(), source })?;
    Ok(config)
}
