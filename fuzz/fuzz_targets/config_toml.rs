//! The native TOML configuration reader (`config::native::parse`).
//!
//! Properties: never panics; every server it returns expands (with no
//! variables set) to an error or a configuration, without panicking.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use mcpvisor_wire::config::native;

fuzz_target!(|text: &str| {
    if let Ok(servers) = native::parse(Path::new("/nonexistent/mcpvisor/config.toml"), text) {
        for server in servers {
            let _ = server.expanded(|_| None);
            let _ = server.validate();
        }
    }
});
