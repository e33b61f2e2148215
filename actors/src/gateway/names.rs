//! The gateway's routing tables: the names it serves, and where each leads.
//!
//! - Tools and prompts are served as `{server}__{name}` by the registry's
//!   naming rule with the gateway's prefix ([`NameRule::GATEWAY`]):
//!   sanitised, at most 64 characters, hash suffixes where names were cut
//!   or read alike, and every collision reported as the registry reports it.
//!   With `serve --server NAME` ([`ServeOptions::passthrough`]) the one
//!   server's names are served unchanged.
//! - Resources and resource templates keep their own URIs; a URI served
//!   by two servers goes to the first in name order, and the clash is
//!   reported ([`Routes::warnings`]).
//! - The built-in `STATUS_URI` resource comes first and cannot be shadowed.
//!
//! Invariant: a table is a pure function of the servers' listings; it is
//! rebuilt whenever a listing may have changed ([`RoutesCache::invalidate`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::join_all;
use rmcp::model::{Prompt, Resource, ResourceTemplate};

use super::ServeOptions;
use crate::handle::Handle;
use crate::naming::{self, ExposedName, NameRule};
use crate::policy::Kind;
use crate::registry::catalog::Catalog;
use crate::server::STATUS_URI;
use crate::{Event, KeptTool, ServerState, ServerStatus};

/// A served name's owner: the server and its own name for the thing.
#[derive(Debug, Clone, PartialEq)]
pub struct Owner {
    pub server: String,
    pub name: String,
}

/// One snapshot of what the pool serves.
#[derive(Debug, Default)]
pub struct Routes {
    /// Served tool name → its owner and its tool, kept as the registry
    /// keeps it (schemas as text, shared) under its own name: the served
    /// name is the key, written in its place when the tool is listed.
    pub tools: BTreeMap<String, (Owner, KeptTool)>,
    pub prompts: BTreeMap<String, (Owner, Prompt)>,
    /// URI → (server, resource), first server in name order wins.
    pub resources: BTreeMap<String, (String, Resource)>,
    /// In server name order.
    pub templates: Vec<(String, ResourceTemplate)>,
    /// Collisions and clashes, as the log message the client is sent.
    pub warnings: Vec<String>,
}

/// What one server lists besides its tools.
#[derive(Debug, Default, Clone)]
pub struct Listing {
    pub server: String,
    pub tools: Vec<KeptTool>,
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
}

impl Routes {
    /// The tables of these listings (sorted by server name).
    pub fn build(mut listings: Vec<Listing>, options: &ServeOptions) -> Routes {
        listings.sort_by(|a, b| a.server.cmp(&b.server));
        let mut routes = Routes::default();
        let passthrough = options.passthrough.is_some();
        let mut catalog = Catalog::with_rule(NameRule::GATEWAY);
        for listing in &listings {
            catalog.register(&listing.server);
        }
        for listing in &mut listings {
            if passthrough {
                for tool in std::mem::take(&mut listing.tools) {
                    let owner = Owner { server: listing.server.clone(), name: tool.name().to_string() };
                    routes.tools.insert(owner.name.clone(), (owner, tool));
                }
            } else {
                catalog.install(&listing.server, std::mem::take(&mut listing.tools));
            }
        }
        for collision in catalog.take_collisions() {
            routes.warnings.push(format!(
                "tool names read alike as `{}`: `{}` keeps it, `{}` is served under a disambiguated name",
                collision.name, collision.kept, collision.rejected
            ));
        }
        for (name, route) in catalog.routes() {
            let owner = Owner { server: route.server.clone(), name: route.tool.name().to_string() };
            routes.tools.insert(name.clone(), (owner, route.tool.clone()));
        }
        for listing in listings {
            routes.add_prompts(&listing.server, listing.prompts, passthrough);
            for resource in listing.resources {
                routes.add_resource(&listing.server, resource);
            }
            routes.templates.extend(listing.templates.into_iter().map(|template| (listing.server.clone(), template)));
        }
        routes
    }

