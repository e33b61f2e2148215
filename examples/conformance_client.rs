//! The client the official MCP conformance runner starts
//! (`@modelcontextprotocol/conformance client --command ...`; `.ci/run` and
//! docs/conformance.md).
//!
//! usage: conformance_client [ARGS...] SERVER_URL
//!
//! The runner passes the scenario's server URL as the last argument, the
//! scenario's name in `MCP_CONFORMANCE_SCENARIO`, the protocol version it
//! runs at in `MCP_CONFORMANCE_PROTOCOL_VERSION` (`2026-07-28` is the
//! stateless era, a dated version before it the `initialize` era) and
//! extra data (pre-registered OAuth clients) in `MCP_CONFORMANCE_CONTEXT`.
//!
//! It is an ordinary embedder of the library's public API, with no protocol
//! code of its own: one remote server through [`Runtime`] and [`Handle`],
//! handlers that answer sampling, elicitation and roots the way a user and
//! a model would, OAuth whose logins follow the authorization redirect
//! headlessly ([`FollowRedirects`]), then: wait until connected, list the tools, call every
//! tool with arguments made from its `inputSchema`, list the skills and load
//! those a scenario asks for ([`skills`]), shut down. Only the
//! arguments of a scenario's call may come from [`arguments_for`], where a
//! scenario asks for particular values (the echo of a schema, header values
//! that need encoding); everything on the wire is the library's.
//!
//! Exit status: 0 when the server was reached and every call was answered
//! by the server (an `isError` result or a JSON-RPC error is the server's
//! answer, and what some scenarios check); 1 when connecting, listing or a
//! call failed on the client's side (transport, protocol, time-out,
//! authorization), so the runner sees the failure; 2 for a bad command line.

use std::time::Duration;

use actix::prelude::*;
use mcpvisor::actors::client_requests::answered_by;
use mcpvisor::config::{Auth, Era, Grant, IdentityProvider, OAuthConfig, RuntimeConfig, ServerConfig, Transport};
use mcpvisor::oauth::FollowRedirects;
use mcpvisor::{
    CallError, CallTool, ClientHandlers, ElicitResult, ElicitationAction, ElicitationRequest, Handle, JsonObject, Refusal, Root,
    RootsRequest, Runtime, SamplingRequest, ServerState, SkillError, ToolEntry,
};
use serde_json::{json, Value};

/// The configured name of the one server.
const SERVER: &str = "conformance";
/// How long connecting may take; the runner gives a whole scenario 30 s.
const CONNECT_LIMIT: Duration = Duration::from_secs(20);
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------- the user and the model

/// Answers the server's requests: sampling with a fixed assistant message,
/// elicitation by accepting a form filled with the schema's defaults (the
/// library pre-fills them, SEP-1034) and example values for the rest, and
/// roots with the working directory.
struct User;

impl Actor for User {
    type Context = Context<Self>;
}

impl Handler<SamplingRequest> for User {
    type Result = Result<JsonObject, Refusal>;

    fn handle(&mut self, request: SamplingRequest, _: &mut Context<Self>) -> Self::Result {
        eprintln!("sampling asked by {}: {}", request.server, Value::Object(request.params));
        let answer = json!({
            "role": "assistant",
            "content": {"type": "text", "text": "This is a test response from the conformance client."},
            "model": "conformance-client-model",
            "stopReason": "endTurn",
        });
        Ok(answer.as_object().cloned().unwrap_or_default())
    }
}

impl Handler<ElicitationRequest> for User {
    type Result = Result<ElicitResult, Refusal>;

    fn handle(&mut self, request: ElicitationRequest, _: &mut Context<Self>) -> Self::Result {
        let params = serde_json::to_value(&request.request).unwrap_or_default();
        eprintln!("elicitation asked by {}: {params}", request.server);
        let mut content = request.prefilled;
        let schema = &params["requestedSchema"];
        for field in required(schema) {
            if !content.contains_key(&field) {
                content.insert(field.clone(), example_value(&schema["properties"][&field]));
            }
        }
        let mut result = ElicitResult::new(ElicitationAction::Accept);
        result.content = Some(Value::Object(content));
        Ok(result)
    }
}

