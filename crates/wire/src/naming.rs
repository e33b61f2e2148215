//! Exposed tool names: `mcp__{server}__{tool}` in the registry, and
//! `{server}__{name}` where the gateway serves the pool ([`NameRule`]).
//!
//! Invariants of every name built here: it matches `[A-Za-z0-9_-]{1,64}`;
//! it is a pure function of its inputs, stable across runs and releases
//! (the hash is FNV-1a, not std's randomised hasher); names that fit are
//! kept readable, longer ones are cut and given an 8-hex-digit suffix of
//! the hash of the *original* pair, so two long names that share a prefix
//! still differ.
//!
//! Sanitising can map distinct names to one (`a.b`, `a b` and `a_b` all read
//! `a_b`). The registry then disambiguates deterministically with the same
//! kind of hash suffix: on the server segment ([`server_segment`]) when
//! server names collide, on the tool part ([`ExposedName::tool_hashed`]) when
//! tool names do. A name already made only of allowed characters keeps its
//! readable form, so adding a colliding server never renames the exact one.

/// Longest exposed name (the limit of most LLM tool-calling APIs).
pub const MAX_NAME_LEN: usize = 64;

const SEPARATOR: &str = "__";
/// `_` and 8 hex digits.
const SUFFIX_LEN: usize = 9;

/// What every exposed name of a catalog starts with. The rest of the rule
/// (sanitising, the 64-character cut, the hash suffixes) is the same for all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NameRule {
    pub prefix: &'static str,
}

impl NameRule {
    /// The registry's names: `mcp__{server}__{tool}`.
    pub const REGISTRY: NameRule = NameRule { prefix: "mcp__" };
    /// The gateway's names: `{server}__{name}` (its client adds its own prefix).
    pub const GATEWAY: NameRule = NameRule { prefix: "" };

    /// `{prefix}{segment}__`: what every exposed name of that segment starts
    /// with (unless the whole name was cut to [`MAX_NAME_LEN`]).
    pub fn server_prefix(self, segment: &str) -> String {
        format!("{}{segment}{SEPARATOR}", self.prefix)
    }
}

impl Default for NameRule {
    fn default() -> Self {
        NameRule::REGISTRY
    }
}

/// The name under which `tool` of `server` appears in the catalog when
/// nothing collides with it.
pub fn exposed_name(server: &str, tool: &str) -> String {
    ExposedName { rule: NameRule::REGISTRY, server, segment: &sanitised(server), tool, tool_hashed: false }.build()
}

/// The parts of one exposed name.
#[derive(Debug, Clone, Copy)]
pub struct ExposedName<'a> {
    pub rule: NameRule,
    /// The server's configured name.
    pub server: &'a str,
    /// How the server appears in the name (see [`server_segment`]).
    pub segment: &'a str,
    /// The server's own tool name.
    pub tool: &'a str,
    /// Add the pair's hash to the tool part (tool names that collide).
    pub tool_hashed: bool,
}

impl ExposedName<'_> {
    pub fn build(&self) -> String {
        let mut name = String::with_capacity(MAX_NAME_LEN + SUFFIX_LEN);
        name.push_str(&self.rule.server_prefix(self.segment));
        push_sanitised(&mut name, self.tool);
        let suffix = format!("_{:08x}", fnv1a([self.server.as_bytes(), self.tool.as_bytes()]) as u32);
        if self.tool_hashed {
            name.push_str(&suffix);
        }
        if name.len() <= MAX_NAME_LEN {
            return name;
        }
        name.truncate(MAX_NAME_LEN - SUFFIX_LEN);
        name.push_str(&suffix);
        name
    }
}

/// How `server` appears inside its tools' exposed names: its sanitised
/// name, with a hash of the original name appended when `disambiguate`.
pub fn server_segment(server: &str, disambiguate: bool) -> String {
    let mut segment = sanitised(server);
    if disambiguate {
        segment.push_str(&format!("_{:08x}", fnv1a([server.as_bytes()]) as u32));
    }
    segment
}