    fn add_prompts(&mut self, server: &str, prompts: Vec<Prompt>, passthrough: bool) {
        let segment = naming::sanitised(server);
        for mut prompt in prompts {
            let own = prompt.name.clone();
            let built = |tool_hashed| ExposedName { rule: NameRule::GATEWAY, server, segment: &segment, tool: &own, tool_hashed }.build();
            let mut name = if passthrough { own.clone() } else { built(false) };
            if let Some((holder, _)) = self.prompts.get(&name) {
                let rejected = format!("{server}/{own}");
                let kept = format!("{}/{}", holder.server, holder.name);
                if passthrough || self.prompts.contains_key(&built(true)) {
                    self.warnings.push(format!("prompt `{rejected}` reads as `{name}` like `{kept}`: it is left out"));
                    continue;
                }
                name = built(true);
                self.warnings.push(format!("prompt `{rejected}` reads as `{}` like `{kept}`: it is served as `{name}`", built(false)));
            }
            prompt.name = name.clone();
            self.prompts.insert(name, (Owner { server: server.to_string(), name: own }, prompt));
        }
    }

    fn add_resource(&mut self, server: &str, resource: Resource) {
        let uri = resource.uri.clone();
        if uri == STATUS_URI {
            self.warnings.push(format!("server `{server}` lists `{uri}`, which is the gateway's own: the server's is not served"));
            return;
        }
        if let Some((first, _)) = self.resources.get(&uri) {
            self.warnings.push(format!("resource `{uri}` is listed by `{first}` and `{server}`: it is read from `{first}`"));
            return;
        }
        self.resources.insert(uri, (server.to_string(), resource));
    }

    /// The server that serves `uri`: the one listing it, else the first
    /// whose template's fixed start it begins with.
    pub fn resource_server(&self, uri: &str) -> Option<&str> {
        if let Some((server, _)) = self.resources.get(uri) {
            return Some(server);
        }
        self.templates
            .iter()
            .filter(|(_, template)| {
                let fixed = template.uri_template.split('{').next().unwrap_or_default();
                !fixed.is_empty() && uri.starts_with(fixed)
            })
            .max_by_key(|(_, template)| template.uri_template.split('{').next().map_or(0, str::len))
            .map(|(server, _)| server.as_str())
    }

    /// Everything `server` lists: each tool, prompt, resource and template, by its own name or URI.
    pub fn items_of<'a>(&'a self, server: &'a str) -> impl Iterator<Item = (Kind, &'a str)> + 'a {
        let tools =
            self.tools.values().filter(move |(owner, _)| owner.server == server).map(|(owner, _)| (Kind::Tool, owner.name.as_str()));
        let prompts =
            self.prompts.values().filter(move |(owner, _)| owner.server == server).map(|(owner, _)| (Kind::Prompt, owner.name.as_str()));
        let resources = self.resources.iter().filter(move |(_, (owner, _))| owner == server).map(|(uri, _)| (Kind::Resource, uri.as_str()));
        let templates = self
            .templates
            .iter()
            .filter(move |(owner, _)| owner == server)
            .map(|(_, template)| (Kind::Resource, template.uri_template.as_str()));
        tools.chain(prompts).chain(resources).chain(templates)
    }

    /// The server owning the template `uri_template`.
    pub fn template_server(&self, uri_template: &str) -> Option<&str> {
        self.templates.iter().find(|(_, template)| template.uri_template == uri_template).map(|(server, _)| server.as_str())
    }
}

/// The current [`Routes`], built when first needed after a change.
///
/// Invariants: one build at a time (the sessions that ask meanwhile get
/// its result); a build that an [`invalidate`](RoutesCache::invalidate)
/// overtook answers its caller but is not kept, so a change is never
/// hidden behind tables read before it.
#[derive(Debug, Clone, Default)]
pub struct RoutesCache {
    cached: Arc<Mutex<Cached>>,
    building: Arc<tokio::sync::Mutex<()>>,
}

#[derive(Debug, Default)]
struct Cached {
    current: Option<Arc<Routes>>,
    /// A task invalidates the tables on the pool's events ([`RoutesCache::watch`]).
    watched: bool,
    /// Counts invalidations: a build keeps its tables only if none came meanwhile.
    generation: u64,
    /// Every tool name served so far and its owner: a server that is down
    /// (restarting) leaves the listing, but calls by its names still go to
    /// it, and its connection holds them until it is back.
    known_tools: BTreeMap<String, Owner>,
    /// Each server's last listing while connected: a server that is
    /// restarting stays in the tables with it, so a crash loop does not make
    /// its tools vanish from the clients' lists and come back (calls wait
    /// for the restart anyway). A failed, disabled or removed server leaves.
    last: BTreeMap<String, Listing>,
}

