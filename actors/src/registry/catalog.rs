//! The catalog's data: which exposed name routes to which (server, tool),
//! and how names are made unique.
//!
//! Invariants:
//! - an exposed name routes to exactly one (server, tool);
//! - names depend only on the set of registered servers and each server's
//!   own listing, never on which server listed first: server names that
//!   sanitise alike are told apart on the server segment, tool names that
//!   do on the tool part, in both cases with a stable hash (see
//!   [`crate::naming`]), and a name already exact keeps its readable form;
//! - a residual clash between two servers (`x` + tool `y__z` against
//!   `x__y` + tool `z`) is settled by server name order: the first in order
//!   keeps the name, the other gets the hashed form;
//! - nothing is left out or renamed without a warning for the server.

use std::collections::BTreeMap;

use rmcp::model::Tool;

use crate::naming::{self, ExposedName, NameRule};
use crate::pool::KeptTool;

/// A tool as a catalog holds it: rmcp's [`Tool`] (the gateway's tables) or
/// a [`KeptTool`] (the registry's, schemas as text).
pub trait Listed: Clone {
    /// The tool's name on its server.
    fn listed_name(&self) -> &str;
}

impl Listed for Tool {
    fn listed_name(&self) -> &str {
        &self.name
    }
}

impl Listed for KeptTool {
    fn listed_name(&self) -> &str {
        self.name()
    }
}

/// Where an exposed name leads.
#[derive(Debug, Clone)]
pub struct Route<T = Tool> {
    pub server: String,
    pub tool: T,
}

/// Exposed names one server gained and lost in one change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Change {
    pub server: String,
    pub added: Vec<String>,
    pub removed: Vec<String>,
}

#[derive(Debug, Default)]
struct Entry {
    segment: String,
    /// Exposed names this server owns, in listing order.
    names: Vec<String>,
    /// Problems of the current listing (collisions, duplicates).
    warnings: Vec<String>,
}

/// Two (server, tool) pairs that read alike as `name`: `kept` keeps the
/// readable name (empty when neither is exact), `rejected` was given a
/// disambiguated one (`server/tool`).
#[derive(Debug, Clone, PartialEq)]
pub struct Collision {
    pub name: String,
    pub kept: String,
    pub rejected: String,
}

#[derive(Debug)]
pub struct Catalog<T = Tool> {
    /// How names begin (the registry's rule by default).
    rule: NameRule,
    routes: BTreeMap<String, Route<T>>,
    servers: BTreeMap<String, Entry>,
    /// Collisions found since the last [`Catalog::take_collisions`].
    collisions: Vec<Collision>,
}

impl<T> Default for Catalog<T> {
    fn default() -> Catalog<T> {
        Catalog { rule: NameRule::default(), routes: BTreeMap::new(), servers: BTreeMap::new(), collisions: Vec::new() }
    }
}

impl<T: Listed> Catalog<T> {
    /// An empty catalog whose names follow `rule`.
    pub fn with_rule(rule: NameRule) -> Catalog<T> {
        Catalog { rule, ..Catalog::default() }
    }

    pub fn route(&self, name: &str) -> Option<&Route<T>> {
        self.routes.get(name)
    }

    pub fn routes(&self) -> impl Iterator<Item = (&String, &Route<T>)> {
        self.routes.iter()
    }

    /// The collisions found by the changes since the last call.
    pub fn take_collisions(&mut self) -> Vec<Collision> {
        std::mem::take(&mut self.collisions)
    }

    /// The server's segment in exposed names (see [`naming::server_segment`]).
    pub fn segment(&self, server: &str) -> Option<&str> {
        self.servers.get(server).map(|entry| entry.segment.as_str())
    }

    /// The exposed names the server owns now.
    pub fn names(&self, server: &str) -> &[String] {
        self.servers.get(server).map(|entry| entry.names.as_slice()).unwrap_or_default()
    }

    /// Adds a server without tools; servers whose segment changes because
    /// of it are renamed.
    pub fn register(&mut self, server: &str) -> Vec<Change> {
        self.servers.entry(server.to_string()).or_default();
        self.resegment(&naming::sanitised(server))
    }

