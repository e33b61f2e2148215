//! Configurations safe to show: in listings, status output and logs.
//!
//! Rules: every header value and auth secret (token, password, API key
//! value) is masked; the Basic auth username and the API key's header
//! name are not secrets and stay. Env values are masked when their name
//! looks like a secret (see [`looks_secret`]). In URLs, the password of the
//! userinfo (or the user, when there is no password: tokens are often put
//! there) and query values whose names look like secrets are masked.
//! In `args`, the value of a flag whose name looks like a secret is masked
//! (`--api-key VALUE`, `--token=VALUE`).
//! A value that is exactly one `${VAR}` reference is shown as it is: it
//! names the secret without holding it. Empty values stay empty.

use super::expand::{is_only_reference, Syntax, TextField};
use super::ServerConfig;

/// What a hidden value is shown as.
pub const MASK: &str = "***";

/// Name fragments that mark an env variable or query parameter as a secret (case-insensitive).
const SECRET_MARKERS: [&str; 7] = ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASS", "AUTH", "CREDENTIAL"];

impl ServerConfig {
    /// The configuration with its secrets replaced by [`MASK`]; use it for
    /// everything shown to people or written to logs.
    pub fn redacted(&self) -> ServerConfig {
        let mut config = self.clone();
        let never: Result<(), std::convert::Infallible> = config.visit_texts(|field, text| {
            let syntax = field.syntax();
            match field {
                TextField::Command | TextField::Arg(_) | TextField::Cwd | TextField::Auth("username") => {}
                TextField::Env(name) if !looks_secret(name) => {}
                TextField::Url => *text = redact_url(text),
                TextField::Env(_) | TextField::Header(_) | TextField::Auth(_) => *text = mask(text, syntax),
            }
            Ok(())
        });
        let Ok(()) = never;
        redact_flag_values(&mut config.args);
        config
    }
}

/// Whether a variable or parameter name looks like it holds a secret.
pub(crate) fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_MARKERS.iter().any(|marker| upper.contains(marker))
}

/// Masks the values of secret-looking flags: `--token=VALUE` and `--api-key VALUE`.
fn redact_flag_values(args: &mut [String]) {
    let mut secret_flag_before = false;
    for arg in args.iter_mut() {
        let follows_secret_flag = std::mem::take(&mut secret_flag_before);
        if let Some((flag, value)) = arg.split_once('=').filter(|(flag, _)| flag.starts_with('-')) {
            if looks_secret(flag) {
                *arg = format!("{flag}={}", mask(value, Syntax::Braced));
            }
        } else if arg.starts_with('-') {
            secret_flag_before = looks_secret(arg);
        } else if follows_secret_flag {
            *arg = mask(arg, Syntax::Braced);
        }
    }
}

fn mask(value: &str, syntax: Syntax) -> String {
    if value.is_empty() || is_only_reference(value, syntax) {
        value.into()
    } else {
        MASK.into()
    }
}

/// Masks the userinfo secret and secret-looking query values of a URL.
fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|at| at + 3) else {
        return url.into();
    };
    let (scheme, rest) = url.split_at(scheme_end);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let userinfo = match userinfo.split_once(':') {
                Some((user, password)) => format!("{user}:{}", mask(password, Syntax::Braced)),
                None => mask(userinfo, Syntax::Braced),
            };
            format!("{userinfo}@{host}")
        }
        None => authority.into(),
    };
    format!("{scheme}{authority}{}", redact_query(tail))
}

