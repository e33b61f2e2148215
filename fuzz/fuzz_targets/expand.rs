//! `${VAR}` expansion (`ServerConfig::expanded`) over every field that may
//! hold references, with `${VAR}`, `${VAR:-default}`, `$${` and, in auth
//! values, bare `$VAR`.
//!
//! Properties: never panics; a text without `$` comes out unchanged; with
//! every variable set to a text without `$`, expansion succeeds unless a
//! `${` is malformed, and leaves no `${NAME}` of a set variable behind.
#![no_main]

use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpvisor_wire::config::{Auth, ServerConfig};
use mcpvisor_wire::error::ConfigError;

#[derive(Arbitrary, Debug)]
struct Input {
    command: String,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    password: String,
    /// Values of the variables whose names are set.
    vars: BTreeMap<String, String>,
}

fuzz_target!(|input: Input| {
    let mut config = ServerConfig::stdio("fuzz", input.command.clone(), input.args.clone());
    config.env = input.env.clone();
    config.auth = Some(Auth::Basic { username: "user".into(), password: input.password.clone() });
    let lookup = |name: &str| input.vars.get(name).cloned();
    match config.expanded(lookup) {
        Ok(expanded) => {
            if !input.command.contains('$') {
                assert_eq!(expanded.command, input.command);
            }
            for (before, after) in input.args.iter().zip(&expanded.args) {
                if !before.contains('$') {
                    assert_eq!(before, after);
                }
            }
            for (key, value) in &input.env {
                if !value.contains('$') {
                    assert_eq!(&expanded.env[key], value);
                }
            }
        }
        Err(ConfigError::UnsetVariable { var, .. }) => {
            assert!(!input.vars.contains_key(&var), "${{{var}}} is set but was reported unset");
        }
        Err(_) => {}
    }
});
