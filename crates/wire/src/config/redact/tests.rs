use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::config::{Auth, Transport};

#[test]
fn secret_names() {
    for name in ["GITHUB_TOKEN", "api_key", "ApiKey", "DB_PASSWORD", "PASSPHRASE", "AUTH_HEADER", "GOOGLE_CREDENTIALS", "CLIENT_SECRET"] {
        assert!(looks_secret(name), "{name}");
    }
    for name in ["LOG_LEVEL", "PATH", "HOME", "REGION"] {
        assert!(!looks_secret(name), "{name}");
    }
    assert!(is_secret_name("sig") && is_secret_name("--api-key") && !is_secret_name("signal"));
}

#[test]
fn numbers_booleans_and_setting_words_are_not_secrets() {
    for value in ["1000", "-1.5e3", "false", "TRUE", "off", "required", "debug", "", "  ", "${TOKEN}"] {
        assert!(!could_be_secret(value), "{value:?}");
    }
    for value in ["hunter2", "abc", "ghp_x", "${PW:-hunter2}", "s3cr3t-value"] {
        assert!(could_be_secret(value), "{value:?}");
    }
}

#[test]
fn env_values_with_secret_names_are_masked_unless_they_cannot_be_secrets() {
    let config = ServerConfig::stdio("gh", "npx", ["-y", "server-github"])
        .with_env("LOG_LEVEL", "info")
        .with_env("GITHUB_TOKEN", "ghp_abc")
        .with_env("API_KEY", "${API_KEY}")
        .with_env("DB_PASSWORD", "${PW:-hunter2}")
        .with_env("EMPTY_SECRET", "")
        .with_env("MAX_TOKENS", "1000")
        .with_env("AUTH_REQUIRED", "false")
        .with_env("DATABASE_URL", "postgres://u:PASS@host/db")
        .with_env("GH", "ghp_abcdefghijklmnopqrstuvwxyz0123");
    let shown = config.redacted();
    assert_eq!(shown.env["LOG_LEVEL"], "info");
    assert_eq!(shown.env["GITHUB_TOKEN"], MASK);
    assert_eq!(shown.env["API_KEY"], "${API_KEY}");
    assert_eq!(shown.env["DB_PASSWORD"], MASK, "a default may be a secret");
    assert_eq!(shown.env["EMPTY_SECRET"], "");
    assert_eq!((shown.env["MAX_TOKENS"].as_str(), shown.env["AUTH_REQUIRED"].as_str()), ("1000", "false"));
    assert_eq!(shown.env["DATABASE_URL"], "postgres://u:***@host/db", "a URL password under a neutral name");
    assert_eq!(shown.env["GH"], MASK, "a token shape under a neutral name");
    assert_eq!(shown.args, config.args);
    assert_eq!(shown.command, config.command);
}

#[test]
fn secrets_in_args_are_masked() {
    let cases = [
        ("--api-key", "--api-key"),
        ("sk-123", MASK),
        ("--token=ghp_x", "--token=***"),
        ("--verbose", "--verbose"),
        ("--path", "--path"),
        ("/data", "/data"),
        ("--password", "--password"),
        ("${PW}", "${PW}"),
        ("--auth-token=${T}", "--auth-token=${T}"),
        ("-H", "-H"),
        ("Authorization: Bearer abcdef123456", "Authorization: Bearer ***"),
        ("https://x.example/f?sv=1&sig=abc%2F", "https://x.example/f?sv=1&sig=***"),
        ("mysql://root:pw@db/x", "mysql://root:***@db/x"),
    ];
    let shown = ServerConfig::stdio("s", "srv", cases.map(|(arg, _)| arg)).redacted();
    assert_eq!(shown.args, cases.map(|(_, shown)| shown));
}

#[test]
fn headers_and_auth_are_masked() {
    let mut config = ServerConfig::remote("api", Transport::Http, "https://example.com/mcp")
        .with_header("X-Team", "core")
        .with_header("Authorization", "Bearer ${TOKEN}")
        .with_header("X-Api-Key", "${KEY}")
        .with_header("X-Retries", "3");
    config.auth = Some(Auth::Basic { username: "me".into(), password: "pw".into() });
    let shown = config.redacted();
    assert_eq!(shown.headers["X-Team"], MASK, "a header value may be a secret");
    assert_eq!(shown.headers["Authorization"], MASK);
    assert_eq!(shown.headers["X-Api-Key"], "${KEY}");
    assert_eq!(shown.headers["X-Retries"], "3");
    assert_eq!(shown.auth, Some(Auth::Basic { username: "me".into(), password: MASK.into() }));

    config.auth = Some(Auth::Bearer { token: "$TOKEN".into() });
    assert_eq!(config.redacted().auth, Some(Auth::Bearer { token: "$TOKEN".into() }), "a bare reference in auth");
    config.auth = Some(Auth::ApiKey { header: "X-Key".into(), value: "abc".into() });
    assert_eq!(config.redacted().auth, Some(Auth::ApiKey { header: "X-Key".into(), value: MASK.into() }));
}

