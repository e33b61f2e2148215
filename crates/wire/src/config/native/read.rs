//! One server's table: the file's shape ([`ServerFile`], read by serde and
//! described by the JSON Schema), then the checks between its keys, every
//! error naming the file, the server and the key, and saying what to write.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use toml_edit::Item;

use super::schema::{not_a_server_table, Restart, DEFAULT_MAX_RESTARTS};
use crate::config::de::{from_node, DeError, Node};
use crate::config::per_caller::PerCallerTable;
use crate::config::sandbox::SandboxFile;
use crate::config::scan::Withhold;
use crate::config::token_exchange::{UpstreamAuthorizationServer, DEFAULT_CALLER_IDLE, DEFAULT_MAX_CALLERS};
use crate::config::values::{Count, OnOrTable, Rate, RateLimitFile, Seconds, Span, TextList, TextMap, Word, TABLE_EXAMPLES};
use crate::config::{
    Auth, Era, Grant, IdentityProvider, Keyword, OAuthConfig, PerCallerLogin, Pinning, SecretsMode, SecretsPolicy, ServerConfig,
    TokenExchangeConfig, ToolFilter, Transport,
};
use crate::error::ConfigError;
use crate::rate_limit::{RateLimit, RateLimits};
use crate::restart::{Cooldown, RestartPolicy};

/// `[servers.NAME]`: one MCP server; every key may be left out. The
/// fields' order is the order of `KEYS`, in which new keys are written.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServerFile {
    /// How the server is reached (default: `stdio`, or `http` when only `url` is set).
    transport: Option<Word<Transport>>,
    /// The program of a stdio server; `${VAR}` references are expanded when it starts.
    command: Option<String>,
    args: Option<TextList>,
    /// Added to the child's environment, after the safe inherited set.
    env: Option<TextMap>,
    cwd: Option<String>,
    /// Pass this process's whole environment instead of the safe set.
    inherit_env: Option<bool>,
    /// The endpoint of an http or sse server.
    url: Option<String>,
    headers: Option<TextMap>,
    auth: Option<AuthFile>,
    enabled: Option<bool>,
    /// The time-out of a tool call, in seconds (default 60).
    timeout: Option<Seconds>,
    startup_timeout: Option<Seconds>,
    shutdown_grace: Option<Seconds>,
    /// How far progress notifications may push a call's time-out out.
    max_timeout: Option<Seconds>,
    /// Ping the server this often; no answer within `timeout` restarts it.
    health_ping: Option<Seconds>,
    restart: Option<Word<Restart>>,
    /// Restarts allowed with `restart = "on-failure"` (default 5).
    max_restarts: Option<Count<u32, 0>>,
    /// Restarts allowed within `period` before the server is failed (default 5).
    intensity: Option<Count<usize, 1>>,
    period: Option<Span>,
    backoff: Option<BackoffFile>,
    /// The wait before a failed server is tried again, or `false` to give it up.
    cooldown: Option<OnOrTable<BackoffFile>>,
    era: Option<Word<Era>>,
    roots: Option<TextList>,
    tools: Option<ToolsFile>,
    /// Pin the tools' definitions on first use and withhold a changed one until accepted (default true; "notify": accept changes with a warning; false is unsafe).
    pin: Option<PinFile>,
    /// Secrets in the tool calls' arguments and results: "mask", "block", "allow" or "default", for both or per direction.
    secrets: Option<SecretsFile>,
    /// Withhold its tools whose scan findings reach this severity: "low", "medium", "high", or "off" (default: the file's [scan] withhold, else "off").
    withhold: Option<Word<Withhold>>,
    max_in_flight: Option<Count<usize, 1>>,
    max_queued: Option<Count<usize, 0>>,
    max_frame: Option<Count<usize, 1024>>,
    max_list_pages: Option<Count<usize, 1>>,
    max_list_items: Option<Count<usize, 1>>,
    limits: Option<LimitsFile>,
    sandbox: Option<SandboxFile>,
    /// One process per caller of the gateway: true, or { max_callers, caller_idle, secrets }.
    per_caller: Option<OnOrTable<PerCallerTable>>,
}

/// `{ initial = "100ms", max = "30s" }`: either may be left out.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BackoffFile {
    initial: Option<Span>,
    max: Option<Span>,
}

/// `pin`: true, false, or "notify".
enum PinFile {
    On(bool),
    Notify,
}

