//! The `[serve]` table of mcpvisor's TOML: how `mcpvisor serve --http`
//! guards itself.
//!
//! ```toml
//! [serve]
//! token = "${MCPVISOR_TOKEN}"                    # names the variable holding the bearer token
//! allowed_origins = ["https://app.example.com"]  # Origins allowed besides the loopback ones
//! client_roots = true                            # servers without `roots` get the client's (one local user)
//! tls_cert = "/etc/mcpvisor/tls/fullchain.pem"   # serve HTTPS: PEM chain and key, both or neither,
//! tls_key = "/etc/mcpvisor/tls/key.pem"          #   relative to this file's folder; reloaded on SIGHUP
//! workers = 4                                    # threads serving HTTP sessions (default: one per core)
//! public_url = "https://gw.example.com"          # where callers' browsers reach the gateway (per-caller logins)
//! login_key = "${MCPVISOR_LOGIN_KEY}"            # 32 bytes, base64: encrypts callers' stored logins
//! ```
//!
//! `public_url` and `login_key` are needed by servers whose callers log in
//! themselves (`auth = { type = "oauth", per_caller = true }`): the login
//! links and the redirect URI (`{public_url}/login/callback`) are made from
//! the first, and the callers' tokens are encrypted at rest with the second
//! (a `${VAR}` reference, as `token`; make one with `openssl rand -base64 32`).
//!
//! `token` must be one `${VAR}` reference, expanded when `serve` starts: it
//! names the secret without holding it, since configuration files get
//! copied and committed (a literal is refused, saying so). The
//! environment's `MCPVISOR_SERVE_TOKEN` wins over the file: it is set for
//! one run (a container, a unit file), the file for every run. A token is
//! never accepted on the command line (`ps` shows it) and never printed:
//! errors name the variable, [`ServeSettings`]' `Debug` masks the value.
//! `[serve.keys.NAME]` (named API keys) and `[serve.policy]` (access rules)
//! are read by `serve_policy.rs`. A later file's table replaces an
//! earlier one's whole.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use toml_edit::Item;

use super::de::{from_node, Node};
use super::serve_auth::ServeAuthFile;
pub use super::serve_auth::{AuthSettings, IntrospectionSettings, LoginClient};
use super::serve_policy::{expand_secret, into_keys, named_rules, KeyFile, PolicyFile, Reference, REFERENCE_PATTERN};
use super::serve_policy::{KeySettings, PolicySettings};
use super::values::{scalar_type, schema_as, string_list, Ordered, RateLimitFile, Scalar, TABLE_EXAMPLES};
use crate::error::ConfigError;
use crate::rate_limit::RateLimit;

/// Most `workers` the table may ask for (`serve --workers` has the same bound).
pub const MAX_WORKERS: usize = 1024;

/// The `[serve]` table, its references not yet expanded.
#[derive(Clone, Default, PartialEq)]
pub struct ServeSettings {
    /// The file the table was read from (errors name it).
    pub file: PathBuf,
    /// The bearer token as written (`${VAR}` references kept).
    pub token: Option<String>,
    pub allowed_origins: Vec<String>,
    /// Over HTTP, the servers without configured `roots` get the roots of
    /// the gateway's client (meant for one user on this machine: the
    /// servers are shared by every client); else an empty list.
    pub client_roots: bool,
    /// The PEM certificate chain and private key to serve HTTPS with
    /// (both or neither; relative paths resolved against `file`'s folder).
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// `[serve.auth]`: the access tokens of an OAuth issuer (beside the
    /// shared token, when both are set).
    pub auth: Option<AuthSettings>,
    /// `[serve.keys.NAME]`: named API keys, each its own identity.
    pub keys: Vec<KeySettings>,
    /// `[serve.policy]`: who may list and use what (none: everyone everything).
    pub policy: Option<PolicySettings>,
    /// `[serve.caller_limits]`: tool calls per second (`rate`, `burst`) and
    /// at once (`concurrent`) of each identity apart; read at start.
    pub caller_limits: Option<RateLimit>,
    /// Threads that serve the HTTP connections and their sessions, 1 to
    /// [`MAX_WORKERS`] (`--workers` wins; none: one per core).
    pub workers: Option<usize>,
    /// The gateway's public base URL (`https://…`, or `http://` on a
    /// loopback host): login links and the OAuth redirect URI start with it.
    pub public_url: Option<String>,
    /// The key that encrypts callers' stored logins, as written (one `${VAR}` reference).
    pub login_key: Option<String>,
}

