//! JSON with comments and trailing commas (VS Code's and OpenCode's "JSONC").
//!
//! [`strip`] blanks out `//` and `/* */` comments and commas before `}` or
//! `]`, outside strings, so that `serde_json` can parse the rest. Every
//! removed byte becomes a space (newlines stay), so the line and column of
//! a syntax error are those of the original text.

use std::borrow::Cow;

/// `text` as plain JSON; borrowed when it is already plain (the common
/// case), so a large file is not copied. Works on bytes: every character
/// JSON's syntax uses is ASCII.
pub(crate) fn strip(text: &str) -> Cow<'_, str> {
    let mut out: Option<Vec<u8>> = None;
    let source = text.as_bytes();
    let mut at = 0;
    while at < source.len() {
        match (source[at], source.get(at + 1)) {
            (b'"', _) => at = string_end(source, at),
            (b'/', Some(b'/')) => {
                let end = source[at..].iter().position(|&b| b == b'\n').map_or(source.len(), |n| at + n);
                blank(&mut out, source, at..end);
                at = end;
            }
            (b'/', Some(b'*')) => {
                let end = source[at + 2..].windows(2).position(|w| w == b"*/").map_or(source.len(), |n| at + 2 + n + 2);
                blank(&mut out, source, at..end);
                at = end;
            }
            _ => at += 1,
        }
    }
    // Trailing commas, looked for in the text without comments.
    let commas: Vec<usize> = {
        let current = out.as_deref().unwrap_or(source);
        let mut commas = Vec::new();
        let mut at = 0;
        while at < current.len() {
            match current[at] {
                b'"' => at = string_end(current, at),
                b',' => {
                    if matches!(current[at + 1..].iter().find(|b| !b.is_ascii_whitespace()), Some(b'}' | b']')) {
                        commas.push(at);
                    }
                    at += 1;
                }
                _ => at += 1,
            }
        }
        commas
    };
    for comma in commas {
        blank(&mut out, source, comma..comma + 1);
    }
    match out {
        // Only ASCII bytes were replaced, by spaces, and whole comments at that: still UTF-8.
        Some(bytes) => Cow::Owned(String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())),
        None => Cow::Borrowed(text),
    }
}

/// The position after the string starting with the quote at `start` (or the end).
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return at + 1,
            _ => at += 1,
        }
    }
    bytes.len()
}

/// Replaces `range` by spaces, keeping newlines (so error positions stay),
/// copying the source on the first change.
fn blank(out: &mut Option<Vec<u8>>, source: &[u8], range: std::ops::Range<usize>) {
    let bytes = out.get_or_insert_with(|| source.to_vec());
    for byte in &mut bytes[range] {
        if *byte != b'\n' {
            *byte = b' ';
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> serde_json::Value {
        serde_json::from_str(&strip(text)).unwrap()
    }

    #[test]
    fn plain_json_is_unchanged() {
        let text = r#"{"a": [1, 2, {"b": "c,}"}], "d": "//not a comment", "e": "/* nor this */", "f": "quote \" // x"}"#;
        assert_eq!(strip(text), text);
        assert!(matches!(strip(text), Cow::Borrowed(_)), "plain JSON is not copied");
    }

    #[test]
    fn comments_and_trailing_commas_go() {
        let text = "{\n  // a comment\n  \"a\": 1, /* block\n comment */ \"b\": [1, 2,],\n  \"c\": {\"d\": \"e\",\n  },\n}\n";
        assert_eq!(parse(text), serde_json::json!({"a": 1, "b": [1, 2], "c": {"d": "e"}}));
        assert_eq!(strip(text).lines().count(), text.lines().count(), "lines are kept for error positions");
        assert_eq!(strip(text).len(), text.len());
    }

    #[test]
    fn strings_with_escapes_and_slashes() {
        let text = r#"{"url": "https://example.com//x", "esc": "a\\", "path": "C:\\dir\\", "next": 1, }"#;
        assert_eq!(parse(text), serde_json::json!({"url": "https://example.com//x", "esc": "a\\", "path": "C:\\dir\\", "next": 1}));
    }

    #[test]
    fn broken_input_does_not_panic() {
        for text in ["{\"a\": \"unterminated", "/* never closed", "// only", ",", "{,}", "\"\\", "/"] {
            let _ = strip(text);
        }
    }
}