/// What building the tables found: the tables, and whether they are new
/// (their warnings not yet told).
pub struct Fetched {
    pub routes: Arc<Routes>,
    pub fresh: bool,
}

impl RoutesCache {
    /// The tables, built from the pool if a change made them stale.
    pub async fn fetch(&self, handle: &Handle, options: &ServeOptions) -> Fetched {
        if let Some(routes) = self.current() {
            return Fetched { routes, fresh: false };
        }
        let _building = self.building.lock().await;
        let (listed, generation) = {
            let cached = self.lock();
            if let Some(routes) = cached.current.clone() {
                return Fetched { routes, fresh: false };
            }
            (cached.last.keys().cloned().collect(), cached.generation)
        };
        let (fresh, coming_back) = listings(handle, options, &listed).await;
        let mut all = fresh.clone();
        {
            let mut cached = self.lock();
            all.extend(coming_back.iter().filter_map(|server| cached.last.get(server).cloned()));
            cached.last.retain(|server, _| coming_back.contains(server));
            cached.last.extend(fresh.into_iter().map(|listing| (listing.server.clone(), listing)));
        }
        let routes = Arc::new(Routes::build(all, options));
        for warning in &routes.warnings {
            tracing::warn!("{warning}");
        }
        let mut cached = self.lock();
        cached.known_tools.extend(routes.tools.iter().map(|(name, (owner, _))| (name.clone(), owner.clone())));
        if cached.generation == generation {
            cached.current = Some(routes.clone());
        }
        Fetched { routes, fresh: true }
    }

    /// The tables if they are fresh, without building them.
    pub fn current(&self) -> Option<Arc<Routes>> {
        self.lock().current.clone()
    }

    /// The owner of a tool name served before, though not listed now.
    pub fn known_tool(&self, name: &str) -> Option<Owner> {
        self.lock().known_tools.get(name).cloned()
    }

    /// The own names of `server`'s tools served so far.
    pub fn known_tools_of(&self, server: &str) -> Vec<String> {
        self.lock().known_tools.values().filter(|owner| owner.server == server).map(|owner| owner.name.clone()).collect()
    }

    /// Forgets the tables: a server's lists may have changed.
    pub fn invalidate(&self) {
        invalidate(&self.cached);
    }