impl JsonSchema for PinFile {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PinFile".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "anyOf": [{ "type": "boolean" }, { "type": "string", "enum": ["notify"] }] })
    }
}

impl<'de> Deserialize<'de> for PinFile {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = PinFile;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("true, false or \"notify\", not {found}")
            }
            fn visit_bool<E: serde::de::Error>(self, on: bool) -> Result<PinFile, E> {
                Ok(PinFile::On(on))
            }
            fn visit_str<E: serde::de::Error>(self, word: &str) -> Result<PinFile, E> {
                match word {
                    "notify" => Ok(PinFile::Notify),
                    other => Err(E::custom(format!("is {other:?}; write true, false or \"notify\""))),
                }
            }
        }
        deserializer.deserialize_any(Either)
    }
}

/// `secrets`: one mode for both directions, or a table of them.
#[derive(JsonSchema)]
#[schemars(untagged)]
enum SecretsFile {
    Both(Word<SecretsMode>),
    Each(SecretsTable),
}

/// `{ arguments = "block", results = "mask" }`: either may be left out (its default stays).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SecretsTable {
    arguments: Option<Word<SecretsMode>>,
    results: Option<Word<SecretsMode>>,
}

impl<'de> Deserialize<'de> for SecretsFile {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = SecretsFile;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(
                    f,
                    "one of {}, not {{found}}, or a table like {{ arguments = \"block\", results = \"mask\" }}",
                    SecretsMode::choices()
                )
            }
            fn visit_str<E: serde::de::Error>(self, word: &str) -> Result<SecretsFile, E> {
                Word::deserialize(serde::de::value::StrDeserializer::new(word)).map(SecretsFile::Both)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<SecretsFile, A::Error> {
                SecretsTable::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(SecretsFile::Each)
            }
        }
        deserializer.deserialize_any(Either)
    }
}

impl SecretsFile {
    fn into_policy(self) -> SecretsPolicy {
        match self {
            SecretsFile::Both(mode) => SecretsPolicy::both(mode.0),
            SecretsFile::Each(table) => SecretsPolicy {
                arguments: table.arguments.map_or(SecretsMode::Default, |w| w.0),
                results: table.results.map_or(SecretsMode::Default, |w| w.0),
            },
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ToolsFile {
    /// Glob patterns of the tools exposed (default: all).
    allow: Option<TextList>,
    /// Glob patterns of the tools hidden; a deny wins over an allow.
    deny: Option<TextList>,
}

/// Calls per second and at once, for the server and for each of its tools.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    rate: Option<Rate>,
    burst: Option<Count<u32, 1>>,
    concurrent: Option<Count<usize, 1>>,
    /// By the server's own tool name.
    tools: Option<BTreeMap<String, RateLimitFile>>,
}

/// `auth = { type = "...", ... }`: the credentials sent to a remote server.
#[derive(Deserialize, JsonSchema)]
#[schemars(tag = "type", deny_unknown_fields)]
#[allow(clippy::large_enum_variant)] // one per server table, read once and converted at once
enum AuthFile {
    #[serde(rename = "bearer")]
    Bearer { token: String },
    #[serde(rename = "basic")]
    Basic { username: String, password: String },
    #[serde(rename = "api_key")]
    ApiKey { header: String, value: String },
    /// OAuth 2.1; every key may be left out.
    #[serde(rename = "oauth")]
    OAuth {
        client_id: Option<String>,
        client_secret: Option<String>,
        scopes: Option<TextList>,
        client_metadata_url: Option<String>,
        grant: Option<Word<Grant>>,
        private_key: Option<String>,
        dpop: Option<bool>,
        assertion: Option<String>,
        assertion_file: Option<String>,
        identity_provider: Option<IdentityProviderFile>,
        /// Behind `serve --http`, each caller logs in to the server itself (needs client_id,
        /// `[serve] public_url` and `[serve] login_key`).
        per_caller: Option<bool>,
        /// With per_caller: per-caller connections at once (default 64).
        max_callers: Option<Count<usize, 1>>,
        /// With per_caller: a per-caller connection unused this long is ended (default "5m").
        caller_idle: Option<Span>,
        /// With per_caller: stored logins at most (default 1000).
        max_logins: Option<Count<usize, 1>>,
    },
    /// Behind `serve --http`: each caller's token exchanged (RFC 8693) for one meant for this server.
    #[serde(rename = "token_exchange")]
    TokenExchange {
        /// The authorization server that exchanges callers' tokens (its metadata names the token endpoint).
        issuer: Option<String>,
        /// Its token endpoint, instead of `issuer`.
        token_endpoint: Option<String>,
        /// The gateway as a client of the token endpoint.
        client_id: String,
        client_secret: String,
        /// `audience` of the exchanged tokens.
        audience: Option<String>,
        /// `resource` of the exchanged tokens (default: the server's url, when no audience is set).
        resource: Option<String>,
        scopes: Option<TextList>,
        /// Per-caller connections at once (default 64).
        max_callers: Option<Count<usize, 1>>,
        /// A per-caller connection unused this long is ended (default "5m").
        caller_idle: Option<Span>,
        /// Enterprise-managed authorization: the server's own authorization server, which redeems
        /// ID-JAGs the issuer issues (RFC 7523), and the gateway's client there.
        authorization_server: Option<AuthorizationServerFile>,
    },
}

/// The `authorization_server` of a `token_exchange` auth.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AuthorizationServerFile {
    /// Its issuer identifier (the ID-JAG's audience; its RFC 8414 metadata names the token endpoint).
    issuer: Option<String>,
    /// The gateway as its client.
    client_id: Option<String>,
    client_secret: Option<String>,
}

/// The identity provider of a `jwt_bearer` grant.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct IdentityProviderFile {
    token_endpoint: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    id_token: Option<String>,
    id_token_file: Option<String>,
}

