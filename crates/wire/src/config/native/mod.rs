//! mcpvisor's own TOML files (`servers.toml`, `.mcpvisor.toml`).
//!
//! One `[servers.NAME]` table per server; the keys are [`KEYS`]. The
//! `[agent]` table is read by [`super::agent`], the `[audit]` table
//! ([`parse_audit`]) by `super::audit`, the `[serve]` table
//! ([`parse_serve`]) by `super::serve`, the `[telemetry]` table
//! ([`parse_telemetry`]) by `super::otel`. Reading is
//! strict: an unknown key or a value of the wrong type is an error naming
//! the file, the server and the key. Writing goes through `toml_edit`, so
//! comments, formatting and the order of everything not changed stay byte
//! for byte: an existing key is updated in place (keeping its trailing
//! comment), a key that no longer applies is removed, and a new key is
//! appended only when its value differs from the default. Text is written
//! raw: `${VAR}` references stay references.
//!
//! Supervision is data too: `intensity` (restarts allowed within
//! `period`, default 5), `period` (default `"60s"`), `backoff = { initial =
//! "100ms", max = "30s" }` and `cooldown = { initial = "30s", max = "10m" }`
//! (or `false`), spans of time written `"250ms"`, `"60s"`, `"10m"`, `"1h"`
//! (a bare number is seconds). Not written: `scope` (it is where the file
//! is), and the healthy-run length and jitter of restarts (set in code).
//! Rate limits: `limits = { rate, burst, concurrent }` for the server and
//! `limits.tools.TOOL = { ... }` per tool (see `crate::rate_limit`).
//! docs/operations.md is the reference of these keys.
//!
//! The code: `schema` (the keys and the shape of the document), `read`
//! (a server's table into a [`ServerConfig`]) and `edit` (changes made in
//! place with `toml_edit`).

mod edit;
mod json_schema;
mod read;
mod schema;

use std::path::Path;

use super::file::read_optional;
use super::{agent, AgentSettings, ServerConfig};
use crate::error::ConfigError;
use schema::{parse_document, servers_table};

pub use edit::{remove, set_enabled, upsert};
#[doc(hidden)]
pub use json_schema::json_schema;
pub use schema::{DEFAULT_MAX_RESTARTS, KEYS};

/// The servers of the file, in file order; a missing file has none.
pub fn load(path: &Path) -> Result<Vec<ServerConfig>, ConfigError> {
    match read_optional(path)? {
        Some(text) => parse(path, &text),
        None => Ok(Vec::new()),
    }
}

/// The servers of `text`; `path` is only named in errors.
pub fn parse(path: &Path, text: &str) -> Result<Vec<ServerConfig>, ConfigError> {
    parse_with_agent(path, text).map(|(servers, _)| servers)
}

/// The `[audit]` table of `text`, if it has one.
pub fn parse_audit(path: &Path, text: &str) -> Result<Option<crate::config::AuditConfig>, ConfigError> {
    let document = parse_document(path, text)?;
    document.get("audit").map(|item| super::audit::read(path, item)).transpose()
}

/// The `[serve]` table of `text`, if it has one.
pub fn parse_serve(path: &Path, text: &str) -> Result<Option<super::ServeSettings>, ConfigError> {
    let document = parse_document(path, text)?;
    document.get("serve").map(|item| super::serve::read(path, item)).transpose()
}

/// The `[telemetry]` table of `text`, if it has one.
pub fn parse_telemetry(path: &Path, text: &str) -> Result<Option<super::OtlpSettings>, ConfigError> {
    let document = parse_document(path, text)?;
    document.get("telemetry").map(|item| super::otel::read(path, item)).transpose()
}

