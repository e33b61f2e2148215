//! JSON with comments and trailing commas (VS Code's and OpenCode's "JSONC").
//!
//! [`strip`] blanks out `//` and `/* */` comments and commas before `}` or
//! `]`, outside strings, so that `serde_json` can parse the rest. Every
//! removed character becomes a space (newlines stay), so the line and
//! column of a syntax error are those of the original text.

/// `text` as plain JSON. Plain JSON comes back unchanged.
pub(crate) fn strip(text: &str) -> String {
    let chars: Vec<char> = without_comments(text).chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for (i, &c) in chars.iter().enumerate() {
        if in_string {
            (in_string, escaped) = (escaped || c != '"', !escaped && c == '\\');
        } else if c == '"' {
            in_string = true;
        } else if c == ',' && matches!(chars[i + 1..].iter().find(|c| !c.is_whitespace()), Some('}' | ']')) {
            out.push(' ');
            continue;
        }
        out.push(c);
    }
    out
}

fn without_comments(text: &str) -> String {
    #[derive(PartialEq)]
    enum State {
        Code,
        String { escaped: bool },
        LineComment,
        BlockComment,
    }
    let mut out = String::with_capacity(text.len());
    let mut state = State::Code;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
        match state {
            State::Code => match (c, chars.peek()) {
                ('"', _) => state = State::String { escaped: false },
                ('/', Some('/')) => state = State::LineComment,
                ('/', Some('*')) => {
                    chars.next();
                    out.push_str("  ");
                    state = State::BlockComment;
                    continue;
                }
                _ => {}
            },
            State::String { escaped } => {
                state = match c {
                    '"' if !escaped => State::Code,
                    '\\' => State::String { escaped: !escaped },
                    _ => State::String { escaped: false },
                }
            }
            State::LineComment => {
                if c == '\n' {
                    state = State::Code;
                } else {
                    out.push(' ');
                    continue;
                }
            }
            State::BlockComment => {
                if c == '*' && chars.peek() == Some(&'/') {
                    chars.next();
                    out.push_str("  ");
                    state = State::Code;
                } else {
                    out.push(blank(c));
                }
                continue;
            }
        }
        out.push(if state == State::LineComment { ' ' } else { c });
    }
    out
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
