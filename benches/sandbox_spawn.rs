//! The cost of a sandbox at spawn: time from `stdio::spawn` to the reaped
//! exit of `/bin/true`, without a sandbox, with the standard preset
//! (Landlock, seccomp, no_new_privs), and with the preset plus network
//! "none" (a network namespace) and memory/process limits (a cgroup).
//! `cargo bench --bench sandbox_spawn`; numbers in docs/security.md.

use std::time::{Duration, Instant};

use mcpvisor::config::{Network, SandboxSpec, ServerConfig};
use mcpvisor::transport::stdio;

const RUNS: usize = 100;

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    let full = SandboxSpec { network: Network::None, memory: Some(512 << 20), processes: Some(64), ..SandboxSpec::default() };
    let cases = [("no sandbox", None), ("standard preset", Some(SandboxSpec::default())), ("preset + netns + cgroup", Some(full))];
    for (label, spec) in cases {
        let mut config = ServerConfig::stdio("bench", "/bin/true", Vec::<String>::new());
        config.sandbox = spec;
        let mut times: Vec<Duration> = runtime.block_on(async {
            let mut times = Vec::with_capacity(RUNS);
            for _ in 0..RUNS {
                let started = Instant::now();
                let process = stdio::spawn(&config).expect("spawns");
                let exit = process.exit.wait().await;
                assert_eq!(exit.code, Some(0), "{label}: /bin/true failed under the sandbox");
                times.push(started.elapsed());
            }
            times
        });
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!("{label:<24} median {:.2} ms  p90 {:.2} ms  ({RUNS} spawns)", ms(times[RUNS / 2]), ms(times[RUNS * 9 / 10]));
    }
}