    /// Removes a server and its tools.
    pub fn unregister(&mut self, server: &str) -> Vec<Change> {
        let removed = self.clear(server);
        self.servers.remove(server);
        let mut changes = vec![Change { server: server.to_string(), added: Vec::new(), removed }];
        changes.extend(self.resegment(&naming::sanitised(server)));
        changes
    }

    /// Replaces a server's tools with `tools`.
    pub fn install(&mut self, server: &str, tools: Vec<T>) -> Vec<Change> {
        let Some(segment) = self.segment(server).map(str::to_string) else { return Vec::new() };
        let old = self.clear(server);
        let mut warnings = Vec::new();
        let mut changes = Vec::new();
        for (name, tool) in assign(self.rule, server, &segment, tools, &mut warnings, &mut self.collisions) {
            self.claim(server, name, tool, &mut warnings, &mut changes);
        }
        let entry = self.servers.entry(server.to_string()).or_default();
        entry.warnings.extend(warnings);
        let added = entry.names.iter().filter(|n| !old.contains(n)).cloned().collect();
        let removed = old.into_iter().filter(|n| !entry.names.contains(n)).collect();
        changes.insert(0, Change { server: server.to_string(), added, removed });
        changes
    }

    /// The server's warnings: how its names were disambiguated.
    pub fn warnings(&self, server: &str) -> Vec<String> {
        let Some(entry) = self.servers.get(server) else { return Vec::new() };
        let mut warnings = Vec::new();
        if entry.segment != naming::sanitised(server) {
            let alike: Vec<String> = self
                .servers
                .keys()
                .filter(|other| naming::sanitised(other) == naming::sanitised(server))
                .map(|s| format!("`{s}`"))
                .collect();
            warnings.push(format!(
                "server names {} read alike in exposed tool names; this server's tools are exposed as `{}*`",
                alike.join(", "),
                self.rule.server_prefix(&entry.segment)
            ));
        }
        warnings.extend(entry.warnings.iter().cloned());
        warnings
    }

    /// Removes a server's routes and warnings; returns its names.
    fn clear(&mut self, server: &str) -> Vec<String> {
        let Some(entry) = self.servers.get_mut(server) else { return Vec::new() };
        entry.warnings.clear();
        let names = std::mem::take(&mut entry.names);
        for name in &names {
            self.routes.remove(name);
        }
        names
    }

    /// Gives every server whose name sanitises to `sanitised` its segment
    /// and re-installs the tools of those whose segment changed.
    fn resegment(&mut self, sanitised: &str) -> Vec<Change> {
        let alike: Vec<String> = self.servers.keys().filter(|s| naming::sanitised(s) == sanitised).cloned().collect();
        let mut changes = Vec::new();
        for server in &alike {
            let segment = naming::server_segment(server, alike.len() > 1 && !naming::is_exact(server));
            let entry = self.servers.entry(server.clone()).or_default();
            if entry.segment == segment {
                continue;
            }
            if entry.segment.is_empty() && segment == sanitised {
                entry.segment = segment;
                continue;
            }
            entry.segment = segment;
            if alike.len() > 1 && !naming::is_exact(server) {
                let kept = alike.iter().find(|s| naming::is_exact(s)).cloned().unwrap_or_default();
                self.collisions.push(Collision { name: self.rule.server_prefix(sanitised), kept, rejected: server.clone() });
            }
            let entry = self.servers.entry(server.clone()).or_default();
            let tools: Vec<T> = entry.names.iter().filter_map(|n| self.routes.get(n)).map(|r| r.tool.clone()).collect();
            if !entry.names.is_empty() {
                changes.extend(self.install(server, tools));
            }
        }
        changes
    }