#[test]
fn urls() {
    let url = |url: &str| ServerConfig::remote("r", Transport::Sse, url).redacted().url.unwrap_or_default();
    assert_eq!(url("https://user:pw@host:8443/mcp"), "https://user:***@host:8443/mcp");
    assert_eq!(url("https://ghp_token@host/mcp"), "https://***@host/mcp");
    assert_eq!(url("https://${USER}:${PASSWORD}@host/"), "https://${USER}:${PASSWORD}@host/");
    assert_eq!(url("https://host/mcp?api_key=abc&x=1#frag"), "https://host/mcp?api_key=***&x=1#frag");
    assert_eq!(url("https://host/mcp?token=${T}"), "https://host/mcp?token=${T}");
    assert_eq!(url("https://host"), "https://host");
}

fn redactor_of(config: &ServerConfig) -> Redactor {
    Redactor::from_configs([config])
}

#[test]
fn text_masks_the_values_of_the_configuration_and_nothing_else() {
    let config = ServerConfig::stdio("s", "cmd", ["--api-key", "key-abcdef", "--level", "debug-1"])
        .with_env("API_TOKEN", "tok-12345")
        .with_env("MAX_TOKENS", "1000")
        .with_env("AUTH_REQUIRED", "false")
        .with_env("DSN", "postgres://u:pa55word@host/db");
    let redactor = redactor_of(&config);
    assert_eq!(redactor.text("using tok-12345 at level debug-1"), "using *** at level debug-1");
    assert_eq!(redactor.text("sum 1000 is false"), "sum 1000 is false");
    assert_eq!(redactor.text("login failed for pa55word; key key-abcdef"), "login failed for ***; key ***");
    assert!(matches!(redactor.text("nothing here"), Cow::Borrowed(_)));
}

#[test]
fn every_line_of_a_multi_line_secret_is_masked() {
    let pem =
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n-----END PRIVATE KEY-----\n";
    let redactor = redactor_of(&ServerConfig::stdio("s", "cmd", Vec::<String>::new()).with_env("TLS_KEY", pem));
    for line in pem.lines() {
        assert_eq!(redactor.text(&format!("stderr: {line}")), "stderr: ***", "{line}");
    }
    assert_eq!(redactor.text(&serde_json::to_string(pem).unwrap()), "\"***\"", "the JSON-escaped form");
}

#[test]
fn references_are_expanded_from_the_environment() {
    let config = ServerConfig::stdio("s", "cmd", Vec::<String>::new()).with_env("DB_PASSWORD", "${MCPVISOR_REDACT_TEST_NOT_SET:-hunter22}");
    assert_eq!(redactor_of(&config).text("pw hunter22"), "pw ***");
}

#[test]
fn a_secret_made_by_masking_is_masked_too() {
    let redactor = Redactor::with_secrets(["ab***cd".to_string(), "XXXXXXXX".to_string()]);
    assert_eq!(redactor.text("abXXXXXXXXcd"), "***");
    assert_eq!(redactor.text("tiny"), "tiny");
    assert_eq!(Redactor::with_secrets(["short".to_string()]).text("short"), "short", "below the minimum length");
}

#[test]
fn json_is_masked_inside_strings_only() {
    let redactor = Redactor::with_secrets(["1000-true".to_string(), "readOnlyHint".to_string()]);
    let mut value = json!({"readOnlyHint": true, "n": 1000, "text": "x 1000-true y", "list": [null, "readOnlyHint"]});
    redactor.json(&mut value);
    assert_eq!(value, json!({"readOnlyHint": true, "n": 1000, "text": "x *** y", "list": [null, "***"]}));
    let mut deep = json!("ghp_abcdefghijklmnopqrstuvwxyz");
    for _ in 0..50_000 {
        deep = Value::Array(vec![deep]);
    }
    redactor.json(&mut deep);
    let mut inner = &deep;
    while let Value::Array(items) = inner {
        inner = &items[0];
    }
    assert_eq!(inner, &json!("***"));
    std::mem::forget(deep); // dropping 50,000 levels would recurse: not what this test is about
}

/// Secrets that cannot be spelled by JSON's syntax, numbers or the keys below.
fn secret() -> impl Strategy<Value = String> {
    "[g-z][a-zA-Z0-9_!*%-]{5,16}"
}

