//! `mcpvisor acp`: the agent served to an editor over the Agent Client
//! Protocol on stdin/stdout ([`crate::acp`]). The model, confirmation and
//! limits are chosen as for `mcpvisor agent` (flags, then `[agent]`, then
//! the environment); every configured server is started first and shared
//! by the editor's sessions. stdout carries only protocol frames; notes go
//! to stderr. Exit code 0 when the editor closes stdin.

use std::time::Duration;

use clap::Args;

use super::agent::{ModelArgs, Setup};
use super::output::Failure;
use super::servers::Servers;
use super::session::Session;
use super::{interrupted, Cli, EXIT_INTERRUPTED};

/// Time for the editor's sessions and the servers to stop after a signal.
const STOP_GRACE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Args)]
pub struct AcpArgs {
    /// The model and confirmation (`--confirm` is the editor's `ask` mode), as for `agent`.
    #[command(flatten)]
    pub choice: ModelArgs,
}

pub fn run(cli: &Cli, args: &AcpArgs) -> Result<u8, Failure> {
    let servers = Servers::load(cli)?;
    let setup = Setup::new(&args.choice, &servers.agent)?;
    let options = setup.acp_options();
    // Before the runtime: the exporters' threads are their own.
    let telemetry = super::otel::start(&servers, Default::default())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::connection(format!("cannot start a tokio runtime: {e}")))?;
    let outcome = runtime.block_on(async {
        let configs = super::session::prepare(servers.to_start(None)?.iter().copied(), |_| {})?;
        let session = Session::launch_configs(configs, Default::default(), telemetry.clone())?;
        session.settle().await;
        let served = crate::acp::serve(session.handle.clone(), options, tokio::io::stdin(), tokio::io::stdout());
        let outcome = tokio::select! {
            () = served => Ok(0),
            signal = interrupted() => Err(Failure { code: EXIT_INTERRUPTED, message: format!("interrupted by {signal}; the servers were stopped") }),
        };
        session.close().await;
        super::otel::flush(&telemetry, STOP_GRACE).await;
        outcome
    });
    // A read of stdin may still be pending after a signal: do not wait for it.
    runtime.shutdown_timeout(STOP_GRACE);
    outcome
}
