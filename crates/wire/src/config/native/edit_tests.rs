//! Tests of the TOML editor: every field written back reads as it was.

use super::super::load;
use super::super::tests::file;
use super::*;
use crate::config::Era;
use std::fs;

fn full_config() -> ServerConfig {
    let mut config = ServerConfig::stdio("full", "${HOME}/bin/srv", ["--flag", "two words"]).with_env("TOKEN", "${TOKEN}");
    config.cwd = Some("/work".into());
    config.inherit_env = true;
    config.enabled = false;
    config.timeouts = crate::config::Timeouts {
        call: Duration::from_millis(1500),
        startup: Duration::from_secs(5),
        shutdown_grace: Duration::from_secs(1),
        max_call: Duration::from_secs(120),
        health_ping: Some(Duration::from_millis(2500)),
        ..Default::default()
    };
    config.restart = RestartPolicy::OnFailure { max_restarts: 2 };
    config.era = Era::Legacy;
    config.roots = vec!["/a".into(), "file:///b".into()];
    config.tools = ToolFilter { allow: vec!["get_*".into()], deny: vec![] };
    config.limits = crate::config::Limits { max_in_flight: 4, max_queued: 8, max_frame: 4096, ..Default::default() };
    config
}

#[test]
fn upsert_then_load_gives_the_same_servers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep/dir/servers.toml");
    let mut remote = ServerConfig::remote("remote", Transport::Sse, "https://x.example/sse").with_header("X-Team", "core");
    remote.auth = Some(Auth::Basic { username: "me".into(), password: "${PASSWORD}".into() });
    let mut never = ServerConfig::stdio("never", "n", Vec::<String>::new());
    never.restart = RestartPolicy::Never;
    let odd_name = ServerConfig::stdio("my.server \"x\"", "n", Vec::<String>::new()).with_env("WEIRD KEY", "v");
    let mut machine = ServerConfig::remote("machine", Transport::Http, "https://m.example/mcp");
    machine.auth = Some(Auth::OAuth(crate::config::OAuthConfig {
        client_id: Some("ci-bot".into()),
        private_key: Some("${CI_KEY}".into()),
        scopes: vec!["read".into(), "write".into()],
        grant: crate::config::Grant::ClientCredentials,
        ..Default::default()
    }));
    let mut browser = ServerConfig::remote("browser", Transport::Http, "https://b.example/mcp");
    browser.auth = Some(Auth::OAuth(crate::config::OAuthConfig {
        client_metadata_url: Some("https://me.example/client.json".into()),
        dpop: false,
        ..Default::default()
    }));
    let mut enterprise = ServerConfig::remote("enterprise", Transport::Http, "https://e.example/mcp");
    enterprise.auth = Some(Auth::OAuth(crate::config::OAuthConfig {
        client_id: Some("crm".into()),
        client_secret: Some("${CRM_SECRET}".into()),
        grant: crate::config::Grant::JwtBearer,
        identity_provider: Some(Box::new(crate::config::IdentityProvider {
            token_endpoint: "https://idp.example/token".into(),
            client_id: "mcpvisor".into(),
            id_token_file: Some("/run/user/sso/id_token".into()),
            ..Default::default()
        })),
        ..Default::default()
    }));
    let mut as_each_caller = ServerConfig::remote("jira", Transport::Http, "https://jira.example/mcp");
    as_each_caller.auth = Some(Auth::TokenExchange(Box::new(crate::config::TokenExchangeConfig {
        issuer: Some("https://idp.example".into()),
        token_endpoint: None,
        client_id: "gateway".into(),
        client_secret: "${GW_SECRET}".into(),
        audience: Some("https://jira.example".into()),
        resource: None,
        scopes: vec!["jira:read".into()],
        max_callers: 8,
        caller_idle: Duration::from_secs(90),
        authorization_server: None,
    })));
    let mut by_id_jag = ServerConfig::remote("crm", Transport::Http, "https://crm.example/mcp");
    by_id_jag.auth = Some(Auth::TokenExchange(Box::new(crate::config::TokenExchangeConfig {
        issuer: Some("https://idp.example".into()),
        token_endpoint: None,
        client_id: "gateway".into(),
        client_secret: "${GW_SECRET}".into(),
        audience: None,
        resource: Some("https://crm.example".into()),
        scopes: vec!["crm:read".into()],
        max_callers: crate::config::token_exchange::DEFAULT_MAX_CALLERS,
        caller_idle: crate::config::token_exchange::DEFAULT_CALLER_IDLE,
        authorization_server: Some(crate::config::token_exchange::UpstreamAuthorizationServer {
            issuer: "https://auth.crm.example".into(),
            client_id: "gateway-at-crm".into(),
            client_secret: "${CRM_AS_SECRET}".into(),
        }),
    })));
    let mut logged_in_each = ServerConfig::remote("github", Transport::Http, "https://gh.example/mcp");
    logged_in_each.auth = Some(Auth::OAuth(crate::config::OAuthConfig {
        client_id: Some("gateway".into()),
        client_secret: Some("${GH_SECRET}".into()),
        per_caller: Some(crate::config::PerCallerLogin { max_callers: 5, caller_idle: Duration::from_secs(60), max_logins: 20 }),
        ..Default::default()
    }));
    let configs = [full_config(), remote, never, odd_name, machine, browser, enterprise, as_each_caller, by_id_jag, logged_in_each];
    for config in &configs {
        upsert(&path, config).unwrap();
    }
    assert_eq!(load(&path).unwrap(), configs);
}