    /// Puts `tool` of `server` under `name`, settling a clash with another server.
    fn claim(&mut self, server: &str, name: String, tool: T, warnings: &mut Vec<String>, changes: &mut Vec<Change>) {
        let Some(holder) = self.routes.get(&name).map(|route| route.server.clone()) else {
            return self.insert(server, name, tool);
        };
        if holder == server {
            warnings
                .push(format!("tool `{}` reads as `{name}` like another of its tools: it is left out of the catalog", tool.listed_name()));
            return;
        }
        let rule = self.rule;
        let hashed = |server: &str, segment: &str, tool: &str| ExposedName { rule, server, segment, tool, tool_hashed: true }.build();
        if holder.as_str() < server {
            let other = hashed(server, &self.servers[server].segment, tool.listed_name());
            self.collisions.push(Collision {
                name: name.clone(),
                kept: format!("{holder}/{}", self.routes[&name].tool.listed_name()),
                rejected: format!("{server}/{}", tool.listed_name()),
            });
            let what = format!("tool `{}` reads as `{name}`, which server `{holder}` already exposes", tool.listed_name());
            self.insert_instead(server, other, tool, what, warnings);
            return;
        }
        // This server comes first in name order: it takes the name over.
        let Some(moved) = self.routes.remove(&name) else { return };
        let Some(entry) = self.servers.get_mut(&holder) else { return };
        entry.names.retain(|n| n != &name);
        let other = hashed(&holder, &entry.segment, moved.tool.listed_name());
        let what = format!("tool `{}` reads as `{name}`, which server `{server}` exposes too", moved.tool.listed_name());
        self.collisions.push(Collision {
            name: name.clone(),
            kept: format!("{server}/{}", tool.listed_name()),
            rejected: format!("{holder}/{}", moved.tool.listed_name()),
        });
        let mut their_warnings = Vec::new();
        let added = self.insert_instead(&holder, other.clone(), moved.tool, what, &mut their_warnings);
        if let Some(entry) = self.servers.get_mut(&holder) {
            entry.warnings.extend(their_warnings);
        }
        changes.push(Change { server: holder, added: added.into_iter().collect(), removed: vec![name.clone()] });
        warnings.push(format!("tool `{}` reads as `{name}` like a tool of another server, which was renamed", tool.listed_name()));
        self.insert(server, name, tool);
    }

    /// Puts a tool under its disambiguated `name`, warning with `what`;
    /// leaves it out (with a warning) if even that name is taken.
    fn insert_instead(&mut self, server: &str, name: String, tool: T, what: String, warnings: &mut Vec<String>) -> Option<String> {
        if self.routes.contains_key(&name) {
            warnings.push(format!("{what}, and `{name}` is taken too: the tool is left out of the catalog"));
            return None;
        }
        warnings.push(format!("{what}: it is exposed as `{name}`"));
        self.insert(server, name.clone(), tool);
        Some(name)
    }

    fn insert(&mut self, server: &str, name: String, tool: T) {
        self.routes.insert(name.clone(), Route { server: server.to_string(), tool });
        self.servers.entry(server.to_string()).or_default().names.push(name);
    }
}