pub(super) fn read_server(path: &Path, name: &str, item: &Item) -> Result<ServerConfig, ConfigError> {
    item.as_table_like().ok_or_else(|| not_a_server_table(path, name))?;
    let file: ServerFile = from_node(Node::Item(item), "", TABLE_EXAMPLES).map_err(|error| error.into_server_error(path, name))?;
    let config = file.into_config(name).map_err(|error| error.into_server_error(path, name))?;
    config.validate().map_err(|source| ConfigError::Invalid { file: path.into(), source })?;
    Ok(config)
}

impl ServerFile {
    fn into_config(self, name: &str) -> Result<ServerConfig, DeError> {
        let mut config = ServerConfig::stdio(name, self.command.unwrap_or_default(), self.args.unwrap_or_default().0);
        config.env = self.env.unwrap_or_default().0;
        config.cwd = self.cwd.map(Into::into);
        config.inherit_env = self.inherit_env.unwrap_or(false);
        config.url = self.url;
        config.headers = self.headers.unwrap_or_default().0;
        config.auth = self.auth.map(AuthFile::into_auth).transpose()?;
        config.enabled = self.enabled.unwrap_or(true);
        let timeouts = &mut config.timeouts;
        let set = |slot: &mut Duration, value: Option<Seconds>| *slot = value.map_or(*slot, |s| s.0);
        set(&mut timeouts.call, self.timeout);
        set(&mut timeouts.startup, self.startup_timeout);
        set(&mut timeouts.shutdown_grace, self.shutdown_grace);
        set(&mut timeouts.max_call, self.max_timeout);
        timeouts.health_ping = self.health_ping.map(|s| s.0);
        config.restart = restart(self.restart.map(|w| w.0), self.max_restarts.map(|c| c.0))?;
        let restart_limits = &mut config.restart_limits;
        restart_limits.max_restarts_in_window = self.intensity.map_or(restart_limits.max_restarts_in_window, |c| c.0);
        restart_limits.window = self.period.map_or(restart_limits.window, |s| s.0);
        if let Some(backoff) = self.backoff {
            (restart_limits.initial_backoff, restart_limits.max_backoff) =
                backoff.spans("backoff", (restart_limits.initial_backoff, restart_limits.max_backoff))?;
        }
        restart_limits.cooldown = match self.cooldown {
            None => restart_limits.cooldown,
            Some(OnOrTable::On(on)) => on.then(Cooldown::default),
            Some(OnOrTable::Table(table)) => {
                let default = Cooldown::default();
                let (initial, max) = table.spans("cooldown", (default.initial, default.max))?;
                Some(Cooldown { initial, max })
            }
        };
        config.rate_limits = self.limits.map(LimitsFile::into_limits).transpose()?.unwrap_or_default();
        config.era = self.era.map_or(Era::Auto, |w| w.0);
        config.roots = self.roots.unwrap_or_default().0;
        config.pin = match self.pin {
            None | Some(PinFile::On(true)) => Pinning::Withhold,
            Some(PinFile::On(false)) => Pinning::Off,
            Some(PinFile::Notify) => Pinning::Notify,
        };
        config.secrets = self.secrets.map(SecretsFile::into_policy).unwrap_or_default();
        config.withhold = self.withhold.and_then(|word| word.0 .0);
        let tools = self.tools.map_or((None, None), |t| (t.allow, t.deny));
        config.tools = ToolFilter { allow: tools.0.unwrap_or_default().0, deny: tools.1.unwrap_or_default().0 };
        let limits = &mut config.limits;
        for (slot, value) in [
            (&mut limits.max_in_flight, self.max_in_flight.map(|c| c.0)),
            (&mut limits.max_queued, self.max_queued.map(|c| c.0)),
            (&mut limits.max_frame, self.max_frame.map(|c| c.0)),
            (&mut limits.max_list_pages, self.max_list_pages.map(|c| c.0)),
            (&mut limits.max_list_items, self.max_list_items.map(|c| c.0)),
        ] {
            *slot = value.unwrap_or(*slot);
        }
        config.per_caller = self.per_caller.map(PerCallerTable::into_config).transpose()?.flatten();
        config.sandbox = self.sandbox.map(SandboxFile::into_spec).transpose().map_err(|error| error.under("sandbox"))?;
        config.transport = match self.transport {
            Some(transport) => transport.0,
            None if config.url.is_some() && !config.command.is_empty() => {
                let why = "is needed when both `command` and `url` are set; write transport = \"stdio\", \"http\" or \"sse\"";
                return Err(DeError::field("transport", why));
            }
            None if config.url.is_some() => Transport::Http,
            None => Transport::Stdio,
        };
        Ok(config)
    }
}

