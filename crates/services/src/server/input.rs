//! Servers' own requests for a 2026-07-28 client: multi round-trip
//! requests (MRTR).
//!
//! That era has no channel from the gateway to its client besides the
//! answer to the client's request. So while a 2026-07-28 `tools/call`
//! whose `_meta` declares `sampling`, `elicitation` or `roots` is served,
//! an upstream server's request of that kind (it arrives through the
//! gateway session's client bridge, in `actors::gateway`) is handed to the call as an
//! [`Asked`]; the call is then *parked* in [`ParkedCalls`] under a random
//! `requestState`, and the client is answered
//! `{resultType: "input_required", inputRequests: {KEY: {method, params}}, requestState}`.
//! The client sends the call again with `inputResponses: {KEY: result}`
//! (or `{KEY: {"error": {code, message}}}` to refuse) and the same
//! `requestState`: the upstream request gets that answer and the retry
//! waits for the call's result, which may ask for input again.
//!
//! Invariants: a `requestState` is 128 random bits, accepted once, and
//! only until its deadline ([`ParkedCalls::timeout`]); past it the entry is
//! removed, the waiting upstream requests get the answer a client without
//! the capability gets, and the call is cancelled upstream (nobody is left
//! to read its result). At most [`MAX_PARKED`] calls are parked at once
//! per gateway; past that the call is refused. State lives in this process
//! only: a retry must reach the same replica.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ring::rand::{SecureRandom, SystemRandom};
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, oneshot};

use crate::protocol::{error_codes, methods, ErrorObject};

/// Calls parked at once by one gateway; the next is refused.
pub const MAX_PARKED: usize = 1024;

/// How long a parked call waits for its client's retry by default.
pub const DEFAULT_INPUT_TIMEOUT: Duration = Duration::from_secs(300);

/// The environment variable that sets [`ParkedCalls::timeout`] in milliseconds.
pub const INPUT_TIMEOUT_VAR: &str = "MCPVISOR_SERVE_INPUT_TIMEOUT_MS";

type Answer = Result<Value, ErrorObject>;

/// One server's request handed to the call it happened during.
#[derive(Debug)]
pub struct Asked {
    pub method: &'static str,
    pub params: Value,
    /// Where the client's answer goes; dropped unanswered, the server gets
    /// the default answer.
    pub reply: oneshot::Sender<Answer>,
}

/// The capability a server's request needs of the client.
pub fn capability(method: &str) -> &'static str {
    match method {
        methods::SAMPLING_CREATE_MESSAGE => "sampling",
        methods::ELICITATION_CREATE => "elicitation",
        _ => "roots",
    }
}

/// Whether a 2026-07-28 request's client capabilities let it be asked anything.
pub fn may_ask(capabilities: &Value) -> bool {
    ["sampling", "elicitation", "roots"].iter().any(|name| capabilities.get(name).is_some())
}

/// A call that asks input through its answers: the upstream call running
/// on its own task, and the channel its servers' requests arrive on.
pub struct Asking {
    call: tokio::task::JoinHandle<Answer>,
    asks: mpsc::UnboundedReceiver<Asked>,
    sender: mpsc::UnboundedSender<Asked>,
    /// The served tool's name (a retry must name the same tool).
    pub tool: String,
    /// The server the call went to, once known (its requests are routed by it).
    pub server: Arc<OnceLock<String>>,
}

impl Asking {
    /// Starts `call` (on the current actix/tokio local set) of the tool
    /// `tool`; the call sets `server` before it is sent.
    pub fn start(tool: String, server: Arc<OnceLock<String>>, call: impl Future<Output = Answer> + 'static) -> Asking {
        let (sender, asks) = mpsc::unbounded_channel();
        Asking { call: tokio::task::spawn_local(call), asks, sender, tool, server }
    }

    /// Where the servers' requests during the call go.
    pub fn sender(&self) -> mpsc::UnboundedSender<Asked> {
        self.sender.clone()
    }

    /// The call's result, or `input_required` once a server asks something
    /// (the call then waits in `parked`).
    pub async fn run(mut self, parked: ParkedCalls) -> Answer {
        let first = tokio::select! {
            biased;
            outcome = &mut self.call => return outcome.unwrap_or_else(|e| Err(internal(format!("the call stopped: {e}")))),
            Some(asked) = self.asks.recv() => asked,
        };
        let mut asked = vec![first];
        while let Ok(more) = self.asks.try_recv() {
            asked.push(more);
        }
        parked.park(self, asked)
    }
}