impl std::fmt::Debug for ServeSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeSettings")
            .field("file", &self.file)
            .field("token", &self.token.as_ref().map(|_| super::MASK))
            .field("allowed_origins", &self.allowed_origins)
            .field("client_roots", &self.client_roots)
            .field("tls_cert", &self.tls_cert)
            .field("tls_key", &self.tls_key)
            .field("auth", &self.auth)
            .field("keys", &self.keys)
            .field("policy", &self.policy)
            .field("caller_limits", &self.caller_limits)
            .field("workers", &self.workers)
            .field("public_url", &self.public_url)
            .field("login_key", &self.login_key.as_ref().map(|_| super::MASK))
            .finish()
    }
}

impl ServeSettings {
    /// The token with its references expanded by `lookup`; `None` when the
    /// table has none or it expands to blanks. An unset variable is an
    /// error naming the file and the variable (never the value).
    pub fn token(&self, lookup: impl Fn(&str) -> Option<String>) -> Result<Option<String>, ConfigError> {
        let Some(raw) = &self.token else { return Ok(None) };
        expand_secret(raw, &self.file, "serve.token", lookup)
    }

    /// The login key with its reference expanded by `lookup` (errors as for
    /// [`Self::token`]); `None` when the table has none.
    pub fn login_key(&self, lookup: impl Fn(&str) -> Option<String>) -> Result<Option<String>, ConfigError> {
        let Some(raw) = &self.login_key else { return Ok(None) };
        expand_secret(raw, &self.file, "serve.login_key", lookup)
    }

    /// The introspection client's `(client_id, client_secret)` of
    /// `[serve.auth]`, expanded by `lookup` (errors as for [`Self::token`]);
    /// `None` without introspection.
    pub fn introspection_client(&self, lookup: impl Fn(&str) -> Option<String>) -> Result<Option<(String, String)>, ConfigError> {
        let Some(introspection) = self.auth.as_ref().and_then(|auth| auth.introspection.as_ref()) else { return Ok(None) };
        self.client_pair("serve.auth.introspection", &introspection.client_id, &introspection.client_secret, lookup).map(Some)
    }

    /// The login client's `(client_id, client_secret)` of `[serve.auth]`
    /// (`login`), expanded by `lookup`; `None` without one.
    pub fn login_client(&self, lookup: impl Fn(&str) -> Option<String>) -> Result<Option<(String, String)>, ConfigError> {
        let Some(login) = self.auth.as_ref().and_then(|auth| auth.login.as_ref()) else { return Ok(None) };
        self.client_pair("serve.auth.login", &login.client_id, &login.client_secret, lookup).map(Some)
    }

