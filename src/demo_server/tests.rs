//! The server driven in process with real JSON frames, in both eras: a test
//! plays the client, reading every frame the server writes.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::era::{Era, META_LOG_LEVEL};
use crate::protocol::session::META_PROTOCOL_VERSION;

const MODERN_VERSION: &str = crate::protocol::MODERN_VERSIONS[0];
use super::server::Server;
use super::DemoServerOptions;
use crate::protocol::session::META_SUBSCRIPTION_ID;

/// A client: sends lines to an in-process server and reads its frames.
struct Client {
    server: Server,
    frames: mpsc::UnboundedReceiver<Vec<u8>>,
    /// Frames read while waiting for something else, oldest first.
    seen: Vec<Value>,
    next_id: u64,
    /// Adds the modern `_meta` to every request.
    modern: bool,
}

impl Client {
    fn new(options: DemoServerOptions, modern: bool) -> Self {
        let (out, frames) = mpsc::unbounded_channel();
        Client { server: Server::new(options, out), frames, seen: Vec::new(), next_id: 0, modern }
    }

    fn legacy() -> Self {
        let mut client = Self::new(DemoServerOptions { era: Era::Legacy, ..Default::default() }, false);
        client.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}));
        client.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let initialized: Value = serde_json::from_slice(&client.frames.try_recv().expect("initialize is answered at once")).unwrap();
        assert_eq!(initialized["result"]["protocolVersion"], "2025-11-25");
        client
    }

    fn modern() -> Self {
        Self::new(DemoServerOptions { era: Era::Modern, ..Default::default() }, true)
    }

    fn send(&self, message: Value) {
        self.server.handle_line(message.to_string().as_bytes());
    }

    fn notify(&self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request; returns its id.
    fn request(&mut self, method: &str, mut params: Value) -> u64 {
        self.next_id += 1;
        if self.modern {
            params["_meta"][META_PROTOCOL_VERSION] = json!(MODERN_VERSION);
            params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
        }
        self.send(json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}));
        self.next_id
    }

    async fn next_frame(&mut self) -> Value {
        let frame = tokio::time::timeout(Duration::from_secs(5), self.frames.recv()).await.expect("a frame within 5 s");
        serde_json::from_slice(&frame.expect("the server is alive")).expect("a JSON frame")
    }

    /// The response to request `id`; other frames go to `seen`.
    async fn response(&mut self, id: u64) -> Value {
        loop {
            let frame = self.next_frame().await;
            if frame["id"] == id && frame.get("method").is_none() {
                return frame;
            }
            self.seen.push(frame);
        }
    }

    /// Sends a request and waits for its response.
    async fn ask(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.response(id).await
    }

    async fn result(&mut self, method: &str, params: Value) -> Value {
        let response = self.ask(method, params).await;
        assert!(response.get("error").is_none(), "{method}: {response}");
        response["result"].clone()
    }

    async fn error(&mut self, method: &str, params: Value) -> Value {
        let response = self.ask(method, params).await;
        assert!(response.get("result").is_none(), "{method}: {response}");
        response["error"].clone()
    }

    async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.result("tools/call", json!({"name": tool, "arguments": arguments})).await
    }

    /// The next frame that is a server request or notification named `method`.
    async fn expect(&mut self, method: &str) -> Value {
        if let Some(at) = self.seen.iter().position(|f| f["method"] == method) {
            return self.seen.remove(at);
        }
        loop {
            let frame = self.next_frame().await;
            if frame["method"] == method {
                return frame;
            }
            self.seen.push(frame);
        }
    }

    /// Answers a server request.
    fn reply(&self, request: &Value, outcome: Result<Value, Value>) {
        let mut message = json!({"jsonrpc": "2.0", "id": request["id"]});
        match outcome {
            Ok(result) => message["result"] = result,
            Err(error) => message["error"] = error,
        }
        self.send(message);
    }

    /// Nothing more is written within 100 ms.
    async fn quiet(&mut self) {
        assert!(self.seen.is_empty(), "unexpected frames: {:?}", self.seen);
        let more = tokio::time::timeout(Duration::from_millis(100), self.frames.recv()).await;
        assert!(more.is_err(), "unexpected frame: {:?}", more.map(|f| f.map(|f| String::from_utf8_lossy(&f).into_owned())));
    }
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// Every item of a paginated list.
async fn walk(client: &mut Client, method: &str, key: &str) -> Vec<Value> {
    let (mut items, mut params) = (Vec::new(), json!({}));
    loop {
        let page = client.result(method, params).await;
        items.extend(page[key].as_array().unwrap().iter().cloned());
        match page.get("nextCursor") {
            Some(cursor) => params = json!({ "cursor": cursor }),
            None => return items,
        }
    }
}