/// `mcp__{segment}__`: the registry's [`NameRule::server_prefix`].
pub fn server_prefix(segment: &str) -> String {
    NameRule::REGISTRY.server_prefix(segment)
}

/// Whether `name` can be an exposed name of a server whose segment is
/// `segment`: it starts with the server's prefix, or it was cut to the
/// maximum length inside that prefix.
pub fn may_belong_to(name: &str, segment: &str) -> bool {
    let prefix = server_prefix(segment);
    if name.starts_with(&prefix) {
        return true;
    }
    let cut = MAX_NAME_LEN - SUFFIX_LEN;
    name.len() == MAX_NAME_LEN && name.is_char_boundary(cut) && prefix.starts_with(&name[..cut])
}

/// Whether `part` is kept as it is by sanitising.
pub fn is_exact(part: &str) -> bool {
    part.chars().all(allowed)
}

/// `part` with every character outside `[A-Za-z0-9_-]` replaced by `_`.
pub fn sanitised(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    push_sanitised(&mut out, part);
    out
}

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn push_sanitised(out: &mut String, part: &str) {
    out.extend(part.chars().map(|c| if allowed(c) { c } else { '_' }));
}

/// FNV-1a over the parts, with a NUL between consecutive parts.
#[doc(hidden)]
pub fn fnv1a<const N: usize>(parts: [&[u8]; N]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, part) in parts.iter().enumerate() {
        let separator: &[u8] = if i == 0 { &[] } else { &[0] };
        for byte in separator.iter().chain(part.iter()) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        !name.is_empty() && name.len() <= MAX_NAME_LEN && name.chars().all(allowed)
    }

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
        let hash = fnv1a([b"server".as_slice(), format!("{long}a").as_bytes()]) as u32;
        assert_eq!(&a[MAX_NAME_LEN - 9..], &format!("_{hash:08x}"));
        assert!(valid(&a));
    }

    #[test]
    fn the_hash_is_pinned_across_releases() {
        // FNV-1a of "a.b"; a change here renames users' tools.
        assert_eq!(server_segment("a.b", true), "a_b_0466522c");
        assert_eq!(server_segment("a.b", false), "a_b");
    }

    #[test]
    fn disambiguated_names_differ_stay_valid_and_belong_to_their_server() {
        let dotted = server_segment("a.b", true);
        let spaced = server_segment("a b", true);
        assert_ne!(dotted, spaced);
        let name = ExposedName { rule: NameRule::REGISTRY, server: "a.b", segment: &dotted, tool: "echo", tool_hashed: false }.build();
        assert!(valid(&name) && may_belong_to(&name, &dotted) && !may_belong_to(&name, "a_b"));
        let x = ExposedName { rule: NameRule::REGISTRY, server: "s", segment: "s", tool: "x.y", tool_hashed: true }.build();
        let y = ExposedName { rule: NameRule::REGISTRY, server: "s", segment: "s", tool: "x y", tool_hashed: true }.build();
        assert!(valid(&x) && valid(&y) && x != y && x.starts_with("mcp__s__x_y_"));
        let long = "s".repeat(70);
        let cut = exposed_name(&long, "tool");
        assert!(valid(&cut) && may_belong_to(&cut, &sanitised(&long)) && !may_belong_to(&cut, "s"));
    }

    #[test]
    fn the_gateway_rule_has_no_prefix_and_the_same_cut() {
        let gateway =
            |server, tool| ExposedName { rule: NameRule::GATEWAY, server, segment: &sanitised(server), tool, tool_hashed: false }.build();
        assert_eq!(gateway("fs", "read.file"), "fs__read_file");
        let long = "t".repeat(80);
        let cut = gateway("server", &long);
        assert_eq!(cut.len(), MAX_NAME_LEN);
        assert_eq!(&cut[MAX_NAME_LEN - 9..], &exposed_name("server", &long)[MAX_NAME_LEN - 9..]);
        assert!(valid(&cut) && cut.starts_with("server__ttt"));
    }
}