    /// A client's id and secret references under `table`, expanded; an
    /// unset or empty variable is an error naming the field.
    fn client_pair(
        &self,
        table: &str,
        id: &str,
        secret: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(String, String), ConfigError> {
        let expanded = |field: &str, raw: &str| {
            expand_secret(raw, &self.file, &format!("{table}.{field}"), &lookup)?.ok_or_else(|| ConfigError::InvalidSetting {
                file: self.file.clone(),
                field: format!("{table}.{field}"),
                message: "expands to nothing; set the variable it names".into(),
            })
        };
        Ok((expanded("client_id", id)?, expanded("client_secret", secret)?))
    }
}

/// The shortest serve token accepted, in characters.
pub const MIN_TOKEN_LEN: usize = 16;
/// The fewest different characters a serve token may have (`aaaa…` is no secret).
const MIN_DISTINCT: usize = 8;

/// Refuses a serve token too short or too plain to be a secret; the
/// message names where it came from (`source`) and its length, never the
/// token, and says how to make a good one.
pub fn check_token(token: &str, source: &str) -> Result<(), String> {
    let length = token.chars().count();
    let distinct = token.chars().collect::<std::collections::BTreeSet<char>>().len();
    if length >= MIN_TOKEN_LEN && distinct >= MIN_DISTINCT {
        return Ok(());
    }
    let why = match length < MIN_TOKEN_LEN {
        true => format!("is {length} characters long; it must have at least {MIN_TOKEN_LEN}"),
        false => format!("repeats {distinct} different characters; it must have at least {MIN_DISTINCT}"),
    };
    Err(format!("the serve token from {source} {why}, as anyone who can reach the port may guess it: make one with `openssl rand -hex 32`"))
}

/// Whether `url` can be the gateway's public base URL: an https URL, or
/// http on a loopback host; no query or fragment.
pub fn check_public_url(url: &str) -> Result<(), String> {
    let parsed =
        url::Url::parse(url).map_err(|e| format!("is not a URL ({e}); write the gateway's base, such as \"https://gw.example.com\""))?;
    let loopback = matches!(parsed.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    match parsed.scheme() {
        "https" => {}
        "http" if loopback => {}
        _ => return Err("must be an https:// URL (http:// only on a loopback host): callers' browsers carry login codes to it".into()),
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err("must have no query or fragment: it is the base the login paths are added to".into());
    }
    Ok(())
}

/// `[serve]` as written.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServeFile {
    /// One `${VAR}` reference naming the variable that holds the bearer token.
    token: Option<Token>,
    /// Origins allowed besides the loopback ones.
    allowed_origins: Option<Origins>,
    /// Servers without `roots` get the client's (one local user).
    client_roots: Option<bool>,
    /// Serve HTTPS: the PEM chain and its key, both or neither, relative to this file's folder.
    tls_cert: Option<PemPath>,
    tls_key: Option<PemPath>,
    auth: Option<ServeAuthFile>,
    /// Named API keys, each its own identity: `[serve.keys.NAME]`.
    keys: Option<Ordered<KeyFile>>,
    policy: Option<PolicyFile>,
    /// Tool calls per second and at once of each identity apart.
    caller_limits: Option<RateLimitFile>,
    /// Threads serving HTTP connections and sessions (default: one per core).
    workers: Option<Workers>,
    /// The gateway's public base URL, for per-caller logins (https, or http on a loopback host).
    public_url: Option<String>,
    /// One `${VAR}` reference naming the variable that holds the key (32 bytes, base64) of stored logins.
    login_key: Option<Token>,
}

/// `[serve] token`.
struct Token(String);

impl<'de> Deserialize<'de> for Token {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let refused = "must be one reference such as \"${MCPVISOR_TOKEN}\", naming the variable that holds the token: \
                       a token written in the file would travel with every copy of it";
        Reference::read(deserializer, "a string, such as \"${MCPVISOR_TOKEN}\"", refused).map(|reference| Token(reference.0))
    }
}

schema_as!(Token, { "type": "string", "pattern": REFERENCE_PATTERN });

/// `["https://app.example.com"]`.
#[derive(JsonSchema)]
#[schemars(transparent)]
struct Origins(Vec<String>);

impl<'de> Deserialize<'de> for Origins {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let expecting = "a list of origins, such as [\"https://app.example.com\"]";
        string_list(deserializer, expecting, "must hold strings only, such as \"https://app.example.com\"").map(Origins)
    }
}

scalar_type!(PemPath(String), "the path of a PEM file", { "type": "string", "minLength": 1 }, |value: Scalar| match value {
    Scalar::Str(text) if !text.trim().is_empty() => Some(text),
    _ => None,
});

scalar_type!(
    Workers(usize),
    "a whole number from 1 to 1024",
    { "type": "integer", "minimum": 1, "maximum": MAX_WORKERS },
    |value: Scalar| match value {
        Scalar::Int(n) => usize::try_from(n).ok().filter(|n| (1..=MAX_WORKERS).contains(n)),
        _ => None,
    }
);

