//! Asking the client for input (sampling, elicitation, roots, ping).
//!
//! Legacy: a real JSON-RPC request to the client, with our own id, whose
//! response the tool awaits. Modern (MRTR): the call answers `input_required`
//! and the client retries it with `inputResponses` and the `requestState`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde_json::{json, Value};
use tokio::sync::oneshot;

use super::lock;
use super::rpc::{error_result, request_frame, structured_result, ErrorObject, Out};

/// One question for the client: `method` and `params`, under `key` in MRTR maps.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    pub key: &'static str,
    pub method: &'static str,
    pub params: Value,
}

/// The form `elicit` asks for; every property has a default (SEP-1034).
fn form_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "default": "Ada"},
            "age": {"type": "integer", "title": "Age", "minimum": 0, "default": 36},
            "subscribe": {"type": "boolean", "title": "Subscribe", "default": true},
            "color": {"type": "string", "title": "Colour", "enum": ["red", "green", "blue"], "default": "green"},
        },
        "required": ["name"],
    })
}

impl Ask {
    pub fn sample(prompt: &str) -> Ask {
        let params = json!({"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}], "maxTokens": 100});
        Ask { key: "sampling", method: "sampling/createMessage", params }
    }

    pub fn elicit(message: &str) -> Ask {
        Ask {
            key: "elicitation",
            method: "elicitation/create",
            params: json!({"mode": "form", "message": message, "requestedSchema": form_schema()}),
        }
    }

    /// URL mode; the elicitation id is random, so ids never repeat within a run.
    pub fn elicit_url(url: &str, message: &str) -> Ask {
        let id = format!("elicitation-{:016x}", fastrand::u64(..));
        Ask {
            key: "elicitation",
            method: "elicitation/create",
            params: json!({"mode": "url", "elicitationId": id, "url": url, "message": message}),
        }
    }

    pub fn roots() -> Ask {
        Ask { key: "roots", method: "roots/list", params: json!({}) }
    }

    pub fn is_url_elicitation(&self) -> bool {
        self.params["mode"] == "url"
    }

    /// The tool's answer to the client's response (`Err`: its JSON-RPC error object, quoted).
    pub fn answer(&self, response: Result<Value, Value>) -> Value {
        let result = match response {
            Ok(result) => result,
            Err(error) => return error_result(format!("the client refused {}: {error}", self.method)),
        };
        let malformed = || error_result(format!("malformed {} result: {result}", self.method));
        match self.method {
            "sampling/createMessage" => {
                // `content` is one block, or (2025-11-25) an array of blocks.
                let content = result.get("content").map(|c| c.as_array().and_then(|a| a.first()).unwrap_or(c));
                match content.and_then(|c| c.get("text")).and_then(Value::as_str) {
                    Some(text) => structured_result(text.to_owned(), json!({"text": text, "model": result.get("model")})),
                    None => malformed(),
                }
            }
            "elicitation/create" => match result.get("action").and_then(Value::as_str) {
                Some(action) => {
                    let content = result.get("content").cloned().unwrap_or(Value::Null);
                    let text =
                        if content.is_null() { format!("action: {action}") } else { format!("action: {action}, content: {content}") };
                    structured_result(text, json!({"action": action, "content": content}))
                }
                None => malformed(),
            },
            _ => match result.get("roots").and_then(Value::as_array) {
                Some(roots) => {
                    let uris: Option<Vec<&str>> = roots.iter().map(|r| r.get("uri").and_then(Value::as_str)).collect();
                    match uris {
                        Some(uris) => structured_result(uris.join("\n"), json!({ "roots": roots })),
                        None => malformed(),
                    }
                }
                None => malformed(),
            },
        }
    }
}

/// Legacy requests sent to the client and not answered yet, by our id (`demo-<n>`).
#[derive(Default)]
pub struct Outgoing {
    pending: Mutex<HashMap<String, oneshot::Sender<Result<Value, Value>>>>,
    next: AtomicU64,
}

/// Forgets a pending request when its waiter goes away (answered or cancelled).
struct Forget<'a> {
    outgoing: &'a Outgoing,
    id: String,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        lock(&self.outgoing.pending).remove(&self.id);
    }
}

