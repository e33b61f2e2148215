//! Running a checked tool call, in the era of its request.

use std::io::Write as _;
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::catalog::{Addition, ToolCall, TOOLS};
use super::era::RequestEra;
use super::interaction::Ask;
use super::media::media_result;
use super::rpc::{error_result, notification_frame, structured_result, text_result, ErrorObject, URL_ELICITATION_REQUIRED};
use super::state::State;
use super::{lock, log, resources};
use crate::server::listen::Change;

/// The line the `garbage` tool writes to stdout before its answer.
pub const GARBAGE_LINE: &str = "this line is not JSON";

/// The answer to `call`; `params` are the request's (for `_meta` and MRTR retries).
pub async fn execute(call: ToolCall, state: &State, era: RequestEra, params: &Value) -> Result<Value, ErrorObject> {
    Ok(match call {
        ToolCall::Echo(text) => text_result(text),
        ToolCall::Add(a, b) | ToolCall::Structured(a, b) => sum(a, b),
        ToolCall::Sleep(ms) | ToolCall::SlowTask(ms) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            text_result(format!("slept {ms} ms"))
        }
        ToolCall::Fail(message) => error_result(message),
        ToolCall::Crash(code) => {
            log(format_args!("crash requested, exiting with code {code}"));
            let _ = std::io::stderr().flush();
            std::process::exit(code)
        }
        ToolCall::SpawnGrandchild => spawn_grandchild(),
        ToolCall::Garbage => {
            state.send(format!("{GARBAGE_LINE}\n").into_bytes());
            text_result("ok")
        }
        ToolCall::Big(bytes) => text_result("x".repeat(bytes)),
        ToolCall::Cancellations => {
            let report = json!({ "cancellations": lock(&state.received).cancellations });
            structured_result(report.to_string(), report)
        }
        ToolCall::Stderr(text) => {
            eprintln!("{text}");
            text_result("ok")
        }
        ToolCall::Progress { steps, ms } => {
            let token = params.get("_meta").and_then(|m| m.get("progressToken")).filter(|t| !t.is_null());
            for step in 1..=steps {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                if let Some(token) = token {
                    let progress =
                        json!({"progressToken": token, "progress": step, "total": steps, "message": format!("step {step} of {steps}")});
                    state.send(notification_frame("notifications/progress", progress));
                }
            }
            text_result(format!("done {steps} steps"))
        }
        ToolCall::Log { level, message } => {
            let threshold = match era {
                RequestEra::Legacy => Some(*lock(&state.log_level)),
                RequestEra::Modern { log_level } => log_level,
            };
            if threshold.is_some_and(|t| level >= t) {
                state.send(notification_frame("notifications/message", json!({"level": level.name(), "logger": "demo", "data": message})));
                text_result(format!("sent at {}", level.name()))
            } else {
                text_result("filtered")
            }
        }
        ToolCall::Ask(ask) => return interact(ask, state, era, params).await,
        ToolCall::NeedsUrl => return Err(url_elicitation_required()),
        ToolCall::PingClient if era.is_legacy() => {
            let start = Instant::now();
            match state.outgoing.request(&state.out, "ping", json!({})).await {
                Ok(_) => text_result(format!("pong in {} ms", start.elapsed().as_millis())),
                Err(error) => error_result(format!("the client refused ping: {error}")),
            }
        }
        ToolCall::PingClient => {
            error_result("ping_client needs a legacy session: the 2026-07-28 era has no server-to-client requests".into())
        }
        ToolCall::BadStructured => structured_result("forty-two".into(), json!({"sum": "forty-two"})),
        ToolCall::Media => media_result(),
        ToolCall::Touch(uri) => touch(state, uri)?,
        ToolCall::Extend(addition, name) => extend(state, addition, name)?,
        ToolCall::PauseReading(ms) => text_result(format!("reading no input for {ms} ms")),
        ToolCall::CloseStdout => {
            close_stdout();
            text_result("stdout closed")
        }
        ToolCall::Received => {
            let report = lock(&state.received).report();
            structured_result(report.to_string(), report)
        }
    })
}

fn sum(a: f64, b: f64) -> Value {
    let sum = a + b;
    if !sum.is_finite() {
        return error_result("the sum of `a` and `b` is not a finite number".into());
    }
    // Integral sums print as integers: 2 + 40 is "42", not "42.0".
    let sum = if sum.fract() == 0.0 && sum.abs() < 9.0e15 { json!(sum as i64) } else { json!(sum) };
    structured_result(sum.to_string(), json!({ "sum": sum }))
}

