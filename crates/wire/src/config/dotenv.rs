//! `.env` files, as named by VS Code's and Cursor's `envFile`.
//!
//! Lines are `NAME=value`, optionally prefixed with `export `; blank lines
//! and lines starting with `#` are skipped. A value may be in single quotes
//! (taken literally) or double quotes (`\n`, `\t`, `\"` and `\\` are
//! unescaped); an unquoted value is trimmed and ends at ` #`.

use std::collections::BTreeMap;

/// The variables of `text`, or the 1-based number of the first bad line
/// (its text is not returned: it may hold a secret).
pub(crate) fn parse(text: &str) -> Result<BTreeMap<String, String>, usize> {
    let mut vars = BTreeMap::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let assignment = trimmed.strip_prefix("export ").unwrap_or(trimmed);
        let bad = || index + 1;
        let (name, value) = assignment.split_once('=').ok_or_else(bad)?;
        let name = name.trim();
        let valid_name = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        if !valid_name {
            return Err(bad());
        }
        vars.insert(name.to_owned(), value_of(value.trim()).ok_or_else(bad)?);
    }
    Ok(vars)
}

fn value_of(raw: &str) -> Option<String> {
    if let Some(rest) = raw.strip_prefix('\'') {
        return rest.find('\'').map(|end| rest[..end].to_owned());
    }
    if let Some(rest) = raw.strip_prefix('"') {
        let mut value = String::new();
        let mut chars = rest.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => return Some(value),
                '\\' => value.push(match chars.next()? {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    other => other,
                }),
                _ => value.push(c),
            }
        }
        return None;
    }
    let end = raw.find(" #").unwrap_or(raw.len());
    Some(raw[..end].trim_end().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_usual_forms() {
        let text = "# comment\n\nA=1\nexport B = two words \nC='lit $x \\n'\nD=\"line\\nnext \\\"q\\\"\"\nE=value # note\nF=\nG=a#b\n";
        let vars = parse(text).unwrap();
        assert_eq!(vars["A"], "1");
        assert_eq!(vars["B"], "two words");
        assert_eq!(vars["C"], "lit $x \\n");
        assert_eq!(vars["D"], "line\nnext \"q\"");
        assert_eq!(vars["E"], "value");
        assert_eq!(vars["F"], "");
        assert_eq!(vars["G"], "a#b");
        assert_eq!(vars.len(), 7);
    }

    #[test]
    fn bad_lines_are_reported_with_their_number() {
        assert_eq!(parse("A=1\nnot an assignment\n"), Err(2));
        assert_eq!(parse("1A=x"), Err(1));
        assert_eq!(parse("A=\"unterminated"), Err(1));
        assert_eq!(parse("A='unterminated"), Err(1));
    }
}
