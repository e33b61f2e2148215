//! Where connections run: each whole on one of the Hub's connection
//! threads, off the thread that runs the Hub (`RuntimeConfig::connection_threads`),
//! and what a replaced connection may still say is not heard.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::*;
use futures::future::BoxFuture;
use mcpvisor::actors::connection::StateChanged;
use mcpvisor::actors::hub::{GetRegistry, Hub, ServerStatusOf, Shutdown, WaitReady};
use mcpvisor::actors::parts::Parts;
use mcpvisor::actors::{CallTool, ListTools, ServerDown, ToolsChanged};
use mcpvisor::config::{RuntimeConfig, ServerConfig};
use mcpvisor::protocol::ErrorObject;
use mcpvisor::{CallToolResult, ContentBlock, JsonObject, ServerState, Tool, ToolHandler};
use serde_json::json;

/// One tool, `where`, that answers the name of the thread it runs on.
struct Where;

impl ToolHandler for Where {
    fn tools(&self) -> Vec<Tool> {
        vec![Tool::new("where", "the thread this tool runs on", json!({"type": "object"}).as_object().cloned().unwrap_or_default())]
    }

    fn call<'a>(&'a self, _: &'a str, _: JsonObject) -> BoxFuture<'a, Result<CallToolResult, ErrorObject>> {
        let thread = format!("{:?}", std::thread::current().id());
        Box::pin(async move { Ok(CallToolResult::success(vec![ContentBlock::text(thread)])) })
    }
}

/// Starts a hub with in-process servers `names` on `threads` connection
/// threads (in the current actix System) and waits until they are ready.
async fn hub_of(names: &[&str], threads: usize) -> actix::Addr<Hub> {
    let servers: Vec<ServerConfig> = names.iter().map(|name| ServerConfig::in_process(*name)).collect();
    let config = RuntimeConfig { connection_threads: threads, ..RuntimeConfig::new(servers) };
    let in_process = names.iter().map(|name| (name.to_string(), Where.into())).collect::<BTreeMap<_, _>>();
    let hub = Hub::start_with(config, Parts { in_process, ..Parts::default() });
    tokio::time::timeout(Duration::from_secs(20), hub.send(WaitReady)).await.expect("the servers are ready in time").unwrap();
    hub
}

async fn thread_of(hub: &actix::Addr<Hub>, server: &str) -> String {
    let registry = hub.send(GetRegistry).await.unwrap();
    let result = registry.send(CallTool::new(format!("mcp__{server}__where"), json!({}))).await.unwrap().unwrap();
    text(&result)
}

#[test]
fn connections_run_on_threads_of_their_own_spread_round_robin() {
    actix::System::new().block_on(async {
        let here = format!("{:?}", std::thread::current().id());
        let hub = hub_of(&["a", "b", "c"], 2).await;
        let (a, b, c) = (thread_of(&hub, "a").await, thread_of(&hub, "b").await, thread_of(&hub, "c").await);
        assert!(a != here && b != here && c != here, "a connection ran on the hub's thread {here}: {a}, {b}, {c}");
        assert_ne!(a, b, "two servers on two threads share one");
        assert_eq!(a, c, "the third server goes back to the first thread");
        hub.send(Shutdown).await.unwrap();
    });
}

#[test]
fn by_default_connections_stay_on_the_hubs_thread() {
    actix::System::new().block_on(async {
        let here = format!("{:?}", std::thread::current().id());
        let hub = hub_of(&["a"], RuntimeConfig::default().connection_threads).await;
        assert_eq!(thread_of(&hub, "a").await, here);
        hub.send(Shutdown).await.unwrap();
    });
}

#[test]
fn reports_from_another_connection_of_the_same_name_are_not_heard() {
    actix::System::new().block_on(async {
        let hub = hub_of(&["kept"], 2).await;
        let registry = hub.send(GetRegistry).await.unwrap();
        let listed = registry.send(ListTools).await.unwrap().len();
        assert_eq!(listed, 1);
        // What a replaced connection of the same name could still send, from its own thread.
        let stale = 0;
        hub.do_send(StateChanged { server: "kept".into(), instance: stale, state: ServerState::Pending });
        registry.do_send(ServerDown { server: "kept".into(), instance: stale });
        registry.do_send(ToolsChanged { server: "kept".into(), instance: stale, tools: Vec::new() });
        let status = hub.send(ServerStatusOf("kept".into())).await.unwrap().expect("the server is there");
        assert_eq!(status.state, ServerState::Connected, "the hub heeded another connection's report");
        assert_eq!(registry.send(ListTools).await.unwrap().len(), listed, "the registry heeded another connection's report");
        thread_of(&hub, "kept").await; // and its calls still route to it
        hub.send(Shutdown).await.unwrap();
    });
}