fn restart(kind: Option<Restart>, max_restarts: Option<u32>) -> Result<RestartPolicy, DeError> {
    Ok(match (kind, max_restarts) {
        (Some(Restart::OnFailure), max) => RestartPolicy::OnFailure { max_restarts: max.unwrap_or(DEFAULT_MAX_RESTARTS) },
        (_, Some(_)) => {
            return Err(DeError::field("max_restarts", "applies only with restart = \"on-failure\"; set that or remove max_restarts"))
        }
        (Some(Restart::Never), None) => RestartPolicy::Never,
        (Some(Restart::Always), None) => RestartPolicy::Always,
        (None, None) => RestartPolicy::default(),
    })
}

impl BackoffFile {
    /// The spans written over `default`; `max` must not be below `initial`.
    fn spans(self, field: &str, default: (Duration, Duration)) -> Result<(Duration, Duration), DeError> {
        let initial = self.initial.map_or(default.0, |s| s.0);
        let max = self.max.map_or(default.1, |s| s.0);
        if max < initial {
            let message = format!("({max:?}) is shorter than {field}.initial ({initial:?}); make it at least as long");
            return Err(DeError::field(&format!("{field}.max"), message));
        }
        Ok((initial, max))
    }
}

/// `limit` of `field`, whose burst needs a rate.
fn rate_limit(field: &str, limit: RateLimit) -> Result<RateLimit, DeError> {
    if limit.burst.is_some() && limit.rate.is_none() {
        let message = format!("needs {field}.rate: a burst is the calls let through at once above a rate");
        return Err(DeError::field(&format!("{field}.burst"), message));
    }
    Ok(limit)
}

impl LimitsFile {
    fn into_limits(self) -> Result<RateLimits, DeError> {
        let own = RateLimitFile { rate: self.rate, burst: self.burst, concurrent: self.concurrent };
        let server = rate_limit("limits", own.limit())?;
        let mut tools = BTreeMap::new();
        for (tool, limits) in self.tools.unwrap_or_default() {
            let limit = rate_limit(&format!("limits.tools.{tool}"), limits.limit())?;
            tools.insert(tool, limit);
        }
        Ok(RateLimits { server, tools })
    }
}

