//! The Hub holds the only strong address of a connection: removing a server
//! ends its actor even while a multi-round operation on it is outstanding.
//! (One test in its own binary: it counts the connections of the process.)

#[path = "common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use actix::prelude::*;
use common::*;
use mcpvisor::actors::client_requests::{answered_by, ClientHandlers, Refusal, SamplingRequest};
use mcpvisor::actors::connection::live_connections;
use mcpvisor::config::{Era, RuntimeConfig};
use mcpvisor::{CallTool, JsonObject, Runtime};
use serde_json::json;
use tokio::sync::mpsc;

/// A sampling handler that tells when it is asked and never answers.
struct Silent(mpsc::UnboundedSender<()>);

impl Actor for Silent {
    type Context = Context<Self>;
}

impl Handler<SamplingRequest> for Silent {
    type Result = ResponseFuture<Result<JsonObject, Refusal>>;

    fn handle(&mut self, _: SamplingRequest, _: &mut Context<Self>) -> Self::Result {
        let _ = self.0.send(());
        Box::pin(std::future::pending())
    }
}

fn silent_handlers(asked: mpsc::UnboundedSender<()>) -> ClientHandlers {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        actix::System::new().block_on(async move {
            let _ = tx.send(Silent(asked).start());
            std::future::pending::<()>().await;
        });
    });
    let silent = rx.recv().expect("the handler starts");
    ClientHandlers { roots: None, sampling: Some(answered_by(silent.recipient())), elicitation: None }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_server_ends_its_actor_while_an_operation_is_outstanding() {
    let (asked_tx, mut asked) = mpsc::unbounded_channel();
    let mut server = demo("asker", &[]);
    // Modern: the sampling question comes back inside the call's result (a multi-round call).
    server.era = Era::Modern;
    let handle = Runtime::builder(RuntimeConfig::new([server])).client_handlers(silent_handlers(asked_tx)).start().unwrap();
    assert!(handle.wait_ready(Duration::from_secs(20)).await);
    assert_eq!(live_connections(), 1);

    let h = handle.clone();
    let outstanding = tokio::spawn(async move {
        h.call_on("asker", CallTool::new("sample", json!({"prompt": "never answered"})).with_timeout(Duration::from_secs(300))).await
    });
    asked.recv().await.expect("the server asked for sampling");
    handle.remove_server("asker").await.unwrap();

    let deadline = Instant::now() + Duration::from_secs(20);
    while live_connections() > 0 {
        assert!(Instant::now() < deadline, "the removed server's connection is still alive");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!outstanding.is_finished(), "the operation is still outstanding: nothing it holds kept the connection alive");
    outstanding.abort();
}
