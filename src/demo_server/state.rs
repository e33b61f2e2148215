//! The demo server's state, shared by the server and its requests' tasks
//! (and read by the tools).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::task::AbortHandle;

use super::catalog::{added_tool_json, TOOLS};
use super::era::{Era, RequestEra};
use super::interaction::{Outgoing, RequestStates};
use super::logging::Level;
use super::rpc::{notification_frame, Out};
use super::{lock, DemoServerOptions};
use crate::server::listen::Change;
use crate::server::subscriptions::Subscriptions;
use crate::task_store::TaskStore;

/// What the server has received, as the `received` and `cancellations` tools report it.
#[derive(Default)]
pub struct Received {
    pub initialize_requests: u64,
    /// Every notification, counted by method.
    pub(super) notifications: BTreeMap<String, u64>,
    /// Every `notifications/cancelled`: `{requestId, reason, tool, arguments}`.
    pub cancellations: Vec<Value>,
}

impl Received {
    pub fn report(&self) -> Value {
        let count = |method: &str| self.notifications.get(method).copied().unwrap_or(0);
        json!({
            "initializeRequests": self.initialize_requests,
            "initialized": count("notifications/initialized") > 0,
            "rootsListChanged": count("notifications/roots/list_changed"),
            "notifications": self.notifications,
            "cancellations": self.cancellations,
        })
    }
}

/// Names added at run time by `add_tool`, `add_prompt` and `add_resource`.
#[derive(Default)]
pub struct Added {
    pub tools: Vec<String>,
    pub prompts: Vec<String>,
    pub resources: Vec<String>,
}

/// A request still running. `seq` tells it apart from a later request reusing its id.
pub(super) struct InFlight {
    pub(super) seq: u64,
    /// The call's `name` and `arguments` (null for other methods), as `cancellations` reports them.
    pub(super) tool: Value,
    pub(super) arguments: Value,
    pub(super) abort: AbortHandle,
}

/// State shared by the server and its request tasks.
pub struct State {
    pub options: DemoServerOptions,
    pub out: Out,
    /// Running requests by the JSON text of their id. An entry is removed exactly once:
    /// by the request when it ends (then it answers) or by a cancellation (then nobody does).
    pub(super) in_flight: Mutex<HashMap<String, InFlight>>,
    pub(super) next_seq: AtomicU64,
    pub received: Mutex<Received>,
    /// Set by `pause_reading`: how long the input loop stops reading after the current line.
    pub(super) pause_reading: Mutex<Option<Duration>>,
    pub added: Mutex<Added>,
    /// The value of `demo://counter`.
    pub counter: AtomicU64,
    /// The legacy `logging/setLevel` threshold.
    pub log_level: Mutex<Level>,
    /// Every listen stream goes to stdout: its id tags its frames.
    pub subscriptions: Subscriptions<Value, ()>,
    pub outgoing: Outgoing,
    pub request_states: RequestStates,
    pub tasks: TaskStore,
}

impl State {
    pub fn send(&self, frame: Vec<u8>) {
        // Fails only once the writer is gone (stdout broken); nothing is left to tell.
        let _ = self.out.send(frame);
    }

    /// Tells `change` to legacy sessions and listen streams that asked for it. A dual
    /// server has a legacy session once it received `initialize`.
    pub fn announce(&self, change: Change) {
        let legacy_session = match self.options.era {
            Era::Legacy => true,
            Era::Modern => false,
            Era::Dual => lock(&self.received).initialize_requests > 0,
        };
        self.subscriptions.announce(&change, legacy_session, |_, params| self.send(notification_frame(change.method(), params)));
    }

    /// `tools/list` items: the catalog (minus legacy-only tools in the modern era), then added tools.
    pub(super) fn tools(&self, era: RequestEra) -> Vec<Value> {
        let catalog = TOOLS.iter().filter(|t| era.is_legacy() || !t.legacy_only).map(|t| t.json());
        catalog.chain(lock(&self.added).tools.iter().map(|name| added_tool_json(name))).collect()
    }
}