fn names(items: &[Value]) -> Vec<&str> {
    items.iter().map(|i| i["name"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn tools_answer_and_slow_calls_do_not_block_others() {
    let mut client = Client::legacy();
    client.server.handle_line(b"this is not json\n");
    let slow = client.request("tools/call", json!({"name": "sleep", "arguments": {"ms": 200}}));
    let add = client.call("add", json!({"a": 2, "b": 40})).await;
    assert_eq!((text(&add), &add["structuredContent"]), ("42", &json!({"sum": 42})));
    assert_eq!(text(&client.call("big", json!({"bytes": 1000})).await), "x".repeat(1000));
    assert_eq!(client.call("fail", json!({})).await["isError"], true);
    let garbage = client.request("tools/call", json!({"name": "garbage"}));
    assert_eq!(client.frames.recv().await.unwrap(), b"this line is not JSON\n");
    assert_eq!(text(&client.response(garbage).await["result"]), "ok");
    assert_eq!(text(&client.response(slow).await["result"]), "slept 200 ms");
}

#[tokio::test]
async fn cancelled_calls_stop_silently_and_are_reported() {
    let mut client = Client::legacy();
    client.request("tools/call", json!({"name": "sleep", "arguments": {"ms": 60_000}}));
    client.notify("notifications/cancelled", json!({"requestId": 1, "reason": "bored"}));
    client.notify("notifications/cancelled", json!({"requestId": "x"}));
    let report = client.call("cancellations", json!({})).await;
    let expected = json!([
        {"requestId": 1, "reason": "bored", "tool": "sleep", "arguments": {"ms": 60_000}},
        {"requestId": "x", "reason": null, "tool": null, "arguments": null},
    ]);
    assert_eq!(report["structuredContent"]["cancellations"], expected);
    assert!(client.seen.iter().all(|f| f["id"] != 1), "the cancelled call must not answer");
    let received = client.call("received", json!({})).await["structuredContent"].clone();
    assert_eq!(received["cancellations"], expected);
    assert_eq!((&received["initializeRequests"], &received["initialized"]), (&json!(1), &json!(true)));
    client.notify("notifications/roots/list_changed", json!({}));
    let received = client.call("received", json!({})).await["structuredContent"].clone();
    assert_eq!((&received["rootsListChanged"], &received["notifications"]["notifications/cancelled"]), (&json!(1), &json!(2)));
}

#[tokio::test]
async fn each_era_answers_its_own_lifecycle() {
    let mut legacy = Client::legacy();
    assert_eq!(legacy.error("server/discover", json!({})).await["code"], -32601);
    assert!(legacy.result("tools/list", json!({})).await.get("resultType").is_none());

    let mut modern = Client::modern();
    let discover = modern.result("server/discover", json!({})).await;
    assert_eq!(discover["supportedVersions"], json!([MODERN_VERSION]));
    assert_eq!((&discover["resultType"], &discover["cacheScope"]), (&json!("complete"), &json!("public")));
    assert_eq!(discover["serverInfo"]["name"], "mcpvisor-demo");
    let list = modern.result("tools/list", json!({})).await;
    assert_eq!((&list["resultType"], &list["ttlMs"]), (&json!("complete"), &json!(0)));
    assert_eq!(modern.result("ping", json!({})).await, json!({"resultType": "complete"}));
    modern.modern = false;
    let refused = modern.error("initialize", json!({"protocolVersion": "2025-11-25"})).await;
    assert_eq!(
        refused,
        json!({"code": -32022, "message": "Unsupported protocol version: 2025-11-25", "data": {"supported": [MODERN_VERSION], "requested": "2025-11-25"}})
    );
    let missing = modern.error("tools/list", json!({})).await;
    assert_eq!((&missing["code"], &missing["data"]), (&json!(-32022), &json!({"supported": [MODERN_VERSION]})));
    for method in ["logging/setLevel", "resources/subscribe", "resources/unsubscribe", "tasks/list", "tasks/get"] {
        modern.modern = true;
        assert_eq!(modern.error(method, json!({"level": "info", "uri": "demo://counter"})).await["code"], -32601, "{method}");
    }

    let mut dual = Client::new(DemoServerOptions::default(), false);
    assert_eq!(dual.result("server/discover", json!({})).await["supportedVersions"][0], MODERN_VERSION);
    assert_eq!(dual.result("initialize", json!({"protocolVersion": "2025-06-18"})).await["protocolVersion"], "2025-06-18");
    assert!(dual.result("tools/list", json!({})).await.get("resultType").is_none());
    dual.modern = true;
    assert_eq!(dual.result("tools/list", json!({})).await["resultType"], "complete");
}

#[tokio::test]
async fn no_initialize_leaves_the_handshake_unanswered_in_every_era() {
    for era in [Era::Legacy, Era::Modern, Era::Dual] {
        let mut client = Client::new(DemoServerOptions { era, no_initialize: true, ..Default::default() }, era == Era::Modern);
        client.request("initialize", json!({"protocolVersion": "2025-11-25"}));
        if era != Era::Legacy {
            client.request("server/discover", json!({}));
        }
        let ping = client.request("ping", json!({}));
        assert_eq!(client.response(ping).await["result"]["resultType"].is_string(), era == Era::Modern);
        client.quiet().await;
    }
}

#[tokio::test]
async fn lists_paginate_in_both_eras() {
    for mut client in [Client::legacy(), Client::modern()] {
        let tools = walk(&mut client, "tools/list", "tools").await;
        let legacy_only = ["ping_client", "slow_task"];
        assert_eq!(tools.iter().any(|t| legacy_only.contains(&t["name"].as_str().unwrap())), !client.modern);
        assert!(tools.len() > 20 && tools.iter().all(|t| t["inputSchema"]["type"] == "object" && t["title"].is_string()));
        assert_eq!(names(&walk(&mut client, "prompts/list", "prompts").await), ["greet", "plain"]);
        let resources = walk(&mut client, "resources/list", "resources").await;
        assert_eq!(resources.len(), 5);
        let templates = walk(&mut client, "resources/templates/list", "resourceTemplates").await;
        assert_eq!(templates[0]["uriTemplate"], "demo://item/{id}");
        assert_eq!(client.error("tools/list", json!({"cursor": "page:1"})).await["code"], -32602);
    }
    let mut bare = Client::new(DemoServerOptions { no_templates: true, page_size: 1, ..Default::default() }, false);
    assert_eq!(bare.error("resources/templates/list", json!({})).await["code"], -32601);
    assert_eq!(walk(&mut bare, "prompts/list", "prompts").await.len(), 2);
}

#[tokio::test]
async fn resources_prompts_and_completions_answer_in_both_eras() {
    for mut client in [Client::legacy(), Client::modern()] {
        let read = client.result("resources/read", json!({"uri": "demo://item/42"})).await;
        assert_eq!(read["contents"][0]["text"], "item 42");
        let blob = client.result("resources/read", json!({"uri": "demo://blob"})).await;
        assert_eq!(blob["contents"][0]["blob"], "AAECAwQFBgcICQoLDA0ODw==");
        let missing = client.error("resources/read", json!({"uri": "demo://nope"})).await;
        assert_eq!(missing["code"], if client.modern { -32602 } else { -32002 });
        assert_eq!(missing["data"]["uri"], "demo://nope");
        let greet = client.result("prompts/get", json!({"name": "greet", "arguments": {"name": "Ada", "style": "formal"}})).await;
        assert_eq!(greet["messages"][0]["content"]["text"], "Greet Ada in a formal style.");
        assert!(client.error("prompts/get", json!({"name": "greet"})).await["message"].as_str().unwrap().contains("`name`"));
        let params = json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "style", "value": "c"}});
        let completion = client.result("completion/complete", params).await;
        assert_eq!(completion["completion"], json!({"values": ["casual"], "total": 1, "hasMore": false}));
    }
}

