//! Exposed tool names: `mcp__{server}__{tool}`.
//!
//! Invariants of [`exposed_name`]: the result matches `[A-Za-z0-9_-]{1,64}`;
//! it is a pure function of (server, tool), stable across runs and
//! releases (the hash is FNV-1a, not std's randomised hasher); names that
//! fit are kept readable, longer ones are cut and given an 8-hex-digit
//! suffix of the hash of the *original* pair, so two long names that share a
//! prefix still differ. Distinct pairs can still map to one name
//! (`a.b` and `a_b`): the registry detects and reports that.

/// Longest exposed name (the limit of most LLM tool-calling APIs).
pub const MAX_NAME_LEN: usize = 64;

const PREFIX: &str = "mcp__";
const SEPARATOR: &str = "__";

/// The name under which `tool` of `server` appears in the catalog.
pub fn exposed_name(server: &str, tool: &str) -> String {
    let mut name = String::with_capacity(PREFIX.len() + server.len() + SEPARATOR.len() + tool.len());
    name.push_str(PREFIX);
    push_sanitised(&mut name, server);
    name.push_str(SEPARATOR);
    push_sanitised(&mut name, tool);
    if name.len() <= MAX_NAME_LEN {
        return name;
    }
    let suffix = format!("_{:08x}", fnv1a(server, tool) as u32);
    name.truncate(MAX_NAME_LEN - suffix.len());
    name.push_str(&suffix);
    name
}

fn push_sanitised(out: &mut String, part: &str) {
    out.extend(part.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }));
}

/// FNV-1a over `server`, a NUL, then `tool`.
fn fnv1a(server: &str, tool: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in server.bytes().chain([0]).chain(tool.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_names_are_kept() {
        assert_eq!(exposed_name("fs", "read_file"), "mcp__fs__read_file");
        assert_eq!(exposed_name("my server", "get.thing/v2"), "mcp__my_server__get_thing_v2");
        assert_eq!(exposed_name("é", "ok-1"), "mcp_____ok-1");
    }

    #[test]
    fn long_names_are_cut_with_a_stable_distinct_suffix() {
        let long = "t".repeat(80);
        let a = exposed_name("server", &format!("{long}a"));
        let b = exposed_name("server", &format!("{long}b"));
        assert_eq!(a.len(), MAX_NAME_LEN);
        assert_ne!(a, b);
        assert_eq!(a, exposed_name("server", &format!("{long}a")));
        // Pinned: the suffix must not change between releases.
        assert_eq!(&a[MAX_NAME_LEN - 9..], &format!("_{:08x}", fnv1a("server", &format!("{long}a")) as u32));
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
    }
}
