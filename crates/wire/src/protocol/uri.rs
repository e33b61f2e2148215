//! Resource URIs in one form (RFC 3986 §6.2.2), so that a policy matches
//! what the server will read: `file:///./private/x`, `file:///%70rivate/x`
//! and `file:///public/%2e%2e/private/x` are all `file:///private/x`.
//!
//! Invariants:
//! - the scheme and the authority are lower-cased (not a user part), a
//!   percent-encoded unreserved character is decoded, any other escape is
//!   upper-cased, and `.` and `..` segments are removed from the path;
//! - what cannot be put in one form is refused, never guessed: an empty
//!   path segment (`file:////private` is `/private` to a file system),
//!   an encoded `/`, `\` or NUL, a malformed escape;
//! - a URI that is already in its form comes back borrowed, unchanged.

use std::borrow::Cow;

/// The normal form of `uri`, or why it has none.
pub fn normalize(uri: &str) -> Result<Cow<'_, str>, String> {
    let Some((scheme, rest)) = uri.split_once(':').filter(|(scheme, _)| is_scheme(scheme)) else {
        return Err("it has no scheme (write it as scheme:path, e.g. file:///a/b)".into());
    };
    let (rest, fragment) = split_at_char(rest, '#');
    let (rest, query) = split_at_char(rest, '?');
    let (authority, path) = match rest.strip_prefix("//") {
        Some(after) => {
            let end = after.find('/').unwrap_or(after.len());
            (Some(&after[..end]), &after[end..])
        }
        None => (None, rest),
    };
    let path = decode_unreserved(path)?;
    if path.contains("%2F") || path.contains("%5C") || path.contains("%00") {
        return Err("its path encodes a `/`, a `\\` or a NUL, which a server may read as a separator".into());
    }
    let path = remove_dot_segments(&path);
    if path.contains("//") || (authority.is_none() && path.starts_with("//")) {
        return Err("its path has an empty segment (`//`), which a server may read as one `/`".into());
    }
    let mut normal = scheme.to_ascii_lowercase();
    normal.push(':');
    if let Some(authority) = authority {
        let authority = decode_unreserved(authority)?;
        normal.push_str("//");
        match authority.rsplit_once('@') {
            Some((user, host)) => normal.push_str(&format!("{user}@{}", host.to_ascii_lowercase())),
            None => normal.push_str(&authority.to_ascii_lowercase()),
        }
    }
    normal.push_str(&path);
    for (mark, part) in [('?', query), ('#', fragment)] {
        if let Some(part) = part {
            normal.push(mark);
            normal.push_str(&decode_unreserved(part)?);
        }
    }
    Ok(if normal == uri { Cow::Borrowed(uri) } else { Cow::Owned(normal) })
}

fn is_scheme(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|first| first.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

fn split_at_char(text: &str, mark: char) -> (&str, Option<&str>) {
    match text.split_once(mark) {
        Some((before, after)) => (before, Some(after)),
        None => (text, None),
    }
}

/// Decodes `%XX` of unreserved characters, upper-cases the others.
fn decode_unreserved(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] != b'%' {
            let next = text[at..].chars().next().unwrap_or_default();
            out.push(next);
            at += next.len_utf8().max(1);
            continue;
        }
        let hex = text.get(at + 1..at + 3).filter(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()));
        let Some(byte) = hex.and_then(|hex| u8::from_str_radix(hex, 16).ok()) else {
            return Err(format!("`{}` is not a valid escape (% and two hex digits)", &text[at..(at + 3).min(text.len())]));
        };
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(byte as char),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
        at += 3;
    }
    Ok(out)
}

/// RFC 3986 §5.2.4: `.` and `..` segments removed (`..` above the root stays at the root).
fn remove_dot_segments(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut kept: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').skip(usize::from(absolute)).collect();
    let last = segments.len().saturating_sub(1);
    let mut trailing = false;
    for (index, segment) in segments.iter().enumerate() {
        match *segment {
            "." => trailing = index == last,
            ".." => {
                kept.pop();
                trailing = index == last;
            }
            other => {
                kept.push(other);
                trailing = false;
            }
        }
    }
    let mut out = if absolute { String::from("/") } else { String::new() };
    out.push_str(&kept.join("/"));
    if trailing && !kept.is_empty() {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ways_round_a_rule_reach_one_form() {
        for written in ["file:///./private/x", "file:///%70rivate/x", "file:///public/%2e%2e/private/x", "FILE:///private/./x"] {
            assert_eq!(normalize(written).unwrap(), "file:///private/x", "{written}");
        }
        assert_eq!(normalize("https://Example.COM/a/%7euser/b?q=%7e%2f#%41").unwrap(), "https://example.com/a/~user/b?q=~%2F#A");
        assert_eq!(normalize("demo://item/../../x").unwrap(), "demo://item/x");
        assert_eq!(normalize("file:///a/b/").unwrap(), "file:///a/b/");
    }

    #[test]
    fn a_uri_in_its_form_comes_back_unchanged() {
        for uri in ["file:///a/b.txt", "demo://item/1", "demo://counter", "mcpvisor://status", "urn:isbn:0451450523"] {
            assert!(matches!(normalize(uri), Ok(Cow::Borrowed(same)) if same == uri), "{uri}");
        }
    }

    #[test]
    fn what_has_no_one_form_is_refused() {
        for (uri, why) in [
            ("file:////private/x", "empty segment"),
            ("file:///a//private", "empty segment"),
            ("file:///a/%2Fprivate", "encodes a `/`"),
            ("file:///a%5C..%5Cprivate", "encodes a `/`"),
            ("file:///a%zz", "not a valid escape"),
            ("file:///a%2", "not a valid escape"),
            ("no scheme here", "no scheme"),
        ] {
            let error = normalize(uri).unwrap_err();
            assert!(error.contains(why), "{uri}: {error}");
        }
    }
}
