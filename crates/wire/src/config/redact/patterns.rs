//! Secrets recognised by their shape in any text, without knowing them:
//! the parts of a text [`spans`] returns.
//!
//! - the password of a URL's userinfo (`postgres://u:PASS@host`), or the
//!   user when there is no password and it could be a secret
//!   (`https://TOKEN@host`);
//! - the credentials after `Authorization` (`: Bearer X`, `=X`), and after a
//!   lone `Bearer ` when they look like a token (at least
//!   [`MIN_SECRET_CHARS`], not one lowercase word);
//! - well-known token shapes wherever they stand: `ghp_`/`gho_`/`ghu_`/
//!   `ghs_`/`ghr_`, `github_pat_`, `glpat-`, `sk-`, `sk_live_`, `rk_live_`,
//!   `xox?-`, `xapp-`, `AKIA`/`ASIA`, `AIza`, `npm_`, `pypi-`, `hf_`,
//!   `shpat_`, and JSON Web Tokens (`eyJ….….…`);
//! - the value of a secret-looking name assigned with `=` or `:`
//!   (`--token=X`, `?sig=X`, `API_KEY=X`, `"password": "X"`);
//! - the value after a secret-looking flag (`--api-key X`, `--password X`);
//! - private keys: a PEM block whose label ends in `PRIVATE KEY` (RSA, EC,
//!   PKCS#8, OpenSSH `-----BEGIN OPENSSH PRIVATE KEY-----`, encrypted ones)
//!   or `PRIVATE KEY BLOCK` (PGP), from its BEGIN line through its END
//!   line, or to the end of the text when the END line is missing (a read
//!   cut short); whatever stands between the lines (a viewer's line
//!   numbers) is masked with it.
//!
//! Values that cannot be secrets ([`could_be_secret`]) and values that are
//! only a `${VAR}` reference are left alone. Every range starts and ends at
//! a character boundary: all delimiters are ASCII.

use std::ops::Range;
use std::sync::LazyLock;

use aho_corasick::AhoCorasick;

use super::{could_be_secret, is_secret_name, SecretKind, MIN_SECRET_CHARS};
use crate::config::expand::{is_only_reference, Syntax};

/// Known token prefixes and the least number of token characters after them.
pub(super) const TOKEN_SHAPES: [(&str, usize); 25] = [
    ("github_pat_", 20),
    ("ghp_", 16),
    ("gho_", 16),
    ("ghu_", 16),
    ("ghs_", 16),
    ("ghr_", 16),
    ("glpat-", 16),
    ("sk_live_", 16),
    ("sk_test_", 16),
    ("rk_live_", 16),
    ("sk-", 20),
    ("xoxa-", 10),
    ("xoxb-", 10),
    ("xoxe-", 10),
    ("xoxp-", 10),
    ("xoxr-", 10),
    ("xoxs-", 10),
    ("xapp-", 10),
    ("AKIA", 16),
    ("ASIA", 16),
    ("AIza", 30),
    ("shpat_", 20),
    ("npm_", 30),
    ("pypi-", 30),
    ("hf_", 30),
];

/// The byte ranges of `text` that hold secrets, sorted and not overlapping.
pub(crate) fn spans(text: &str) -> Vec<Range<usize>> {
    merge(hits(text).into_iter().map(|(span, _)| span).collect())
}

/// Every secret of `text` found by its shape, with the shape's kind; in no
/// order, and they may overlap (a token shape inside an assignment).
pub(crate) fn hits(text: &str) -> Vec<(Range<usize>, SecretKind)> {
    hits_for(text, Needs::ALL)
}

