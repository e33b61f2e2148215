//! Which servers' news reach a caller: a server's log messages, list
//! changes, resource updates and state (the status resource, `/admin`)
//! reach a caller only if it may use something of that server.
//!
//! The verdict is the lists' ([`super::access`]): a caller may use
//! something of a server when some tool, prompt, resource or template of
//! it, as the routing tables list them (or a tool of it served before,
//! for a server that is down), passes the policy for that caller. A server
//! that never listed anything is judged by its name alone (a thing of it
//! with an empty name: a rule on the whole server decides). A policy that
//! allows everything lets every caller hear every server.

use std::collections::HashMap;
use std::sync::Arc;

use actix::prelude::*;

use super::names::{Routes, RoutesCache};
use super::work::Pool;
use super::{GatewaySession, ServeOptions};
use crate::handle::Handle;
use crate::identity::Identity;
use crate::policy::{Kind, Policy};

/// Whether `identity` may use something of `server` (see the module).
pub fn may_use_server(policy: &Policy, identity: Option<&Identity>, routes: &Routes, cache: &RoutesCache, server: &str) -> bool {
    if policy.allows_everything() {
        return true;
    }
    let visible = |kind: Kind, name: &str| Pool::may_list(policy, identity, server, kind, name);
    let mut listed = false;
    for (kind, name) in routes.items_of(server) {
        if visible(kind, name) {
            return true;
        }
        listed = true;
    }
    let known = cache.known_tools_of(server);
    if known.iter().any(|tool| visible(Kind::Tool, tool)) {
        return true;
    }
    !listed && known.is_empty() && visible(Kind::Tool, "")
}

/// One session's verdicts, kept while the policy and the tables they were
/// read from stay the same.
#[derive(Default)]
pub(super) struct Audience {
    policy: Option<Arc<Policy>>,
    routes: Option<Arc<Routes>>,
    verdicts: HashMap<String, bool>,
    /// A build of the tables is under way for this session.
    refreshing: bool,
}

impl GatewaySession {
    /// Whether news of `server` reach this session's caller. Answers from
    /// the freshest tables at hand; when they are stale, a build is started
    /// so the next verdicts read the new ones.
    pub(super) fn hears_from(&mut self, server: &str, ctx: &mut Context<Self>) -> bool {
        let policy = self.pool.policy();
        if policy.allows_everything() {
            return true;
        }
        let audience = &mut self.audience;
        let current = self.pool.routes.current();
        let new_policy = !audience.policy.as_ref().is_some_and(|held| Arc::ptr_eq(held, &policy));
        let new_routes = current.as_ref().is_some_and(|current| !audience.routes.as_ref().is_some_and(|held| Arc::ptr_eq(held, current)));
        if new_policy || new_routes {
            audience.verdicts.clear();
            audience.policy = Some(policy.clone());
            if current.is_some() {
                audience.routes = current.clone();
            }
        }
        if current.is_none() && !audience.refreshing {
            audience.refreshing = true;
            let pool = self.pool.clone();
            ctx.spawn(async move { pool.routes.fetch(&pool.handle, &pool.options).await }.into_actor(self).map(|_, session, _| {
                session.audience.refreshing = false;
            }));
        }
        let audience = &mut self.audience;
        if let Some(verdict) = audience.verdicts.get(server) {
            return *verdict;
        }
        let empty = Routes::default();
        let routes = audience.routes.as_deref().unwrap_or(&empty);
        let verdict = may_use_server(&policy, self.pool.identity.as_deref(), routes, &self.pool.routes, server);
        // Bounded by the servers of the pool (and those removed since the tables last changed).
        audience.verdicts.insert(server.to_string(), verdict);
        verdict
    }
}

/// The servers of `servers` that `identity` may use something of, by the
/// policy in force and the current tables (built if stale).
pub async fn heard_by(handle: &Handle, options: &ServeOptions, identity: Option<&Identity>, servers: Vec<String>) -> Vec<String> {
    let policy = options.policy.get();
    if policy.allows_everything() {
        return servers;
    }
    let routes = options.routes.fetch(handle, options).await.routes;
    servers.into_iter().filter(|server| may_use_server(&policy, identity, &routes, &options.routes, server)).collect()
}