impl Handler<RootsRequest> for User {
    type Result = Result<Vec<Root>, Refusal>;

    fn handle(&mut self, _: RootsRequest, _: &mut Context<Self>) -> Self::Result {
        let cwd = std::env::current_dir().map(|dir| dir.display().to_string()).unwrap_or_else(|_| "/".into());
        Ok(vec![Root { uri: format!("file://{cwd}"), name: Some("work".into()) }])
    }
}

// ---------------------------------------------------------------- arguments

/// The names a JSON schema of an object marks `required`.
fn required(schema: &Value) -> Vec<String> {
    schema["required"].as_array().into_iter().flatten().filter_map(|name| name.as_str().map(str::to_string)).collect()
}

/// A value that satisfies `schema` as far as a form filler can tell: its
/// `default`, `const` or first `enum` value, else one per type.
fn example_value(schema: &Value) -> Value {
    if let Some(value) = schema.get("default").or_else(|| schema.get("const")) {
        return value.clone();
    }
    if let Some(first) = schema["enum"].as_array().and_then(|values| values.first()) {
        return first.clone();
    }
    for options in ["oneOf", "anyOf"] {
        if let Some(first) = schema[options].as_array().and_then(|options| options.first()) {
            return example_value(first);
        }
    }
    let kind = match &schema["type"] {
        Value::Array(kinds) => kinds.iter().find_map(Value::as_str).unwrap_or("string"),
        kind => kind.as_str().unwrap_or(if schema["properties"].is_object() { "object" } else { "string" }),
    };
    match (kind, schema["format"].as_str()) {
        ("object", _) => Value::Object(arguments_from_schema(schema)),
        ("array", _) => json!([]),
        ("integer", _) => json!(2),
        ("number", _) => json!(3),
        ("boolean", _) => json!(true),
        ("null", _) => Value::Null,
        (_, Some("email")) => json!("user@example.com"),
        (_, Some("uri")) => json!("https://example.com/"),
        (_, Some("date")) => json!("2025-01-01"),
        (_, Some("date-time")) => json!("2025-01-01T00:00:00Z"),
        _ => json!("test"),
    }
}

/// Arguments for a tool: an example value for each required property.
fn arguments_from_schema(schema: &Value) -> JsonObject {
    required(schema).into_iter().map(|field| (field.clone(), example_value(&schema["properties"][&field]))).collect()
}

/// The arguments of the call to `tool`: what `scenario` asks for, else
/// example values from the tool's schema. Two scenarios ask for particular
/// values, which a form filler cannot guess from a schema: one checks that
/// a tool's `inputSchema`, as the library listed it, reaches a tool
/// unchanged; the other that parameter values needing Base64 (non-ASCII,
/// control characters, edge whitespace) are encoded in their headers.
fn arguments_for(scenario: &str, tool: &ToolEntry, catalog: &[ToolEntry]) -> JsonObject {
    let asked = match (scenario, tool.tool.name.as_ref()) {
        ("json-schema-2020-12-preservation", "json_schema_echo") => catalog
            .iter()
            .find(|entry| entry.tool.name == "json_schema_2020_12_tool")
            .map(|focal| json!({"schema": Value::Object((*focal.tool.input_schema).clone())})),
        ("http-custom-headers", "test_custom_headers") => Some(json!({
            "region": "us-west-2", "priority": 5, "verbose": false, "debug": true, "empty_val": "",
            "method_val": "tools/call", "float_val": 1.5, "non_ascii_val": "héllo wörld", "whitespace_val": " padded ",
            "leading_space_val": " leading", "trailing_space_val": "trailing ", "internal_space_val": "a b c",
            "control_char_val": "bell\u{7}", "crlf_val": "line\r\nbreak", "tab_val": "\tindented", "query": "weather",
        })),
        _ => None,
    };
    match asked {
        Some(Value::Object(arguments)) => arguments,
        _ => arguments_from_schema(&Value::Object((*tool.tool.input_schema).clone())),
    }
}