#[test]
fn only_non_default_fields_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("servers.toml");
    upsert(&path, &ServerConfig::stdio("fs", "npx", ["-y", "server"]).with_env("LOG_LEVEL", "info")).unwrap();
    upsert(&path, &ServerConfig::remote("remote", Transport::Http, "https://example.com/mcp")).unwrap();
    let expected = "[servers.fs]\ncommand = \"npx\"\nargs = [\"-y\", \"server\"]\nenv = { LOG_LEVEL = \"info\" }\n\n\
                    [servers.remote]\nurl = \"https://example.com/mcp\"\n";
    assert_eq!(fs::read_to_string(&path).unwrap(), expected);
}

#[test]
fn invalid_configs_are_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("servers.toml");
    let error = upsert(&path, &ServerConfig::stdio("x", "", Vec::<String>::new())).unwrap_err();
    assert!(error.to_string().contains("`command` is empty"), "{error}");
    assert!(!path.exists());
}

const EDITED: &str = r#"# my servers

# the first one
[servers.alpha]
command = "alpha"   # keep me
args = ['--quiet']
timeout = 60.0

[servers.beta]   # beta's header
command = "beta"
enabled = true  # toggled by hand
env = { LEVEL = "debug" }

# gamma, below
[servers.gamma]
url = "https://gamma.example/mcp"
[servers.gamma.headers]
X-Team = "core"   # the team

# end of file
"#;

#[test]
fn unchanged_upsert_leaves_the_file_byte_for_byte() {
    let (_dir, path) = file(EDITED);
    for config in load(&path).unwrap() {
        upsert(&path, &config).unwrap();
    }
    assert_eq!(fs::read_to_string(&path).unwrap(), EDITED, "different spellings of the same values are kept");
}

#[test]
fn upsert_changes_only_what_changed() {
    let (_dir, path) = file(EDITED);
    let mut beta = load(&path).unwrap().remove(1);
    beta.env.insert("EXTRA".into(), "1".into());
    beta.enabled = false;
    beta.timeouts.call = Duration::from_secs(90);
    upsert(&path, &beta).unwrap();
    let mut gamma = load(&path).unwrap().remove(2);
    gamma.headers.insert("X-Team".into(), "infra".into());
    gamma.headers.insert("X-Other".into(), "1".into());
    upsert(&path, &gamma).unwrap();
    let expected = EDITED
        .replace(
            "enabled = true  # toggled by hand\nenv = { LEVEL = \"debug\" }",
            "enabled = false  # toggled by hand\nenv = { LEVEL = \"debug\", EXTRA = \"1\" }\ntimeout = 90",
        )
        .replace("X-Team = \"core\"   # the team\n", "X-Team = \"infra\"   # the team\nX-Other = \"1\"\n");
    assert_eq!(fs::read_to_string(&path).unwrap(), expected);
}

#[test]
fn upsert_removes_keys_that_no_longer_apply() {
    let (_dir, path) = file("[servers.s]\ncommand = \"x\"\nrestart = \"on-failure\"\nmax_restarts = 2\ncwd = \"/tmp\"\n");
    let mut config = load(&path).unwrap().remove(0);
    config.restart = RestartPolicy::Always;
    config.cwd = None;
    upsert(&path, &config).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "[servers.s]\ncommand = \"x\"\nrestart = \"always\"\n");
}