fn json_value(secrets: Vec<String>) -> impl Strategy<Value = Value> {
    let text = prop_oneof![
        "[ -~]{0,12}",
        proptest::sample::select(secrets.clone()),
        (proptest::sample::select(secrets), "[ -~]{0,6}").prop_map(|(s, tail)| format!("x{s}{tail}")),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        text.prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map("[a-f]{1,5}", inner, 0..6).prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// The same shape, keys, numbers, booleans and nulls.
fn same_skeleton(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(_), Value::String(_)) => true,
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_skeleton(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((ka, a), (kb, b))| ka == kb && same_skeleton(a, b))
        }
        _ => a == b,
    }
}

proptest! {
    #[test]
    fn text_never_shows_a_configured_secret(
        secrets in proptest::collection::vec(secret(), 1..4),
        pieces in proptest::collection::vec((0usize..4, "[ -~]{0,8}"), 0..8),
    ) {
        let text: String = pieces.iter().map(|(i, filler)| format!("{}{filler}", secrets.get(*i).map_or("", String::as_str))).collect();
        let redactor = Redactor::with_secrets(secrets.clone());
        let shown = redactor.text(&text);
        for secret in &secrets {
            prop_assert!(!shown.contains(secret.as_str()), "{secret:?} in {shown:?}");
        }
    }

    #[test]
    fn json_stays_json_with_the_same_skeleton_and_without_secrets(
        (secrets, value) in proptest::collection::vec(secret(), 1..4).prop_flat_map(|secrets| (Just(secrets.clone()), json_value(secrets))),
    ) {
        let redactor = Redactor::with_secrets(secrets.clone());
        let mut masked = value.clone();
        redactor.json(&mut masked);
        prop_assert!(same_skeleton(&value, &masked));
        let text = serde_json::to_string(&masked).unwrap();
        prop_assert!(serde_json::from_str::<Value>(&text).is_ok(), "not JSON: {}", text);
        for secret in &secrets {
            prop_assert!(!text.contains(secret.as_str()), "{secret:?} in {text}");
        }
    }
}

#[test]
fn oauth_secrets_are_masked_and_client_ids_shown() {
    let mut config = ServerConfig::remote("r", Transport::Http, "https://r.example/mcp");
    config.auth = Some(Auth::OAuth(crate::config::OAuthConfig {
        client_id: Some("my-client-id".into()),
        client_secret: Some("client-secret-value".into()),
        private_key: Some("-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMG\n-----END PRIVATE KEY-----".into()),
        client_metadata_url: Some("https://me.example/client.json".into()),
        ..Default::default()
    }));
    let Some(Auth::OAuth(shown)) = config.redacted().auth else { panic!("auth changed kind") };
    assert_eq!(shown.client_id.as_deref(), Some("my-client-id"));
    assert_eq!(shown.client_metadata_url.as_deref(), Some("https://me.example/client.json"));
    assert_eq!((shown.client_secret.as_deref(), shown.private_key.as_deref()), (Some(MASK), Some(MASK)));
    let redactor = crate::config::Redactor::from_configs([&config]);
    assert_eq!(redactor.text("secret: client-secret-value"), "secret: ***");
    assert_eq!(redactor.text("key line MIGHAgEAMBMG"), "key line ***");
}

/// Issue 19: three of mcpvisor's own messages were garbled by the
/// redactor; each is shown as it is, while the secrets beside them stay masked.
#[test]
fn mcpvisors_own_messages_are_not_taken_for_secrets() {
    let redactor = Redactor::default();
    let unchanged = [
        // was "... or write ${API_KEY:***}"
        "server \"s\": env.X uses ${API_KEY}, which is not set; set it or write ${API_KEY:-default}",
        // was "needs_auth: *** `remote` needs a login"
        "needs_auth: server `remote` needs a login; log in with `mcpvisor auth remote`",
        "auth: server `remote` is not logged in",
        // was "PWD=***"
        "env: PWD=/home/me/project, HOME=/home/me",
    ];
    for text in unchanged {
        assert_eq!(redactor.text(text), text);
    }
    for (text, shown) in [
        ("DB_PASSWORD=${PW:-hunter22}", "DB_PASSWORD=***"),
        ("write ${API_KEY:-hunter22}", "write ${API_KEY:-***}"),
        ("auth: hunter22", "auth: ***"),
        ("auth: \"hunter22\"", "auth: \"***\""),
        ("pwd=hunter22 PWD=hunter22", "pwd=*** PWD=***"),
    ] {
        assert_eq!(redactor.text(text), shown, "{text}");
    }
}