// ---------------------------------------------------------------- authorization

/// The HTTPS URL this client offers as its client ID metadata document,
/// used where the authorization server supports those (the suite serves it).
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// The OAuth settings a user of this client would write: logins completed
/// headlessly by following the authorization redirect (the suite's
/// authorization server approves without a person), tokens kept in
/// `token_dir`, and what `context` (`MCP_CONFORMANCE_CONTEXT`) says was
/// set up beforehand: a client ID and secret; a machine client (client
/// credentials, with a secret or a private key for `private_key_jwt`),
/// which the scenario names; a workload's platform-issued JWT
/// (`valid_jwt`: the JWT-bearer grant); or an enterprise identity provider
/// with the user's ID token (`idp_*`: the JWT-bearer grant with an ID-JAG
/// from a token exchange there).
fn oauth(scenario: &str, context: &Value, token_dir: &std::path::Path) -> Result<OAuthConfig, String> {
    let text = |key: &str| context[key].as_str().map(str::to_string);
    let identity_provider = match (text("idp_token_endpoint"), text("idp_client_id"), text("idp_id_token")) {
        (Some(token_endpoint), Some(client_id), Some(id_token)) => {
            Some(Box::new(IdentityProvider { token_endpoint, client_id, id_token: Some(id_token), ..IdentityProvider::default() }))
        }
        _ => None,
    };
    let assertion = text("valid_jwt");
    let grant = if assertion.is_some() || identity_provider.is_some() {
        Grant::JwtBearer
    } else if scenario.contains("client-credentials") || context.get("private_key_pem").is_some() {
        Grant::ClientCredentials
    } else {
        Grant::AuthorizationCode
    };
    Ok(OAuthConfig {
        client_id: text("client_id"),
        client_secret: text("client_secret"),
        client_metadata_url: Some(CLIENT_METADATA_URL.into()),
        grant,
        private_key: text("private_key_pem"),
        assertion,
        identity_provider,
        token_dir: Some(token_dir.to_path_buf()),
        ..OAuthConfig::default()
    })
}

// ---------------------------------------------------------------- the run

/// The era of the protocol version the runner asks for.
fn era(protocol_version: Option<&str>) -> Era {
    match protocol_version {
        Some(version) if version >= "2026" => Era::Modern,
        Some(_) => Era::Legacy,
        None => Era::Auto,
    }
}

/// Whether the server, rather than this client, produced the failure.
fn answered_by_server(error: &CallError) -> bool {
    matches!(error, CallError::Rpc { .. } | CallError::InvalidArguments { .. })
}

async fn run(url: String, scenario: String, era: Era, context: Value) -> Result<(), String> {
    let user = User.start();
    let handlers = ClientHandlers {
        roots: Some(answered_by(user.clone().recipient())),
        sampling: Some(answered_by(user.clone().recipient())),
        elicitation: Some(answered_by(user.recipient())),
    };
    let tokens = std::env::temp_dir().join(format!("mcpvisor-conformance-{}", std::process::id()));
    let mut server = ServerConfig::remote(SERVER, Transport::Http, url);
    server.era = era;
    server.auth = Some(Auth::OAuth(oauth(&scenario, &context, &tokens)?));
    server.timeouts.call = CALL_TIMEOUT;
    let authorizer = FollowRedirects::new().map_err(|e| format!("no HTTP client for the authorization redirect: {e}"))?;
    let config = RuntimeConfig { subreaper: false, ..RuntimeConfig::new([server]) };
    let runtime = Runtime::builder(config).client_handlers(handlers).authorizer(SERVER, authorizer);
    let handle = runtime.start().map_err(|e| format!("the runtime did not start: {e}"))?;
    let outcome = exercise(&handle, &scenario).await;
    handle.shutdown().await;
    let _ = std::fs::remove_dir_all(&tokens);
    outcome
}