/// The servers and the `[agent]` settings of `text`.
pub fn parse_with_agent(path: &Path, text: &str) -> Result<(Vec<ServerConfig>, AgentSettings), ConfigError> {
    let document = parse_document(path, text)?;
    let agent = document.get("agent").map(|item| agent::read(path, item)).transpose()?.unwrap_or_default();
    let Some(servers) = document.get("servers") else {
        return Ok((Vec::new(), agent));
    };
    let default = document.get("sandbox").map(|item| super::sandbox::read_default(path, item)).transpose()?.flatten();
    let withhold = document.get("scan").map(|item| super::scan::read(path, item)).transpose()?.flatten().flatten();
    let tables = servers_table(path, servers)?;
    let mut servers: Vec<ServerConfig> = tables.iter().map(|(name, item)| read::read_server(path, name, item)).collect::<Result<_, _>>()?;
    for server in servers.iter_mut().filter(|s| s.sandbox.is_none() && s.transport == super::Transport::Stdio) {
        server.sandbox = default.clone();
    }
    // The file's `[scan] withhold`, for the servers that do not say their own.
    for (server, (_, item)) in servers.iter_mut().zip(tables.iter()) {
        if item.get("withhold").is_none() {
            server.withhold = server.withhold.or(withhold);
        }
    }
    Ok((servers, agent))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Auth, Era, ToolFilter, Transport};
    use crate::restart::RestartPolicy;
    use std::fs;
    use std::time::Duration;

    const EXAMPLE: &str = r#"# my servers
[servers.fs]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
env = { LOG_LEVEL = "info" }
cwd = "/tmp"
inherit_env = false
enabled = true
timeout = 60            # call time-out, seconds (float ok)
startup_timeout = 30
max_timeout = 600       # progress may push a call's time-out out to this
health_ping = 30        # ping every 30 s; no answer within `timeout` restarts the server
restart = "on-failure"  # never | on-failure | always
max_restarts = 5
era = "auto"            # auto | legacy | modern
roots = ["/home/me/project"]
tools = { allow = ["read_*"], deny = ["*delete*"] }
max_in_flight = 64
max_queued = 1024
max_list_pages = 1000   # a */list still handing out cursors after this many pages is an error
max_list_items = 100000 # items of one */list, all pages together