/// [`hits`], running only the finders `needs` names (see [`needs`]).
pub(crate) fn hits_for(text: &str, needs: Needs) -> Vec<(Range<usize>, SecretKind)> {
    let bytes = text.as_bytes();
    let mut hits = Vec::new();
    let mut found = Vec::new();
    let mut tag = |found: &mut Vec<Range<usize>>, kind: SecretKind| hits.extend(found.drain(..).map(|span| (span, kind)));
    if needs.url {
        url_userinfo(text, &mut found);
        tag(&mut found, SecretKind::UrlPassword);
    }
    if needs.authorization {
        authorization(text, &mut found);
        tag(&mut found, SecretKind::Authorization);
    }
    if needs.private_key {
        private_keys(text, &mut found);
        tag(&mut found, SecretKind::PrivateKey);
    }
    if needs.token {
        for at in 0..bytes.len() {
            if at > 0 && is_word(bytes[at - 1]) {
                continue;
            }
            if let Some(span) = token_shape(bytes, at) {
                found.push(span);
            }
        }
        tag(&mut found, SecretKind::Token);
    }
    if needs.named {
        for (at, &byte) in bytes.iter().enumerate() {
            match byte {
                b'=' | b':' => assignment(text, at, &mut found),
                b'-' if at == 0 || bytes[at - 1].is_ascii_whitespace() || is_quote(bytes[at - 1]) => flag_value(text, at, &mut found),
                _ => {}
            }
        }
        tag(&mut found, SecretKind::NamedValue);
    }
    hits
}

/// Which of the finders of [`hits_for`] a text needs: those whose triggers it holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Needs {
    url: bool,
    authorization: bool,
    private_key: bool,
    token: bool,
    /// Assignments and flags under a secret's name.
    named: bool,
}

impl Needs {
    pub(crate) const ALL: Needs = Needs { url: true, authorization: true, private_key: true, token: true, named: true };

    fn or(self, other: Needs) -> Needs {
        Needs {
            url: self.url || other.url,
            authorization: self.authorization || other.authorization,
            private_key: self.private_key || other.private_key,
            token: self.token || other.token,
            named: self.named || other.named,
        }
    }
}

/// What text must hold for [`hits`] to find anything, as written: the
/// shapes matched exactly (a URL's `://`, a PEM block's first line, a
/// JWT's start, and the token prefixes of [`TOKEN_SHAPES`]).
const EXACT_TRIGGERS: [&str; 3] = ["://", "-----BEGIN ", "eyJ"];

/// The words found case-insensitively (secret names, `Bearer`), each in
/// lower, UPPER and Capitalized case, which covers `snake_case`,
/// `SCREAMING_CASE`, `camelCase` and `kebab-case` names; a name in any
/// other mix of cases (`tOkEn`) is the pre-check's one blind spot.
const WORD_TRIGGERS: [&str; 10] = ["bearer", "key", "token", "secret", "pass", "auth", "credential", "signature", "sig", "pwd"];

/// Every trigger, with the finders it calls for.
fn triggers() -> Vec<(String, Needs)> {
    let none = Needs::default();
    let exact = |trigger: &str| match trigger {
        "://" => Needs { url: true, ..none },
        "-----BEGIN " => Needs { private_key: true, ..none },
        _ => Needs { token: true, ..none },
    };
    let mut triggers: Vec<(String, Needs)> = EXACT_TRIGGERS.iter().map(|trigger| (trigger.to_string(), exact(trigger))).collect();
    triggers.extend(TOKEN_SHAPES.iter().map(|(prefix, _)| (prefix.to_string(), Needs { token: true, ..none })));
    for word in WORD_TRIGGERS {
        let needs = match word {
            "bearer" => Needs { authorization: true, ..none },
            "auth" => Needs { authorization: true, named: true, ..none },
            _ => Needs { named: true, ..none },
        };
        let capitalized = word[..1].to_ascii_uppercase() + &word[1..];
        triggers.extend([word.to_string(), word.to_ascii_uppercase(), capitalized].map(|variant| (variant, needs)));
    }
    triggers
}

/// Whether a text holds any trigger: one pass over it with a SIMD
/// prefilter (leftmost-first: only whether one is there matters).
static SHAPE_TRIGGERS: LazyLock<Option<AhoCorasick>> = LazyLock::new(|| {
    let triggers = triggers().into_iter().map(|(trigger, _)| trigger);
    AhoCorasick::builder().match_kind(aho_corasick::MatchKind::LeftmostFirst).build(triggers).ok()
});

