//! deploy/kubernetes.yaml and the Dockerfile checked against the binary:
//! the flags exist, the ports agree, the probes reach a path the gateway
//! answers, the token is provided for the non-loopback bind, and the grace
//! period covers the drain.

use std::process::Command;

use crate::gateway_http_support::{client, Gateway, BIN};
use serde::Deserialize;
use serde_yaml::Value;

const MANIFEST: &str = include_str!("../../deploy/kubernetes.yaml");
const DOCKERFILE: &str = include_str!("../../Dockerfile");

fn documents() -> Vec<Value> {
    serde_yaml::Deserializer::from_str(MANIFEST).map(|document| Value::deserialize(document).expect("valid YAML")).collect()
}

fn of_kind(kind: &str) -> Value {
    documents().into_iter().find(|document| document["kind"] == kind).unwrap_or_else(|| panic!("the manifest has a {kind}"))
}

fn strings(value: &Value) -> Vec<String> {
    value.as_sequence().expect("a list").iter().map(|item| item.as_str().expect("a string").to_string()).collect()
}

/// The value following `flag` in `args`.
fn flag_value<'a>(args: &'a [String], flag: &str) -> &'a str {
    let at = args.iter().position(|arg| arg == flag).unwrap_or_else(|| panic!("{flag} in {args:?}"));
    &args[at + 1]
}

fn help(args: &[&str]) -> String {
    let output = Command::new(BIN).args(args).arg("--help").output().expect("mcpvisor runs");
    assert!(output.status.success());
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn the_manifest_agrees_with_the_binary() {
    let deployment = of_kind("Deployment");
    let pod = &deployment["spec"]["template"];
    let container = &pod["spec"]["containers"][0];
    let args = strings(&container["args"]);

    // Every flag the manifest passes exists.
    let (global, serve) = (help(&[]), help(&["serve"]));
    for flag in args.iter().filter(|arg| arg.starts_with("--")) {
        assert!(global.contains(flag.as_str()) || serve.contains(flag.as_str()), "mcpvisor has no flag {flag}");
    }
    let serve_at = args.iter().position(|arg| arg == "serve").expect("the container runs serve");
    assert!(args.iter().position(|arg| arg == "--http").is_some_and(|at| at > serve_at), "--http belongs to serve: {args:?}");

    // The port it listens on is the one declared, probed and served.
    let addr: std::net::SocketAddr = flag_value(&args, "--http").parse().expect("HOST:PORT");
    let port = &container["ports"][0];
    assert_eq!(port["containerPort"].as_u64(), Some(u64::from(addr.port())));
    let port_name = port["name"].as_str().expect("a named port");
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(container[probe]["httpGet"]["port"].as_str(), Some(port_name), "{probe}");
    }
    let service = of_kind("Service");
    assert_eq!(service["spec"]["ports"][0]["targetPort"].as_str(), Some(port_name));
    assert_eq!(service["spec"]["selector"], pod["metadata"]["labels"], "the Service selects the Deployment's pods");

    // Beyond loopback the gateway refuses to start without its token.
    assert!(!addr.ip().is_loopback());
    let env = container["env"].as_sequence().expect("env");
    assert!(env.iter().any(|var| var["name"] == "MCPVISOR_SERVE_TOKEN"), "the token is provided");

    // SIGTERM drains for 20 s by default: the grace period must be longer.
    let grace = pod["spec"]["terminationGracePeriodSeconds"].as_u64().expect("a grace period");
    let drain = args.iter().position(|arg| arg == "--drain").map_or(20, |at| args[at + 1].parse::<u64>().expect("--drain SECS"));
    assert!(grace > drain, "grace {grace} s <= drain {drain} s");

    // The Dockerfile runs the same command line and exposes the same port.
    let cmd = DOCKERFILE.lines().find_map(|line| line.strip_prefix("CMD ")).expect("a CMD");
    assert_eq!(serde_json::from_str::<Vec<String>>(cmd).expect("CMD in exec form"), args);
    assert!(DOCKERFILE.lines().any(|line| line.trim() == format!("EXPOSE {}", addr.port())));
    assert!(DOCKERFILE.lines().any(|line| line.starts_with("USER ") && !line.contains("root")), "a non-root user");

    // The probes' path answers 200 on a running gateway.
    let path = container["readinessProbe"]["httpGet"]["path"].as_str().expect("a probe path");
    let gateway = Gateway::loopback();
    let health = client().get(format!("{}{path}", gateway.base)).send().await.unwrap();
    assert_eq!(health.status(), 200, "{path}");
}