[servers.remote]
transport = "http"      # stdio | http | sse (default: stdio when command is set)
url = "https://example.com/mcp"
headers = { "X-Team" = "core" }
auth = { type = "bearer", token = "${GITHUB_TOKEN}" }   # or basic {username,password}, api_key {header,value}, oauth {...}
"#;

    pub(super) fn file(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("servers.toml");
        fs::write(&path, text).unwrap();
        (dir, path)
    }

    fn parse_error(text: &str) -> String {
        parse(Path::new("servers.toml"), text).unwrap_err().to_string()
    }

    #[test]
    fn reads_the_documented_example() {
        let (_dir, path) = file(EXAMPLE);
        let servers = load(&path).unwrap();
        let mut fs =
            ServerConfig::stdio("fs", "npx", ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]).with_env("LOG_LEVEL", "info");
        fs.cwd = Some("/tmp".into());
        fs.restart = RestartPolicy::OnFailure { max_restarts: 5 };
        fs.roots = vec!["/home/me/project".into()];
        fs.timeouts.health_ping = Some(Duration::from_secs(30));
        fs.tools = ToolFilter { allow: vec!["read_*".into()], deny: vec!["*delete*".into()] };
        let mut remote = ServerConfig::remote("remote", Transport::Http, "https://example.com/mcp").with_header("X-Team", "core");
        remote.auth = Some(Auth::Bearer { token: "${GITHUB_TOKEN}".into() });
        assert_eq!(servers, [fs, remote]);
    }

    #[test]
    fn supervision_is_read_and_written_back() {
        let text = "[servers.s]\ncommand = \"x\"\nintensity = 3\nperiod = \"2m\"\nbackoff = { initial = \"250ms\", max = \"5s\" }\ncooldown = { initial = \"1s\" }\n";
        let (_dir, path) = file(text);
        let server = load(&path).unwrap().remove(0);
        let limits = server.restart_limits;
        assert_eq!((limits.max_restarts_in_window, limits.window), (3, Duration::from_secs(120)));
        assert_eq!((limits.initial_backoff, limits.max_backoff), (Duration::from_millis(250), Duration::from_secs(5)));
        let cooldown = crate::restart::Cooldown { initial: Duration::from_secs(1), max: Duration::from_secs(600) };
        assert_eq!(limits.cooldown, Some(cooldown));
        // Written back from the model: every key that differs from its default.
        let (_dir2, copy) = file("");
        upsert(&copy, &server).unwrap();
        let written = fs::read_to_string(&copy).unwrap();
        assert!(written.contains("intensity = 3\nperiod = \"2m\"\nbackoff = { initial = \"250ms\", max = \"5s\" }\ncooldown = { initial = \"1s\", max = \"10m\" }"), "{written}");
        assert_eq!(load(&copy).unwrap(), [server]);
        let off = parse(Path::new("x.toml"), "[servers.s]\ncommand = \"x\"\ncooldown = false\nperiod = 90\n").unwrap().remove(0);
        assert_eq!((off.restart_limits.cooldown, off.restart_limits.window), (None, Duration::from_secs(90)));
        let (_dir3, default) = file("");
        upsert(&default, &ServerConfig::stdio("d", "x", Vec::<String>::new())).unwrap();
        assert_eq!(fs::read_to_string(&default).unwrap(), "[servers.d]\ncommand = \"x\"\n", "defaults are not written");
    }

    #[test]
    fn rate_limits_are_read_and_written_back() {
        let text = "[servers.s]\ncommand = \"x\"\n\n[servers.s.limits]\nrate = 10\nburst = 20\nconcurrent = 4\n\n[servers.s.limits.tools.search]\nrate = 0.5\n";
        let server = parse(Path::new("x.toml"), text).unwrap().remove(0);
        let limits = &server.rate_limits;
        assert_eq!((limits.server.rate, limits.server.burst, limits.server.concurrent), (Some(10.0), Some(20), Some(4)));
        assert_eq!(limits.tools["search"].rate, Some(0.5));
        let (_dir, copy) = file("");
        upsert(&copy, &server).unwrap();
        let written = fs::read_to_string(&copy).unwrap();
        assert!(written.contains("limits = { rate = 10, burst = 20, concurrent = 4, tools = { search = { rate = 0.5 } } }"), "{written}");
        assert_eq!(load(&copy).unwrap(), [server]);
        let cases = [
            ("limits = { rate = 0 }", "`limits.rate` must be a number of calls per second greater than zero"),
            ("limits = { burst = 3 }", "`limits.burst` needs limits.rate"),
            ("limits = { concurrent = 0 }", "`limits.concurrent` must be a whole number of at least 1"),
            ("limits = { per_second = 1 }", "unknown key `limits.per_second`; the known keys are rate, burst, concurrent, tools"),
            (
                "limits = { tools = { t = { tools = {} } } }",
                "unknown key `limits.tools.t.tools`; the known keys are rate, burst, concurrent",
            ),
            ("limits = 5", "`limits` must be a table, like { rate = 10, burst = 20, concurrent = 4 }"),
        ];
        for (body, expected) in cases {
            let message = parse_error(&format!("[servers.s]\ncommand = \"x\"\n{body}\n"));
            assert!(message.starts_with("servers.toml: server \"s\": ") && message.contains(expected), "{body:?}: {message}");
        }
    }

    #[test]
    fn bad_supervision_names_the_file_the_server_and_the_key() {
        let cases = [
            ("intensity = 0", "`intensity` must be a whole number of at least 1"),
            ("period = \"60\"", "`period` must be a span of time greater than zero, like \"100ms\""),
            ("period = \"0s\"", "`period` must be a span of time greater than zero"),
            ("backoff = { initial = \"1x\" }", "`backoff.initial` must be a span of time"),
            ("backoff = { start = \"1s\" }", "unknown key `backoff.start`; the known keys are initial, max"),
            ("backoff = { initial = \"10s\", max = \"1s\" }", "`backoff.max` (1s) is shorter than backoff.initial (10s)"),
            ("backoff = \"1s\"", "`backoff` must be a table, like { initial = \"100ms\", max = \"30s\" }"),
            ("cooldown = 5", "`cooldown` must be true, false or a table like { initial = \"100ms\", max = \"30s\" }, not integer"),
        ];
        for (body, expected) in cases {
            let message = parse_error(&format!("[servers.s]\ncommand = \"x\"\n{body}\n"));
            assert!(message.starts_with("servers.toml: server \"s\": "), "{message}");
            assert!(message.contains(expected), "{body:?}: {message}");
        }
    }

    #[test]
    fn secrets_are_read_for_both_directions_or_each_and_written_back() {
        use crate::config::{SecretsMode, SecretsPolicy};
        let read = |body: &str| parse(Path::new("x.toml"), &format!("[servers.s]\ncommand = \"x\"\n{body}\n")).unwrap().remove(0);
        assert_eq!(read("").secrets, SecretsPolicy::default());
        assert_eq!(read("secrets = \"block\"").secrets, SecretsPolicy::both(SecretsMode::Block));
        let each = read("secrets = { arguments = \"block\" }");
        assert_eq!(each.secrets, SecretsPolicy { arguments: SecretsMode::Block, results: SecretsMode::Default });
        for (server, line) in [(each, "secrets = { arguments = \"block\" }"), (read("secrets = \"allow\""), "secrets = \"allow\"")] {
            let (_dir, copy) = file("");
            upsert(&copy, &server).unwrap();
            let written = fs::read_to_string(&copy).unwrap();
            assert!(written.contains(line), "{written}");
            assert_eq!(load(&copy).unwrap(), [server]);
        }
        let cases = [
            ("secrets = \"hide\"", "`secrets` is \"hide\"; write one of default | mask | block | allow"),
            ("secrets = 1", "`secrets` must be one of default | mask | block | allow, not integer, or a table like { arguments = \"block\", results = \"mask\" }"),
            ("secrets = { results = \"drop\" }", "`secrets.results` is \"drop\"; write one of default | mask | block | allow"),
            ("secrets = { input = \"mask\" }", "unknown key `secrets.input`; the known keys are arguments, results"),
        ];
        for (body, expected) in cases {
            let message = parse_error(&format!("[servers.s]\ncommand = \"x\"\n{body}\n"));
            assert!(message.starts_with("servers.toml: server \"s\": ") && message.contains(expected), "{body:?}: {message}");
        }
    }

    #[test]
    fn pin_is_true_false_or_notify_and_written_back() {
        use crate::config::Pinning;
        let read = |body: &str| parse(Path::new("x.toml"), &format!("[servers.s]\ncommand = \"x\"\n{body}\n")).unwrap().remove(0);
        for (body, pinning) in [
            ("", Pinning::Withhold),
            ("pin = true", Pinning::Withhold),
            ("pin = false", Pinning::Off),
            ("pin = \"notify\"", Pinning::Notify),
        ] {
            let server = read(body);
            assert_eq!(server.pin, pinning, "{body}");
            let (_dir, copy) = file("");
            upsert(&copy, &server).unwrap();
            assert!(fs::read_to_string(&copy).unwrap().contains(if pinning == Pinning::Withhold { "" } else { body }));
            assert_eq!(load(&copy).unwrap(), [server]);
        }
        for (body, expected) in [
            ("pin = \"sometimes\"", "`pin` is \"sometimes\"; write true, false or \"notify\""),
            ("pin = 1", "`pin` must be true, false or \"notify\", not integer"),
        ] {
            let message = parse_error(&format!("[servers.s]\ncommand = \"x\"\n{body}\n"));
            assert!(message.contains(expected), "{body:?}: {message}");
        }
    }

    #[test]
    fn scan_withhold_is_the_files_default_and_a_servers_own_wins() {
        use crate::config::Severity;
        let text = "[scan]\nwithhold = \"high\"\n\n[servers.a]\ncommand = \"x\"\n\n[servers.b]\ncommand = \"x\"\nwithhold = \"off\"\n\n[servers.c]\ncommand = \"x\"\nwithhold = \"low\"\n";
        let servers = parse(Path::new("x.toml"), text).unwrap();
        let withhold: Vec<Option<Severity>> = servers.iter().map(|server| server.withhold).collect();
        assert_eq!(withhold, [Some(Severity::High), None, Some(Severity::Low)]);
        let (_dir, copy) = file("");
        upsert(&copy, &servers[0]).unwrap();
        assert!(fs::read_to_string(&copy).unwrap().contains("withhold = \"high\""));
        assert_eq!(load(&copy).unwrap(), [servers[0].clone()]);
        for (body, expected) in [
            ("[scan]\nwithhold = \"loud\"\n", "`scan.withhold` is \"loud\"; write one of off | low | medium | high"),
            ("[scan]\nfail_on = \"high\"\n", "unknown key `scan.fail_on`"),
            ("scan = 1\n", "must sit in a [scan] table"),
        ] {
            let message = parse_error(&format!("{body}[servers.s]\ncommand = \"x\"\n"));
            assert!(message.contains(expected), "{body:?}: {message}");
        }
    }

    #[test]
    fn missing_file_has_no_servers_and_empty_file_too() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(&dir.path().join("none.toml")).unwrap(), []);
        assert_eq!(parse(Path::new("x.toml"), "# nothing yet\n").unwrap(), []);
    }

    #[test]
    fn inferred_transport_and_other_values() {
        let servers = parse(
            Path::new("x.toml"),
            r#"
            [servers]
            a = { url = "https://a.example/mcp", timeout = 2.5, restart = "never", era = "modern" }
            b = { transport = "sse", url = "http://localhost:9000/sse", auth = { type = "api_key", header = "X-Key", value = "$KEY" } }
            c = { command = "c", restart = "on-failure", enabled = false, max_frame = 2048, max_queued = 0, shutdown_grace = 0.5, max_list_pages = 3, max_list_items = 40 }
            "#,
        )
        .unwrap();
        assert_eq!(servers[0].transport, Transport::Http);
        assert_eq!(servers[0].timeouts.call, Duration::from_millis(2500));
        assert_eq!(servers[0].restart, RestartPolicy::Never);
        assert_eq!(servers[0].era, Era::Modern);
        assert_eq!(servers[1].transport, Transport::Sse);
        assert_eq!(servers[1].auth, Some(Auth::ApiKey { header: "X-Key".into(), value: "$KEY".into() }));
        assert_eq!(servers[2].restart, RestartPolicy::OnFailure { max_restarts: DEFAULT_MAX_RESTARTS });
        assert!(!servers[2].enabled);
        assert_eq!((servers[2].limits.max_frame, servers[2].limits.max_queued), (2048, 0));
        assert_eq!((servers[2].limits.max_list_pages, servers[2].limits.max_list_items), (3, 40));
        assert_eq!(servers[2].timeouts.shutdown_grace, Duration::from_millis(500));
    }

    #[test]
    fn unknown_keys_are_errors_listing_the_known_ones() {
        let message = parse_error("[servers.fs]\ncommand = \"x\"\ncomand = \"y\"\n");
        assert!(
            message.starts_with("servers.toml: server \"fs\": unknown key `comand`; the known keys are transport, command, args"),
            "{message}"
        );
        let message = parse_error("[server.fs]\ncommand = \"x\"\n");
        assert_eq!(
            message,
            "servers.toml: top level: unknown key `server`; the known keys are servers, agent, audit, serve, sandbox, scan, telemetry"
        );
        let message = parse_error("[servers.fs]\ncommand = \"x\"\ntools = { allow = [], block = [] }\n");
        assert_eq!(message, "servers.toml: server \"fs\": unknown key `tools.block`; the known keys are allow, deny");
        let message = parse_error("[servers.r]\nurl = \"https://x\"\nauth = { type = \"bearer\", token = \"t\", user = \"u\" }\n");
        assert_eq!(message, "servers.toml: server \"r\": unknown key `auth.user`; the known keys are type, token");
    }

    #[test]
    fn bad_values_name_the_server_and_the_field_and_say_what_to_write() {
        let cases = [
            ("command = 5", "`command` must be a string, not integer"),
            ("command = \"x\"\nargs = [\"a\", 1]", "`args[1]` must be a string, not integer"),
            ("command = \"x\"\nenv = { A = true }", "`env.A` must be a string, not boolean"),
            ("command = \"x\"\ntimeout = \"60\"", "`timeout` must be a number of seconds greater than zero, like 60 or 2.5"),
            ("command = \"x\"\ntimeout = 0", "`timeout` must be a number of seconds greater than zero"),
            ("command = \"x\"\ntimeout = nan", "`timeout` must be a number of seconds greater than zero"),
            ("command = \"x\"\ntimeout = 1e300", "`timeout` must be a number of seconds greater than zero"),
            ("command = \"x\"\nmax_in_flight = 0", "`max_in_flight` must be a whole number of at least 1"),
            ("command = \"x\"\nmax_queued = -1", "`max_queued` must be a whole number of at least 0"),
            ("command = \"x\"\nrestart = \"sometimes\"", "`restart` is \"sometimes\"; write one of never | on-failure | always"),
            ("command = \"x\"\nmax_restarts = 3", "`max_restarts` applies only with restart = \"on-failure\""),
            ("command = \"x\"\nera = \"new\"", "`era` is \"new\"; write one of auto | legacy | modern"),
            ("transport = \"websocket\"", "`transport` is \"websocket\"; write one of stdio | http | sse"),
            ("command = \"x\"\nurl = \"https://x\"", "`transport` is needed when both `command` and `url` are set"),
            ("url = \"https://x\"\nauth = { token = \"t\" }", "`auth.type` is missing"),
            (
                "url = \"https://x\"\nauth = { type = \"basic\", username = \"u\" }",
                "`auth.password` is missing; basic auth needs username and password",
            ),
            (
                "url = \"https://x\"\nauth = { type = \"oidc\" }",
                "`auth.type` is \"oidc\"; write \"bearer\", \"basic\", \"api_key\", \"oauth\" or \"token_exchange\"",
            ),
            (
                "url = \"https://x\"\nauth = { type = \"token_exchange\", client_id = \"gw\", client_secret = \"s\" }",
                "`auth.issuer` is missing; set the issuer (or its token_endpoint)",
            ),
            (
                "url = \"https://x\"\nauth = { type = \"token_exchange\", issuer = \"https://i\", token_endpoint = \"https://i/t\", client_id = \"gw\", client_secret = \"s\" }",
                "`auth.token_endpoint` and auth.issuer are both set",
            ),
            (
                "url = \"https://x\"\nauth = { type = \"token_exchange\", issuer = \"https://i\", client_id = \"gw\" }",
                "`auth.client_secret` is missing",
            ),
            (
                "url = \"https://x\"\nauth = { type = \"token_exchange\", issuer = \"https://i\", client_id = \"gw\", client_secret = \"s\", max_callers = 0 }",
                "`auth.max_callers`",
            ),
            (
                "url = \"https://x\"\nauth = { type = \"token_exchange\", issuer = \"https://i\", client_id = \"gw\", client_secret = \"s\", authorization_server = { issuer = \"https://as\", client_id = \"up\" } }",
                "`auth.authorization_server.client_secret` is missing",
            ),
            (
                "url = \"https://x\"\nauth = { type = \"token_exchange\", issuer = \"https://i\", client_id = \"gw\", client_secret = \"s\", audience = \"https://x\", authorization_server = { issuer = \"https://as\", client_id = \"up\", client_secret = \"u\" } }",
                "`auth.audience` and auth.authorization_server are both set",
            ),
            (
                "url = \"https://x\"\nauth = { type = \"token_exchange\", issuer = \"https://i\", client_id = \"gw\", client_secret = \"s\", authorization_server = { issuer = \"https://as\", client_id = \"\", client_secret = \"u\" } }",
                "`auth.authorization_server.client_id` is empty",
            ),
            (
                "url = \"https://x\"\nauth = { type = \"token_exchange\", issuer = \"https://i\", client_id = \"gw\", client_secret = \"s\", authorization_server = { url = \"https://as\" } }",
                "unknown key `auth.authorization_server.url`; the known keys are issuer, client_id, client_secret",
            ),
            (
                "transport = \"sse\"\nurl = \"https://x\"\nauth = { type = \"token_exchange\", issuer = \"https://i\", client_id = \"gw\", client_secret = \"s\" }",
                "auth type \"token_exchange\" is for http servers",
            ),
            ("command = \"x\"\nper_caller = 5", "`per_caller` must be true, false or a table like { max_callers = 16"),
            ("command = \"x\"\nper_caller = { max_callers = 0 }", "`per_caller.max_callers` must be a whole number of at least 1"),
            ("command = \"x\"\nper_caller = { idle = \"5m\" }", "unknown key `per_caller.idle`; the known keys are max_callers, caller_idle, secrets"),
            ("url = \"https://x\"\nper_caller = true", "`per_caller` is for stdio servers"),
            ("command = \"x\"\nargs = [\"${caller.subject}\"]\nper_caller = true", "`args[0]` holds a ${caller.…} reference; only `env`"),
            ("command = \"x\"\nenv = { T = \"${caller.token}\" }\nper_caller = true", "${caller.token}"),
            (
                "url = \"https://x\"\nauth = { type = \"oauth\", client = \"x\" }",
                "unknown key `auth.client`; the known keys are type, client_id, client_secret",
            ),
            (
                "url = \"https://x\"\nauth = { type = \"oauth\", grant = \"password\" }",
                "`auth.grant` is \"password\"; write one of authorization_code | client_credentials",
            ),
            ("url = \"https://x\"\nauth = { type = \"oauth\", scopes = \"a b\" }", "`auth.scopes` must be an array of strings"),
            ("url = \"https://x\"\nauth = { type = \"oauth\", client_secret = \"s\" }", "`auth.client_id` is missing"),
            (
                "url = \"https://x\"\nauth = { type = \"oauth\", grant = \"client_credentials\", client_id = \"c\" }",
                "`auth.grant` needs auth.client_id with auth.client_secret or auth.private_key",
            ),
            (
                "url = \"https://x\"\nauth = { type = \"oauth\", client_id = \"c\", client_secret = \"s\", private_key = \"k\" }",
                "`auth.private_key` and auth.client_secret are both set",
            ),
            (
                "url = \"https://x\"\nauth = { type = \"oauth\", grant = \"jwt_bearer\", client_id = \"c\" }",
                "\"jwt_bearer\" needs exactly one of auth.assertion, auth.assertion_file and auth.identity_provider",
            ),
            (
                "url = \"https://x\"\nauth = { type = \"oauth\", client_id = \"c\", assertion_file = \"/run/token\" }",
                "is not \"jwt_bearer\", yet an assertion",
            ),
            (
                "url = \"https://x\"\nauth = { type = \"oauth\", grant = \"jwt_bearer\", client_id = \"c\", identity_provider = { client_id = \"i\" } }",
                "`auth.identity_provider.token_endpoint` is missing",
            ),
            (
                "url = \"https://x\"\nauth = { type = \"oauth\", grant = \"jwt_bearer\", client_id = \"c\", identity_provider = { token_endpoint = \"https://idp/token\", client_id = \"i\" } }",
                "`auth.identity_provider` needs exactly one of id_token and id_token_file",
            ),
            ("url = \"https://x\"\nheaders = [\"a\"]", "`headers` must be a table, like { NAME = \"value\" }, not array"),
            ("args = [\"a\"]", "invalid configuration for server `s`: `command` is empty"),
            ("url = \"ftp://x\"", "`url` must be an http:// or https:// URL"),
        ];
        for (body, expected) in cases {
            let message = parse_error(&format!("[servers.s]\n{body}\n"));
            assert!(message.starts_with("servers.toml: "), "{message}");
            assert!(message.contains("server \"s\"") || message.contains("server `s`"), "{message}");
            assert!(message.contains(expected), "{body:?}: {message}");
        }
        assert!(parse_error("[servers]\ns = 1\n").contains("`servers.s` must be a table: write [servers.s]"));
        assert!(parse_error("servers = 1\n").contains("`servers` must be a table"));
        assert!(parse_error("[servers.s\n").starts_with("servers.toml: not valid TOML: "));
    }

    #[test]
    fn the_keys_written_are_the_keys_read_and_the_keys_described() {
        assert_eq!(crate::config::de::fields_of::<read::ServerFile>(), KEYS);
        let schema = json_schema();
        let keys = |value: &serde_json::Value| value["properties"].as_object().map(|p| p.keys().cloned().collect::<Vec<_>>());
        let sorted = |keys: &[&str]| {
            let mut keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
            keys.sort();
            keys
        };
        assert_eq!(keys(&schema), Some(sorted(&schema::TOP_LEVEL_KEYS)));
        assert_eq!(keys(&schema["$defs"]["ServerFile"]), Some(sorted(&KEYS)));
    }

    #[test]
    fn each_kind_of_value_says_what_to_write_and_what_it_found() {
        let cases = [
            ("transport = \"in-process\"", "`transport` is \"in-process\": such a server is registered in code"),
            ("url = \"https://x\"\nauth = \"t\"", "`auth` must be a table, like { type = \"bearer\", token = \"${TOKEN}\" }, not string"),
            ("command = \"x\"\nintensity = \"3\"", "`intensity` must be a whole number of at least 1, not string"),
            ("command = \"x\"\nenabled = \"yes\"", "`enabled` must be true or false, not string"),
            ("command = \"x\"\nenv = { A = { B = \"c\" } }", "`env.A` must be a string, not inline table"),
            ("command = \"x\"\nsandbox = { memory = \"lots\" }", "`sandbox.memory` must be a size, like \"512MiB\""),
            ("command = \"x\"\nsandbox = { wirte = [] }", "unknown key `sandbox.wirte`; the known keys are read, write, network"),
        ];
        for (body, expected) in cases {
            let message = parse_error(&format!("[servers.s]\n{body}\n"));
            assert!(message.starts_with("servers.toml: server \"s\": ") && message.contains(expected), "{body:?}: {message}");
        }
    }

    #[test]
    fn a_syntax_error_keeps_the_parsers_error_as_its_source() {
        let native = parse(Path::new("servers.toml"), "[servers.fs\ncommand = 1").unwrap_err();
        assert!(matches!(&native, ConfigError::Syntax { syntax: "TOML", .. }), "{native:?}");
        let parser = crate::error::Cause::find::<toml_edit::TomlError>(&native).expect("the TOML parser's error is the source");
        assert!(native.to_string().contains(&parser.to_string().lines().next().unwrap_or_default().to_string()), "{native}");
        let foreign =
            crate::config::foreign::parse(Path::new("claude_desktop_config.json"), "{\"mcpServers\": [", &Default::default()).unwrap_err();
        assert!(crate::error::Cause::find::<serde_json::Error>(&foreign).is_some(), "the JSON parser's error is the source: {foreign:?}");
        // A rule of ours, not a parser's, has no source.
        let ours = parse(Path::new("servers.toml"), "servers = 1").unwrap_err();
        assert!(matches!(&ours, ConfigError::Syntax { cause: None, .. }), "{ours:?}");
    }

    #[test]
    fn references_in_the_url_are_checked_after_expansion() {
        let servers = parse(Path::new("x.toml"), "[servers.r]\nurl = \"${BASE_URL}/mcp\"\n").unwrap();
        assert_eq!(servers[0].url.as_deref(), Some("${BASE_URL}/mcp"));
        let expanded = servers[0].expanded(|_| Some("ftp://nope".into())).unwrap();
        assert!(expanded.validate().is_err());
    }
}