impl fmt::Debug for Asking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Asking").field("tool", &self.tool).field("server", &self.server.get()).finish()
    }
}

impl Drop for Asking {
    /// A call nobody waits for any more is cancelled upstream.
    fn drop(&mut self) {
        self.call.abort();
    }
}

/// A call waiting for its client's retry.
struct Parked {
    asking: Asking,
    /// The upstream requests awaiting an answer, by their `inputRequests` key.
    waiting: Vec<(String, oneshot::Sender<Answer>)>,
    deadline: Instant,
}

/// The calls waiting for their client's input, shared by every session of
/// a gateway (a stateless front serves the retry with another session).
#[derive(Clone)]
pub struct ParkedCalls {
    calls: Arc<Mutex<HashMap<String, Parked>>>,
    timeout: Duration,
    limit: usize,
}

impl Default for ParkedCalls {
    fn default() -> ParkedCalls {
        ParkedCalls::new(DEFAULT_INPUT_TIMEOUT, MAX_PARKED)
    }
}

impl fmt::Debug for ParkedCalls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParkedCalls").field("parked", &self.parked()).field("timeout", &self.timeout).finish()
    }
}

impl ParkedCalls {
    pub fn new(timeout: Duration, limit: usize) -> ParkedCalls {
        ParkedCalls { calls: Arc::default(), timeout, limit }
    }

    /// The default table, its time-out from [`INPUT_TIMEOUT_VAR`] when set.
    pub fn from_env() -> Result<ParkedCalls, String> {
        match std::env::var(INPUT_TIMEOUT_VAR) {
            Err(_) => Ok(ParkedCalls::default()),
            Ok(text) => match text.trim().parse::<u64>() {
                Ok(ms) => Ok(ParkedCalls::new(Duration::from_millis(ms), MAX_PARKED)),
                Err(_) => Err(format!("{INPUT_TIMEOUT_VAR} must be a whole number of milliseconds, not {text:?}")),
            },
        }
    }

    /// How many calls are parked now.
    pub fn parked(&self) -> usize {
        self.lock().len()
    }

    /// How long a parked call waits for the client's retry.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Parks `asking` until the client answers `asked`: the
    /// `input_required` result, or an error when the table is full.
    fn park(&self, asking: Asking, asked: Vec<Asked>) -> Answer {
        let mut requests = Map::new();
        let mut waiting = Vec::with_capacity(asked.len());
        for (n, Asked { method, params, reply }) in asked.into_iter().enumerate() {
            let key = match n {
                0 => capability(method).to_string(),
                n => format!("{}-{}", capability(method), n + 1),
            };
            requests.insert(key.clone(), json!({"method": method, "params": params}));
            waiting.push((key, reply));
        }
        let state = random_state()?;
        {
            let mut calls = self.lock();
            if calls.len() >= self.limit {
                return Err(internal(format!(
                    "the gateway already holds {} calls waiting for their clients' input; try the call again later",
                    self.limit
                )));
            }
            calls.insert(state.clone(), Parked { asking, waiting, deadline: Instant::now() + self.timeout });
        }
        let (table, expiring) = (self.clone(), state.clone());
        tokio::task::spawn_local(async move {
            tokio::time::sleep(table.timeout).await;
            table.lock().remove(&expiring);
        });
        Ok(json!({"resultType": "input_required", "inputRequests": requests, "requestState": state}))
    }

