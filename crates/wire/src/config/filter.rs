//! Which of a server's tools are exposed: glob patterns on the server's own
//! tool names (not the exposed `mcp__{server}__{tool}` names).

/// Allow and deny lists of glob patterns.
///
/// A tool is permitted when `allow` is empty or one of its patterns
/// matches, and no pattern of `deny` matches: deny wins.
/// Patterns: `*` matches any run of characters (also none), `?` exactly
/// one character; everything else matches itself, case-sensitively.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

impl ToolFilter {
    pub fn permits(&self, tool: &str) -> bool {
        let matches = |pattern: &String| glob_match(pattern, tool);
        (self.allow.is_empty() || self.allow.iter().any(matches)) && !self.deny.iter().any(matches)
    }

    /// True when every tool is permitted.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }
}

/// Wildcard matching with backtracking to the last `*`: linear in practice,
/// `O(pattern × text)` at worst, never exponential.
#[doc(hidden)]
pub fn glob_match(pattern: &str, text: &str) -> bool {
    glob_match_counting(pattern, text, &mut 0)
}

/// [`glob_match`], adding the number of steps it took to `steps`.
fn glob_match_counting(pattern: &str, text: &str, steps: &mut usize) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    // Position of the last `*` seen and of the text it was tried against.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        *steps += 1;
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == '?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((star_p, star_t)) => {
                    p = star_p + 1;
                    t = star_t + 1;
                    star = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(allow: &[&str], deny: &[&str]) -> ToolFilter {
        ToolFilter { allow: allow.iter().map(|s| s.to_string()).collect(), deny: deny.iter().map(|s| s.to_string()).collect() }
    }

    #[test]
    fn globs() {
        assert!(glob_match("read_*", "read_file"));
        assert!(glob_match("read_*", "read_"));
        assert!(!glob_match("read_*", "write_file"));
        assert!(glob_match("*delete*", "bulk_delete_all"));
        assert!(glob_match("*delete*", "delete"));
        assert!(glob_match("get_?", "get_x"));
        assert!(!glob_match("get_?", "get_xy"));
        assert!(glob_match("a*b*c", "aXXbYYbc"));
        assert!(!glob_match("a*b*c", "aXXbYYb"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("", "x"));
        assert!(glob_match("exact", "exact"));
        assert!(!glob_match("Exact", "exact"));
        assert!(glob_match("é*", "été"));
    }

    #[test]
    fn pathological_pattern_takes_at_most_pattern_times_text_steps() {
        let (pattern, text) = ("*a*a*a*a*a*a*a*b", "a".repeat(10_000));
        let mut steps = 0;
        assert!(!glob_match_counting(pattern, &text, &mut steps));
        // A naive backtracking matcher needs about text^7 / 7! steps here.
        assert!(steps <= pattern.len() * text.len(), "{steps} steps");
    }

    #[test]
    fn empty_filter_permits_everything() {
        assert!(ToolFilter::default().permits("anything"));
        assert!(ToolFilter::default().is_empty());
    }

    #[test]
    fn allow_then_deny() {
        let f = filter(&["read_*", "list_*"], &["*secret*"]);
        assert!(f.permits("read_file"));
        assert!(f.permits("list_dir"));
        assert!(!f.permits("write_file"));
        assert!(!f.permits("read_secret_file"));
        let deny_only = filter(&[], &["*delete*"]);
        assert!(deny_only.permits("read_file"));
        assert!(!deny_only.permits("delete_file"));
    }
}