#[tokio::test]
async fn legacy_sampling_is_a_real_request_and_refusals_are_quoted() {
    let mut client = Client::legacy();
    let call = client.request("tools/call", json!({"name": "sample", "arguments": {"prompt": "Say hi"}}));
    let request = client.expect("sampling/createMessage").await;
    assert_eq!(request["params"]["messages"][0]["content"]["text"], "Say hi");
    assert!(request["id"].as_str().unwrap().starts_with("demo-"));
    client.reply(&request, Ok(json!({"role": "assistant", "content": {"type": "text", "text": "hi!"}, "model": "test-model"})));
    let answer = client.response(call).await["result"].clone();
    assert_eq!((text(&answer), &answer["structuredContent"]["model"]), ("hi!", &json!("test-model")));

    let call = client.request("tools/call", json!({"name": "sample", "arguments": {"prompt": "again"}}));
    let request = client.expect("sampling/createMessage").await;
    client.reply(&request, Err(json!({"code": -1, "message": "User rejected sampling request"})));
    let refused = client.response(call).await["result"].clone();
    assert_eq!(refused["isError"], true);
    assert!(text(&refused).ends_with(r#"{"code":-1,"message":"User rejected sampling request"}"#), "{refused}");
}

#[tokio::test]
async fn legacy_elicitation_roots_and_ping_round_trip() {
    let mut client = Client::legacy();
    let call = client.request("tools/call", json!({"name": "elicit", "arguments": {"message": "Who are you?"}}));
    let request = client.expect("elicitation/create").await;
    assert_eq!(request["params"]["requestedSchema"]["properties"]["name"]["default"], "Ada");
    client.reply(&request, Ok(json!({"action": "accept", "content": {"name": "Bo"}})));
    let answer = client.response(call).await["result"].clone();
    assert_eq!(answer["structuredContent"], json!({"action": "accept", "content": {"name": "Bo"}}));

    let call = client.request("tools/call", json!({"name": "elicit_url", "arguments": {"url": "https://example.com/x"}}));
    let request = client.expect("elicitation/create").await;
    assert_eq!((&request["params"]["mode"], &request["params"]["url"]), (&json!("url"), &json!("https://example.com/x")));
    client.reply(&request, Ok(json!({"action": "accept"})));
    let complete = client.expect("notifications/elicitation/complete").await;
    assert_eq!(complete["params"]["elicitationId"], request["params"]["elicitationId"]);
    assert_eq!(text(&client.response(call).await["result"]), "action: accept");

    let call = client.request("tools/call", json!({"name": "roots"}));
    let request = client.expect("roots/list").await;
    client.reply(&request, Ok(json!({"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]})));
    let answer = client.response(call).await["result"].clone();
    assert_eq!((text(&answer), answer["structuredContent"]["roots"].as_array().unwrap().len()), ("file:///a\nfile:///b", 2));

    let call = client.request("tools/call", json!({"name": "ping_client"}));
    let ping = client.expect("ping").await;
    client.reply(&ping, Ok(json!({})));
    assert!(text(&client.response(call).await["result"]).starts_with("pong in "));
}

#[tokio::test]
async fn legacy_requests_to_a_cancelled_call_are_forgotten() {
    let mut client = Client::legacy();
    let call = client.request("tools/call", json!({"name": "roots"}));
    let request = client.expect("roots/list").await;
    client.notify("notifications/cancelled", json!({"requestId": call}));
    tokio::task::yield_now().await;
    client.reply(&request, Ok(json!({"roots": []})));
    client.quiet().await;
}

/// A modern call that asks for input: the `input_required` result, then the answer to the retry.
async fn round_trip(client: &mut Client, tool: &str, arguments: Value, key: &str, response: Value) -> (Value, Value) {
    let pending = client.call(tool, arguments.clone()).await;
    assert_eq!(pending["resultType"], "input_required", "{pending}");
    let request = pending["inputRequests"][key].clone();
    let retry = json!({"name": tool, "arguments": arguments, "inputResponses": {key: response}, "requestState": pending["requestState"]});
    let answer = client.result("tools/call", retry.clone()).await;
    assert_eq!(client.error("tools/call", retry).await["code"], -32602, "a requestState is accepted once");
    (request, answer)
}

#[tokio::test]
async fn modern_input_is_asked_with_input_required_results() {
    let mut client = Client::modern();
    let model = json!({"role": "assistant", "content": {"type": "text", "text": "hi!"}, "model": "m"});
    let (request, answer) = round_trip(&mut client, "sample", json!({"prompt": "Say hi"}), "sampling", model).await;
    assert_eq!(
        (&request["method"], &request["params"]["messages"][0]["content"]["text"]),
        (&json!("sampling/createMessage"), &json!("Say hi"))
    );
    assert_eq!((text(&answer), &answer["resultType"]), ("hi!", &json!("complete")));

    let refusal = json!({"error": {"code": -1, "message": "no"}});
    let (_, answer) = round_trip(&mut client, "sample", json!({"prompt": "x"}), "sampling", refusal).await;
    assert_eq!(
        (text(&answer), &answer["isError"]),
        (r#"the client refused sampling/createMessage: {"code":-1,"message":"no"}"#, &json!(true))
    );

    let form = json!({"action": "accept", "content": {"name": "Bo"}});
    let (request, answer) = round_trip(&mut client, "elicit", json!({"message": "Who?"}), "elicitation", form).await;
    assert_eq!((&request["method"], &request["params"]["mode"]), (&json!("elicitation/create"), &json!("form")));
    assert_eq!(answer["structuredContent"]["content"]["name"], "Bo");

    let (request, answer) =
        round_trip(&mut client, "elicit_url", json!({"url": "https://x"}), "elicitation", json!({"action": "decline"})).await;
    assert_eq!(request["params"]["mode"], "url");
    assert_eq!(text(&answer), "action: decline");

    let (request, answer) = round_trip(&mut client, "roots", json!({}), "roots", json!({"roots": [{"uri": "file:///r"}]})).await;
    assert_eq!(request["method"], "roots/list");
    assert_eq!(text(&answer), "file:///r");

    let forged = json!({"name": "roots", "inputResponses": {"roots": {"roots": []}}, "requestState": "roots/999"});
    assert_eq!(client.error("tools/call", forged).await["code"], -32602);
    let ping = client.call("ping_client", json!({})).await;
    assert_eq!(ping["isError"], true);
    client.quiet().await;
}

#[tokio::test]
async fn progress_follows_the_request_token_in_both_eras() {
    for mut client in [Client::legacy(), Client::modern()] {
        let params = json!({"name": "progress", "arguments": {"steps": 3, "ms": 1}, "_meta": {"progressToken": "tok"}});
        let done = client.result("tools/call", params).await;
        assert_eq!(text(&done), "done 3 steps");
        let progress: Vec<&Value> = client.seen.iter().filter(|f| f["method"] == "notifications/progress").map(|f| &f["params"]).collect();
        assert_eq!(progress.len(), 3);
        assert_eq!(*progress[2], json!({"progressToken": "tok", "progress": 3, "total": 3, "message": "step 3 of 3"}));
        client.seen.clear();
        assert_eq!(text(&client.call("progress", json!({"steps": 2, "ms": 1})).await), "done 2 steps");
        client.quiet().await;
    }
}

#[tokio::test]
async fn log_messages_respect_the_level_of_each_era() {
    let mut legacy = Client::legacy();
    assert_eq!(text(&legacy.call("log", json!({"level": "debug", "message": "d"})).await), "sent at debug");
    assert_eq!(legacy.expect("notifications/message").await["params"], json!({"level": "debug", "logger": "demo", "data": "d"}));
    legacy.result("logging/setLevel", json!({"level": "warning"})).await;
    assert_eq!(text(&legacy.call("log", json!({"level": "info", "message": "i"})).await), "filtered");
    assert_eq!(text(&legacy.call("log", json!({"level": "error", "message": "e"})).await), "sent at error");
    assert_eq!(legacy.expect("notifications/message").await["params"]["data"], "e");
    assert_eq!(legacy.error("logging/setLevel", json!({"level": "loud"})).await["code"], -32602);
    legacy.quiet().await;

    let mut modern = Client::modern();
    assert_eq!(text(&modern.call("log", json!({"level": "emergency", "message": "m"})).await), "filtered");
    let params = json!({"name": "log", "arguments": {"level": "info", "message": "m"}, "_meta": {META_LOG_LEVEL: "info"}});
    assert_eq!(text(&modern.result("tools/call", params).await), "sent at info");
    assert_eq!(modern.expect("notifications/message").await["params"]["level"], "info");
    modern.quiet().await;
}

#[tokio::test]
async fn structured_media_and_url_required_results() {
    let mut client = Client::modern();
    assert_eq!(client.call("structured", json!({"a": 1, "b": 2})).await["structuredContent"], json!({"sum": 3}));
    assert_eq!(client.call("bad_structured", json!({})).await["structuredContent"], json!({"sum": "forty-two"}));
    let media = client.call("media", json!({})).await;
    assert_eq!(media["content"].as_array().unwrap().len(), 5);
    let error = client.error("tools/call", json!({"name": "needs_url"})).await;
    assert_eq!(error["code"], -32042);
    assert_eq!(error["data"]["elicitations"][0]["mode"], "url");
    assert!(error["data"]["elicitations"][0]["elicitationId"].is_string());
}

#[tokio::test]
async fn legacy_tasks_run_poll_cancel_and_expire() {
    let mut client = Client::legacy();
    assert_eq!(client.error("tools/call", json!({"name": "slow_task", "arguments": {"ms": 1}})).await["code"], -32601);
    assert_eq!(client.error("tools/call", json!({"name": "echo", "arguments": {"text": "x"}, "task": {}})).await["code"], -32601);
    let created = client.result("tools/call", json!({"name": "slow_task", "arguments": {"ms": 100}, "task": {"ttl": 60_000}})).await;
    let task = created["task"].clone();
    assert_eq!((&task["status"], &task["ttl"], &task["pollInterval"]), (&json!("working"), &json!(60_000), &json!(100)));
    let id = task["taskId"].clone();
    assert_eq!(client.result("tasks/get", json!({"taskId": id})).await["status"], "working");
    let result = client.result("tasks/result", json!({"taskId": id})).await;
    assert_eq!(text(&result), "slept 100 ms");
    assert_eq!(result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id);
    assert_eq!(client.result("tasks/get", json!({"taskId": id})).await["status"], "completed");
    assert_eq!(client.error("tasks/cancel", json!({"taskId": id})).await["code"], -32602);

    let other =
        client.result("tools/call", json!({"name": "slow_task", "arguments": {"ms": 60_000}, "task": {}})).await["task"]["taskId"].clone();
    let waiting = client.request("tasks/result", json!({"taskId": other}));
    assert_eq!(client.result("tasks/cancel", json!({"taskId": other})).await["status"], "cancelled");
    assert_eq!(client.response(waiting).await["error"]["code"], -32602);
    assert_eq!(walk(&mut client, "tasks/list", "tasks").await.len(), 2);

    let short = client.result("tools/call", json!({"name": "slow_task", "arguments": {"ms": 1}, "task": {"ttl": 50}})).await["task"]
        ["taskId"]
        .clone();
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert_eq!(client.error("tasks/get", json!({"taskId": short})).await["code"], -32602, "forgotten after its ttl");
}

#[tokio::test]
async fn legacy_changes_reach_the_session_and_subscribers() {
    let mut client = Client::legacy();
    assert_eq!(text(&client.call("touch", json!({})).await), "touched demo://counter; counter is 1");
    client.quiet().await;
    client.result("resources/subscribe", json!({"uri": "demo://counter"})).await;
    client.call("touch", json!({"uri": "demo://counter"})).await;
    assert_eq!(client.expect("notifications/resources/updated").await["params"], json!({"uri": "demo://counter"}));
    assert_eq!(client.result("resources/read", json!({"uri": "demo://counter"})).await["contents"][0]["text"], "2");
    assert_eq!(client.error("tools/call", json!({"name": "touch", "arguments": {"uri": "demo://nope"}})).await["code"], -32602);

    client.call("add_tool", json!({"name": "mine"})).await;
    assert_eq!(client.expect("notifications/tools/list_changed").await["params"], json!({}));
    assert!(names(&walk(&mut client, "tools/list", "tools").await).contains(&"mine"));
    assert_eq!(text(&client.call("mine", json!({"text": "hello"})).await), "hello");
    assert!(client.error("tools/call", json!({"name": "add_tool", "arguments": {"name": "mine"}})).await["message"]
        .as_str()
        .unwrap()
        .contains("taken"));
    client.call("add_prompt", json!({"name": "p"})).await;
    client.expect("notifications/prompts/list_changed").await;
    assert_eq!(names(&walk(&mut client, "prompts/list", "prompts").await), ["greet", "plain", "p"]);
    client.call("add_resource", json!({"name": "r"})).await;
    client.expect("notifications/resources/list_changed").await;
    assert_eq!(client.result("resources/read", json!({"uri": "demo://added/r"})).await["contents"][0]["text"], "added resource r");
    client.quiet().await;
}

#[tokio::test]
async fn modern_changes_go_to_listen_streams_by_filter() {
    let mut client = Client::modern();
    let filter = json!({"notifications": {"toolsListChanged": true, "resourceSubscriptions": ["demo://counter"]}});
    let listen = client.request("subscriptions/listen", filter);
    let ack = client.expect("notifications/subscriptions/acknowledged").await;
    let tag = json!({ META_SUBSCRIPTION_ID: listen });
    assert_eq!(
        ack["params"],
        json!({"_meta": tag, "notifications": {"toolsListChanged": true, "resourceSubscriptions": ["demo://counter"]}})
    );
    client.call("touch", json!({})).await;
    assert_eq!(client.expect("notifications/resources/updated").await["params"], json!({"uri": "demo://counter", "_meta": tag}));
    client.call("add_tool", json!({"name": "t"})).await;
    assert_eq!(client.expect("notifications/tools/list_changed").await["params"], json!({"_meta": tag}));
    client.call("add_prompt", json!({"name": "p"})).await;
    client.quiet().await;
    client.notify("notifications/cancelled", json!({"requestId": listen}));
    client.call("touch", json!({})).await;
    client.call("add_tool", json!({"name": "u"})).await;
    client.quiet().await;
    assert!(client.seen.iter().all(|f| f["id"] != listen), "a listen stream is never answered");
}

#[tokio::test]
async fn a_dual_server_sends_legacy_notifications_only_after_initialize() {
    let mut client = Client::new(DemoServerOptions::default(), false);
    client.call("add_tool", json!({"name": "early"})).await;
    client.quiet().await;
    client.result("initialize", json!({"protocolVersion": "2025-11-25"})).await;
    client.call("add_tool", json!({"name": "late"})).await;
    client.expect("notifications/tools/list_changed").await;
}

#[tokio::test]
async fn the_default_tool_list_has_three_pages() {
    // tests/memory/memory_bound.rs counts the lines a client sends before its first call.
    for mut client in [Client::legacy(), Client::modern()] {
        let (mut pages, mut page) = (1, client.result("tools/list", json!({})).await);
        while let Some(cursor) = page.get("nextCursor").cloned() {
            pages += 1;
            page = client.result("tools/list", json!({ "cursor": cursor })).await;
        }
        assert_eq!(pages, 3);
    }
}