    /// Resumes the call parked under the retry's `requestState`: answers
    /// its servers' requests with the retry's `inputResponses` and hands
    /// the call back. -32602 when the state is unknown, used or expired,
    /// or the retry names another tool.
    pub fn resume(&self, params: &Value) -> Result<Asking, ErrorObject> {
        let state = params.get("requestState").and_then(Value::as_str).unwrap_or_default();
        let parked = self.lock().remove(state).filter(|parked| parked.deadline > Instant::now());
        let Some(Parked { asking, waiting, .. }) = parked else {
            return Err(ErrorObject::invalid_params(format!(
                "tools/call: `requestState` {state:?} is unknown, used already, or expired (a call waits {} ms for its input); \
                 call the tool again without it",
                self.timeout.as_millis()
            )));
        };
        let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
        if name != asking.tool {
            return Err(ErrorObject::invalid_params(format!(
                "tools/call: this `requestState` belongs to a call of `{}`, not `{name}`",
                asking.tool
            )));
        }
        let responses = params.get("inputResponses");
        for (key, reply) in waiting {
            let answer = match responses.and_then(|responses| responses.get(&key)) {
                Some(Value::Object(response)) if response.contains_key("error") => Err(refusal(&response["error"])),
                Some(response) => Ok(response.clone()),
                None => Err(internal(format!("the gateway's client gave no `inputResponses.{key}`"))),
            };
            let _ = reply.send(answer);
        }
        Ok(asking)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Parked>> {
        self.calls.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// 128 random bits, hex: not guessable.
fn random_state() -> Result<String, ErrorObject> {
    let mut bytes = [0u8; 16];
    SystemRandom::new().fill(&mut bytes).map_err(|_| internal("the system's random source failed".into()))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

fn refusal(error: &Value) -> ErrorObject {
    ErrorObject {
        code: error.get("code").and_then(Value::as_i64).unwrap_or(error_codes::INTERNAL_ERROR),
        message: error.get("message").and_then(Value::as_str).unwrap_or("the gateway's client refused").to_string(),
        data: error.get("data").cloned(),
    }
}

fn internal(message: String) -> ErrorObject {
    ErrorObject { code: error_codes::INTERNAL_ERROR, message, data: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call that asks `method` and answers what it was told; the question.
    fn asking(tool: &str, method: &'static str) -> (Asking, tokio::sync::oneshot::Receiver<Option<Answer>>) {
        let (told, heard) = oneshot::channel();
        let (give, take) = oneshot::channel::<mpsc::UnboundedSender<Asked>>();
        let call = async move {
            let (reply, answer) = oneshot::channel();
            take.await.unwrap().send(Asked { method, params: json!({"q": 1}), reply }).unwrap();
            let answer = answer.await.ok();
            let _ = told.send(answer.clone());
            answer.unwrap_or_else(|| Ok(json!("default")))
        };
        let asking = Asking::start(tool.into(), Arc::default(), call);
        give.send(asking.sender()).unwrap();
        (asking, heard)
    }

    #[tokio::test(start_paused = true)]
    async fn a_parked_call_is_resumed_once_and_a_forgotten_one_expires() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let table = ParkedCalls::new(Duration::from_secs(10), 8);
                let (call, heard) = asking("t", methods::ELICITATION_CREATE);
                let pending = call.run(table.clone()).await.unwrap();
                assert_eq!(pending["inputRequests"]["elicitation"]["params"], json!({"q": 1}));
                let state = pending["requestState"].clone();
                let refusal = json!({"name": "t", "requestState": state, "inputResponses": {"elicitation": {"error": {"code": -1, "message": "no"}}}});
                let resumed = table.resume(&refusal).unwrap();
                assert_eq!(heard.await.unwrap().unwrap().unwrap_err().message, "no", "the server hears the refusal");
                assert_eq!(resumed.run(table.clone()).await.unwrap_err().message, "no");
                assert_eq!(table.resume(&refusal).unwrap_err().code, error_codes::INVALID_PARAMS, "accepted once");

                let (call, heard) = asking("t", methods::ROOTS_LIST);
                call.run(table.clone()).await.unwrap();
                assert_eq!(table.parked(), 1);
                tokio::time::sleep(Duration::from_secs(11)).await;
                assert_eq!(table.parked(), 0, "the entry is removed at its deadline");
                assert!(heard.await.is_err(), "the call is cancelled, not left running");
            })
            .await;
    }

    #[tokio::test]
    async fn past_the_limit_a_call_is_refused_and_another_tools_retry_too() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let table = ParkedCalls::new(Duration::from_secs(60), 1);
                let (first, _) = asking("one", methods::SAMPLING_CREATE_MESSAGE);
                let pending = first.run(table.clone()).await.unwrap();
                let (second, _) = asking("two", methods::SAMPLING_CREATE_MESSAGE);
                assert!(second.run(table.clone()).await.unwrap_err().message.contains("1 calls waiting"));
                let wrong = json!({"name": "two", "requestState": pending["requestState"]});
                assert!(table.resume(&wrong).unwrap_err().message.contains("belongs to a call of `one`"));
            })
            .await;
    }
}
