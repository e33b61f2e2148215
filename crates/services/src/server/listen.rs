//! 2026-07-28 `subscriptions/listen` filters: which changes one listen
//! stream asked to hear about, as the gateway and the demo server both
//! read them.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::protocol::{error_codes, ErrorObject};

/// Something that changed, announced to whoever asked.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Tools,
    Prompts,
    Resources,
    Updated(String),
}

impl Change {
    pub fn method(&self) -> &'static str {
        match self {
            Change::Tools => "notifications/tools/list_changed",
            Change::Prompts => "notifications/prompts/list_changed",
            Change::Resources => "notifications/resources/list_changed",
            Change::Updated(_) => "notifications/resources/updated",
        }
    }

    pub fn params(&self) -> Value {
        match self {
            Change::Updated(uri) => json!({ "uri": uri }),
            _ => json!({}),
        }
    }
}

/// The notification types one listen stream opted into (all of them are supported).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: BTreeSet<String>,
}

impl Filter {
    pub fn parse(params: &Value) -> Result<Filter, ErrorObject> {
        let invalid =
            |what: &str| ErrorObject { code: error_codes::INVALID_PARAMS, message: format!("subscriptions/listen: {what}"), data: None };
        let requested =
            params.get("notifications").filter(|n| n.is_object()).ok_or_else(|| invalid("`notifications` must be an object"))?;
        let flag = |name: &str| match requested.get(name) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(invalid(&format!("`notifications.{name}` must be a boolean, got {other}"))),
        };
        let uris = match requested.get("resourceSubscriptions") {
            None | Some(Value::Null) => BTreeSet::new(),
            Some(Value::Array(uris)) => uris
                .iter()
                .map(|u| u.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| invalid("`resourceSubscriptions` must hold strings"))?,
            Some(other) => return Err(invalid(&format!("`notifications.resourceSubscriptions` must be an array, got {other}"))),
        };
        Ok(Filter {
            tools: flag("toolsListChanged")?,
            prompts: flag("promptsListChanged")?,
            resources: flag("resourcesListChanged")?,
            uris,
        })
    }

    /// The accepted filter as acknowledged: true flags only, URIs when any.
    pub fn to_json(&self) -> Value {
        let mut accepted = json!({});
        for (name, on) in [("toolsListChanged", self.tools), ("promptsListChanged", self.prompts), ("resourcesListChanged", self.resources)]
        {
            if on {
                accepted[name] = json!(true);
            }
        }
        if !self.uris.is_empty() {
            accepted["resourceSubscriptions"] = json!(self.uris);
        }
        accepted
    }

    /// The resource URIs asked for.
    pub fn uris(&self) -> impl Iterator<Item = &String> {
        self.uris.iter()
    }

    pub fn wants(&self, change: &Change) -> bool {
        match change {
            Change::Tools => self.tools,
            Change::Prompts => self.prompts,
            Change::Resources => self.resources,
            Change::Updated(uri) => self.uris.contains(uri),
        }
    }
}
