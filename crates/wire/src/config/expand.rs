//! `${VAR}` references in configuration values and their expansion.
//!
//! Syntax: `${VAR}` is the value of `VAR` (an error if it is not set);
//! `${VAR:-default}` is `default` when `VAR` is unset or empty; in auth
//! values `$VAR` works too. `$${` writes a literal `${` (and `$$VAR` a
//! literal `$VAR` in auth values); any other `$` is literal. Names are
//! `[A-Za-z_][A-Za-z0-9_]*`.
//!
//! The fields that may hold references are listed once, by
//! [`ServerConfig::visit_texts`]: command, args, cwd, env values, url,
//! header values and auth values.

use std::path::PathBuf;

use super::{Auth, ServerConfig};
use crate::error::ConfigError;

/// Whether a bare `$VAR` is a reference in a field, besides `${VAR}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syntax {
    Braced,
    BracedOrBare,
}

/// A field whose text may hold references.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TextField<'a> {
    Command,
    Arg(usize),
    Cwd,
    Env(&'a str),
    Url,
    Header(&'a str),
    /// The auth value's key: `token`, `username`, `password`, `value`, or
    /// one of OAuth's (`client_id`, `client_secret`, `client_metadata_url`, `private_key`).
    Auth(&'static str),
}

impl TextField<'_> {
    /// The field as the native file spells it: `env.GITHUB_TOKEN`, `args[2]`.
    pub(crate) fn path(&self) -> String {
        match self {
            TextField::Command => "command".into(),
            TextField::Arg(i) => format!("args[{i}]"),
            TextField::Cwd => "cwd".into(),
            TextField::Env(key) => format!("env.{key}"),
            TextField::Url => "url".into(),
            TextField::Header(key) => format!("headers.{key}"),
            TextField::Auth(key) => format!("auth.{key}"),
        }
    }

    pub(crate) fn syntax(&self) -> Syntax {
        match self {
            TextField::Auth(_) => Syntax::BracedOrBare,
            _ => Syntax::Braced,
        }
    }
}

impl ServerConfig {
    /// Calls `visit` on every text field that may hold references, in a fixed order.
    /// A non-UTF-8 `cwd` is skipped.
    pub(crate) fn visit_texts<E>(&mut self, mut visit: impl FnMut(TextField<'_>, &mut String) -> Result<(), E>) -> Result<(), E> {
        visit(TextField::Command, &mut self.command)?;
        for (i, arg) in self.args.iter_mut().enumerate() {
            visit(TextField::Arg(i), arg)?;
        }
        if let Some(mut cwd) = self.cwd.as_ref().and_then(|cwd| cwd.to_str()).map(str::to_owned) {
            visit(TextField::Cwd, &mut cwd)?;
            self.cwd = Some(PathBuf::from(cwd));
        }
        for (key, value) in self.env.iter_mut() {
            visit(TextField::Env(key), value)?;
        }
        if let Some(url) = &mut self.url {
            visit(TextField::Url, url)?;
        }
        for (key, value) in self.headers.iter_mut() {
            visit(TextField::Header(key), value)?;
        }
        // The auth fields that may be unset, visited once the variant's own are.
        let mut optional: Vec<(&str, &mut Option<String>)> = Vec::new();
        match &mut self.auth {
            Some(Auth::Bearer { token }) => visit(TextField::Auth("token"), token)?,
            Some(Auth::Basic { username, password }) => {
                visit(TextField::Auth("username"), username)?;
                visit(TextField::Auth("password"), password)?;
            }
            Some(Auth::ApiKey { value, .. }) => visit(TextField::Auth("value"), value)?,
            Some(Auth::OAuth(oauth)) => {
                optional.extend([
                    ("client_id", &mut oauth.client_id),
                    ("client_secret", &mut oauth.client_secret),
                    ("client_metadata_url", &mut oauth.client_metadata_url),
                    ("private_key", &mut oauth.private_key),
                    ("assertion", &mut oauth.assertion),
                    ("assertion_file", &mut oauth.assertion_file),
                ]);
                if let Some(idp) = &mut oauth.identity_provider {
                    visit(TextField::Auth("identity_provider.token_endpoint"), &mut idp.token_endpoint)?;
                    visit(TextField::Auth("identity_provider.client_id"), &mut idp.client_id)?;
                    optional.extend([
                        ("identity_provider.client_secret", &mut idp.client_secret),
                        ("identity_provider.id_token", &mut idp.id_token),
                        ("identity_provider.id_token_file", &mut idp.id_token_file),
                    ]);
                }
            }
            Some(Auth::TokenExchange(exchange)) => {
                visit(TextField::Auth("client_id"), &mut exchange.client_id)?;
                visit(TextField::Auth("client_secret"), &mut exchange.client_secret)?;
                optional.extend([
                    ("issuer", &mut exchange.issuer),
                    ("token_endpoint", &mut exchange.token_endpoint),
                    ("audience", &mut exchange.audience),
                    ("resource", &mut exchange.resource),
                ]);
                if let Some(server) = &mut exchange.authorization_server {
                    visit(TextField::Auth("authorization_server.issuer"), &mut server.issuer)?;
                    visit(TextField::Auth("authorization_server.client_id"), &mut server.client_id)?;
                    visit(TextField::Auth("authorization_server.client_secret"), &mut server.client_secret)?;
                }
            }
            None => {}
        }
        for (key, value) in optional {
            if let Some(value) = value {
                visit(TextField::Auth(key), value)?;
            }
        }
        Ok(())
    }

    /// The configuration with every reference replaced by its value, as the
    /// runtime needs it. `lookup` is usually `|name| std::env::var(name).ok()`.
    ///
    /// An unset variable without a default, or a `${...}` that is not a
    /// reference, is an error naming the server and the field.
    pub fn expanded(&self, lookup: impl Fn(&str) -> Option<String>) -> Result<ServerConfig, ConfigError> {
        let mut config = self.clone();
        config.visit_texts(|field, text| {
            *text = expand(text, field.syntax(), &lookup).map_err(|problem| {
                let (server, field) = (self.name.clone(), field.path());
                match problem {
                    Problem::Unset(var) => ConfigError::UnsetVariable { server, field, var },
                    Problem::Malformed(reference) => ConfigError::BadReference { server, field, reference },
                }
            })?;
            Ok(())
        })?;
        Ok(config)
    }
}

/// One part of a text: literal text or a reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    Text(&'a str),
    Var {
        name: &'a str,
        default: Option<&'a str>,
    },
    /// `${caller.…}` of a per-caller server, filled in only when a
    /// caller's process starts (`super::per_caller`): kept as written.
    Caller(&'a str),
}

/// Why a text could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    /// The variable is not set and the reference has no default.
    Unset(String),
    /// This `${...}` (or unclosed `${`) is not a reference.
    Malformed(String),
}

/// Splits `text` into literal parts and references. `$$` before a
/// reference yields a literal `$` and leaves the reference as text.
pub(crate) fn pieces(text: &str, syntax: Syntax) -> Result<Vec<Piece<'_>>, Problem> {
    let bytes = text.as_bytes();
    let starts_reference = |at: usize| match bytes.get(at) {
        Some(b'{') => true,
        Some(&c) => syntax == Syntax::BracedOrBare && is_name_start(c),
        None => false,
    };
    let mut pieces = Vec::new();
    let (mut literal_from, mut i) = (0, 0);
    while i < bytes.len() {
        if bytes[i] != b'$' {
            i += 1;
            continue;
        }
        if bytes.get(i + 1) == Some(&b'$') && starts_reference(i + 2) {
            push_text(&mut pieces, &text[literal_from..=i]);
            i += 2;
            literal_from = i;
            continue;
        }
        let (reference, end) = match bytes.get(i + 1) {
            Some(b'{') => {
                let close = text[i + 2..].find('}').map(|at| i + 2 + at).ok_or_else(|| Problem::Malformed(text[i..].into()))?;
                let inner = &text[i + 2..close];
                match super::per_caller::caller_reference(inner) {
                    Some(Ok(())) => (Piece::Caller(&text[i..=close]), close + 1),
                    Some(Err(_)) => return Err(Problem::Malformed(text[i..=close].into())),
                    None => {
                        let (name, default) = match inner.split_once(":-") {
                            Some((name, default)) => (name, Some(default)),
                            None => (inner, None),
                        };
                        if !is_name(name) {
                            return Err(Problem::Malformed(text[i..=close].into()));
                        }
                        (Piece::Var { name, default }, close + 1)
                    }
                }
            }
            Some(&c) if syntax == Syntax::BracedOrBare && is_name_start(c) => {
                let end = i + 1 + bytes[i + 1..].iter().take_while(|&&c| is_name_char(c)).count();
                (Piece::Var { name: &text[i + 1..end], default: None }, end)
            }
            _ => {
                i += 1;
                continue;
            }
        };
        push_text(&mut pieces, &text[literal_from..i]);
        pieces.push(reference);
        i = end;
        literal_from = end;
    }
    push_text(&mut pieces, &text[literal_from..]);
    Ok(pieces)
}