impl Outgoing {
    /// Sends `method` to the client and waits for its result, or its error object.
    pub async fn request(&self, out: &Out, method: &str, params: Value) -> Result<Value, Value> {
        let id = format!("demo-{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let (answer, answered) = oneshot::channel();
        lock(&self.pending).insert(id.clone(), answer);
        let forget = Forget { outgoing: self, id };
        let _ = out.send(request_frame(&forget.id, method, params));
        answered.await.unwrap_or_else(|_| Err(json!({"code": -32603, "message": "no response"})))
    }

    /// Hands a client's response to the waiting request; false if none waits for `id`.
    pub fn deliver(&self, id: &Value, outcome: Result<Value, Value>) -> bool {
        let waiting = id.as_str().and_then(|id| lock(&self.pending).remove(id));
        waiting.is_some_and(|answer| answer.send(outcome).is_ok())
    }
}

/// Modern `requestState`s handed out and not used yet: `<tool>/<n>`, each accepted once.
#[derive(Default)]
pub struct RequestStates {
    issued: Mutex<HashSet<String>>,
    next: AtomicU64,
}

impl RequestStates {
    /// The `input_required` result asking `ask` for `tool`.
    pub fn input_required(&self, tool: &str, ask: &Ask) -> Value {
        let state = format!("{tool}/{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        lock(&self.issued).insert(state.clone());
        json!({
            "resultType": "input_required",
            "inputRequests": { ask.key: {"method": ask.method, "params": ask.params} },
            "requestState": state,
        })
    }

    /// The client's response to `ask` carried by a retry's `params`; `None` on a
    /// first call. A response `{"error": {...}}` is a refusal.
    pub fn response(&self, tool: &str, ask: &Ask, params: &Value) -> Result<Option<Result<Value, Value>>, ErrorObject> {
        let response = match params.get("inputResponses") {
            None | Some(Value::Null) => return Ok(None),
            Some(responses) => responses.get(ask.key).ok_or_else(|| {
                ErrorObject::invalid_params(format!(
                    "tool `{tool}`: `inputResponses` must be an object with `{}`, got {responses}",
                    ask.key
                ))
            })?,
        };
        let state = params.get("requestState").and_then(Value::as_str).unwrap_or_default();
        if !state.starts_with(&format!("{tool}/")) || !lock(&self.issued).remove(state) {
            return Err(ErrorObject::invalid_params(format!(
                "tool `{tool}`: `requestState` {state:?} is not one this server issued, or was used already"
            )));
        }
        Ok(Some(match response.get("error") {
            Some(error) if response.as_object().is_some_and(|r| r.len() == 1) => Err(error.clone()),
            _ => Ok(response.clone()),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_quote_the_client_results_and_refusals() {
        let sample = Ask::sample("hi");
        let ok = sample.answer(Ok(json!({"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m"})));
        assert_eq!((&ok["content"][0]["text"], &ok["structuredContent"]["model"]), (&json!("hello"), &json!("m")));
        let array = sample.answer(Ok(json!({"content": [{"type": "text", "text": "first"}]})));
        assert_eq!(array["content"][0]["text"], "first");
        let refused = sample.answer(Err(json!({"code": -1, "message": "User rejected sampling"})));
        assert_eq!(refused["isError"], true);
        assert_eq!(
            refused["content"][0]["text"],
            r#"the client refused sampling/createMessage: {"code":-1,"message":"User rejected sampling"}"#
        );
        assert_eq!(sample.answer(Ok(json!({"content": 5})))["isError"], true);
        let roots = Ask::roots();
        let listed = roots.answer(Ok(json!({"roots": [{"uri": "file:///a"}, {"uri": "file:///b", "name": "b"}]})));
        assert_eq!(listed["content"][0]["text"], "file:///a\nfile:///b");
        assert_eq!(roots.answer(Ok(json!({"roots": [{}]})))["isError"], true);
        let url = Ask::elicit_url("https://x", "go");
        assert!(url.is_url_elicitation() && url.params["elicitationId"] != Ask::elicit_url("https://x", "go").params["elicitationId"]);
        assert_eq!(url.answer(Ok(json!({"action": "decline"})))["content"][0]["text"], "action: decline");
    }

    #[test]
    fn the_form_schema_has_a_default_for_every_property() {
        let form = Ask::elicit("who?");
        let properties = form.params["requestedSchema"]["properties"].as_object().unwrap();
        assert!(properties.values().all(|p| p.get("default").is_some()));
        assert_eq!(form.params["mode"], "form");
    }

    #[test]
    fn request_states_are_accepted_once_and_only_for_their_tool() {
        let states = RequestStates::default();
        let ask = Ask::roots();
        assert_eq!(states.response("roots", &ask, &json!({})), Ok(None));
        let pending = states.input_required("roots", &ask);
        assert_eq!(pending["inputRequests"]["roots"]["method"], "roots/list");
        let retry = json!({"inputResponses": {"roots": {"roots": []}}, "requestState": pending["requestState"]});
        assert_eq!(states.response("sample", &ask, &retry).unwrap_err().code, super::super::rpc::INVALID_PARAMS);
        assert_eq!(states.response("roots", &ask, &retry), Ok(Some(Ok(json!({"roots": []})))));
        assert!(states.response("roots", &ask, &retry).is_err(), "a state is accepted once");
        let pending = states.input_required("roots", &ask);
        let refusal = json!({"inputResponses": {"roots": {"error": {"code": -1}}}, "requestState": pending["requestState"]});
        assert_eq!(states.response("roots", &ask, &refusal), Ok(Some(Err(json!({"code": -1})))));
        assert!(states.response("roots", &ask, &json!({"inputResponses": {"other": {}}})).is_err());
    }
}