#[test]
fn new_servers_are_appended_after_the_others() {
    let (_dir, path) = file(EDITED);
    upsert(&path, &ServerConfig::stdio("delta", "delta", Vec::<String>::new())).unwrap();
    let text = fs::read_to_string(&path).unwrap();
    let expected = EDITED.replace("\n# end of file\n", "\n[servers.delta]\ncommand = \"delta\"\n\n# end of file\n");
    assert_eq!(text, expected);
    let names: Vec<String> = load(&path).unwrap().into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["alpha", "beta", "gamma", "delta"]);
}

#[test]
fn set_enabled_changes_one_value() {
    let (_dir, path) = file(EDITED);
    set_enabled(&path, "beta", false).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), EDITED.replace("enabled = true  # toggled", "enabled = false  # toggled"));
    set_enabled(&path, "alpha", false).unwrap();
    let expected = EDITED
        .replace("enabled = true  # toggled", "enabled = false  # toggled")
        .replace("timeout = 60.0\n", "timeout = 60.0\nenabled = false\n");
    assert_eq!(fs::read_to_string(&path).unwrap(), expected);
    set_enabled(&path, "alpha", true).unwrap();
    set_enabled(&path, "beta", true).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), EDITED.replace("timeout = 60.0\n", "timeout = 60.0\nenabled = true\n"));
}

#[test]
fn remove_keeps_the_other_servers_and_detached_comments() {
    let (_dir, path) = file(EDITED);
    remove(&path, "beta").unwrap();
    let beta = "[servers.beta]   # beta's header\ncommand = \"beta\"\nenabled = true  # toggled by hand\nenv = { LEVEL = \"debug\" }\n\n";
    assert_eq!(fs::read_to_string(&path).unwrap(), EDITED.replace(beta, ""));

    remove(&path, "alpha").unwrap();
    let expected = "# my servers\n\n# gamma, below\n[servers.gamma]\nurl = \"https://gamma.example/mcp\"\n[servers.gamma.headers]\nX-Team = \"core\"   # the team\n\n# end of file\n";
    assert_eq!(fs::read_to_string(&path).unwrap(), expected, "the file's header comment stays, alpha's own goes");

    remove(&path, "gamma").unwrap();
    assert_eq!(load(&path).unwrap(), []);
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.contains("# my servers") && text.contains("# end of file"), "{text:?}");
}

#[test]
fn unknown_servers_are_errors_and_leave_the_file_alone() {
    let (dir, path) = file(EDITED);
    let error = remove(&path, "zeta").unwrap_err();
    assert_eq!(error, ConfigError::UnknownServer { file: path.clone(), server: "zeta".into() });
    assert!(matches!(set_enabled(&path, "zeta", true), Err(ConfigError::UnknownServer { .. })));
    assert_eq!(fs::read_to_string(&path).unwrap(), EDITED);
    let missing = dir.path().join("missing.toml");
    assert!(matches!(remove(&missing, "x"), Err(ConfigError::UnknownServer { .. })));
    assert!(!missing.exists());
}

#[test]
fn inline_server_tables_are_edited_in_place() {
    let (_dir, path) = file("[servers]\na = { command = \"a\" }  # inline\n");
    set_enabled(&path, "a", false).unwrap();
    upsert(&path, &ServerConfig::stdio("b", "b", Vec::<String>::new())).unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "[servers]\na = { command = \"a\", enabled = false }  # inline\nb = { command = \"b\" }\n"
    );
    assert_eq!(load(&path).unwrap().len(), 2);
}

#[test]
fn an_authorization_server_sub_table_is_edited_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("servers.toml");
    let text = "[servers.crm]\nurl = \"https://crm.example/mcp\"\n\n[servers.crm.auth]\ntype = \"token_exchange\"\n\
                issuer = \"https://idp.example\"\nclient_id = \"gw\"\nclient_secret = \"${GW_SECRET}\"\n\n\
                # the CRM's own authorization server\n[servers.crm.auth.authorization_server]\nissuer = \"https://as.example\"\n\
                client_id = \"gw-at-crm\"\nclient_secret = \"${OLD}\"\n";
    fs::write(&path, text).unwrap();
    let mut config = load(&path).unwrap().remove(0);
    let Some(Auth::TokenExchange(exchange)) = &mut config.auth else { panic!("{config:?}") };
    exchange.authorization_server.as_mut().unwrap().client_secret = "${NEW}".into();
    upsert(&path, &config).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), text.replace("${OLD}", "${NEW}"), "only the secret's value changed");
    assert_eq!(load(&path).unwrap(), [config]);
}
