//! The access policy applied to a gateway session's requests
//! ([`crate::policy`]): lists show only what the caller may use, and a use
//! outside its rights is refused naming the rule.
//!
//! Invariants:
//! - a list and a use of one thing get the same verdict (with `arguments`
//!   null in the list), read from the policy in force when the request
//!   started;
//! - a refused tool call is a line of the audit log, naming the rule
//!   ([`crate::telemetry::audit`]);
//! - a check whose estimate ([`Policy::estimate`]) is over [`INLINE_STEPS`]
//!   runs on the blocking pool, at most one per core at once, so a costly
//!   rule delays only the request it judges, never another session's;
//! - a refusal names the thing as the client named it and the rule (or
//!   the default), never the thing's schema or description, and has the
//!   code of an unknown name (`-32602`, `-32002` for a resource): a hidden
//!   thing reads like one that is not served, but for the rule named.

use std::sync::{Arc, LazyLock};

use serde_json::{json, Value};
use tokio::sync::Semaphore;

use super::work::{Pool, GATEWAY_SERVER};
use crate::identity::Identity;
use crate::policy::{Denial, Kind, Policy, Target};
use crate::protocol::{error_codes, ErrorObject};
use crate::server::STATUS_URI;
use crate::telemetry::audit::{Refusal, RefusedCall};

/// The estimated steps a check may take on the session's own thread
/// (a few milliseconds at most).
const INLINE_STEPS: f64 = 10_000.0;

/// Costly checks running at once: one per core.
static COSTLY_CHECKS: LazyLock<Semaphore> =
    LazyLock::new(|| Semaphore::new(std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)));

impl Pool {
    /// The policy in force for this request.
    pub(super) fn policy(&self) -> std::sync::Arc<Policy> {
        self.options.policy.get()
    }

    /// Whether this session's caller may see `name` of `server` in a list.
    pub(super) fn may_list(policy: &Policy, identity: Option<&crate::identity::Identity>, server: &str, kind: Kind, name: &str) -> bool {
        policy.check(identity, &Target { server, kind, name, arguments: None }).is_ok()
    }

    /// Refuses a use of `name` of `server` (served to the client as
    /// `served`) that the policy does not allow this caller.
    pub(super) async fn check_use(
        &self,
        server: &str,
        kind: Kind,
        name: &str,
        served: &str,
        arguments: Option<&Value>,
    ) -> Result<(), ErrorObject> {
        let empty = json!({});
        let arguments = match kind {
            Kind::Resource => None,
            _ => Some(arguments.unwrap_or(&empty)),
        };
        let target = Target { server, kind, name, arguments };
        let policy = self.policy();
        let verdict = match policy.estimate(self.identity.as_deref(), &target) {
            steps if steps <= INLINE_STEPS => policy.check(self.identity.as_deref(), &target),
            _ => check_aside(policy, self.identity.clone(), server, kind, name, arguments).await,
        };
        let Err(denial) = verdict else { return Ok(()) };
        let who =
            self.identity.as_ref().map_or_else(|| "this unauthenticated caller".to_string(), |identity| format!("`{}`", identity.subject));
        let what = match kind {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::Resource => "resource",
        };
        tracing::info!(caller = %who, rule = ?denial.rule, %served, "policy: refused a use");
        let code = if kind == Kind::Resource { error_codes::RESOURCE_NOT_FOUND } else { error_codes::INVALID_PARAMS };
        Err(ErrorObject {
            code,
            message: format!("Forbidden: the {what} `{served}` is not available to {who}: {}", denial.reason),
            data: Some(json!({ "policyRule": denial.rule })),
        })
    }

    /// Writes the audit line of a call refused before it reached `server`
    /// (`None`: the name leads to no server), `params` the call's.
    pub(super) fn audit_refused(&self, server: Option<&str>, tool: &str, params: &Value, why: Refusal, rule: Option<&str>) {
        let Some(log) = self.handle.telemetry().audit() else { return };
        log.refused(&RefusedCall {
            caller: Some(&self.caller),
            identity: self.identity.as_deref(),
            server,
            tool,
            arguments: params.get("arguments").and_then(Value::as_object),
            redactor: &self.options.redactor,
            why,
            rule,
        });
    }

    /// Whether the caller may read the gateway's own status resource.
    pub(super) fn may_read_status(&self, policy: &Policy) -> bool {
        Pool::may_list(policy, self.identity.as_deref(), GATEWAY_SERVER, Kind::Resource, STATUS_URI)
    }
}

/// Checks `target` on the blocking pool, once a core is free for it.
async fn check_aside(
    policy: Arc<Policy>,
    identity: Option<Arc<Identity>>,
    server: &str,
    kind: Kind,
    name: &str,
    arguments: Option<&Value>,
) -> Result<(), Denial> {
    let failed = |why: String| Denial { rule: None, reason: format!("the policy could not be checked ({why}), which denies") };
    let _permit = COSTLY_CHECKS.acquire().await.map_err(|error| failed(error.to_string()))?;
    let (server, name, arguments) = (server.to_string(), name.to_string(), arguments.cloned());
    tokio::task::spawn_blocking(move || {
        policy.check(identity.as_deref(), &Target { server: &server, kind, name: &name, arguments: arguments.as_ref() })
    })
    .await
    .unwrap_or_else(|error| Err(failed(error.to_string())))
}