/// Masks the values of secret-looking parameters in `path?query#fragment`.
fn redact_query(tail: &str) -> String {
    let Some(query_start) = tail.find('?').map(|at| at + 1) else {
        return tail.into();
    };
    let query_end = tail[query_start..].find('#').map_or(tail.len(), |at| query_start + at);
    let query = tail[query_start..query_end]
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) if looks_secret(name) => format!("{name}={}", mask(value, Syntax::Braced)),
            _ => pair.into(),
        })
        .collect::<Vec<_>>()
        .join("&");
    format!("{}{query}{}", &tail[..query_start], &tail[query_end..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Auth, Transport};

    #[test]
    fn secret_names() {
        for name in ["GITHUB_TOKEN", "api_key", "ApiKey", "DB_PASSWORD", "PASSPHRASE", "AUTH_HEADER", "GOOGLE_CREDENTIALS", "CLIENT_SECRET"]
        {
            assert!(looks_secret(name), "{name}");
        }
        for name in ["LOG_LEVEL", "PATH", "HOME", "REGION"] {
            assert!(!looks_secret(name), "{name}");
        }
    }

    #[test]
    fn env_values_with_secret_names_are_masked_unless_only_a_reference() {
        let config = ServerConfig::stdio("gh", "npx", ["-y", "server-github"])
            .with_env("LOG_LEVEL", "info")
            .with_env("GITHUB_TOKEN", "ghp_abc")
            .with_env("API_KEY", "${API_KEY}")
            .with_env("DB_PASSWORD", "${PW:-hunter2}")
            .with_env("EMPTY_SECRET", "");
        let shown = config.redacted();
        assert_eq!(shown.env["LOG_LEVEL"], "info");
        assert_eq!(shown.env["GITHUB_TOKEN"], MASK);
        assert_eq!(shown.env["API_KEY"], "${API_KEY}");
        assert_eq!(shown.env["DB_PASSWORD"], MASK, "a default may be a secret");
        assert_eq!(shown.env["EMPTY_SECRET"], "");
        assert_eq!(shown.args, config.args);
        assert_eq!(shown.command, config.command);
    }

    #[test]
    fn values_of_secret_flags_in_args_are_masked() {
        let args = ["--api-key", "sk-123", "--token=ghp_x", "--verbose", "--path", "/data", "--password", "${PW}", "--auth-token=${T}"];
        let shown = ServerConfig::stdio("s", "srv", args).redacted();
        assert_eq!(
            shown.args,
            ["--api-key", MASK, "--token=***", "--verbose", "--path", "/data", "--password", "${PW}", "--auth-token=${T}"]
        );
    }

    #[test]
    fn headers_and_auth_are_masked() {
        let mut config = ServerConfig::remote("api", Transport::Http, "https://example.com/mcp")
            .with_header("X-Team", "core")
            .with_header("Authorization", "Bearer ${TOKEN}")
            .with_header("X-Api-Key", "${KEY}");
        config.auth = Some(Auth::Basic { username: "me".into(), password: "pw".into() });
        let shown = config.redacted();
        assert_eq!(shown.headers["X-Team"], MASK, "every header value may be a secret");
        assert_eq!(shown.headers["Authorization"], MASK);
        assert_eq!(shown.headers["X-Api-Key"], "${KEY}");
        assert_eq!(shown.auth, Some(Auth::Basic { username: "me".into(), password: MASK.into() }));

        config.auth = Some(Auth::Bearer { token: "$TOKEN".into() });
        assert_eq!(config.redacted().auth, Some(Auth::Bearer { token: "$TOKEN".into() }), "a bare reference in auth");
        config.auth = Some(Auth::ApiKey { header: "X-Key".into(), value: "abc".into() });
        assert_eq!(config.redacted().auth, Some(Auth::ApiKey { header: "X-Key".into(), value: MASK.into() }));
    }

    #[test]
    fn urls() {
        assert_eq!(redact_url("https://user:pw@host:8443/mcp"), "https://user:***@host:8443/mcp");
        assert_eq!(redact_url("https://ghp_token@host/mcp"), "https://***@host/mcp");
        assert_eq!(redact_url("https://${USER}:${PASSWORD}@host/"), "https://${USER}:${PASSWORD}@host/");
        assert_eq!(redact_url("https://host/mcp?api_key=abc&x=1#frag"), "https://host/mcp?api_key=***&x=1#frag");
        assert_eq!(redact_url("https://host/mcp?token=${T}"), "https://host/mcp?token=${T}");
        assert_eq!(redact_url("https://host/a@b"), "https://host/a@b", "an @ in the path is not userinfo");
        assert_eq!(redact_url("https://host"), "https://host");
        assert_eq!(redact_url("not a url"), "not a url");
        let config = ServerConfig::remote("r", Transport::Sse, "https://u:p@h/sse");
        assert_eq!(config.redacted().url.as_deref(), Some("https://u:***@h/sse"));
    }
}