/// Reads `[serve]` of the file at `path`.
#[doc(hidden)]
pub fn read(path: &Path, item: &Item) -> Result<ServeSettings, ConfigError> {
    let invalid =
        |field: &str, message: &str| ConfigError::InvalidSetting { file: path.into(), field: field.into(), message: message.into() };
    if item.as_table_like().is_none() {
        return Err(invalid("serve.", "must be a table: write [serve] with token = \"${VAR}\" below it"));
    }
    let table: ServeFile = from_node(Node::Item(item), "serve", TABLE_EXAMPLES)
        .map_err(|error| named_rules(error, item.get("policy")).into_setting_error(path))?;
    let folder = path.parent().unwrap_or(Path::new(""));
    let settings = ServeSettings {
        file: path.into(),
        token: table.token.map(|token| token.0),
        allowed_origins: table.allowed_origins.map_or_else(Vec::new, |origins| origins.0),
        client_roots: table.client_roots.unwrap_or(false),
        tls_cert: table.tls_cert.map(|cert| folder.join(cert.0)),
        tls_key: table.tls_key.map(|key| folder.join(key.0)),
        auth: table
            .auth
            .map(ServeAuthFile::into_settings)
            .transpose()
            .map_err(|error| error.under("serve.auth").into_setting_error(path))?,
        keys: table
            .keys
            .map(into_keys)
            .transpose()
            .map_err(|error| error.under("serve.keys").into_setting_error(path))?
            .unwrap_or_default(),
        policy: table
            .policy
            .map(PolicyFile::into_policy)
            .transpose()
            .map_err(|error| error.under("serve.policy").into_setting_error(path))?,
        caller_limits: table.caller_limits.map(|limits| limits.limit()),
        workers: table.workers.map(|workers| workers.0),
        public_url: table.public_url.map(|url| url.trim_end_matches('/').to_owned()),
        login_key: table.login_key.map(|key| key.0),
    };
    if let Some(url) = &settings.public_url {
        if let Err(why) = check_public_url(url) {
            return Err(invalid("serve.public_url", &why));
        }
    }
    if settings.caller_limits.is_some_and(|limits| limits.is_empty()) {
        return Err(invalid("serve.caller_limits", "limits nothing: give `rate` (calls per second) or `concurrent` (calls at once)"));
    }
    if settings.tls_cert.is_some() != settings.tls_key.is_some() {
        let missing = if settings.tls_cert.is_none() { "serve.tls_cert" } else { "serve.tls_key" };
        return Err(invalid(missing, "is missing: TLS needs both tls_cert (the PEM chain) and tls_key (its private key)"));
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve(text: &str) -> Result<ServeSettings, String> {
        let document: toml_edit::DocumentMut = text.parse().unwrap();
        read(Path::new("/etc/mcpvisor/servers.toml"), &document["serve"]).map_err(|e| e.to_string())
    }

    #[test]
    fn short_or_plain_tokens_are_refused_without_showing_them() {
        for (token, says) in
            [("Q", "is 1 characters long"), ("hunter2hunter2!", "is 15 characters"), ("abababababababababab", "repeats 2 different")]
        {
            let refused = check_token(token, "MCPVISOR_SERVE_TOKEN").unwrap_err();
            assert!(refused.contains(says) && refused.contains("openssl rand -hex 32") && !refused.contains(token), "{refused}");
        }
        assert!(check_token("0f3a9c2e7b1d4a6f8e0c2b4d6f8a0c1e", "MCPVISOR_SERVE_TOKEN").is_ok());
    }

    #[test]
    fn the_token_is_expanded_late_and_never_shown() {
        let settings = serve("[serve]\ntoken = \"${GW_TOKEN}\"\nallowed_origins = [\"https://a.example\"]\n").unwrap();
        assert_eq!(settings.allowed_origins, ["https://a.example"]);
        let lookup = |name: &str| (name == "GW_TOKEN").then(|| " s3cr3t ".to_string());
        assert_eq!(settings.token(lookup).unwrap().as_deref(), Some("s3cr3t"));
        let unset = settings.token(|_| None).unwrap_err().to_string();
        assert!(unset.contains("serve.token") && unset.contains("${GW_TOKEN}") && unset.contains("servers.toml"), "{unset}");
        assert!(!format!("{settings:?}").contains("GW_TOKEN"), "{settings:?}");
        let blank = |_: &str| Some("  ".to_string());
        assert_eq!(settings.token(blank).unwrap(), None);
    }

    #[test]
    fn client_roots_are_off_unless_set() {
        assert!(!serve("[serve]\nallowed_origins = []\n").unwrap().client_roots);
        assert!(serve("[serve]\nclient_roots = true\n").unwrap().client_roots);
        let refused = serve("[serve]\nclient_roots = \"yes\"\n").unwrap_err();
        assert!(refused.contains("`serve.client_roots` must be true or false"), "{refused}");
    }

    #[test]
    fn tls_files_come_in_pairs_relative_to_the_file() {
        let settings = serve("[serve]\ntls_cert = \"tls/cert.pem\"\ntls_key = \"/secret/key.pem\"\n").unwrap();
        assert_eq!(settings.tls_cert.as_deref(), Some(Path::new("/etc/mcpvisor/tls/cert.pem")));
        assert_eq!(settings.tls_key.as_deref(), Some(Path::new("/secret/key.pem")));
        let alone = serve("[serve]\ntls_cert = \"cert.pem\"\n").unwrap_err();
        assert!(alone.contains("`serve.tls_key` is missing"), "{alone}");
        let blank = serve("[serve]\ntls_cert = \"\"\ntls_key = \"k\"\n").unwrap_err();
        assert!(blank.contains("`serve.tls_cert` must be the path of a PEM file"), "{blank}");
    }

    #[test]
    fn errors_name_the_file_and_the_key() {
        for (body, expected) in [
            ("token = 5", "`serve.token` must be a string"),
            ("token = \"hunter2-literal\"", "`serve.token` must be one reference"),
            ("token = \"${A:-hunter2}\"", "`serve.token` must be one reference"),
            ("allowed_origins = \"x\"", "`serve.allowed_origins` must be a list"),
            ("allowed_origins = [1]", "must hold strings only"),
            ("http = \"0.0.0.0:1\"", "unknown key `serve.http`; the known keys are token, allowed_origins"),
        ] {
            let message = serve(&format!("[serve]\n{body}\n")).unwrap_err();
            assert!(message.starts_with("/etc/mcpvisor/servers.toml: ") && message.contains(expected), "{message}");
        }
    }

    #[test]
    fn the_public_url_and_the_login_key_are_checked() {
        let settings = serve("[serve]\npublic_url = \"https://gw.example.com/\"\nlogin_key = \"${LOGIN_KEY}\"\n").unwrap();
        assert_eq!(settings.public_url.as_deref(), Some("https://gw.example.com"));
        assert_eq!(settings.login_key(|_| Some("a2V5".into())).unwrap().as_deref(), Some("a2V5"));
        assert!(!format!("{settings:?}").contains("LOGIN_KEY"), "{settings:?}");
        assert!(serve("[serve]\npublic_url = \"http://127.0.0.1:8080\"\n").is_ok());
        for (body, expected) in [
            ("public_url = \"http://gw.example.com\"", "`serve.public_url` must be an https:// URL"),
            ("public_url = \"https://gw.example.com/?x=1\"", "no query"),
            ("public_url = \"gw\"", "`serve.public_url` is not a URL"),
            ("login_key = \"literal-key\"", "`serve.login_key` must be one reference"),
        ] {
            let message = serve(&format!("[serve]\n{body}\n")).unwrap_err();
            assert!(message.contains(expected), "{message}");
        }
    }

    #[test]
    fn workers_are_a_bounded_count() {
        assert_eq!(serve("[serve]\nworkers = 3\n").unwrap().workers, Some(3));
        assert_eq!(serve("[serve]\nclient_roots = true\n").unwrap().workers, None);
        for body in ["workers = 0", "workers = 1025", "workers = \"4\"", "workers = -1"] {
            let message = serve(&format!("[serve]\n{body}\n")).unwrap_err();
            assert!(message.contains("`serve.workers` must be a whole number from 1 to 1024"), "{message}");
        }
    }

    #[test]
    fn caller_limits_are_read_and_checked() {
        let settings = serve("[serve.caller_limits]\nrate = 2.5\nburst = 5\nconcurrent = 3\n").unwrap();
        assert_eq!(settings.caller_limits, Some(RateLimit { rate: Some(2.5), burst: Some(5), concurrent: Some(3) }));
        for (body, expected) in [
            ("rate = 0", "`serve.caller_limits.rate` must be a number"),
            ("burst = 0", "`serve.caller_limits.burst` must be a whole number"),
            ("burst = 4", "`serve.caller_limits` limits nothing"),
            ("per = 1", "unknown key `serve.caller_limits.per`"),
        ] {
            let message = serve(&format!("[serve.caller_limits]\n{body}\n")).unwrap_err();
            assert!(message.contains(expected), "{message}");
        }
    }
}