    /// Keeps the tables fresh by the pool's events, whether or not any
    /// session listens to them (a stateless request does not): once per
    /// cache, by a task on the calling runtime thread that ends with the
    /// cache or the pool.
    pub fn watch(&self, handle: &Handle) {
        {
            let mut cached = self.lock();
            if std::mem::replace(&mut cached.watched, true) {
                return;
            }
        }
        let cached = Arc::downgrade(&self.cached);
        let mut events = handle.subscribe();
        actix_rt::spawn(async move {
            while let Some(event) = events.recv().await {
                let Some(cached) = cached.upgrade() else { return };
                if matches!(event, Event::ServerState { .. } | Event::Catalog { .. } | Event::ListChanged { .. }) {
                    invalidate(&cached);
                }
            }
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cached> {
        lock(&self.cached)
    }
}

fn lock(cached: &Mutex<Cached>) -> std::sync::MutexGuard<'_, Cached> {
    cached.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn invalidate(cached: &Mutex<Cached>) {
    let mut cached = lock(cached);
    cached.current.take();
    cached.generation += 1;
}

/// What a client is told when it names a tool that is not served: when
/// the name is one of a served server's that is not up (its prefix, or
/// any name under `serve --server`), that the server is down and why.
pub fn unknown_tool(name: &str, statuses: &[ServerStatus], options: &ServeOptions) -> String {
    let owner = statuses
        .iter()
        .filter(|status| serves(options, &status.name) && status.state != ServerState::Connected)
        .filter(|status| {
            options.passthrough.is_some()
                || name.starts_with(&NameRule::GATEWAY.server_prefix(&naming::server_segment(&status.name, false)))
        })
        .max_by_key(|status| status.name.len());
    let Some(status) = owner else {
        return format!("Unknown tool: `{name}` is not served here; list the tools for the names served");
    };
    let server = &status.name;
    let last = status.last_error.as_deref().map(|error| format!(": {error}")).unwrap_or_default();
    let why = match &status.state {
        ServerState::Failed { error, .. } => {
            format!("failed: {error}; `mcpvisor test {server}` explains, and restarting the gateway starts it again")
        }
        ServerState::Restarting { attempt, .. } => format!("is restarting (attempt {attempt}) after it failed{last}; try again shortly"),
        ServerState::Pending => "is still starting; try again shortly".into(),
        ServerState::NeedsAuth => format!("needs authorization; run `mcpvisor auth {server}`"),
        ServerState::Disabled => format!("is disabled; `mcpvisor enable {server}` turns it on"),
        ServerState::Connected => "does not list it; list the tools for the names served".into(),
    };
    let stderr = status.stderr_tail.last().map(|line| format!(" (its last stderr line: {line})")).unwrap_or_default();
    format!("`{name}` is not available: server `{server}` {why}{stderr}")
}

/// The server's own tool a gateway `name` means when that tool is withheld
/// by its pin (not in the tables, so not found by them).
pub fn withheld_owner(name: &str, statuses: &[ServerStatus], options: &ServeOptions) -> Option<Owner> {
    statuses.iter().filter(|status| serves(options, &status.name)).find_map(|status| {
        let prefix = NameRule::GATEWAY.server_prefix(&naming::server_segment(&status.name, false));
        let tool = match options.passthrough {
            Some(_) => name,
            None => name.strip_prefix(prefix.as_str())?,
        };
        status.withheld.iter().any(|withheld| withheld == tool).then(|| Owner { server: status.name.clone(), name: tool.to_string() })
    })
}

/// Whether `server` is served under these options.
pub fn serves(options: &ServeOptions, server: &str) -> bool {
    options.passthrough.as_deref().is_none_or(|only| only == server)
}

/// How long building the tables waits for servers still starting.
pub const STARTUP_WAIT: Duration = Duration::from_secs(30);

/// Every served server's listing that could be read whole (a list a
/// server does not offer is empty), and the names of the served servers
/// with a listing in `listed` that are not read whole now but have not
/// left either (failed, disabled, waiting for authorisation, removed):
/// restarting, starting again, or restarted while they were being listed. Servers starting for
/// the first time are waited for first, at most [`STARTUP_WAIT`], so a
/// client's first listing is not empty.
///
/// A listing is read whole when the server was connected, in the same
/// run (pid and restart count), before its tools were read and after its
/// other lists were: one taken across a restart could miss lists that the
/// server had before and has again.
async fn listings(handle: &Handle, options: &ServeOptions, listed: &BTreeSet<String>) -> (Vec<Listing>, Vec<String>) {
    let served = || async { handle.status().await.into_iter().filter(|status| serves(options, &status.name)).collect::<Vec<_>>() };
    let mut before = served().await;
    if before.iter().any(|s| s.state == ServerState::Pending && !listed.contains(&s.name)) {
        handle.wait_ready(STARTUP_WAIT).await;
        before = served().await;
    }
    let mut tools: BTreeMap<String, Vec<KeptTool>> = BTreeMap::new();
    for entry in handle.list_kept_tools().await {
        tools.entry(entry.server).or_default().push(entry.tool);
    }
    let connected: Vec<&ServerStatus> = before.iter().filter(|status| status.state == ServerState::Connected).collect();
    let read = join_all(connected.iter().map(|status| {
        let server = status.name.clone();
        let tools = tools.remove(&server).unwrap_or_default();
        async move {
            let (prompts, resources, templates) =
                futures::join!(handle.list_prompts(&server), handle.list_resources(&server), handle.list_resource_templates(&server));
            Listing {
                tools,
                prompts: prompts.unwrap_or_default(),
                resources: resources.unwrap_or_default(),
                templates: templates.unwrap_or_default(),
                server,
            }
        }
    }))
    .await;
    let after = served().await;
    let same_run = |listing: &Listing| {
        let run = |statuses: &[ServerStatus]| {
            statuses.iter().find(|s| s.name == listing.server).map(|s| (s.state == ServerState::Connected, s.pid, s.restarts))
        };
        run(&before) == run(&after)
    };
    let (mut fresh, torn): (Vec<Listing>, Vec<Listing>) = read.into_iter().partition(same_run);
    let mut torn: BTreeMap<String, Listing> = torn.into_iter().map(|listing| (listing.server.clone(), listing)).collect();
    let leaving = |state: &ServerState| matches!(state, ServerState::Failed { .. } | ServerState::Disabled | ServerState::NeedsAuth);
    let mut restarting = Vec::new();
    for status in &after {
        if leaving(&status.state) || fresh.iter().any(|listing| listing.server == status.name) {
            continue;
        }
        // Down, coming back, or back already but read across its restart:
        // the last whole listing stands in; a server never listed whole
        // serves what was read, and its announced comeback makes the
        // client read again.
        if listed.contains(&status.name) {
            restarting.push(status.name.clone());
        } else if let Some(listing) = torn.remove(&status.name) {
            fresh.push(listing);
        }
    }
    (fresh, restarting)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str) -> KeptTool {
        KeptTool::of(rmcp::model::Tool::new(name.to_string(), "", Arc::new(Default::default())))
    }

    fn resource(uri: &str) -> Resource {
        serde_json::from_value(json!({"uri": uri, "name": uri})).unwrap()
    }

    fn listing(server: &str, tools: &[&str], prompts: &[&str], resources: &[&str]) -> Listing {
        Listing {
            server: server.into(),
            tools: tools.iter().map(|name| tool(name)).collect(),
            prompts: prompts.iter().map(|name| serde_json::from_value(json!({"name": name})).unwrap()).collect(),
            resources: resources.iter().map(|uri| resource(uri)).collect(),
            templates: Vec::new(),
        }
    }

    #[test]
    fn tools_and_prompts_are_prefixed_and_collisions_reported() {
        let routes = Routes::build(
            vec![listing("b", &["echo"], &["greet"], &["file:///x"]), listing("a", &["echo", "a.b", "a_b"], &[], &["file:///x"])],
            &ServeOptions::default(),
        );
        let names: Vec<&String> = routes.tools.keys().collect();
        assert!(names.contains(&&"a__echo".to_string()) && names.contains(&&"b__echo".to_string()), "{names:?}");
        assert_eq!(routes.tools["a__a_b"].0, Owner { server: "a".into(), name: "a_b".into() });
        assert_eq!(routes.tools["b__echo"].1.name(), "echo");
        assert!(routes.tools.keys().any(|name| name.starts_with("a__a_b_") && routes.tools[name].0.name == "a.b"));
        assert!(routes.warnings.iter().any(|w| w.contains("read alike as `a__a_b`")), "{:?}", routes.warnings);
        assert_eq!(routes.prompts["b__greet"].0.name, "greet");
        assert_eq!(routes.resources["file:///x"].0, "a");
        assert!(routes.warnings.iter().any(|w| w.contains("`file:///x` is listed by `a` and `b`")), "{:?}", routes.warnings);
    }

    #[test]
    fn passthrough_keeps_names_and_long_names_are_cut() {
        let long = "t".repeat(80);
        let options = ServeOptions { passthrough: Some("one".into()), ..ServeOptions::default() };
        let routes = Routes::build(vec![listing("one", &["echo", &long], &["greet"], &[])], &options);
        assert!(routes.tools.contains_key("echo") && routes.tools.contains_key(&long) && routes.prompts.contains_key("greet"));
        let routes = Routes::build(vec![listing("one", &[&long], &[], &[])], &ServeOptions::default());
        let name = routes.tools.keys().next().unwrap();
        assert_eq!(name.len(), naming::MAX_NAME_LEN);
        assert!(name.starts_with("one__ttt"));
    }

    #[test]
    fn resources_route_by_uri_then_by_template_and_the_status_uri_stays_ours() {
        let mut routes = Routes::build(vec![listing("s", &[], &[], &[STATUS_URI, "demo://a"])], &ServeOptions::default());
        assert!(!routes.resources.contains_key(STATUS_URI) && routes.warnings.iter().any(|w| w.contains("gateway's own")));
        let template = serde_json::from_value(json!({"uriTemplate": "demo://item/{id}", "name": "item"})).unwrap();
        routes.templates.push(("t".into(), template));
        assert_eq!(routes.resource_server("demo://a"), Some("s"));
        assert_eq!(routes.resource_server("demo://item/7"), Some("t"));
        assert_eq!(routes.resource_server("other://x"), None);
        assert_eq!(routes.template_server("demo://item/{id}"), Some("t"));
    }
}