/// Which triggers a text holds, overlapping ones too (run only on a text
/// [`might_hold`] did not clear), and the finders each calls for.
static CLASSIFY: LazyLock<Option<(AhoCorasick, Vec<Needs>)>> = LazyLock::new(|| {
    let (words, needs): (Vec<String>, Vec<Needs>) = triggers().into_iter().unzip();
    AhoCorasick::new(words).ok().map(|automaton| (automaton, needs))
});

/// The finders `text` needs: those of every trigger in it.
pub(crate) fn needs(text: &str) -> Needs {
    let Some((automaton, needs)) = CLASSIFY.as_ref() else { return Needs::ALL };
    automaton.find_overlapping_iter(text).fold(Needs::default(), |all, found| all.or(needs[found.pattern().as_usize()]))
}

/// False only when [`hits`] surely finds nothing in `text`: one pass over
/// it, no allocation.
pub(crate) fn might_hold(text: &str) -> bool {
    match SHAPE_TRIGGERS.as_ref() {
        Some(triggers) => triggers.is_match(text),
        None => true,
    }
}

/// Sorts `spans` and joins those that overlap or touch.
pub(crate) fn merge(mut spans: Vec<Range<usize>>) -> Vec<Range<usize>> {
    spans.retain(|span| span.start < span.end);
    spans.sort_by_key(|span| span.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for span in spans {
        match merged.last_mut() {
            Some(last) if span.start <= last.end => last.end = last.end.max(span.end),
            _ => merged.push(span),
        }
    }
    merged
}

fn is_word(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

fn is_quote(byte: u8) -> bool {
    matches!(byte, b'"' | b'\'' | b'`')
}

fn is_token_char(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-')
}

/// Where an unquoted value starting at `start` ends: at whitespace, a
/// quote or a separator; a `${...}` reference is taken whole.
fn value_end(bytes: &[u8], start: usize) -> usize {
    let mut at = start;
    while at < bytes.len() {
        match bytes[at] {
            b'$' if bytes.get(at + 1) == Some(&b'{') => match bytes[at..].iter().position(|&b| b == b'}') {
                Some(close) => at += close + 1,
                None => return bytes.len(),
            },
            b if b.is_ascii_whitespace() || is_quote(b) => return at,
            b'<' | b'>' | b'&' | b',' | b';' | b')' | b']' | b'}' => return at,
            _ => at += 1,
        }
    }
    at
}

/// The value at `start`: quoted (up to the closing quote) or not.
fn value_at(bytes: &[u8], start: usize) -> Range<usize> {
    match bytes.get(start) {
        Some(&quote) if is_quote(quote) => {
            let end = bytes[start + 1..].iter().position(|&b| b == quote).map_or(bytes.len(), |at| start + 1 + at);
            start + 1..end
        }
        _ => start..value_end(bytes, start),
    }
}

fn skip_blanks(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(|b| *b == b' ' || *b == b'\t') {
        at += 1;
    }
    at
}

/// Pushes `span` when its text could be a secret and is not a placeholder
/// such as `VALUE` or `API_KEY` (usage texts say `--token TOKEN`, `KEY=VALUE`).
fn push_if_secret(text: &str, span: Range<usize>, found: &mut Vec<Range<usize>>) {
    let value = &text[span.clone()];
    let placeholder = value.bytes().all(|b| b.is_ascii_uppercase() || b == b'_');
    if could_be_secret(value) && !placeholder {
        found.push(span);
    }
}

/// `scheme://user:PASSWORD@host` and `scheme://TOKEN@host`.
fn url_userinfo(text: &str, found: &mut Vec<Range<usize>>) {
    let bytes = text.as_bytes();
    for (separator, _) in text.match_indices("://") {
        let start = separator + 3;
        let end = bytes[start..]
            .iter()
            .position(|&b| matches!(b, b'/' | b'?' | b'#' | b'\\' | b'<' | b'>') || b.is_ascii_whitespace() || is_quote(b))
            .map_or(bytes.len(), |at| start + at);
        let Some(at_sign) = bytes[start..end].iter().rposition(|&b| b == b'@').map(|at| start + at) else { continue };
        match bytes[start..at_sign].iter().position(|&b| b == b':') {
            Some(colon) => {
                let password = start + colon + 1..at_sign;
                if !password.is_empty() && !is_only_reference(&text[password.clone()], Syntax::Braced) {
                    found.push(password);
                }
            }
            None if at_sign - start >= MIN_SECRET_CHARS => push_if_secret(text, start..at_sign, found),
            None => {}
        }
    }
}

/// PEM private key blocks (see the module docs).
fn private_keys(text: &str, found: &mut Vec<Range<usize>>) {
    const BEGIN: &str = "-----BEGIN ";
    let mut from = 0;
    while let Some(at) = text[from..].find(BEGIN).map(|at| from + at) {
        let label_start = at + BEGIN.len();
        let Some(label_end) = text[label_start..].find("-----").map(|end| label_start + end) else { return };
        let label = &text[label_start..label_end];
        from = label_end;
        if label.contains('\n') || !(label.ends_with("PRIVATE KEY") || label.ends_with("PRIVATE KEY BLOCK")) {
            continue;
        }
        let end_line = format!("-----END {label}-----");
        let end = text[label_end..].find(&end_line).map_or(text.len(), |end| label_end + end + end_line.len());
        found.push(at..end);
        from = end;
    }
}

/// Finds `needle` (ASCII) case-insensitively at word starts.
fn word_starts<'t>(text: &'t str, needle: &'t str) -> impl Iterator<Item = usize> + 't {
    let bytes = text.as_bytes();
    (0..bytes.len().saturating_sub(needle.len() - 1))
        .filter(move |&at| bytes[at..at + needle.len()].eq_ignore_ascii_case(needle.as_bytes()) && (at == 0 || !is_word(bytes[at - 1])))
}

/// `Authorization: Scheme CREDENTIALS`, `authorization=X`, and `Bearer TOKEN`.
fn authorization(text: &str, found: &mut Vec<Range<usize>>) {
    let bytes = text.as_bytes();
    for at in word_starts(text, "authorization") {
        let mut next = at + "authorization".len();
        if bytes.get(next).is_some_and(|b| is_quote(*b)) {
            next += 1;
        }
        next = skip_blanks(bytes, next);
        if !matches!(bytes.get(next), Some(b':' | b'=')) {
            continue;
        }
        next = skip_blanks(bytes, next + 1);
        let quoted = bytes.get(next).copied().filter(|b| is_quote(*b));
        if quoted.is_some() {
            next += 1;
        }
        let scheme = bytes[next..].iter().take_while(|b| b.is_ascii_alphabetic()).count();
        if scheme > 0 && bytes.get(next + scheme) == Some(&b' ') {
            next = skip_blanks(bytes, next + scheme);
        }
        let end = match quoted {
            Some(quote) => bytes[next..].iter().position(|&b| b == quote).map_or(bytes.len(), |end| next + end),
            None => value_end(bytes, next),
        };
        if next < end && !is_only_reference(&text[next..end], Syntax::BracedOrBare) {
            found.push(next..end);
        }
    }
    for at in word_starts(text, "bearer ") {
        let start = skip_blanks(bytes, at + "bearer ".len());
        let span = start..value_end(bytes, start);
        let token = &text[span.clone()];
        if token.len() >= MIN_SECRET_CHARS && !token.bytes().all(|b| b.is_ascii_lowercase()) {
            push_if_secret(text, span, found);
        }
    }
}

/// A well-known token starting at `at`.
fn token_shape(bytes: &[u8], at: usize) -> Option<Range<usize>> {
    let rest = &bytes[at..];
    if rest.starts_with(b"eyJ") {
        let length = rest.iter().take_while(|&&b| is_token_char(b) || b == b'.').count();
        let dots = rest[..length].iter().filter(|&&b| b == b'.').count();
        return (length >= 30 && dots == 2).then_some(at..at + length);
    }
    let (prefix, least) = TOKEN_SHAPES.iter().find(|(prefix, _)| rest.starts_with(prefix.as_bytes()))?;
    let body = rest[prefix.len()..].iter().take_while(|&&b| is_token_char(b)).count();
    (body >= *least).then_some(at..at + prefix.len() + body)
}

/// `NAME=VALUE` or `NAME: VALUE` (quotes allowed around both) at the
/// separator `at`, when the name looks secret.
fn assignment(text: &str, at: usize, found: &mut Vec<Range<usize>>) {
    let bytes = text.as_bytes();
    let mut name_end = at;
    if bytes[at] == b':' {
        while name_end > 0 && bytes[name_end - 1] == b' ' {
            name_end -= 1;
        }
    }
    if name_end > 0 && is_quote(bytes[name_end - 1]) {
        name_end -= 1;
    }
    let name_start = bytes[..name_end].iter().rposition(|&b| !(is_token_char(b) || b == b'.')).map_or(0, |p| p + 1);
    if name_start == name_end || !is_secret_name(&text[name_start..name_end]) {
        return;
    }
    if bytes[at] == b':' && bytes.get(at + 1) == Some(&b'/') {
        return; // a URL's scheme
    }
    let name = &text[name_start..name_end];
    // `${NAME:-default}`: the value is the default after `:-`.
    let reference_default = name_start >= 2 && &bytes[name_start - 2..name_start] == b"${" && bytes.get(at + 1) == Some(&b'-');
    let span = value_at(bytes, skip_blanks(bytes, at + 1 + usize::from(reference_default)));
    let value = &text[span.clone()];
    // The shell's working directory, not a password abbreviation.
    if name == "PWD" && value.starts_with(['/', '~']) {
        return;
    }
    // Prose such as "needs_auth: server `remote`": a lowercase word followed by a quoted name.
    let prose = bytes[at] == b':'
        && !value.is_empty()
        && value.bytes().all(|b| b.is_ascii_lowercase())
        && bytes.get(span.end) == Some(&b' ')
        && bytes.get(span.end + 1).is_some_and(|b| is_quote(*b));
    if !prose {
        push_if_secret(text, span, found);
    }
}

/// `--secret-flag VALUE`, the flag starting at `at`.
fn flag_value(text: &str, at: usize, found: &mut Vec<Range<usize>>) {
    let bytes = text.as_bytes();
    let flag_end = at + bytes[at..].iter().take_while(|&&b| is_token_char(b)).count();
    if !bytes.get(flag_end).is_some_and(|b| *b == b' ' || *b == b'\t') || !is_secret_name(&text[at..flag_end]) {
        return;
    }
    let start = skip_blanks(bytes, flag_end);
    if bytes.get(start).is_none_or(|b| *b == b'-') {
        return;
    }
    push_if_secret(text, value_at(bytes, start), found);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` with every span replaced by `***`.
    fn masked(text: &str) -> String {
        super::super::mask_spans(text, &spans(text)).into_owned()
    }

    #[test]
    fn url_passwords_and_token_users() {
        assert_eq!(masked("db postgres://u:PASS@host/db ok"), "db postgres://u:***@host/db ok");
        assert_eq!(masked("https://ghp_token@host/mcp"), "https://***@host/mcp");
        assert_eq!(masked("ssh://git@github.com/x"), "ssh://git@github.com/x", "a short user is not a secret");
        assert_eq!(masked("https://${USER}:${PASSWORD}@host/"), "https://${USER}:${PASSWORD}@host/");
        assert_eq!(masked("https://host/a@b"), "https://host/a@b", "an @ in the path is not userinfo");
        assert_eq!(masked("x://:@"), "x://:@");
    }

    #[test]
    fn authorization_and_bearer() {
        assert_eq!(masked("-H 'Authorization: Bearer abc.def-123'"), "-H 'Authorization: Bearer ***'");
        assert_eq!(masked("\"authorization\": \"Basic dXNlcjpwYXNz\""), "\"authorization\": \"***\"");
        assert_eq!(masked("Authorization: Bearer ${TOKEN}"), "Authorization: Bearer ${TOKEN}");
        assert_eq!(masked("sent Bearer eyJhbGciOi to it"), "sent Bearer *** to it");
        assert_eq!(masked("needs a Bearer token"), "needs a Bearer token");
    }

    #[test]
    fn token_shapes_under_any_name() {
        assert_eq!(masked("GH=ghp_abcdefghijklmnopqrstuvwxyz0123456789"), "GH=***");
        assert_eq!(masked("key sk-proj-abcdefghijklmnopqrstuvwx end"), "key *** end");
        assert_eq!(masked("slack xoxb-1234567890-abcdef"), "slack ***");
        assert_eq!(masked("github_pat_11ABCDEFG0123456789_abcdefghijkl"), "***");
        assert_eq!(masked("AKIAIOSFODNN7EXAMPLE"), "***");
        assert_eq!(masked("scikit sk-learn, mask_ghp_x"), "scikit sk-learn, mask_ghp_x");
        assert_eq!(masked("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig-nature_x"), "jwt ***");
    }

    #[test]
    fn assignments_and_flags() {
        assert_eq!(
            masked("srv --token=abc123 --api-key sk-123 --password 'two words' -v"),
            "srv --token=*** --api-key *** --password '***' -v"
        );
        assert_eq!(
            masked("https://a.blob.core.windows.net/c?sv=2020-08-04&sig=abc%2Fdef&x=1"),
            "https://a.blob.core.windows.net/c?sv=2020-08-04&sig=***&x=1"
        );
        assert_eq!(masked("{\"password\":\"hunter22\",\"max_tokens\":1000}"), "{\"password\":\"***\",\"max_tokens\":1000}");
        assert_eq!(masked("MAX_TOKENS=1000 AUTH_REQUIRED=false TOKEN=${TOKEN}"), "MAX_TOKENS=1000 AUTH_REQUIRED=false TOKEN=${TOKEN}");
        assert_eq!(masked("--token --verbose"), "--token --verbose");
        assert_eq!(masked("write --arg KEY=VALUE or --token TOKEN"), "write --arg KEY=VALUE or --token TOKEN");
        assert_eq!(masked("https://host/mcp?api_key=abc&x=1#frag"), "https://host/mcp?api_key=***&x=1#frag");
    }

    #[test]
    fn private_keys_are_masked_whole_even_numbered_or_cut() {
        let key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\nAAAA\n-----END OPENSSH PRIVATE KEY-----";
        assert_eq!(masked(&format!("read:\n{key}\ndone")), "read:\n***\ndone");
        let numbered = "     1\t-----BEGIN RSA PRIVATE KEY-----\n     2\tMIIEpAIBAAKCAQEA\n     3\t-----END RSA PRIVATE KEY-----\n";
        assert_eq!(masked(numbered), "     1\t***\n");
        assert_eq!(masked("x -----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI"), "x ***", "no END line: to the end");
        assert_eq!(masked("-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQ\n-----END PGP PRIVATE KEY BLOCK-----"), "***");
        let public = "-----BEGIN PUBLIC KEY-----\nMFkwEwYH\n-----END PUBLIC KEY-----";
        assert_eq!(masked(public), public, "a public key or certificate is no secret");
        assert_eq!(masked("-----BEGIN "), "-----BEGIN ");
    }

    #[test]
    fn odd_input_does_not_panic() {
        for text in
            ["", "=", ":", "-", "a=", "--token ", "Authorization", "authorization:", "Bearer ", "://", "x://@", "é=é", "token=${", "ghp_"]
        {
            let _ = masked(text);
        }
    }
}