/// Connects, lists and calls; stops at the first failure of the client's own.
async fn exercise(handle: &Handle, scenario: &str) -> Result<(), String> {
    handle.wait_ready(CONNECT_LIMIT).await;
    let status = handle.server_status(SERVER).await.ok_or("the server is not configured")?;
    if !matches!(status.state, ServerState::Connected) {
        return Err(format!("not connected ({:?}): {}", status.state, status.last_error.unwrap_or_default()));
    }
    eprintln!("connected: era {:?}, protocol {:?}", status.era, status.protocol_version);
    let catalog = handle.list_tools().await;
    eprintln!("tools: {}", catalog.iter().map(|entry| entry.tool.name.as_ref()).collect::<Vec<_>>().join(", "));
    for entry in &catalog {
        let arguments = arguments_for(scenario, entry, &catalog);
        let call = CallTool::new(entry.tool.name.to_string(), Value::Object(arguments)).with_timeout(CALL_TIMEOUT);
        match handle.call_on(SERVER, call).await {
            Ok(result) => eprintln!("{}: {}", entry.tool.name, serde_json::to_string(&result).unwrap_or_default()),
            Err(error) if answered_by_server(&error) => eprintln!("{}: the server answered: {error}", entry.tool.name),
            Err(error) => return Err(error.to_string()),
        }
    }
    skills(handle, scenario).await
}

/// Lists the server's skills (SEP-2640; entries only, nothing is read) and
/// loads those the user asks for: in the `sep-2640-client-verify-*`
/// scenarios, every listed one, then each of its files, as a model
/// following the skill's references would. Elsewhere no skill is asked
/// for, so none is read. Content that fails verification is refused
/// (printed, not failed: it is the server's doing).
async fn skills(handle: &Handle, scenario: &str) -> Result<(), String> {
    let skills = match handle.list_skills(SERVER).await {
        Ok(skills) => skills,
        Err(CallError::Unsupported { .. }) => return Ok(()),
        Err(error) if answered_by_server(&error) => {
            eprintln!("skills/list: the server answered: {error}");
            return Ok(());
        }
        Err(error) => return Err(error.to_string()),
    };
    eprintln!("skills: {}", skills.iter().map(|skill| skill.uri.as_str()).collect::<Vec<_>>().join(", "));
    if !scenario.starts_with("sep-2640-client-verify-") {
        return Ok(());
    }
    for skill in &skills {
        let loaded = match handle.load_skill(SERVER, skill).await {
            Ok(loaded) => loaded,
            Err(SkillError::Call(error)) if !answered_by_server(&error) => return Err(error.to_string()),
            Err(refused) => {
                eprintln!("{}: refused: {refused}", skill.uri);
                continue;
            }
        };
        eprintln!("{}: loaded, {} bytes", skill.uri, loaded.text.len());
        for file in skill.files().into_iter().flatten().filter(|file| file.uri != skill.uri) {
            match handle.read_skill_file(&loaded, &file.uri).await {
                Ok(bytes) => eprintln!("{}: read, {} bytes", file.uri, bytes.len()),
                Err(SkillError::Call(error)) if !answered_by_server(&error) => return Err(error.to_string()),
                Err(refused) => eprintln!("{}: refused: {refused}", file.uri),
            }
        }
    }
    Ok(())
}

fn main() {
    let Some(url) = std::env::args().skip(1).last() else {
        eprintln!("usage: conformance_client SERVER_URL (with MCP_CONFORMANCE_SCENARIO set)");
        std::process::exit(2)
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .init();
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let era = era(std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").ok().as_deref());
    let context = std::env::var("MCP_CONFORMANCE_CONTEXT").ok().and_then(|c| serde_json::from_str(&c).ok()).unwrap_or(Value::Null);
    eprintln!("scenario {scenario:?} at {url}, era {era:?}");
    let outcome = actix::System::new().block_on(run(url, scenario, era, context));
    if let Err(message) = outcome {
        eprintln!("conformance_client: {message}");
        std::process::exit(1)
    }
}