/// Asks the client: legacy by a request awaited here, modern by `input_required`
/// and the retry that carries the response.
async fn interact(ask: Ask, state: &State, era: RequestEra, params: &Value) -> Result<Value, ErrorObject> {
    let tool = params.get("name").and_then(Value::as_str).unwrap_or_default();
    let response = match era {
        RequestEra::Legacy => state.outgoing.request(&state.out, ask.method, ask.params.clone()).await,
        RequestEra::Modern { .. } => match state.request_states.response(tool, &ask, params)? {
            Some(response) => response,
            None => return Ok(state.request_states.input_required(tool, &ask)),
        },
    };
    let accepted = response.as_ref().is_ok_and(|r| r["action"] == "accept");
    if era.is_legacy() && ask.is_url_elicitation() && accepted {
        let completed = json!({ "elicitationId": ask.params["elicitationId"] });
        state.send(notification_frame("notifications/elicitation/complete", completed));
    }
    Ok(ask.answer(response))
}

/// -32042: the call cannot go on until the user visits a URL.
fn url_elicitation_required() -> ErrorObject {
    let elicitation = json!({
        "mode": "url",
        "elicitationId": format!("elicitation-{:016x}", fastrand::u64(..)),
        "url": "https://example.com/mcpvisor-demo/authorize",
        "message": "Authorize the demo server to continue.",
    });
    ErrorObject::new(URL_ELICITATION_REQUIRED, "This request requires more information.")
        .with_data(json!({ "elicitations": [elicitation] }))
}

/// Bumps the counter (when `uri` is it) and tells the subscribers of `uri`.
fn touch(state: &State, uri: String) -> Result<Value, ErrorObject> {
    if resources::contents(&uri, 0, &lock(&state.added).resources).is_none() {
        return Err(ErrorObject::invalid_params(format!("tool `touch`: argument `uri` must name a resource, got {uri:?}")));
    }
    let counter = if uri == resources::COUNTER_URI {
        state.counter.fetch_add(1, Ordering::Relaxed) + 1
    } else {
        state.counter.load(Ordering::Relaxed)
    };
    state.announce(Change::Updated(uri.clone()));
    Ok(structured_result(format!("touched {uri}; counter is {counter}"), json!({"uri": uri, "counter": counter})))
}

/// Adds a tool, prompt or resource named `name`, then announces the list change.
fn extend(state: &State, addition: Addition, name: String) -> Result<Value, ErrorObject> {
    let (tool, builtin, change): (&str, Vec<&str>, Change) = match addition {
        Addition::Tool => ("add_tool", TOOLS.iter().map(|t| t.name).collect(), Change::Tools),
        Addition::Prompt => ("add_prompt", vec!["greet", "plain"], Change::Prompts),
        Addition::Resource => ("add_resource", Vec::new(), Change::Resources),
    };
    {
        let mut added = lock(&state.added);
        let names = match addition {
            Addition::Tool => &mut added.tools,
            Addition::Prompt => &mut added.prompts,
            Addition::Resource => &mut added.resources,
        };
        if builtin.contains(&name.as_str()) || names.contains(&name) {
            return Err(ErrorObject::invalid_params(format!("tool `{tool}`: argument `name` {name:?} is taken")));
        }
        names.push(name.clone());
    }
    state.announce(change);
    let text = match addition {
        Addition::Resource => format!("added {}", resources::added_uri(&name)),
        _ => format!("added {name}"),
    };
    Ok(text_result(text))
}

/// Starts `sleep 3600` in this process's group (no `setsid`/`setpgid`), reaped by a thread.
fn spawn_grandchild() -> Value {
    let spawned = std::process::Command::new("sleep").arg("3600").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn();
    match spawned {
        Ok(mut child) => {
            let pid = child.id();
            // Reaps it if killed while this server lives, so it does not linger as a zombie.
            std::thread::spawn(move || child.wait());
            structured_result(format!("started grandchild pid {pid}"), json!({ "pid": pid }))
        }
        Err(e) => error_result(format!("cannot start `sleep 3600`: {e}")),
    }
}

/// Points fd 1 at /dev/null: the client's end of the pipe sees EOF, and later
/// writes vanish, while the process keeps running.
fn close_stdout() {
    match std::fs::OpenOptions::new().write(true).open("/dev/null") {
        Ok(null) => {
            // SAFETY: dup2 onto fd 1 with a valid open descriptor; `null` is closed after.
            if unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&null), 1) } < 0 {
                log(format_args!("cannot close stdout: {}", std::io::Error::last_os_error()));
            } else {
                log("stdout closed (close_stdout); still running");
            }
        }
        Err(e) => log(format_args!("cannot open /dev/null to close stdout: {e}")),
    }
}