/// Names for one server's listing: tools whose names sanitise alike are
/// told apart (the exact one keeps the readable name); a name listed twice
/// is kept once. Each such case adds a warning. (A connection already leaves
/// out repeated and empty names when it reads a listing; the catalog stays
/// unambiguous even when handed them.)
fn assign<T: Listed>(
    rule: NameRule,
    server: &str,
    segment: &str,
    tools: Vec<T>,
    warnings: &mut Vec<String>,
    collisions: &mut Vec<Collision>,
) -> Vec<(String, T)> {
    let plain = |tool: &str| ExposedName { rule, server, segment, tool, tool_hashed: false }.build();
    let mut groups: BTreeMap<String, Vec<T>> = BTreeMap::new();
    for tool in tools {
        if tool.listed_name().is_empty() {
            warnings.push(format!("the server lists a tool with an empty name; it is exposed as `{}`", plain("")));
        }
        let group = groups.entry(plain(tool.listed_name())).or_default();
        if group.iter().any(|kept| kept.listed_name() == tool.listed_name()) {
            warnings.push(format!("the server lists tool `{}` more than once; the first is kept", tool.listed_name()));
            continue;
        }
        group.push(tool);
    }
    let mut named = Vec::new();
    for (base, group) in groups {
        if group.len() == 1 {
            named.extend(group.into_iter().map(|tool| (base.clone(), tool)));
            continue;
        }
        let alike: Vec<String> = group.iter().map(|tool| format!("`{}`", tool.listed_name())).collect();
        let kept = group
            .iter()
            .find(|tool| naming::is_exact(tool.listed_name()))
            .map(|tool| format!("{server}/{}", tool.listed_name()))
            .unwrap_or_default();
        for tool in group {
            if naming::is_exact(tool.listed_name()) {
                named.push((base.clone(), tool));
                continue;
            }
            let name = ExposedName { rule, server, segment, tool: tool.listed_name(), tool_hashed: true }.build();
            warnings.push(format!("tools {} all read as `{base}`; `{}` is exposed as `{name}`", alike.join(", "), tool.listed_name()));
            collisions.push(Collision { name: base.clone(), kept: kept.clone(), rejected: format!("{server}/{}", tool.listed_name()) });
            named.push((name, tool));
        }
    }
    named
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> Tool {
        Tool::new(name.to_string(), "", std::sync::Arc::new(Default::default()))
    }

    fn exposed(catalog: &Catalog) -> Vec<(String, String, String)> {
        catalog.routes().map(|(name, route)| (name.clone(), route.server.clone(), route.tool.name.to_string())).collect()
    }

    fn build(order: &[&str]) -> Catalog {
        let mut catalog = Catalog::default();
        for server in order {
            catalog.register(server);
        }
        for server in order {
            catalog.install(server, vec![tool("echo")]);
        }
        catalog
    }

    #[test]
    fn colliding_servers_all_keep_their_tools_under_names_independent_of_order() {
        let one = build(&["a.b", "a_b", "a b"]);
        let other = build(&["a b", "a.b", "a_b"]);
        assert_eq!(exposed(&one), exposed(&other));
        assert_eq!(exposed(&one).len(), 3);
        assert_eq!(one.names("a_b"), ["mcp__a_b__echo"]);
        assert!(one.warnings("a.b")[0].contains("`a b`, `a.b`, `a_b`"), "{:?}", one.warnings("a.b"));
        assert!(one.warnings("a_b").is_empty());
    }

    #[test]
    fn a_server_added_later_renames_the_inexact_one_and_says_so() {
        let mut catalog = build(&["a.b"]);
        assert_eq!(catalog.names("a.b"), ["mcp__a_b__echo"]);
        let changes = catalog.register("a_b");
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].removed, ["mcp__a_b__echo"]);
        assert_eq!(changes[0].added, catalog.names("a.b"));
        assert_ne!(catalog.names("a.b"), ["mcp__a_b__echo"]);
        catalog.unregister("a_b");
        assert_eq!(catalog.names("a.b"), ["mcp__a_b__echo"]);
    }

    #[test]
    fn tools_that_read_alike_and_duplicates_are_kept_apart_with_warnings() {
        let mut catalog = Catalog::default();
        catalog.register("s");
        catalog.install("s", vec![tool("x.y"), tool("x_y"), tool("x y"), tool("x_y")]);
        assert_eq!(catalog.names("s").len(), 3);
        assert!(catalog.route("mcp__s__x_y").is_some_and(|r| r.tool.name == "x_y"));
        let warnings = catalog.warnings("s");
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings.iter().any(|w| w.contains("more than once")));
    }

    #[test]
    fn a_clash_across_servers_is_settled_by_server_order() {
        for order in [["x", "x__y"], ["x__y", "x"]] {
            let mut catalog = Catalog::default();
            for server in order {
                catalog.register(server);
            }
            for server in order {
                let name = if server == "x" { "y__z" } else { "z" };
                catalog.install(server, vec![tool(name)]);
            }
            assert!(catalog.route("mcp__x__y__z").is_some_and(|r| r.server == "x"));
            assert_eq!(catalog.names("x__y").len(), 1);
            assert!(catalog.warnings("x__y").iter().any(|w| w.contains("exposed as")), "{:?}", catalog.warnings("x__y"));
        }
    }
}
