//! Who hears about changes: legacy `resources/subscribe` URIs, and modern
//! `subscriptions/listen` streams with their filters.

use std::collections::BTreeSet;
use std::sync::Mutex;

use serde_json::{json, Value};

use super::lock;
use super::rpc::{notification_frame, ErrorObject};
use crate::protocol::session::META_SUBSCRIPTION_ID;
pub use crate::server::listen::Change;
use crate::server::listen::Filter;

#[derive(Default)]
pub struct Subscriptions {
    /// Legacy `resources/subscribe`d URIs.
    uris: Mutex<BTreeSet<String>>,
    /// Open listen streams by request id, in opening order.
    listens: Mutex<Vec<(Value, Filter)>>,
}

fn uri_param<'a>(method: &str, params: &'a Value) -> Result<&'a str, ErrorObject> {
    params.get("uri").and_then(Value::as_str).ok_or_else(|| ErrorObject::invalid_params(format!("{method}: `uri` must be a string")))
}

impl Subscriptions {
    /// `resources/subscribe` and `resources/unsubscribe`.
    pub fn legacy(&self, method: &str, params: &Value) -> Result<Value, ErrorObject> {
        let uri = uri_param(method, params)?.to_owned();
        let mut uris = lock(&self.uris);
        if method == "resources/subscribe" {
            uris.insert(uri);
        } else {
            uris.remove(&uri);
        }
        Ok(json!({}))
    }

    /// Opens the listen stream of request `id`; returns its acknowledgement frame.
    pub fn listen(&self, id: &Value, params: &Value) -> Result<Vec<u8>, ErrorObject> {
        let filter = Filter::parse(params).map_err(|e| ErrorObject::new(e.code, e.message))?;
        let ack = json!({"_meta": { META_SUBSCRIPTION_ID: id }, "notifications": filter.to_json()});
        let mut listens = lock(&self.listens);
        listens.retain(|(open, _)| open != id);
        listens.push((id.clone(), filter));
        Ok(notification_frame("notifications/subscriptions/acknowledged", ack))
    }

    /// Ends the listen stream of request `id`; false if there was none.
    pub fn end(&self, id: &Value) -> bool {
        let mut listens = lock(&self.listens);
        let before = listens.len();
        listens.retain(|(open, _)| open != id);
        listens.len() < before
    }

    /// The frames announcing `change`: unsolicited legacy ones when a legacy
    /// session exists (`updated` only for subscribed URIs), and one per listen
    /// stream that asked for it, tagged with its subscription id.
    pub fn frames(&self, change: &Change, legacy_session: bool) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        let subscribed = match change {
            Change::Updated(uri) => lock(&self.uris).contains(uri),
            _ => true,
        };
        if legacy_session && subscribed {
            frames.push(notification_frame(change.method(), change.params()));
        }
        for (id, _) in lock(&self.listens).iter().filter(|(_, filter)| filter.wants(change)) {
            let mut params = change.params();
            params["_meta"] = json!({ META_SUBSCRIPTION_ID: id });
            frames.push(notification_frame(change.method(), params));
        }
        frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(frame: &[u8]) -> Value {
        serde_json::from_slice(frame).unwrap()
    }

    #[test]
    fn listen_acknowledges_the_accepted_filter_and_delivers_only_what_it_asked() {
        let subscriptions = Subscriptions::default();
        let params =
            json!({"notifications": {"toolsListChanged": true, "promptsListChanged": false, "resourceSubscriptions": ["demo://counter"]}});
        let ack = parse(&subscriptions.listen(&json!(7), &params).unwrap());
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
        assert_eq!(
            ack["params"],
            json!({"_meta": {META_SUBSCRIPTION_ID: 7}, "notifications": {"toolsListChanged": true, "resourceSubscriptions": ["demo://counter"]}})
        );
        let tools = subscriptions.frames(&Change::Tools, false);
        assert_eq!(tools.len(), 1);
        assert_eq!(
            parse(&tools[0]),
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {META_SUBSCRIPTION_ID: 7}}})
        );
        assert!(subscriptions.frames(&Change::Prompts, false).is_empty());
        assert!(subscriptions.frames(&Change::Updated("demo://blob".into()), false).is_empty());
        let updated = parse(&subscriptions.frames(&Change::Updated("demo://counter".into()), false)[0]);
        assert_eq!(updated["params"]["uri"], "demo://counter");
        assert!(subscriptions.end(&json!(7)) && !subscriptions.end(&json!(7)));
        assert!(subscriptions.frames(&Change::Tools, false).is_empty());
    }

    #[test]
    fn legacy_sessions_get_list_changes_and_only_subscribed_updates() {
        let subscriptions = Subscriptions::default();
        assert_eq!(parse(&subscriptions.frames(&Change::Resources, true)[0])["params"], json!({}));
        assert!(subscriptions.frames(&Change::Updated("demo://counter".into()), true).is_empty());
        subscriptions.legacy("resources/subscribe", &json!({"uri": "demo://counter"})).unwrap();
        assert_eq!(subscriptions.frames(&Change::Updated("demo://counter".into()), true).len(), 1);
        subscriptions.legacy("resources/unsubscribe", &json!({"uri": "demo://counter"})).unwrap();
        assert!(subscriptions.frames(&Change::Updated("demo://counter".into()), true).is_empty());
        assert!(subscriptions.frames(&Change::Tools, false).is_empty());
    }

    #[test]
    fn bad_filters_are_invalid_params() {
        let subscriptions = Subscriptions::default();
        for params in [
            json!({}),
            json!({"notifications": 1}),
            json!({"notifications": {"toolsListChanged": "yes"}}),
            json!({"notifications": {"resourceSubscriptions": [1]}}),
        ] {
            assert_eq!(subscriptions.listen(&json!(1), &params).unwrap_err().code, super::super::rpc::INVALID_PARAMS, "{params}");
        }
        assert!(subscriptions.legacy("resources/subscribe", &json!({})).is_err());
    }
}