impl AuthFile {
    fn into_auth(self) -> Result<Auth, DeError> {
        Ok(match self {
            AuthFile::Bearer { token } => Auth::Bearer { token },
            AuthFile::Basic { username, password } => Auth::Basic { username, password },
            AuthFile::ApiKey { header, value } => Auth::ApiKey { header, value },
            AuthFile::OAuth {
                client_id,
                client_secret,
                scopes,
                client_metadata_url,
                grant,
                private_key,
                dpop,
                assertion,
                assertion_file,
                identity_provider,
                per_caller,
                max_callers,
                caller_idle,
                max_logins,
            } => {
                let tuning = max_callers.is_some() || caller_idle.is_some() || max_logins.is_some();
                if tuning && per_caller != Some(true) {
                    return Err(DeError::field(
                        "auth.per_caller",
                        "is not true, yet max_callers, caller_idle or max_logins is set; they are for per_caller = true",
                    ));
                }
                let defaults = PerCallerLogin::default();
                let per_caller = (per_caller == Some(true)).then(|| PerCallerLogin {
                    max_callers: max_callers.map_or(defaults.max_callers, |c| c.0),
                    caller_idle: caller_idle.map_or(defaults.caller_idle, |s| s.0),
                    max_logins: max_logins.map_or(defaults.max_logins, |c| c.0),
                });
                let config = OAuthConfig {
                    client_id,
                    client_secret,
                    scopes: scopes.unwrap_or_default().0,
                    client_metadata_url,
                    grant: grant.map(|w| w.0).unwrap_or_default(),
                    private_key,
                    dpop: dpop.unwrap_or(true),
                    assertion,
                    assertion_file,
                    identity_provider: identity_provider.map(|idp| idp.into_provider().map(Box::new)).transpose()?,
                    per_caller,
                    ..OAuthConfig::default()
                };
                Auth::OAuth(checked_oauth(config)?)
            }
            AuthFile::TokenExchange {
                issuer,
                token_endpoint,
                client_id,
                client_secret,
                audience,
                resource,
                scopes,
                max_callers,
                caller_idle,
                authorization_server,
            } => {
                let config = TokenExchangeConfig {
                    issuer,
                    token_endpoint,
                    client_id,
                    client_secret,
                    audience,
                    resource,
                    scopes: scopes.unwrap_or_default().0,
                    max_callers: max_callers.map_or(DEFAULT_MAX_CALLERS, |c| c.0),
                    caller_idle: caller_idle.map_or(DEFAULT_CALLER_IDLE, |s| s.0),
                    authorization_server: authorization_server.map(AuthorizationServerFile::into_server).transpose()?,
                };
                if let Some((field, message)) = config.problem() {
                    return Err(DeError::field(field, message));
                }
                Auth::TokenExchange(Box::new(config))
            }
        })
    }
}

/// What an OAuth client cannot do without, or cannot have at once.
fn checked_oauth(config: OAuthConfig) -> Result<OAuthConfig, DeError> {
    let invalid = |field: &str, message: &str| Err(DeError::field(field, message));
    if config.client_secret.is_some() && config.private_key.is_some() {
        return invalid("auth.private_key", "and auth.client_secret are both set; a client authenticates with one of them");
    }
    if config.client_id.is_none() && (config.client_secret.is_some() || config.private_key.is_some()) {
        return invalid("auth.client_id", "is missing; a client secret or private key belongs to a pre-registered client_id");
    }
    if config.grant == Grant::ClientCredentials && config.client_secret.is_none() && config.private_key.is_none() {
        return invalid(
            "auth.grant",
            "needs auth.client_id with auth.client_secret or auth.private_key: a machine client must authenticate itself",
        );
    }
    if let Some((field, message)) = config.assertion_problem().or_else(|| config.per_caller_problem()) {
        return invalid(field, message);
    }
    Ok(config)
}

impl AuthorizationServerFile {
    fn into_server(self) -> Result<UpstreamAuthorizationServer, DeError> {
        let required = |value: Option<String>, key: &str| {
            value.ok_or_else(|| {
                DeError::field(
                    &format!("auth.authorization_server.{key}"),
                    "is missing; the gateway redeems ID-JAGs at the server's authorization server with it",
                )
            })
        };
        Ok(UpstreamAuthorizationServer {
            issuer: required(self.issuer, "issuer")?,
            client_id: required(self.client_id, "client_id")?,
            client_secret: required(self.client_secret, "client_secret")?,
        })
    }
}

impl IdentityProviderFile {
    fn into_provider(self) -> Result<IdentityProvider, DeError> {
        let required = |value: Option<String>, key: &str| {
            value.ok_or_else(|| DeError::field(&format!("auth.identity_provider.{key}"), "is missing; the identity provider needs it"))
        };
        Ok(IdentityProvider {
            token_endpoint: required(self.token_endpoint, "token_endpoint")?,
            client_id: required(self.client_id, "client_id")?,
            client_secret: self.client_secret,
            id_token: self.id_token,
            id_token_file: self.id_token_file,
        })
    }
}
