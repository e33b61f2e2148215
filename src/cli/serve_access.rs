//! Who may use what through `serve`: the `[serve]` table's named keys
//! (HTTP only) and access policy, read when `serve` starts (a bad one stops
//! it) and again on SIGHUP (a bad one keeps the previous pair, saying why).

use super::output::{warn, Failure};
use super::servers::env;
use crate::config::ServeSettings;
use crate::gateway::http::keys::{self, KeyRing, NamedKey};
use crate::policy::{Current, Policy};

/// The policy and keys in force, shared with the sessions and the guard.
#[derive(Clone, Default)]
pub struct Access {
    pub policy: Current<Policy>,
    /// `None` over stdio, which takes no credentials.
    pub keys: Option<KeyRing>,
}

/// The policy of `settings`; everything allowed when it has none.
fn policy(settings: Option<&ServeSettings>) -> Result<Policy, String> {
    match settings {
        Some(ServeSettings { policy: Some(policy), file, .. }) => Policy::compile(policy, file).map_err(|error| error.to_string()),
        _ => Ok(Policy::default()),
    }
}

/// The named keys of `settings`, their variables read now.
pub fn named_keys(settings: Option<&ServeSettings>) -> Result<Vec<NamedKey>, String> {
    match settings {
        Some(settings) => keys::load(&settings.keys, &settings.file, env),
        None => Ok(Vec::new()),
    }
}

impl Access {
    /// The access of `settings` at start; `keys` is the HTTP guard's ring
    /// (already loaded by the HTTP options), `None` over stdio.
    pub fn start(settings: Option<&ServeSettings>, keys: Option<KeyRing>) -> Result<Access, Failure> {
        let policy = policy(settings).map_err(|why| Failure::usage(format!("cannot serve: {why}")))?;
        if settings.is_some_and(|settings| !settings.keys.is_empty()) && keys.is_none() {
            warn("the named keys of [serve.keys] are for `serve --http`: over stdio every request comes with identity = null");
        }
        Ok(Access { policy: Current::new(policy), keys })
    }

    /// Applies the policy and keys of `settings` (a SIGHUP's reading), or
    /// keeps the ones in force when either is bad, saying why. Removing
    /// every key is refused: it would turn off authentication. Whether
    /// the new ones were applied.
    pub fn reload(&self, settings: Option<&ServeSettings>) -> bool {
        let keys = match &self.keys {
            Some(ring) => match named_keys(settings) {
                Ok(keys) if keys.is_empty() && !ring.get().is_empty() => {
                    Err("the new configuration has no [serve.keys] left, which would let requests in without them; \
                     restart `serve` to turn named keys off"
                        .to_string())
                }
                loaded => loaded.map(Some),
            },
            None => Ok(None),
        };
        match (policy(settings), keys) {
            (Ok(policy), Ok(keys)) => {
                let rules = settings.and_then(|settings| settings.policy.as_ref()).map_or(0, |policy| policy.rules.len());
                self.policy.set(policy);
                let count = keys.as_ref().map_or(0, Vec::len);
                if let (Some(ring), Some(keys)) = (&self.keys, keys) {
                    ring.set(keys);
                }
                tracing::info!(rules, keys = count, "SIGHUP: access policy and keys applied");
                true
            }
            (Err(why), _) | (_, Err(why)) => {
                warn(format_args!("SIGHUP: the access policy and keys were not changed, the previous ones stay: {why}"));
                false
            }
        }
    }
}

/// Tells every session that every list may have changed (what a caller
/// may see did), as a server's `list_changed` would: clients list again.
pub async fn announce_lists(handle: &crate::Handle) {
    for status in handle.status().await {
        for list in ["tools", "prompts", "resources"] {
            handle.hub().do_send(crate::actors::Event::ListChanged { server: status.name.clone(), list: list.into() });
        }
    }
}
