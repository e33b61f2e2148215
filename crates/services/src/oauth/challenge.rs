//! The `WWW-Authenticate: Bearer ...` challenge of a refusal (RFC 6750
//! §3, RFC 9728 §5.1): where the protected-resource metadata is, which
//! scopes the server wants, and why it refused. A server that takes only
//! DPoP-bound tokens challenges with the `DPoP` scheme instead (RFC 9449
//! §7.1), with the same parameters: read when there is no `Bearer` one.

/// The parameters of a `Bearer` challenge that OAuth acts on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BearerChallenge {
    /// `resource_metadata`: the URL of the protected-resource metadata.
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes the request needs, space-separated.
    pub scope: Option<String>,
    /// `error`: `invalid_token`, `insufficient_scope`, ...
    pub error: Option<String>,
}

impl BearerChallenge {
    /// The `Bearer` challenge of a header value; an empty one when there
    /// is none or it cannot be read (a server's header never fails a login).
    pub fn parse(header: &str) -> BearerChallenge {
        let mut challenge = BearerChallenge::default();
        let Some(params) = scheme_params(header, "bearer").or_else(|| scheme_params(header, "dpop")) else { return challenge };
        for (name, value) in parse_params(params) {
            match name.to_ascii_lowercase().as_str() {
                "resource_metadata" => challenge.resource_metadata = Some(value),
                "scope" => challenge.scope = Some(value),
                "error" => challenge.error = Some(value),
                _ => {}
            }
        }
        challenge
    }

    /// The scopes asked for, in order, without repeats.
    pub fn scopes(&self) -> Vec<String> {
        let mut scopes: Vec<String> = Vec::new();
        for scope in self.scope.as_deref().unwrap_or("").split_whitespace() {
            if !scopes.iter().any(|known| known == scope) {
                scopes.push(scope.to_owned());
            }
        }
        scopes
    }

    pub fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// The text after the scheme name `scheme` (lower case), up to the next challenge.
fn scheme_params<'h>(header: &'h str, scheme: &str) -> Option<&'h str> {
    let lower = header.to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = lower[from..].find(scheme) {
        let start = from + at;
        let end = start + scheme.len();
        let starts_word = start == 0 || matches!(lower.as_bytes()[start - 1], b' ' | b',');
        let ends_word = end == lower.len() || lower.as_bytes()[end] == b' ';
        if starts_word && ends_word {
            return Some(&header[end..]);
        }
        from = end;
    }
    None
}

/// `name=value` and `name="quoted \" value"` pairs separated by commas;
/// stops at what looks like the next scheme (`Basic realm=...`).
fn parse_params(text: &str) -> Vec<(String, String)> {
    let mut params = Vec::new();
    let mut rest = text.trim_start();
    loop {
        rest = rest.trim_start_matches([' ', ',']);
        let Some(eq) = rest.find('=') else { break };
        let name = rest[..eq].trim();
        if name.is_empty() || name.contains(' ') {
            break;
        }
        rest = rest[eq + 1..].trim_start();
        let value;
        if let Some(quoted) = rest.strip_prefix('"') {
            let mut out = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, escaped)) = chars.next() {
                            out.push(escaped);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    _ => out.push(c),
                }
            }
            value = out;
            rest = &quoted[end.min(quoted.len())..];
        } else {
            let end = rest.find([',', ' ']).unwrap_or(rest.len());
            value = rest[..end].to_owned();
            rest = &rest[end..];
        }
        params.push((name.to_owned(), value));
    }
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_quoted_and_bare_parameters_of_the_bearer_challenge() {
        let header = r#"Basic realm="x", Bearer error="insufficient_scope", scope="files:read files:write", resource_metadata="https://r.example/.well-known/oauth-protected-resource/mcp""#;
        let challenge = BearerChallenge::parse(header);
        assert!(challenge.is_insufficient_scope());
        assert_eq!(challenge.scopes(), ["files:read", "files:write"]);
        assert_eq!(challenge.resource_metadata.as_deref(), Some("https://r.example/.well-known/oauth-protected-resource/mcp"));
        let bare = BearerChallenge::parse("Bearer error=invalid_token, scope=a");
        assert_eq!((bare.error.as_deref(), bare.scope.as_deref()), (Some("invalid_token"), Some("a")));
        assert_eq!(BearerChallenge::parse(r#"Bearer scope="a \"b\"""#).scope.as_deref(), Some("a \"b\""));
    }

    proptest::proptest! {
        #[test]
        fn any_header_is_read_without_panicking(header in "(Bearer|bearer|Basic| |,|=|\"|\\\\|[a-z_]{1,8}|é){0,24}") {
            let challenge = BearerChallenge::parse(&header);
            let _ = challenge.scopes();
        }
    }

    #[test]
    fn a_dpop_challenge_is_read_when_there_is_no_bearer_one() {
        let challenge = BearerChallenge::parse(r#"DPoP error="use_dpop_nonce", resource_metadata="https://r/.well-known/x""#);
        assert_eq!(challenge.error.as_deref(), Some("use_dpop_nonce"));
        assert_eq!(challenge.resource_metadata.as_deref(), Some("https://r/.well-known/x"));
        let both = BearerChallenge::parse(r#"DPoP error="use_dpop_nonce", Bearer scope="a""#);
        assert_eq!((both.error, both.scope.as_deref()), (None, Some("a")));
    }

    #[test]
    fn anything_else_is_an_empty_challenge() {
        for header in ["", "Basic realm=\"x\"", "Bearer", "Bearerish a=b", "Bearer \"", "Bearer =", "Bearer a=\"unterminated"] {
            let challenge = BearerChallenge::parse(header);
            assert!(challenge.resource_metadata.is_none() && !challenge.is_insufficient_scope(), "{header:?}");
        }
    }
}
