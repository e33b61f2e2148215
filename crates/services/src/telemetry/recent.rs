//! The last calls of a runtime, for `mcpvisor top` and the gateway's
//! `/admin/calls`: server, tool, outcome, duration and when it ended.
//!
//! Invariants:
//! - at most [`RECENT_CALLS`] calls are kept; a new one pushes out the oldest;
//! - a call's arguments and result are never kept (they may hold secrets);
//! - recording takes one short lock and no allocation: the call's two
//!   names are moved in, and [`RecentCall`]s are made only when listed.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::Outcome;

/// How many calls [`RecentCalls`] keeps.
pub const RECENT_CALLS: usize = 256;

/// One finished call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecentCall {
    pub server: String,
    pub tool: String,
    /// An [`Outcome`] label (`ok`, `tool_error`, `timeout`, ...).
    pub outcome: String,
    pub duration_ms: f64,
    /// When the call ended, in milliseconds since the Unix epoch.
    pub ended_at_ms: u64,
}

/// One finished call as the ring keeps it.
#[derive(Debug)]
struct Kept {
    server: String,
    tool: String,
    outcome: Outcome,
    took: Duration,
    ended_at_ms: u64,
}

/// A bounded ring of the last [`RECENT_CALLS`] calls, oldest first.
#[derive(Debug, Default)]
pub struct RecentCalls {
    calls: Mutex<VecDeque<Kept>>,
}

impl RecentCalls {
    pub fn record(&self, server: String, tool: String, outcome: Outcome, took: Duration) {
        let ended_at_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64);
        let call = Kept { server, tool, outcome, took, ended_at_ms };
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        if calls.len() == RECENT_CALLS {
            calls.pop_front();
        }
        calls.push_back(call);
    }

    /// The calls kept, oldest first; only `server`'s when given.
    pub fn list(&self, server: Option<&str>) -> Vec<RecentCall> {
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let listed = calls.iter().filter(|call| server.is_none_or(|server| call.server == server));
        listed
            .map(|call| RecentCall {
                server: call.server.clone(),
                tool: call.tool.clone(),
                outcome: call.outcome.label().to_string(),
                duration_ms: call.took.as_secs_f64() * 1000.0,
                ended_at_ms: call.ended_at_ms,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_the_last_calls_in_order_and_filters_by_server() {
        let recent = RecentCalls::default();
        for i in 0..RECENT_CALLS + 10 {
            let server = if i % 2 == 0 { "even" } else { "odd" };
            recent.record(server.into(), format!("t{i}"), Outcome::Ok, Duration::from_millis(i as u64));
        }
        let all = recent.list(None);
        assert_eq!(all.len(), RECENT_CALLS);
        assert_eq!(all[0].tool, "t10");
        assert_eq!(all.last().map(|c| c.tool.as_str()), Some(format!("t{}", RECENT_CALLS + 9).as_str()));
        let odd = recent.list(Some("odd"));
        assert_eq!(odd.len(), RECENT_CALLS / 2);
        assert!(odd.iter().all(|c| c.server == "odd" && c.outcome == "ok"));
    }
}
