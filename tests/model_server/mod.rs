//! A scripted model server on loopback that speaks the real wire formats of
//! the Chat Completions API and Anthropic's Messages API: each request
//! takes the next scripted [`Reply`], and every request is recorded (path,
//! headers, JSON body) for the test to check.

#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use serde_json::{json, Value};

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A plain answer: status, extra headers, body.
    Status(u16, Vec<(&'static str, String)>, String),
    /// A JSON answer (200).
    Json(Value),
    /// A server-sent event stream: (`event:` name, data) pairs, then the end.
    Sse(Vec<(Option<String>, String)>),
    /// The events, then silence with the connection open.
    SseThenStall(Vec<(Option<String>, String)>),
}

/// A request the server received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    pub headers: BTreeMap<String, String>,
    pub body: Value,
}

#[derive(Clone, Default)]
struct State {
    script: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

pub struct ModelServer {
    /// `http://127.0.0.1:PORT`
    pub url: String,
    state: State,
}

impl ModelServer {
    /// Starts the server on an ephemeral loopback port, in the current tokio runtime.
    pub async fn start(script: impl IntoIterator<Item = Reply>) -> ModelServer {
        let state = State::default();
        state.script.lock().unwrap().extend(script);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new().fallback({
            let state = state.clone();
            move |uri: Uri, headers: HeaderMap, body: Bytes| answer(state.clone(), uri, headers, body)
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        ModelServer { url, state }
    }

    /// Settings of a model of `provider` served here (no key; streaming as `stream` says, else the default).
    pub fn settings(&self, provider: mcpvisor::llm::Provider, stream: Option<bool>) -> mcpvisor::llm::ModelSettings {
        let base_url = match provider {
            mcpvisor::llm::Provider::OpenAi => format!("{}/v1", self.url),
            mcpvisor::llm::Provider::Anthropic => self.url.clone(),
        };
        let choices = mcpvisor::llm::settings::Choices {
            provider: Some(provider),
            model: Some("scripted-1".into()),
            base_url: Some(base_url),
            api_key: None,
            stream,
        };
        mcpvisor::llm::ModelSettings::resolve(choices, |_| None).expect("settings of a loopback model")
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    pub fn push(&self, reply: Reply) {
        self.state.script.lock().unwrap().push_back(reply);
    }
}

async fn answer(state: State, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let headers = headers.iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string())).collect();
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    state.requests.lock().unwrap().push(Recorded { path: uri.path().to_string(), headers, body });
    let reply = state.script.lock().unwrap().pop_front();
    let reply =
        reply.unwrap_or_else(|| Reply::Status(500, vec![], r#"{"error":{"message":"the test script has no more replies"}}"#.into()));
    let builder = Response::builder();
    match reply {
        Reply::Status(status, extra, text) => {
            let mut builder = builder.status(StatusCode::from_u16(status).unwrap()).header("content-type", "application/json");
            for (name, value) in extra {
                builder = builder.header(name, value);
            }
            builder.body(Body::from(text)).unwrap()
        }
        Reply::Json(value) => builder.header("content-type", "application/json").body(Body::from(value.to_string())).unwrap(),
        Reply::Sse(events) => sse(events, false),
        Reply::SseThenStall(events) => sse(events, true),
    }
}

fn sse(events: Vec<(Option<String>, String)>, stall: bool) -> Response {
    let frames = events.into_iter().map(|(name, data)| {
        let name = name.map(|n| format!("event: {n}\n")).unwrap_or_default();
        Ok::<_, Infallible>(Bytes::from(format!("{name}data: {data}\n\n")))
    });
    let stream = futures::stream::iter(frames.collect::<Vec<_>>());
    let body =
        if stall { Body::from_stream(futures::StreamExt::chain(stream, futures::stream::pending())) } else { Body::from_stream(stream) };
    Response::builder().header("content-type", "text/event-stream").body(body).unwrap()
}

/// Chat Completions stream chunks: `deltas` as given, then the finish reason, usage and `[DONE]`.
pub fn openai_stream(deltas: Vec<Value>, finish_reason: &str) -> Reply {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        .to_string()
    };
    let mut events: Vec<(Option<String>, String)> = deltas.into_iter().map(|d| (None, chunk(d, Value::Null))).collect();
    events.push((None, chunk(json!({}), json!(finish_reason))));
    let usage = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "scripted", "choices": [],
                       "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}});
    events.push((None, usage.to_string()));
    events.push((None, "[DONE]".into()));
    Reply::Sse(events)
}

/// A whole Chat Completions answer.
pub fn openai_whole(content: Option<&str>, tool_calls: Vec<Value>, finish_reason: &str) -> Reply {
    let mut message = json!({"role": "assistant", "content": content});
    if !tool_calls.is_empty() {
        message["tool_calls"] = json!(tool_calls);
    }
    Reply::Json(json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}))
}

/// A Messages API stream: `blocks` are (start block, deltas) pairs.
pub fn anthropic_stream(blocks: Vec<(Value, Vec<Value>)>, stop_reason: &str) -> Reply {
    let event = |name: &str, data: Value| (Some(name.to_string()), data.to_string());
    let mut events = vec![event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
            "model": "scripted", "stop_reason": null, "usage": {"input_tokens": 13, "output_tokens": 1}}}),
    )];
    events.push(event("ping", json!({"type": "ping"})));
    for (index, (start, deltas)) in blocks.into_iter().enumerate() {
        events.push(event("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": start})));
        for delta in deltas {
            events.push(event("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": delta})));
        }
        events.push(event("content_block_stop", json!({"type": "content_block_stop", "index": index})));
    }
    events.push(event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": 9}}),
    ));
    events.push(event("message_stop", json!({"type": "message_stop"})));
    Reply::Sse(events)
}

/// An error body in the shape both APIs use.
pub fn error_body(message: &str, kind: &str) -> String {
    json!({"type": "error", "error": {"message": message, "type": kind, "code": kind}}).to_string()
}