fn push_text<'a>(pieces: &mut Vec<Piece<'a>>, part: &'a str) {
    if !part.is_empty() {
        pieces.push(Piece::Text(part));
    }
}

/// `text` with its references replaced by their values.
pub(crate) fn expand(text: &str, syntax: Syntax, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, Problem> {
    let mut out = String::with_capacity(text.len());
    for piece in pieces(text, syntax)? {
        match piece {
            Piece::Text(part) | Piece::Caller(part) => out.push_str(part),
            Piece::Var { name, default: Some(default) } => {
                out.push_str(&lookup(name).filter(|value| !value.is_empty()).unwrap_or_else(|| default.into()))
            }
            Piece::Var { name, default: None } => out.push_str(&lookup(name).ok_or_else(|| Problem::Unset(name.into()))?),
        }
    }
    Ok(out)
}

/// True when `text` is exactly one reference without a default, such as
/// `${GITHUB_TOKEN}`: it names a secret without holding one.
pub(crate) fn is_only_reference(text: &str, syntax: Syntax) -> bool {
    matches!(pieces(text, syntax).as_deref(), Ok([Piece::Var { default: None, .. } | Piece::Caller(_)]))
}

/// `literal` written so that expanding it gives it back unchanged.
pub(crate) fn escape(literal: &str, syntax: Syntax) -> String {
    let bytes = literal.as_bytes();
    let mut out = String::with_capacity(literal.len());
    for (i, c) in literal.char_indices() {
        let reference_follows = match bytes.get(i + 1) {
            Some(b'{') => true,
            Some(&next) => syntax == Syntax::BracedOrBare && is_name_start(next),
            None => false,
        };
        if c == '$' && reference_follows {
            out.push('$');
        }
        out.push(c);
    }
    out
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn is_name(name: &str) -> bool {
    name.bytes().next().is_some_and(is_name_start) && name.bytes().all(is_name_char)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Transport;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/me".into()),
            "TOKEN" => Some("s3cret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn braced(text: &str) -> Result<String, Problem> {
        expand(text, Syntax::Braced, &env)
    }

    #[test]
    fn braced_references_and_defaults() {
        assert_eq!(braced("${HOME}/x").unwrap(), "/home/me/x");
        assert_eq!(braced("a${HOME}b${TOKEN}c").unwrap(), "a/home/mebs3cretc");
        assert_eq!(braced("${NOPE:-fallback}").unwrap(), "fallback");
        assert_eq!(braced("${EMPTY:-fallback}").unwrap(), "fallback");
        assert_eq!(braced("${HOME:-fallback}").unwrap(), "/home/me");
        assert_eq!(braced("${NOPE:-}").unwrap(), "");
        assert_eq!(braced("${EMPTY}").unwrap(), "");
        assert_eq!(braced("${NOPE}"), Err(Problem::Unset("NOPE".into())));
    }

    #[test]
    fn dollars_that_are_not_references_stay() {
        assert_eq!(braced("$HOME costs $5 $").unwrap(), "$HOME costs $5 $");
        assert_eq!(braced("pid $$").unwrap(), "pid $$");
        assert_eq!(braced("$${HOME}").unwrap(), "${HOME}");
        assert_eq!(braced("$$${HOME}").unwrap(), "$${HOME}", "the second `$` escapes the reference");
        assert_eq!(braced("é${HOME}é").unwrap(), "é/home/meé");
        assert_eq!(
            braced("${caller.secret.T} ${HOME}").unwrap(),
            "${caller.secret.T} /home/me",
            "a caller's reference waits for the caller"
        );
        assert_eq!(braced("${caller.nope}"), Err(Problem::Malformed("${caller.nope}".into())));
    }

    #[test]
    fn malformed_references_are_errors() {
        assert_eq!(braced("${HOME"), Err(Problem::Malformed("${HOME".into())));
        assert_eq!(braced("x ${input:tok} y"), Err(Problem::Malformed("${input:tok}".into())));
        assert_eq!(braced("${}"), Err(Problem::Malformed("${}".into())));
        assert_eq!(braced("${1A}"), Err(Problem::Malformed("${1A}".into())));
    }

    #[test]
    fn bare_references_only_where_allowed() {
        assert_eq!(expand("Bearer $TOKEN", Syntax::BracedOrBare, &env).unwrap(), "Bearer s3cret");
        assert_eq!(expand("$TOKEN-x", Syntax::BracedOrBare, &env).unwrap(), "s3cret-x");
        assert_eq!(expand("$$TOKEN", Syntax::BracedOrBare, &env).unwrap(), "$TOKEN");
        assert_eq!(expand("$5", Syntax::BracedOrBare, &env).unwrap(), "$5");
        assert_eq!(expand("$NOPE", Syntax::BracedOrBare, &env), Err(Problem::Unset("NOPE".into())));
    }

    #[test]
    fn only_reference() {
        assert!(is_only_reference("${TOKEN}", Syntax::Braced));
        assert!(!is_only_reference("$TOKEN", Syntax::Braced));
        assert!(is_only_reference("$TOKEN", Syntax::BracedOrBare));
        assert!(!is_only_reference("${TOKEN:-abc}", Syntax::Braced));
        assert!(!is_only_reference("Bearer ${TOKEN}", Syntax::Braced));
        assert!(!is_only_reference("${TOKEN}${TOKEN}", Syntax::Braced));
        assert!(!is_only_reference("plain", Syntax::Braced));
        assert!(!is_only_reference("${bad:x}", Syntax::Braced));
    }

    #[test]
    fn escape_round_trips() {
        for literal in ["${HOME}", "$${x}", "$HOME $5 $", "a$", "$$$", "é${", "${"] {
            for syntax in [Syntax::Braced, Syntax::BracedOrBare] {
                assert_eq!(expand(&escape(literal, syntax), syntax, &|_| None).unwrap(), literal, "{literal:?} {syntax:?}");
            }
        }
    }

    #[test]
    fn expanded_covers_every_text_field_and_names_the_failing_one() {
        let mut config = ServerConfig::stdio("gh", "${HOME}/bin/server", ["--token", "${TOKEN}"]).with_env("GITHUB_TOKEN", "${TOKEN}");
        config.cwd = Some("${HOME}/work".into());
        let expanded = config.expanded(env).unwrap();
        assert_eq!(expanded.command, "/home/me/bin/server");
        assert_eq!(expanded.args, ["--token", "s3cret"]);
        assert_eq!(expanded.env["GITHUB_TOKEN"], "s3cret");
        assert_eq!(expanded.cwd, Some("/home/me/work".into()));
        assert_eq!(config.env["GITHUB_TOKEN"], "${TOKEN}", "the original keeps the raw text");

        let mut remote = ServerConfig::remote("api", Transport::Http, "https://${HOST:-example.com}/mcp").with_header("X-Key", "${TOKEN}");
        remote.auth = Some(Auth::Basic { username: "me".into(), password: "$TOKEN".into() });
        let expanded = remote.expanded(env).unwrap();
        assert_eq!(expanded.url.as_deref(), Some("https://example.com/mcp"));
        assert_eq!(expanded.headers["X-Key"], "s3cret");
        assert_eq!(expanded.auth, Some(Auth::Basic { username: "me".into(), password: "s3cret".into() }));

        let missing = ServerConfig::stdio("gh", "x", Vec::<String>::new()).with_env("GITHUB_TOKEN", "${GITHUB_TOKEN}");
        let error = missing.expanded(env).unwrap_err();
        assert_eq!(
            error.to_string(),
            "server \"gh\": env.GITHUB_TOKEN uses ${GITHUB_TOKEN}, which is not set; set it or write ${GITHUB_TOKEN:-default}"
        );
        let bad = ServerConfig::stdio("v", "x", ["${input:key}"]);
        assert_eq!(
            bad.expanded(env).unwrap_err(),
            ConfigError::BadReference { server: "v".into(), field: "args[0]".into(), reference: "${input:key}".into() }
        );
        let bearer = ServerConfig { auth: Some(Auth::Bearer { token: "$NOPE".into() }), ..remote };
        assert!(matches!(bearer.expanded(env), Err(ConfigError::UnsetVariable { field, .. }) if field == "auth.token"));
    }
}
